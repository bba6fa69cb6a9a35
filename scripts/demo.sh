#!/usr/bin/env bash
# CommIR demo (the README's main job): builds the tools, shows how the Megatron MLP is
# partitioned over 4 devices and what it communicates, then runs the shared examples
# on the cpu backend (every device simulated in one process) and checks each against
# the single-device program.
#   ./scripts/demo.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/setup.sh
bazel build //:commir-opt //:commir-run

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
echo
echo "demo: every program matched its single-device reference."
