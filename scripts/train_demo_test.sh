#!/usr/bin/env bash
# Runs the training demo (scripts/train_demo.sh) with 10 steps and the tools built for
# the test: it fails if the 8-device loss curve differs from the single-device one at
# any step, if the loss does not fall below half, or if the ring schedule rewrote no
# backward collective.
#   train_demo_test.sh COMMIR_OPT COMMIR_RUN
set -euo pipefail
export COMMIR_OPT="$(realpath "$1")" COMMIR_RUN="$(realpath "$2")" STEPS=10
out="${TEST_TMPDIR:-$(mktemp -d)}/train_demo"
"$(dirname "${BASH_SOURCE[0]}")/train_demo.sh" "${out}" > "${out}.log" 2>&1 || {
  cat "${out}.log"
  exit 1
}
cat "${out}.log"
# The demo wrote one line per step, each with the reference's loss beside it.
[[ "$(grep -c '^step .* reference .* PASS$' "${out}/curves.txt")" -eq 10 ]] || {
  echo "train_demo_test: expected 10 matching step lines" >&2
  exit 1
}
