#!/usr/bin/env bash
# Runs CommIR's whole test suite:
#   1. scripts/setup.sh (installs missing Debian packages; quick when done)
#   2. bazel test //...                      (default config; builds everything)
#   3. bazel test --config=asan //...        (ASan+UBSan; tests only, without
#                                             targets tagged "no_asan")
#   4. the tests tagged "fuzz" built with --config=fuzz (clang-14 + libFuzzer): the
#      parser fuzzer and the pass-pipeline fuzzer each run for FUZZ_SECONDS (default
#      30) over their seed corpora, side by side (Bazel runs the two tests in parallel,
#      so the stage still takes about FUZZ_SECONDS), in an output base of its own so
#      the main build cache stays warm
# Tests tagged "requires-gpu" (the cases that need a GPU; their host-side checks are
# separate targets, see testing/gpu_test.bzl) run where `nvidia-smi -L` lists a GPU;
# elsewhere they are filtered out and counted as skipped.
# The last line printed is "N passed, M failed", with ", K skipped (no GPU)" appended
# when requires-gpu tests were filtered out (", K skipped (G no GPU, I incompatible)"
# when Bazel also skipped targets, e.g. CUDA-only ones on a machine without the CUDA
# toolkit), summed over the runs. Exit status is nonzero if any build or test failed.
#
# Extra arguments are passed to both `bazel test` invocations, e.g.
#   ./scripts/test.sh --test_output=all
# Environment: COMMIR_SKIP_ASAN=1 skips run 3, COMMIR_SKIP_FUZZ=1 run 4;
# FUZZ_SECONDS sets the fuzzing time; COMMIR_TEST_TARGETS overrides //... (runs 2
# and 3) and COMMIR_FUZZ_TARGETS overrides //parser/... //transforms/fuzz/... (run 4).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/setup.sh || { echo "test.sh: setup.sh failed" >&2; echo "0 passed, 1 failed"; exit 1; }

read -r -a TARGETS <<<"${COMMIR_TEST_TARGETS:-//...}"
LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/commir-test.XXXXXX")"
trap 'rm -rf "${LOG_DIR}"' EXIT

gpu_filter=""
# `nvidia-smi -L` prints one "GPU n: ..." line per GPU (and exits 0 with none listed on
# some driver setups), so the lines are what counts.
if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'; }; then
  gpu_filter="-requires-gpu"
  echo "test.sh: no GPU visible; tests tagged requires-gpu are skipped."
fi

# The targets as a query expression: "//a/... -//a/b/..." -> "//a/... - //a/b/...".
targets_query() {
  local expr="" t
  for t in "${TARGETS[@]}"; do
    if [[ ${t} == -* ]]; then
      expr="${expr:-//...} - \"${t#-}\""
    else
      expr="${expr:+${expr} + }\"${t}\""
    fi
  done
  echo "${expr}"
}

# gpu_skipped_count [TAG...]: how many tests of the targets carry requires-gpu (and none
# of TAGs, e.g. no_asan for the asan run, nor manual): the tests a run without a GPU
# filters out. Bazel prints nothing about tests a tag filter removes, so they are
# counted here.
gpu_skipped_count() {
  # A tag as a whole element of the printed list "[a, b]".
  tag_re() { echo "'[\\[ ]$1[,\\]]'"; }
  local tests
  tests="tests($(targets_query))"
  local expr tag
  expr="attr(tags, $(tag_re requires-gpu), ${tests})"
  for tag in manual "$@"; do
    expr+=" except attr(tags, $(tag_re "${tag}"), ${tests})"
  done
  local out
  if ! out="$(bazel query --color=no --curses=no "${expr}" 2>/dev/null)"; then
    echo "test.sh: could not count the requires-gpu tests (bazel query ${expr})" >&2
    echo 0
    return
  fi
  grep -c '^//' <<<"${out}" || true
}

join_filters() {
  local IFS=,
  local out=()
  local f
  for f in "$@"; do [[ -n "${f}" ]] && out+=("${f}"); done
  echo "${out[*]-}"
}

total_passed=0
total_failed=0
total_skipped=0
total_gpu_skipped=0
overall_rc=0

# count_results LOG BAZEL_RC NAME: parses Bazel's test summary lines
#   //pkg:target   (cached) PASSED in 0.1s
#   //pkg:target   FAILED in 2 out of 2 in 0.3s / FAILED TO BUILD / NO STATUS / TIMEOUT / FLAKY ... / SKIPPED
count_results() {
  python3 - "$@" <<'PY'
import re, sys
log, rc, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
line_re = re.compile(
    r"^(@?[\w.\-]*//\S*)\s+(?:\(cached\)\s+)?"
    r"(PASSED|FLAKY|FAILED TO BUILD|FAILED|TIMEOUT|INCOMPLETE|NO STATUS|SKIPPED|REMOTE FAILURE|BUILD FAILURE)\b")
status = {}
with open(log, errors="replace") as f:
    for line in f:
        m = line_re.match(line.rstrip("\n"))
        if m:
            status[m.group(1)] = m.group(2)
passed = sum(1 for s in status.values() if s in ("PASSED", "FLAKY"))
skipped = sum(1 for s in status.values() if s == "SKIPPED")
failed = len(status) - passed - skipped
failed_labels = sorted(l for l, s in status.items() if s not in ("PASSED", "FLAKY", "SKIPPED"))
# Bazel exit codes: 0 ok, 3 tests failed, 4 no tests found; anything else is a
# build/analysis error. If no test target accounts for it, count one failure.
if rc not in (0, 3, 4) and failed == 0:
    failed = 1
    failed_labels.append("(bazel exited with %d before/outside tests: see log above)" % rc)
if rc == 3 and failed == 0:
    failed = 1
    failed_labels.append("(bazel reported failing tests; summary not parsed)")
for l in failed_labels:
    print("test.sh: [%s] FAILED: %s" % (name, l), file=sys.stderr)
print(passed, failed, skipped)
PY
}

# run_bazel_test NAME GPU_SKIPPED ARGS...: GPU_SKIPPED is how many tests the GPU filter
# removed from this run.
run_bazel_test() {
  local name="$1"; shift
  local gpu_skipped="$1"; shift
  local log="${LOG_DIR}/${name}.log"
  echo
  echo "=== test.sh: [${name}] bazel test $* ==="
  bazel "${BAZEL_STARTUP[@]}" test --color=no --curses=no --keep_going "$@" 2>&1 | tee "${log}"
  local rc=${PIPESTATUS[0]}
  if [[ "${rc}" == 8 ]]; then
    echo "test.sh: [${name}] bazel was interrupted; stopping." >&2
    echo "${total_passed} passed, $((total_failed + 1)) failed"
    exit 130
  fi
  local counts
  counts="$(count_results "${log}" "${rc}" "${name}")"
  local p f s
  read -r p f s <<<"${counts}"
  if [[ "${rc}" == 4 ]]; then
    echo "test.sh: [${name}] no test targets found."
    rc=0
  fi
  if [[ "${rc}" != 0 && "${rc}" != 3 ]]; then
    echo "test.sh: [${name}] bazel exited with ${rc}." >&2
  fi
  ((rc != 0)) && overall_rc=1
  ((f > 0)) && overall_rc=1
  echo "test.sh: [${name}] ${p} passed, ${f} failed, ${s} skipped by Bazel, ${gpu_skipped} skipped (no GPU)"
  total_passed=$((total_passed + p))
  total_failed=$((total_failed + f))
  total_skipped=$((total_skipped + s))
  total_gpu_skipped=$((total_gpu_skipped + gpu_skipped))
}

# Startup options for the next `bazel` (the fuzz run uses its own output base).
BAZEL_STARTUP=()

gpu_skipped=0
[[ -n "${gpu_filter}" ]] && gpu_skipped="$(gpu_skipped_count)"
filters="$(join_filters "${gpu_filter}")"
run_bazel_test default "${gpu_skipped}" ${filters:+--test_tag_filters=${filters}} "$@" -- "${TARGETS[@]}"

if [[ "${COMMIR_SKIP_ASAN:-0}" != 1 ]]; then
  gpu_skipped=0
  [[ -n "${gpu_filter}" ]] && gpu_skipped="$(gpu_skipped_count no_asan)"
  filters="$(join_filters -no_asan "${gpu_filter}")"
  run_bazel_test asan "${gpu_skipped}" --config=asan --build_tests_only --test_tag_filters="${filters}" "$@" -- "${TARGETS[@]}"
fi

if [[ "${COMMIR_SKIP_FUZZ:-0}" != 1 ]]; then
  if command -v clang-14 >/dev/null 2>&1; then
    # One output base per checkout: an output base belongs to one workspace. No
    # convenience symlinks, so bazel-bin keeps pointing at the main build.
    fuzz_base="${HOME}/.cache/bazel-commir-fuzz/$(pwd -P | md5sum | cut -c1-12)"
    BAZEL_STARTUP=(--output_base="${fuzz_base}")
    # The fuzz targets live in parser/ and transforms/fuzz/. Expanding //... from this
    # second output base would descend into the main build's convenience symlinks.
    read -r -a FUZZ_TARGETS <<<"${COMMIR_FUZZ_TARGETS:-//parser/... //transforms/fuzz/...}"
    run_bazel_test fuzz 0 --config=fuzz --symlink_prefix=/ --build_tests_only \
      --test_tag_filters=fuzz --test_env=FUZZ_SECONDS="${FUZZ_SECONDS:-30}" "$@" -- "${FUZZ_TARGETS[@]}"
    BAZEL_STARTUP=()
  else
    echo "test.sh: clang-14 not found; the bounded fuzzing run is skipped." >&2
  fi
fi

echo
summary="${total_passed} passed, ${total_failed} failed"
if ((total_gpu_skipped > 0 && total_skipped > 0)); then
  summary+=", $((total_gpu_skipped + total_skipped)) skipped (${total_gpu_skipped} no GPU, ${total_skipped} incompatible)"
elif ((total_gpu_skipped > 0)); then
  summary+=", ${total_gpu_skipped} skipped (no GPU)"
elif ((total_skipped > 0)); then
  summary+=", ${total_skipped} skipped (incompatible)"
fi
echo "${summary}"
exit "${overall_rc}"
