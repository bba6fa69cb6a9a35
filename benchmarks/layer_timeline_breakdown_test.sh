#!/bin/bash
# benchmarks/layer_timeline_breakdown.py on small layers: its tables have the rows the
# ring changes; a failing tool is an error with a message (exit 1), a bad layer bad
# usage (2).
# Usage: layer_timeline_breakdown_test.sh COMMIR_OPT COMMIR_RUN PRINT_LAYER_PROGRAM
set -u
SCRIPT=benchmarks/layer_timeline_breakdown.py
TOOLS=(--commir-opt "$1" --commir-run "$2" --print-layer-program "$3")
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

for layer in gpt3-1.3b:2 llama3-8b:2; do
  /usr/bin/python3 "$SCRIPT" "${TOOLS[@]}" "$layer" > "$TMP/plain.md" 2> "$TMP/err" \
    || fail "$layer: exited nonzero: $(cat "$TMP/err")"
  for row in matmul shift all_gather reduce_scatter; do
    grep -q "^| $row | [0-9]* | [0-9]* | [-+][0-9]* |$" "$TMP/plain.md" || fail "$layer: no $row row"
  done
  grep -q "^${layer%:*}, tp ${layer#*:}: plain [0-9.]* ms, ring [0-9.]* ms" "$TMP/plain.md" \
    || fail "$layer: no title line: $(head -3 "$TMP/plain.md")"
done

/usr/bin/python3 "$SCRIPT" --commir-opt /bin/false --commir-run "$2" --print-layer-program "$3" \
  gpt3-1.3b:2 > "$TMP/false.md" 2> "$TMP/false.err"
status=$?
[[ $status == 1 ]] || fail "with commir-opt failing the script should exit 1, got $status"
grep -q Traceback "$TMP/false.err" && fail "a failing tool gave a traceback: $(cat "$TMP/false.err")"
[[ -s "$TMP/false.err" ]] || fail "a failing tool gave no message"
/usr/bin/python3 "$SCRIPT" "${TOOLS[@]}" gpt3-1.3b:two > /dev/null 2>&1
status=$?
[[ $status == 2 ]] || fail "a bad MODEL:TP should exit 2, got $status"

if (( failures > 0 )); then echo "$failures failure(s)" >&2; exit 1; fi
echo PASS
