#!/bin/bash
# A generated Markdown table cannot drift from the script that generates it: runs the
# script with the given arguments and compares its output with the checked-in file, then
# checks that the script fails cleanly (exit 1, a message) when its tool fails.
# Usage: generated_table_test.sh SCRIPT.py CHECKED_IN.md TOOL_FLAG TOOL [MORE ARGS...]
#   e.g. generated_table_test.sh benchmarks/sim_calibration.py benchmarks/sim_calibration.md \
#        --commir-run bazel-bin/commir-run
set -u
SCRIPT="$1" CHECKED_IN="$2" TOOL_FLAG="$3" TOOL="$4"
shift 4
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

/usr/bin/python3 "$SCRIPT" "$TOOL_FLAG" "$TOOL" "$@" > "$TMP/now.md" 2> "$TMP/err" \
  || fail "$SCRIPT exited $?: $(cat "$TMP/err")"
if ! diff -u "$CHECKED_IN" "$TMP/now.md" > "$TMP/diff"; then
  fail "$CHECKED_IN is not what $SCRIPT prints now; regenerate it (the command is at its top):"
  cat "$TMP/diff" >&2
fi
# The table has rows, and no row lost its figures (an empty cell means a figure is missing).
rows="$(grep -c '^| ' "$TMP/now.md")"
(( rows > 2 )) || fail "$SCRIPT printed no table rows"
if grep -q '^|.*| |' "$TMP/now.md"; then fail "a row has an empty cell: $(grep '^|.*| |' "$TMP/now.md")"; fi

# A tool that fails is an error with a message, not a traceback or a partial table.
/usr/bin/python3 "$SCRIPT" "$TOOL_FLAG" /bin/false "$@" > "$TMP/false.md" 2> "$TMP/false.err"
status=$?
[[ $status == 1 ]] || fail "with a failing tool $SCRIPT should exit 1, got $status"
grep -q Traceback "$TMP/false.err" && fail "a failing tool gave a traceback: $(cat "$TMP/false.err")"
[[ -s "$TMP/false.err" ]] || fail "a failing tool gave no message"

if (( failures )); then echo "$failures failure(s)"; exit 1; fi
echo "$CHECKED_IN matches $SCRIPT"
