#!/bin/bash
# benchmarks/schedule_table.py on programs a user names: a global program is lowered and
# gets the schedules that apply to it, a spmd program is scheduled as it is, and
# --pipelines names the schedules. Usage: schedule_table_test.sh PATH/TO/commir-opt
set -u
OPT="$1"
TABLE=(/usr/bin/python3 benchmarks/schedule_table.py --commir-opt "$OPT")
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_rows FILE ROW...: the table in FILE has exactly these rows (example | schedule),
# in order, after its two header lines.
expect_rows() {
  local file="$1"; shift
  local got want
  got="$(tail -n +3 "$file" | cut -d'|' -f2,3 | sed 's/^ //; s/ $//')"
  want="$(printf '%s\n' "$@")"
  [[ "$got" == "$want" ]] || fail "rows of $file are:"$'\n'"$got"$'\n'"want:"$'\n'"$want"
}

# A user's global program: the MLP example under another name, in a directory of its own.
mkdir -p "$TMP/user"
sed 's/@mlp/@my_mlp/' testdata/examples/mlp.commir > "$TMP/user/my_mlp.commir"
cat > "$TMP/user/my_attention.commir" <<'PROGRAM'
mesh @m(sp=2)
func @attn(%q: f32[1, 2, 64@sp, 16], %k: f32[1, 2, 64@sp, 16], %v: f32[1, 2, 64@sp, 16]) -> f32[1, 2, 64@sp, 16] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}
PROGRAM

"${TABLE[@]}" "$TMP/user/my_mlp.commir" "$TMP/user/my_attention.commir" > "$TMP/user.md" 2> "$TMP/user.err" \
  || fail "schedule_table.py on user programs exited $?: $(cat "$TMP/user.err")"
expect_rows "$TMP/user.md" \
  "my_mlp | lowered (all_gather / reduce_scatter)" \
  "my_mlp | pipeline chunks=2 streams=2" \
  "my_mlp | pipeline chunks=4 streams=2" \
  "my_mlp | ring uni" \
  "my_mlp | ring bi" \
  "my_attention | lowered (all_gather k, v)" \
  "my_attention | ring attention" \
  "my_attention | ring attention zigzag" \
  "my_attention | ulysses (all_to_all)"
# The same program gives the same figures as the shared example's row in the default table.
"${TABLE[@]}" > "$TMP/default.md" || fail "schedule_table.py without arguments exited $?"
want="$(grep '^| mlp | ring bi |' "$TMP/default.md" | sed 's/^| mlp |/| my_mlp |/')"
got="$(grep '^| my_mlp | ring bi |' "$TMP/user.md")"
[[ -n "$want" && "$got" == "$want" ]] || fail "my_mlp ring bi row is '$got', want '$want'"
# Lowered: 2 collectives; the ring: none, 6 shifts.
grep -q '^| my_mlp | lowered (all_gather / reduce_scatter) | 2 | 0 (0) | 2 | 0 |' "$TMP/user.md" \
  || fail "lowered my_mlp row: $(grep 'my_mlp | lowered' "$TMP/user.md")"
grep -q '^| my_mlp | ring uni | 0 | 6 (6) | 8 | 0 |' "$TMP/user.md" \
  || fail "ring uni my_mlp row: $(grep 'my_mlp | ring uni' "$TMP/user.md")"

# A spmd program is not lowered again; --pipelines names the schedules (and their order).
"$OPT" "$TMP/user/my_mlp.commir" --pass-pipeline=propagate-sharding,lower-to-spmd,canonicalize,cse,dce \
  -o "$TMP/user/my_mlp_spmd.commir" || fail "lowering my_mlp failed"
"${TABLE[@]}" "$TMP/user/my_mlp_spmd.commir" --pipelines 'ring-collective-matmul{direction=bi}' '' \
  > "$TMP/spmd.md" 2> "$TMP/spmd.err" || fail "schedule_table.py --pipelines exited $?: $(cat "$TMP/spmd.err")"
expect_rows "$TMP/spmd.md" \
  "my_mlp_spmd | ring-collective-matmul{direction=bi}" \
  "my_mlp_spmd | (as written)"
got="$(grep '^| my_mlp_spmd | ring-collective' "$TMP/spmd.md" | cut -d'|' -f4-)"
want="$(grep '^| my_mlp | ring bi |' "$TMP/user.md" | cut -d'|' -f4-)"
[[ "$got" == "$want" ]] || fail "spmd ring bi figures '$got', want '$want'"

# A program that does not parse, or a pipeline that fails, is an error (exit 1).
echo 'func @broken(' > "$TMP/user/broken.commir"
"${TABLE[@]}" "$TMP/user/broken.commir" > /dev/null 2>&1
[[ $? == 1 ]] || fail "a broken program should exit 1"
"${TABLE[@]}" "$TMP/user/my_mlp.commir" --pipelines 'pipeline-collective-matmul{chunks=3}' > /dev/null 2>&1
[[ $? == 1 ]] || fail "a failing pipeline should exit 1"

if (( failures )); then echo "$failures failure(s)"; exit 1; fi
echo "all schedule_table checks pass"
