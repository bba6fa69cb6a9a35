#!/usr/bin/env bash
# CommIR demo (the README's main job): builds the tools, shows how the Megatron MLP is
# partitioned over 4 devices and what it communicates, then runs the shared examples
# on the cpu backend (every device simulated in one process) and checks each against
# the single-device program, rewrites some of them with the overlap schedules (ring
# and pipelined collective matmul, ring and Ulysses attention) and checks those too,
# and finally lets commir-search find the fastest way to run the transformer block on 8
# devices and checks what it writes, checks a pipelined whole-model plan's training
# step on the cpu mesh (commir-search --plan --check), trains a transformer block for 30 SGD steps on
# a 2x4 mesh (scripts/train_demo.sh), and trains a small GPT written in PyTorch, captured,
# for a few AdamW steps on a 2x4 mesh beside PyTorch's own loop
# (python/examples/gpt_train.py; docs/gpt-demo.md has the 200-step run).
#   ./scripts/demo.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/setup.sh
bazel build //:commir-opt //:commir-run //:commir-search //python:_commir.so

lower='propagate-sharding,lower-to-spmd,canonicalize,cse,dce'
out="$(mktemp -d "${TMPDIR:-/tmp}/commir-demo.XXXXXX")"
trap 'rm -rf "${out}"' EXIT

# Each command is echoed before it runs (in bold on a terminal).
if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "${bold}" "$*" "${plain}"; "$@"; }

cd testdata/examples
step ../../bazel-bin/commir-opt mlp.commir \
  --pass-pipeline='propagate-sharding,lower-to-spmd,canonicalize,cse,dce,comm-report'
step ../../bazel-bin/commir-run mlp.commir --check
step ../../bazel-bin/commir-run transformer_block.commir --check
step ../../bazel-bin/commir-run attention.commir --check
step ../../bazel-bin/commir-run ag_matmul.commir --check
step ../../bazel-bin/commir-run ring_ag_matmul.commir --check-against=ag_matmul_global4.commir

# Communication schedules: each rewritten spmd program is checked against the global one.
step ../../bazel-bin/commir-opt ag_matmul.commir -o "${out}/ag_ring.commir" \
  --pass-pipeline="${lower},ring-collective-matmul{direction=bi},schedule-report"
step ../../bazel-bin/commir-run "${out}/ag_ring.commir" --check-against=ag_matmul.commir
step ../../bazel-bin/commir-opt mlp.commir -o "${out}/mlp_pipelined.commir" \
  --pass-pipeline="${lower},pipeline-collective-matmul{chunks=4,streams=2},schedule-report"
step ../../bazel-bin/commir-run "${out}/mlp_pipelined.commir" --check-against=mlp.commir
step ../../bazel-bin/commir-opt attention.commir -o "${out}/attention_ring.commir" \
  --pass-pipeline="${lower},ring-attention{zigzag=true},cse,schedule-report"
step ../../bazel-bin/commir-run "${out}/attention_ring.commir" --check-against=attention.commir
step ../../bazel-bin/commir-opt attention.commir -o "${out}/attention_ulysses.commir" \
  --pass-pipeline="${lower},ulysses-attention,cse,schedule-report"
step ../../bazel-bin/commir-run "${out}/attention_ulysses.commir" --check-against=attention.commir

# The search: every mesh of 8 devices, every layout the block's ops allow (its written
# layouts pin the sequence, heads and FFN splits), every schedule; the best five are
# proven on the cpu mesh, and the best program is checked once more here.
step ../../bazel-bin/commir-search transformer_block.commir --devices=8 --top=5 --quiet \
  -o "${out}/block_best.commir"
step ../../bazel-bin/commir-run "${out}/block_best.commir" --check-against=transformer_block.commir

# The whole-model plan search on a tiny Llama, and a pipelined plan's training step
# (tp=2 with sequence parallelism, 2 pipeline stages in 1F1B order, 2 data-parallel
# replicas: 8 cpu devices) run on the cpu mesh and compared with one device.
step ../../bazel-bin/commir-search --quiet --top=3 --gpus=8 --check \
  --plan=llama3-8b,layers=4,hidden=64,heads=4,kv_heads=2,ffn=128,seq=16,vocab=256,global_batch=8 \
  --plan-eval=tp=2,sp,pp=2,dp=2,mb=1

# Training: a pre-norm block's SGD step as one function, partitioned over a 2x4 mesh
# with the ring schedule on forward and backward, its loss curve beside one device's.
cd ../..
step ./scripts/train_demo.sh "${out}/training"

# A GPT written in PyTorch (vocabulary-parallel embedding, tied head and loss), captured
# and trained with AdamW and gradient clipping on a Debian licence text (byte-pair
# encoded, 2048 tokens), on the 2x4 mesh (batch over dp, Megatron-LM's tp) and on one
# device, beside torch.optim.AdamW's loop on the same batches; first what the
# partitioned step communicates.
step env PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/gpt_train.py --report
step env PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/gpt_train.py --steps=5 --every=1
echo
echo "demo: every program matched its single-device reference."
