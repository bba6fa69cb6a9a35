#!/usr/bin/env bash
# The training demo: a pre-norm transformer block trained with SGD on a 2x4
# mesh (batch over dp, Megatron weights over tp), one training step being one CommIR
# function, with the ring collective-matmul schedule applied to its forward and its
# backward. It prints the two loss curves side by side, the 8-device run and the
# single-device run of the same step function, and fails unless every step's loss
# matches and the loss falls.
#
#   ./scripts/train_demo.sh [OUT_DIR]        # OUT_DIR keeps the programs (default: a
#                                              temporary directory, removed afterwards)
# Environment: STEPS (default 30); COMMIR_OPT and COMMIR_RUN, the tools to use (default:
# build them with Bazel and use bazel-bin/'s).
#
# What it writes to OUT_DIR:
#   block_step.commir       the global program: the block, then @block_step, the
#                           training step (forward, loss, backward, update) to read
#   block_step_2x4.commir   @block_step partitioned over the 2x4 mesh and scheduled
set -euo pipefail

# OUT_DIR and the tools are taken relative to where the script was started.
out_arg="${1:+$(realpath -m "$1")}"
[[ -n "${COMMIR_OPT:-}" ]] && COMMIR_OPT="$(realpath "${COMMIR_OPT}")"
[[ -n "${COMMIR_RUN:-}" ]] && COMMIR_RUN="$(realpath "${COMMIR_RUN}")"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps="${STEPS:-30}"
if [[ -z "${COMMIR_OPT:-}" || -z "${COMMIR_RUN:-}" ]]; then
  bazel build //:commir-opt //:commir-run
fi
opt="${COMMIR_OPT:-bazel-bin/commir-opt}"
run="${COMMIR_RUN:-bazel-bin/commir-run}"
if [[ -n "${out_arg}" ]]; then
  out="${out_arg}"
  mkdir -p "${out}"
else
  out="$(mktemp -d "${TMPDIR:-/tmp}/commir-train.XXXXXX")"
  trap 'rm -rf "${out}"' EXIT
fi

program=testdata/training/block_train.commir
step="training-step{params=\"win,g1,wq,wk,wv,wo,g2,w1,w2\",lr=0.3}"
# Two propagation rounds: the second sees the backward's layouts and turns its
# partial sums into reduce-scatters that meet their matmuls, which the ring rewrites.
partition='propagate-sharding{iterations=2},lower-to-spmd,canonicalize,cse,dce'

echo "== the training step, one global function: ${out}/block_step.commir"
"${opt}" "${program}" --pass-pipeline="${step}" -o "${out}/block_step.commir"

echo "== partitioned over dp=2 x tp=4, the ring collective matmul on forward and backward"
"${opt}" "${program}" --no-remarks -o "${out}/block_step_2x4.commir" \
  --pass-pipeline="${step},${partition},ring-collective-matmul,cse,schedule-report,comm-report" \
  2> "${out}/reports.txt"
cat "${out}/reports.txt"

# Backward GEMMs are the ones with a transposed operand (dx = dy . w^T); the forward
# has none. A ring block GEMM (%*_blk, %*_part) with transpose_b is a backward
# collective the schedule rewrote.
scheduled="$(sed -n '/^spmd func @block_step/,$p' "${out}/block_step_2x4.commir")"
backward_ring_gemms="$(grep -cE '%[A-Za-z0-9_]*(_blk|_part)[A-Za-z0-9_]* = matmul\(.*transpose_b' \
  <<< "${scheduled}" || true)"
echo "ring block GEMMs of the backward: ${backward_ring_gemms}"
if [[ "${backward_ring_gemms}" -eq 0 ]]; then
  echo "train_demo: FAIL: the schedule rewrote no backward collective" >&2
  exit 1
fi

echo "== ${steps} SGD steps on 8 devices (loss) beside one device (reference)"
status=0
"${run}" "${out}/block_step_2x4.commir" --func=@block_step --init=scaled \
  --steps="${steps}" --check-against="${out}/block_step.commir" | tee "${out}/curves.txt" ||
  status=$?
if [[ "${status}" -ne 0 ]]; then
  echo "train_demo: FAIL: the 8-device run does not match one device (exit ${status})" >&2
  exit 1
fi
first="$(awk '$1 == "step" && $2 == 1 {print $4}' "${out}/curves.txt")"
last="$(awk -v n="${steps}" '$1 == "step" && $2 == n {print $4}' "${out}/curves.txt")"
if ! awk -v a="${first}" -v b="${last}" 'BEGIN {exit !(b < a / 2)}'; then
  echo "train_demo: FAIL: the loss went from ${first} to ${last}, not below half" >&2
  exit 1
fi
echo "train_demo: the loss fell from ${first} to ${last} in ${steps} steps, matching one device at every step."
