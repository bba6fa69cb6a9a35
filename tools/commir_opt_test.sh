#!/bin/bash
# End-to-end checks of the commir-opt binary: exit statuses (0 / 1 / 2), the error
# format, files, stdin, -o, --emit=dot and `bazel run`'s working directory.
# Usage: commir_opt_test.sh PATH/TO/commir-opt
set -u

OPT="$1"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect_status WANT CMD...: runs CMD, keeping stdout in $TMP/out and stderr in $TMP/err.
expect_status() {
  local want="$1"
  shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [[ "$got" != "$want" ]]; then
    fail "'$*' exited $got, want $want; stderr:"
    cat "$TMP/err" >&2
  fi
}

expect_file_equals() {  # FILE EXPECTED-TEXT
  if [[ "$(cat "$1")" != "$2" ]]; then
    fail "$1 is:"
    cat "$1" >&2
    echo "want:" >&2
    echo "$2" >&2
  fi
}

expect_grep() {  # FILE PATTERN (fixed string)
  grep -qF -- "$2" "$1" || { fail "$1 lacks '$2':"; cat "$1" >&2; }
}

cat >"$TMP/good.commir" <<'EOF'
func @f(%x: f32[4]) -> f32[4] {
  %a = mul(%x, 1.0)
  %b = neg(%a)
  %c = neg(%a)
  %d = add(%b, %c) : f32[4]
  %dead = exp(%x)
  return %d
}
EOF

CANONICAL='func @f(%x: f32[4]) -> f32[4] {
  %a = mul(%x, 1.0) : f32[4]
  %b = neg(%a) : f32[4]
  %c = neg(%a) : f32[4]
  %d = add(%b, %c) : f32[4]
  %dead = exp(%x) : f32[4]
  return %d
}'

OPTIMIZED='func @f(%x: f32[4]) -> f32[4] {
  %b = neg(%x) : f32[4]
  %d = add(%b, %b) : f32[4]
  return %d
}'

# ---- Success: 0 --------------------------------------------------------------------------

expect_status 0 "$OPT" "$TMP/good.commir"
expect_file_equals "$TMP/out" "$CANONICAL"
cp "$TMP/out" "$TMP/canonical.commir"
# The canonical form reproduces itself byte for byte.
expect_status 0 "$OPT" "$TMP/canonical.commir"
cmp -s "$TMP/out" "$TMP/canonical.commir" || fail "printing is not idempotent"

expect_status 0 "$OPT" "$TMP/good.commir" --pass-pipeline='canonicalize, cse, dce' --verify-each
expect_file_equals "$TMP/out" "$OPTIMIZED"

# stdin, both implicitly and as '-'.
expect_status 0 "$OPT" --pass-pipeline=canonicalize,cse,dce <"$TMP/good.commir"
expect_file_equals "$TMP/out" "$OPTIMIZED"
expect_status 0 "$OPT" - <"$TMP/good.commir"
expect_file_equals "$TMP/out" "$CANONICAL"

# -o writes the file and nothing to stdout.
expect_status 0 "$OPT" "$TMP/good.commir" -o "$TMP/written.commir" --pass-pipeline=cse,dce
[[ -s "$TMP/out" ]] && fail "-o also wrote to stdout"
expect_grep "$TMP/written.commir" '%d = add(%b, %b) : f32[4]'

# Relative paths follow BUILD_WORKING_DIRECTORY, as under `bazel run`.
mkdir -p "$TMP/wd"
cp "$TMP/good.commir" "$TMP/wd/rel.commir"
expect_status 0 env BUILD_WORKING_DIRECTORY="$TMP/wd" "$OPT" rel.commir -o rel.out
expect_file_equals "$TMP/wd/rel.out" "$CANONICAL"

expect_status 0 "$OPT" --print-ir-after-all --pass-pipeline=dce "$TMP/good.commir"
expect_grep "$TMP/err" '// -----// IR Dump After dce //----- //'

expect_status 0 "$OPT" --list-passes
for pass in canonicalize cse dce; do expect_grep "$TMP/out" "$pass"; done
expect_grep "$TMP/out" 'fold-constants: bool = true'

expect_status 0 "$OPT" --help
expect_grep "$TMP/out" 'usage: commir-opt'

expect_status 0 "$OPT" --emit=dot "$TMP/good.commir"
expect_grep "$TMP/out" 'digraph commir {'
if [[ -x /usr/bin/dot ]]; then
  /usr/bin/dot -Tpng -o "$TMP/graph.png" "$TMP/out" || fail "dot rejected --emit=dot output"
fi

# ---- Invalid input: 1 --------------------------------------------------------------------

cat >"$TMP/bad.commir" <<'EOF'
func @f(%x: f32[4]) -> f32[4] {
  %a = frob(%x) : f32[4]
  %b = neg(%nope) : f32[4]
  return %b
}
EOF
expect_status 1 "$OPT" "$TMP/bad.commir"
expect_grep "$TMP/err" "$TMP/bad.commir:2:8: error: "
expect_grep "$TMP/err" '  %a = frob(%x) : f32[4]'
expect_grep "$TMP/err" '       ^'
expect_grep "$TMP/err" "$TMP/bad.commir:3:"
[[ -s "$TMP/out" ]] && fail "a failed run printed output"

printf 'func @f(%%x: f32[4]) -> f32[8] {\n  return %%x\n}\n' >"$TMP/mismatch.commir"
expect_status 1 "$OPT" <"$TMP/mismatch.commir"
expect_grep "$TMP/err" '<stdin>:2:3: error: '

expect_status 1 "$OPT" "$TMP/does-not-exist.commir"
expect_grep "$TMP/err" "$TMP/does-not-exist.commir: error: cannot open file"

# Inputs that are not regular files: directories are refused, pipes and FIFOs stream.
mkdir -p "$TMP/a_dir"
expect_status 1 "$OPT" "$TMP/a_dir"
expect_grep "$TMP/err" "$TMP/a_dir: error: cannot read file: it is a directory"
[[ -s "$TMP/out" ]] && fail "a directory input printed output"
expect_status 1 "$OPT" - <"$TMP/a_dir"
expect_grep "$TMP/err" "<stdin>: error: cannot read file: it is a directory"
[[ -s "$TMP/out" ]] && fail "a directory on stdin printed output"
expect_status 0 "$OPT" <(cat "$TMP/good.commir")
expect_file_equals "$TMP/out" "$CANONICAL"
rm -f "$TMP/fifo" && mkfifo "$TMP/fifo"
cat "$TMP/good.commir" >"$TMP/fifo" &
expect_status 0 "$OPT" "$TMP/fifo"
wait
expect_file_equals "$TMP/out" "$CANONICAL"

# Lost output is an error (exit 1, naming the file and the OS error), never success.
"$OPT" "$TMP/good.commir" >/dev/full 2>"$TMP/err"
got=$?
[[ "$got" == 1 ]] || fail "stdout on /dev/full exited $got, want 1"
expect_grep "$TMP/err" "cannot write '<stdout>': No space left on device"
"$OPT" --list-passes >/dev/full 2>"$TMP/err"
got=$?
[[ "$got" == 1 ]] || fail "--list-passes on /dev/full exited $got, want 1"
expect_grep "$TMP/err" "cannot write '<stdout>': No space left on device"
expect_status 1 "$OPT" "$TMP/good.commir" -o /dev/full
expect_grep "$TMP/err" "cannot write '/dev/full': No space left on device"
# Under a file-size limit (SIGXFSZ ignored, so writes fail with EFBIG) the output is
# cut: -o leaves no partial file, nor a temporary one, and stdout is reported too.
{
  echo 'func @big(%x: f32[4]) -> f32[4] {'
  for i in $(seq 1 200); do echo "  %v$i = neg(%x) : f32[4]"; done
  echo '  return %x'
  echo '}'
} >"$TMP/big.commir"
mkdir -p "$TMP/limited"
(trap '' XFSZ; ulimit -f 2; exec "$OPT" "$TMP/big.commir" -o "$TMP/limited/out.commir") 2>"$TMP/err"
got=$?
[[ "$got" == 1 ]] || fail "-o under a file-size limit exited $got, want 1"
expect_grep "$TMP/err" "cannot write '$TMP/limited/out.commir': File too large"
[[ -n "$(ls -A "$TMP/limited")" ]] && fail "a failed -o left files: $(ls -A "$TMP/limited")"
(trap '' XFSZ; ulimit -f 2; exec "$OPT" "$TMP/big.commir" >"$TMP/limited_stdout") 2>"$TMP/err"
got=$?
[[ "$got" == 1 ]] || fail "stdout under a file-size limit exited $got, want 1"
expect_grep "$TMP/err" "cannot write '<stdout>': File too large"
# A failed -o keeps what was there before.
echo "previous" >"$TMP/limited/kept.commir"
(trap '' XFSZ; ulimit -f 2; exec "$OPT" "$TMP/big.commir" -o "$TMP/limited/kept.commir") 2>"$TMP/err"
expect_file_equals "$TMP/limited/kept.commir" "previous"

# ---- Bad usage: 2 ------------------------------------------------------------------------

expect_status 2 "$OPT" --frobnicate "$TMP/good.commir"
expect_grep "$TMP/err" "commir-opt: error: unknown option '--frobnicate'"
expect_status 2 "$OPT" --pass-pipeline=cse,frobnicate "$TMP/good.commir"
expect_grep "$TMP/err" "unknown pass 'frobnicate'; valid passes: autodiff, canonicalize, "
for pass in cse dce; do expect_grep "$TMP/err" ", $pass"; done
expect_status 2 "$OPT" '--pass-pipeline=canonicalize{max-rewrites=x}' "$TMP/good.commir"
expect_grep "$TMP/err" "valid options of 'canonicalize'"
expect_status 2 "$OPT" '--pass-pipeline=canonicalize{colour=red}' "$TMP/good.commir"
expect_status 2 "$OPT" --emit=xml "$TMP/good.commir"
expect_status 2 "$OPT" "$TMP/good.commir" "$TMP/good.commir"
expect_status 2 "$OPT" --pass-pipeline
# Out-of-range pass options are usage errors found when the pipeline is parsed.
for case in 'pipeline-collective-matmul{chunks=0}:chunks' 'pipeline-collective-matmul{streams=0}:streams' \
            'propagate-sharding{iterations=101}:iterations' 'propagate-sharding{iterations=0}:iterations' \
            'canonicalize{max-rewrites=-2}:max-rewrites'; do
  expect_status 2 "$OPT" "--pass-pipeline=${case%:*}" "$TMP/good.commir"
  expect_grep "$TMP/err" "option '${case##*:}' must be "
  [[ -s "$TMP/out" ]] && fail "'${case%:*}' printed output"
done
expect_status 0 "$OPT" '--pass-pipeline=propagate-sharding{iterations=100},canonicalize{max-rewrites=-1}' "$TMP/good.commir"
expect_status 0 "$OPT" --list-passes
expect_grep "$TMP/out" 'iterations: int in 1..100 = 1'
expect_grep "$TMP/out" 'chunks: int >= 1 = 4'
# A second --pass-pipeline or -o would silently replace the first.
expect_status 2 "$OPT" --pass-pipeline=cse --pass-pipeline=dce "$TMP/good.commir"
expect_grep "$TMP/err" "--pass-pipeline is given more than once"
expect_status 2 "$OPT" -o "$TMP/o1" -o "$TMP/o2" "$TMP/good.commir"
expect_grep "$TMP/err" "-o is given more than once"

if [[ "$failures" -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all commir-opt checks passed"
