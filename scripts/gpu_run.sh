#!/usr/bin/env bash
# Runs the bundle of scripts/gpu_bundle.sh on a GPU machine that has no Bazel (the device
# tool's machine), from the repository root:
#   run(command="scripts/gpu_run.sh", carry=[".carry/gpu"])
#
#  1. unpacks .carry/gpu/bundle.tar.xz and checks every file against its MANIFEST;
#  2. finds the CUDA libraries the binaries need (libcudart, libcublasLt, libnccl; and
#     reports libcudnn) with `find` and puts their folders on LD_LIBRARY_PATH;
#  3. prints nvidia-smi, and stops with "no GPU" (exit 3) if it lists no GPU, unless
#     --no-gpu-ok is given (then the GPU tests skip and every cuda run fails: a dry run of
#     this script on a machine without a GPU);
#  4. runs every test binary in the bundle's runfiles tree (as `bazel test` would: the
#     working directory, TEST_SRCDIR, TEST_TMPDIR, and the BUILD file's args), gtest XML
#     to the results;
#  5. runs `commir-run --backend=cuda` on every shared example: --check for global
#     programs, --check-against for spmd ones (as scripts/demo.sh does), and each schedule
#     of each global program (commir-opt, then --check-against the program); each must
#     give the exit status the cpu backend gave when the bundle was built;
#  6. runs cuda_benchmarks and kernels_benchmark with --benchmark_format=json;
#  7. prints a summary table; writes summary.txt, nvidia-smi.txt, the two benchmark JSON
#     files and gpu_results.tar.gz (every log and XML) to $OUT (the device tool brings
#     back at most 8 files, 2 folders deep: hence one archive); exits 1 if anything
#     failed.
#
# Environment: OUT (set by the device tool; default /tmp/commir-gpu-out), GPU_TEST_TIMEOUT (s per test binary, default 300),
# GPU_BENCH_TIMEOUT (s per benchmark binary, default 180), GPU_BENCH_ARGS (extra benchmark
# flags, e.g. --benchmark_filter=...), GPU_SKIP_BENCH=1 to skip the benchmarks,
# GPU_RUN_KEEP=1 to keep the unpacked bundle (in $TMPDIR, default /tmp).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$PWD
CARRY=$ROOT/.carry/gpu
OUT=${OUT:-${TMPDIR:-/tmp}/commir-gpu-out}
TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-300}
BENCH_TIMEOUT=${GPU_BENCH_TIMEOUT:-180}
NO_GPU_OK=0

log() { printf 'gpu_run: %s\n' "$*" >&2; }
die() { local code=$1; shift; log "error: $*"; exit "$code"; }

for arg in "$@"; do
  case $arg in
    --no-gpu-ok) NO_GPU_OK=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die 2 "unknown argument '$arg' (see --help)" ;;
  esac
done

# ---- 1. the bundle ---------------------------------------------------------------------
[[ -f $CARRY/bundle.tar.xz ]] ||
  die 2 "no bundle at $CARRY/bundle.tar.xz: run scripts/gpu_bundle.sh on the build machine and pass carry=[\".carry/gpu\"] to the device tool"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/commir-gpu.XXXXXX")
# The unpacked bundle is about 120 MiB; results are copied to $OUT before exit.
[[ ${GPU_RUN_KEEP:-0} == 1 ]] || trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results
mkdir -p "$RESULTS/tests" "$RESULTS/examples" "$RESULTS/bench" "$OUT"
if command -v xz >/dev/null; then
  xz -dc "$CARRY/bundle.tar.xz" | tar -C "$WORK" -xf - || die 2 "cannot unpack the bundle"
else
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
    "$CARRY/bundle.tar.xz" "$WORK" || die 2 "cannot unpack the bundle (no xz; python3 failed)"
fi
BUNDLE=$WORK/gpu
RUNFILES=$BUNDLE/runfiles
(
  cd "$BUNDLE" || exit 1
  grep -v '^link' MANIFEST | awk '{print $1 "  " $3}' | sha256sum -c --quiet - &&
    grep '^link' MANIFEST | while read -r _ target path; do
      [[ -e $path ]] || { echo "$path: broken link to $target"; exit 1; }
    done
) || die 2 "the bundle does not match its MANIFEST"
log "bundle: $(grep -c . "$BUNDLE/MANIFEST") entries verified; $(sed -n 's/^commit: //p' "$BUNDLE/BUILD_INFO")"

# ---- 2. libraries ----------------------------------------------------------------------
mapfile -t BINARIES < <(find "$BUNDLE/bin" "$BUNDLE/tests" -type f -perm -u+x | sort)
missing_sonames() {
  for b in "${BINARIES[@]}"; do ldd "$b" 2>/dev/null; done | awk '/=> not found/ {print $1}' | sort -u
}
# The bundle's own libraries (those of the build machine that the image lacks) come first.
ORIGINAL_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$BUNDLE/lib${ORIGINAL_LD_LIBRARY_PATH:+:$ORIGINAL_LD_LIBRARY_PATH}
mapfile -t MISSING < <(missing_sonames)
# One walk of the file system for every library of interest (and whatever is missing).
patterns=(-name 'libcudart.so*' -o -name 'libcublasLt.so*' -o -name 'libnccl.so*' -o -name 'libcudnn.so*')
for s in "${MISSING[@]}"; do patterns+=(-o -name "$s"); done
mapfile -t FOUND < <(find / \( -path /proc -o -path /sys -o -path /dev -o -path "$WORK" \) -prune -o \
                       \( "${patterns[@]}" \) \( -type f -o -type l \) -print 2>/dev/null |
                     grep -v '/stubs/' |
                     awk '{print (index($0, "/usr/local/cuda") == 1 ? 0 : 1) "\t" $0}' | sort | cut -f2)
declare -a LIB_DIRS=()
add_dir() {
  local d
  for d in "${LIB_DIRS[@]}"; do [[ $d == "$1" ]] && return; done
  LIB_DIRS+=("$1")
}
for s in "${MISSING[@]}"; do
  hit=""
  for f in "${FOUND[@]}"; do [[ $(basename "$f") == "$s" ]] && { hit=$f; break; }; done
  if [[ -n $hit ]]; then add_dir "$(dirname "$hit")"; else log "warning: $s not found anywhere"; fi
done
LIB_DIRS=("$BUNDLE/lib" "${LIB_DIRS[@]}")
LD_LIBRARY_PATH=$(IFS=:; echo "${LIB_DIRS[*]}")${ORIGINAL_LD_LIBRARY_PATH:+:$ORIGINAL_LD_LIBRARY_PATH}
# A C++ runtime older than the build machine's: use the bundled one.
version_errors() { for b in "${BINARIES[@]}"; do ldd "$b" 2>&1; done | grep -o "version \`[A-Z_0-9.]*' not found" | sort -u; }
if version_errors | grep -q 'GLIBCXX\|CXXABI\|GCC_'; then
  log "the C++ runtime here is older than the build machine's: using the bundled libstdc++"
  LD_LIBRARY_PATH=$BUNDLE/lib-fallback:$LD_LIBRARY_PATH
fi
mapfile -t VERSION_ERRORS < <(version_errors)
((${#VERSION_ERRORS[@]} == 0)) ||
  die 3 "the binaries need newer system libraries than this machine has: ${VERSION_ERRORS[*]}"
for lib in libcudart libcublasLt libnccl libcudnn; do
  where=$(printf '%s\n' "${FOUND[@]}" | grep "/$lib\.so" | head -3 | tr '\n' ' ')
  log "$lib: ${where:-not found}"
done
log "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
log "commir-run loads $(ldd "$BUNDLE/bin/commir-run" | grep -c "$BUNDLE/lib") libraries from the bundle"
mapfile -t STILL < <(missing_sonames)
((${#STILL[@]} == 0)) || die 3 "libraries still missing for the binaries: ${STILL[*]}"

# ---- 3. the GPU ------------------------------------------------------------------------
{ nvidia-smi 2>&1 || echo "nvidia-smi failed or is missing"; } | tee "$RESULTS/nvidia-smi.txt" >&2
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  if ((NO_GPU_OK)); then
    log "no GPU (nvidia-smi lists none); going on because of --no-gpu-ok: GPU tests skip and cuda runs fail"
  else
    cp "$RESULTS/nvidia-smi.txt" "$OUT/" 2>/dev/null
    die 3 "no GPU: nvidia-smi lists no GPU on this machine; run this on the device machine (or pass --no-gpu-ok for a dry run)"
  fi
fi

# ---- 4-6. runs -------------------------------------------------------------------------
SUMMARY=$RESULTS/summary.tsv
printf 'kind\tname\tstatus\tdetail\tseconds\n' >"$SUMMARY"
FAILED=0
record() {  # kind name status detail seconds
  printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$SUMMARY"
  [[ $3 == PASS ]] || FAILED=$((FAILED + 1))
  printf 'gpu_run: %-8s %-60s %-7s %s\n' "$1" "$2" "$3" "$4" >&2
}
safe_name() { printf '%s' "$1" | tr -c 'A-Za-z0-9=_.+-' '_'; }

# gtest XML: "tests=N failures=F ... skipped=S" of the root element.
xml_counts() {
  local xml=$1
  [[ -f $xml ]] || { echo "no XML"; return; }
  python3 - "$xml" <<'EOF' 2>/dev/null || echo "unreadable XML"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = list(root.iter("testcase"))
skipped = sum(1 for c in cases if c.find("skipped") is not None or c.get("result") == "skipped")
failed = sum(1 for c in cases if c.find("failure") is not None)
print(f"{len(cases)} cases, {failed} failed, {skipped} skipped")
EOF
}

while IFS=$'\t' read -r name binary args; do
  [[ $name == '#'* || -z $name ]] && continue
  safe=$(safe_name "$name")
  tmp=$(mktemp -d "$WORK/tmp.XXXXXX")
  start=$SECONDS
  # shellcheck disable=SC2086  # args are space-separated words from the BUILD file
  (cd "$RUNFILES/commir" &&
     TEST_SRCDIR=$RUNFILES RUNFILES_DIR=$RUNFILES TEST_WORKSPACE=commir TEST_TMPDIR=$tmp \
     TEST_TARGET="//$name" timeout --kill-after=10 "$TEST_TIMEOUT" \
     "$BUNDLE/$binary" --gtest_output="xml:$RESULTS/tests/$safe.xml" $args) \
    >"$RESULTS/tests/$safe.log" 2>&1
  code=$?
  counts=$(xml_counts "$RESULTS/tests/$safe.xml")
  case $code in
    0) status=PASS ;;
    124 | 137) status=TIMEOUT ;;
    *) status=FAIL ;;
  esac
  record test "$name" "$status" "exit $code; $counts" $((SECONDS - start))
done <"$BUNDLE/tests.tsv"

RUN=$BUNDLE/bin/commir-run
OPT=$BUNDLE/bin/commir-opt
EX=$BUNDLE/examples
while IFS=$'\t' read -r name file pipeline reference expected; do
  [[ $name == '#'* || -z $name ]] && continue
  safe=$(safe_name "$name")
  logf=$RESULTS/examples/$safe.log
  start=$SECONDS
  if [[ $pipeline != - ]]; then
    program=$RESULTS/examples/$safe.commir
    if ! "$OPT" "$EX/$file" --pass-pipeline="$pipeline" >"$program" 2>"$logf"; then
      record example "$name" FAIL "commir-opt failed" $((SECONDS - start))
      continue
    fi
  else
    program=$EX/$file
  fi
  check=(--check)
  [[ $reference != - ]] && check=(--check-against="$EX/$reference")
  timeout --kill-after=10 "$TEST_TIMEOUT" "$RUN" "$program" --backend=cuda "${check[@]}" >>"$logf" 2>&1
  code=$?
  detail="exit $code (cpu: $expected)"
  if [[ $code == "$expected" ]]; then status=PASS; else status=FAIL; fi
  [[ $code == 3 ]] && detail+="; $(grep -m1 'error' "$logf" | cut -c1-100)"
  record example "$name" "$status" "$detail" $((SECONDS - start))
done <"$BUNDLE/examples.tsv"

if [[ ${GPU_SKIP_BENCH:-0} != 1 ]]; then
  for bench in cuda_benchmarks kernels_benchmark; do
    start=$SECONDS
    # shellcheck disable=SC2086
    timeout --kill-after=10 "$BENCH_TIMEOUT" "$BUNDLE/bin/$bench" --benchmark_format=json \
      ${GPU_BENCH_ARGS:-} >"$RESULTS/bench/$bench.json" 2>"$RESULTS/bench/$bench.log"
    code=$?
    # A benchmark that cannot run (no GPU, a failed check) reports error_occurred.
    read -r runs errors < <(python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))["benchmarks"]
print(len(b), sum(1 for x in b if x.get("error_occurred")))' "$RESULTS/bench/$bench.json" 2>/dev/null ||
      echo "0 0")
    case $code in
      0) status=PASS ;;
      124 | 137) status=TIMEOUT ;;
      *) status=FAIL ;;
    esac
    [[ $status == PASS && ($runs == 0 || $errors != 0) ]] && status=FAIL
    record bench "$bench" "$status" "exit $code; $runs benchmarks, $errors with errors" $((SECONDS - start))
  done
fi

# ---- 7. summary ------------------------------------------------------------------------
total=$(($(wc -l <"$SUMMARY") - 1))
{
  echo "CommIR GPU run: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'no GPU')"
  sed 's/^/  /' "$BUNDLE/BUILD_INFO"
  echo
  column -t -s $'\t' "$SUMMARY" 2>/dev/null || cat "$SUMMARY"
  echo
  echo "$((total - FAILED)) of $total passed, $FAILED failed"
} | tee "$RESULTS/summary.txt"
cp "$RESULTS/summary.txt" "$RESULTS/nvidia-smi.txt" "$OUT/"
for bench in "$RESULTS"/bench/*.json; do [[ -s $bench ]] && cp "$bench" "$OUT/"; done
tar -C "$WORK" -czf "$OUT/gpu_results.tar.gz" results
log "results in $OUT (summary.txt, gpu_results.tar.gz with every log and gtest XML)"
((FAILED == 0)) || exit 1
