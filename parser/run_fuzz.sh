#!/usr/bin/env bash
# Builds the libFuzzer parser fuzzer (clang-14, ASan+UBSan) in a separate output base
# and fuzzes for a bounded time over a copy of the seed corpus.
#
#   parser/run_fuzz.sh [SECONDS] [extra libFuzzer flags...]     (default 60 seconds)
#
# Exit status 0 if no input failed; 1 if one did (the reproducer is copied into
# $COMMIR_FUZZ_ARTIFACTS, default /tmp/commir-fuzz-artifacts: add it to
# parser/fuzz_corpus/ once fixed); 2 if the fuzzer could not be built.
# Environment: COMMIR_FUZZ_OUTPUT_BASE (default ~/.cache/bazel-commir-fuzz),
# COMMIR_FUZZ_CORPUS (a directory that keeps the grown corpus between runs; default a
# temporary copy of the seeds), COMMIR_FUZZ_JOBS (parallel fuzzing processes, default 1).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="${PWD}"

seconds="${1:-60}"
shift || true
output_base="${COMMIR_FUZZ_OUTPUT_BASE:-${HOME}/.cache/bazel-commir-fuzz}"
artifacts="${COMMIR_FUZZ_ARTIFACTS:-/tmp/commir-fuzz-artifacts}"
jobs="${COMMIR_FUZZ_JOBS:-1}"

# --symlink_prefix=/ keeps this build from repointing the workspace's bazel-* links.
if ! bazel --output_base="${output_base}" build --config=fuzz --symlink_prefix=/ \
    //parser:parser_fuzzer; then
  echo "run_fuzz.sh: building the fuzzer failed (is clang-14 installed?)" >&2
  exit 2
fi
bin_dir="$(bazel --output_base="${output_base}" info --config=fuzz bazel-bin 2>/dev/null)"
fuzzer="${bin_dir}/parser/parser_fuzzer"

work="$(mktemp -d "${TMPDIR:-/tmp}/commir-fuzz.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
corpus="${COMMIR_FUZZ_CORPUS:-${work}/corpus}"
mkdir -p "${corpus}" "${work}/crashes" "${artifacts}"

parallel=()
# With -jobs, libFuzzer runs that many fuzzing processes, each logging to fuzz-N.log.
[[ "${jobs}" -gt 1 ]] && parallel=(-jobs="${jobs}" -workers="${jobs}")
echo "run_fuzz.sh: fuzzing for ${seconds}s (${jobs} job(s)); corpus ${corpus}"
(cd "${work}" && "${fuzzer}" -max_total_time="${seconds}" -rss_limit_mb=2048 -timeout=10 \
  -max_len=8192 -dict="${root}/parser/parser_fuzzer.dict" -print_final_stats=1 \
  -artifact_prefix="${work}/crashes/" "${parallel[@]}" "$@" \
  "${corpus}" "${root}/parser/fuzz_corpus")
rc=$?
for log in "${work}"/fuzz-*.log; do
  [[ -f "${log}" ]] && { echo "--- ${log##*/}"; tail -n 12 "${log}"; }
done

if compgen -G "${work}/crashes/*" >/dev/null; then
  cp "${work}"/crashes/* "${artifacts}/"
  echo "run_fuzz.sh: FAILED; reproducers in ${artifacts}:" >&2
  ls -1 "${work}/crashes" >&2
  exit 1
fi
if [[ ${rc} != 0 ]]; then
  echo "run_fuzz.sh: the fuzzer exited with ${rc}" >&2
  exit 1
fi
echo "run_fuzz.sh: no failures"
