#!/usr/bin/env bash
# Regenerates the golden files of testdata/ from the current commir-opt (and commir-search).
#
#   testdata/update_goldens.sh                          # every case
#   testdata/update_goldens.sh testdata/ops/matmul.commir testdata/errors
#                                                       # some cases, or whole directories
#
# It builds //:commir-opt and the runner, then runs the runner in --update mode on the
# source tree: each case's NAME.golden is rewritten with the tool's current output. The
# round-trip and exit-status checks still run and are reported. Review `git diff testdata/`
# before committing: a regenerated golden is a claim that the new output is right.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Case arguments relative to the repository root, wherever the script is run from.
cases=()
for arg in "$@"; do
  if [[ -e "$arg" ]]; then
    cases+=("$(realpath --relative-to="$repo" "$arg")")
  else
    cases+=("$arg")
  fi
done

cd "$repo"
# The runner is the test binary itself, run here outside the sandbox on the source tree.
bazel build //:commir-opt //:commir-search //testdata:golden_runner
bin="$(bazel info bazel-bin)"
"$bin/testdata/golden_runner" --commir-opt="$bin/commir-opt" --commir-search="$bin/commir-search" --root="$repo" --update "${cases[@]}"

# The example copies must stay identical to the shared originals when those are present.
shared="$repo/../shared/examples"
if [[ -d "$shared" ]]; then
  for f in "$shared"/*.commir; do
    if ! cmp -s "$f" "testdata/examples/$(basename "$f")"; then
      echo "WARNING: testdata/examples/$(basename "$f") differs from $f" >&2
    fi
  done
fi
