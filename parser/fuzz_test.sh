#!/usr/bin/env bash
# Bounded fuzzing as a Bazel test (//parser:parser_fuzz_test,
# //transforms/fuzz:pipeline_fuzz_test; tag "fuzz"). Arguments: FUZZER DICT SEED...
#
# Built with --config=fuzz, the fuzzer is a libFuzzer binary: this runs it for
# FUZZ_SECONDS (default 30) over a copy of the seed corpus, and fails on any crash,
# sanitizer report, timeout, out-of-memory or round-trip violation; the reproducer is
# left in the test's undeclared outputs (bazel-testlogs/parser/parser_fuzz_test/
# test.outputs/). In other configurations the binary only replays inputs, so this
# replays the corpus (like :parser_fuzzer_corpus_test) and passes.
#
#   bazel --output_base=$HOME/.cache/bazel-commir-fuzz test --config=fuzz \
#       --test_tag_filters=fuzz //parser:parser_fuzz_test [--test_env=FUZZ_SECONDS=300]
set -euo pipefail

fuzzer="$1"
dict="$2"
shift 2  # the rest: seed files

seconds="${FUZZ_SECONDS:-30}"
work="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}/"
mkdir -p "${work}"
# Numbered copies: seeds from different directories may share a name.
i=0
for seed in "$@"; do
  i=$((i + 1))
  cp "${seed}" "${work}/${i}-$(basename "${seed}")"
done

# Capture the help text first: piping it into `grep -q` under pipefail fails when
# grep exits early and the fuzzer dies of SIGPIPE, which would take the replay branch
# with a real libFuzzer binary and fuzz without a time bound.
help_text="$("${fuzzer}" -help=1 2>&1 || true)"
if [[ "${help_text}" == *"To run fuzzing"* ]]; then
  echo "fuzz_test: libFuzzer for ${seconds}s over $(ls "${work}" | wc -l) seeds"
  # -timeout: one input may take at most 10s; -rss_limit_mb: memory blow-ups fail too.
  # New inputs go to the scratch copy; crashes to the outputs directory.
  exec "${fuzzer}" -max_total_time="${seconds}" -rss_limit_mb=2048 -timeout=10 \
    -max_len=8192 -dict="${dict}" -artifact_prefix="${artifacts}" -print_final_stats=1 \
    "${work}"
else
  echo "fuzz_test: ${fuzzer} is not a libFuzzer binary (build with --config=fuzz);"
  echo "fuzz_test: replaying the seed corpus instead"
  exec "${fuzzer}" "${work}"
fi
