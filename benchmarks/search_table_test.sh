#!/bin/bash
# benchmarks/search_table.md cannot drift from benchmarks/search_table.py: regenerates the
# rows that are quick to regenerate (8 GPUs: attention, attention/seq, mlp; the block's
# search and the 64-GPU searches take minutes) and fails unless each is in the checked-in
# file as printed (search times aside). Then checks that a failing tool is an error with a
# message (exit 1), not a traceback or a partial table.
# Usage: search_table_test.sh COMMIR_SEARCH COMMIR_OPT COMMIR_RUN
set -u
SEARCH="$1" OPT="$2" RUN="$3"
SCRIPT=benchmarks/search_table.py CHECKED_IN=benchmarks/search_table.md
QUICK=(--devices 8 --workloads attention attention/seq mlp)
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

/usr/bin/python3 "$SCRIPT" --commir-search "$SEARCH" --commir-opt "$OPT" --commir-run "$RUN" \
  "${QUICK[@]}" --check "$CHECKED_IN" 2> "$TMP/err" \
  || fail "$CHECKED_IN is not what $SCRIPT prints now; regenerate it (the command is at its top): $(cat "$TMP/err")"

# The checked-in table has a row for every workload on both device counts, none empty.
for devices in 8 64; do
  for workload in attention attention/seq mlp block; do
    grep -q "^| $workload | $devices | [0-9]" "$CHECKED_IN" || fail "no $workload row for $devices GPUs"
  done
done
if grep -q '^|.*| |' "$CHECKED_IN"; then fail "a row has an empty cell: $(grep '^|.*| |' "$CHECKED_IN")"; fi

for tool in --commir-search --commir-opt --commir-run; do
  args=(--commir-search "$SEARCH" --commir-opt "$OPT" --commir-run "$RUN" "$tool" /bin/false)
  /usr/bin/python3 "$SCRIPT" "${args[@]}" --devices 8 --workloads mlp > "$TMP/false.md" 2> "$TMP/false.err"
  status=$?
  [[ $status == 1 ]] || fail "with $tool failing $SCRIPT should exit 1, got $status"
  grep -q Traceback "$TMP/false.err" && fail "$tool failing gave a traceback: $(cat "$TMP/false.err")"
  [[ -s "$TMP/false.err" ]] || fail "$tool failing gave no message"
  [[ -s "$TMP/false.md" ]] && fail "$tool failing still printed: $(head -3 "$TMP/false.md")"
done

if (( failures )); then echo "$failures failure(s)"; exit 1; fi
echo "$CHECKED_IN matches $SCRIPT"
