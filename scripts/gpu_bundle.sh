#!/usr/bin/env bash
# Builds everything a GPU machine without Bazel needs to test CommIR's cuda backend, and
# bundles it into .carry/gpu/ (git-ignored) for scripts/gpu_run.sh to run there:
#   - the test binaries that need a GPU (the tests tagged requires-gpu: their host-side
#     cases are separate targets that run in CI everywhere),
#   - //:commir-run with its cuda backend //:libcommir_cuda.so, //:commir-opt,
#     //benchmarks:cuda_benchmarks and
#     //backend_cuda/kernels:kernels_benchmark,
# built with -c opt and --dynamic_mode=off (no _solib tree to carry; only the CUDA, NCCL
# and system libraries stay dynamic), stripped, then packed as .carry/gpu/bundle.tar.xz
# (each binary carries its own sm_80/sm_90 fatbin: about 80 MiB unpacked, 8 compressed);
# each test's runfiles (its data files, laid
# out as Bazel's runfiles tree, which is where the tests look: paths relative to the
# working directory and $(rootpath) arguments); the shared examples with the exit status
# each of their checks gives on the cpu backend here, which the GPU must reproduce.
# The bundle holds MANIFEST (sha256, size and path of every file), tests.tsv,
# examples.tsv and BUILD_INFO; copies of those four sit beside the archive for reading.
# Fails if .carry/gpu plus the rest of the working tree exceeds the device tool's 64 MiB.
#
#   scripts/gpu_bundle.sh            # then, on the device: scripts/gpu_run.sh
#
# The device tool call: run(command="scripts/gpu_run.sh", carry=[".carry/gpu"]).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
CARRY=.carry/gpu
STAGE_ROOT=$(mktemp -d)
trap 'rm -rf "$STAGE_ROOT"' EXIT
DEST=$STAGE_ROOT/gpu  # the unpacked bundle, packed into $CARRY at the end
LIMIT=$((64 * 1024 * 1024))
BAZEL_FLAGS=(-c opt --dynamic_mode=off)
WORKSPACE_NAME=commir

log() { printf 'gpu_bundle: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] ||
  die "no CUDA toolkit here: the cuda targets cannot be built (see docs/building.md, CUDA)"

mapfile -t TESTS < <(bazel query 'attr(tags, "[\[ ]requires-gpu[,\]]", tests(//...))' 2>/dev/null | sort)
[[ ${#TESTS[@]} -gt 0 ]] || die "bazel query found no tests tagged requires-gpu"
# //:libcommir_cuda.so is the cuda backend that commir-run dlopens for --backend=cuda from
# beside itself (bin/; test runfiles link to it there, as they link to commir-run).
TOOLS=(//:commir-run //:libcommir_cuda.so //:commir-opt //benchmarks:cuda_benchmarks
       //backend_cuda/kernels:kernels_benchmark)

log "building ${#TESTS[@]} tests and ${#TOOLS[@]} tools with ${BAZEL_FLAGS[*]}"
bazel build "${BAZEL_FLAGS[@]}" "${TESTS[@]}" "${TOOLS[@]}"
BIN=$(bazel info "${BAZEL_FLAGS[@]}" bazel-bin 2>/dev/null)
[[ -d $BIN ]] || die "bazel info bazel-bin gave '$BIN'"

# //pkg:name -> pkg/name (the output path under bazel-bin and the runfiles path).
label_path() {
  local label=${1#//}
  local pkg=${label%%:*} name=${label#*:}
  if [[ -z $pkg ]]; then echo "$name"; else echo "$pkg/$name"; fi
}

mkdir -p "$DEST/bin" "$DEST/tests" "$DEST/runfiles/$WORKSPACE_NAME" "$DEST/examples" "$DEST/logs"

# Copies $1 to $2 stripped (keeping the mode).
copy_stripped() {
  install -m 0755 "$1" "$2"
  strip --strip-unneeded "$2"
}

for label in "${TOOLS[@]}"; do
  src="$BIN/$(label_path "$label")"
  [[ -x $src ]] || die "missing build output $src"
  copy_stripped "$src" "$DEST/bin/$(basename "$src")"
done

# Which bundled tool a runfile is, if any: the same build output.
declare -A TOOL_BY_REALPATH=()
for label in "${TOOLS[@]}"; do
  TOOL_BY_REALPATH[$(realpath "$BIN/$(label_path "$label")")]=$(basename "$(label_path "$label")")
done

# tests.tsv: NAME <TAB> BINARY (relative to the bundle) <TAB> ARGS (space-separated,
# $(rootpath) expanded; the test runs in runfiles/commir, as under bazel test).
printf '# name\tbinary\targs\n' >"$DEST/tests.tsv"
for label in "${TESTS[@]}"; do
  rel=$(label_path "$label")
  src="$BIN/$rel"
  [[ -x $src ]] || die "missing build output $src"
  mkdir -p "$DEST/tests/$(dirname "$rel")"
  copy_stripped "$src" "$DEST/tests/$rel"
  # The test's data: every runfile but the binary itself and external repositories.
  manifest="$src.runfiles_manifest"
  [[ -f $manifest ]] || die "no runfiles manifest $manifest (--nobuild_runfile_manifests?)"
  while read -r runfile target; do
    [[ $runfile == "$WORKSPACE_NAME/"* ]] || continue
    path=${runfile#"$WORKSPACE_NAME/"}
    [[ $path == "$rel" || $path == _solib* || -z $target ]] && continue
    dest="$DEST/runfiles/$WORKSPACE_NAME/$path"
    mkdir -p "$(dirname "$dest")"
    tool=${TOOL_BY_REALPATH[$(realpath "$target")]:-}
    if [[ -n $tool ]]; then
      # A bundled tool (commir-run as a test's data): a relative link, not a second copy.
      ln -sfn "$(realpath --relative-to="$(dirname "$dest")" "$DEST/bin/$tool")" "$dest"
    elif [[ ! -e $dest ]]; then
      cp -L "$target" "$dest"
    fi
  done <"$manifest"
  args=$(bazel query --output=build "$label" 2>/dev/null | python3 -c '
import re, sys
m = re.search(r"^\s*args = \[(.*)\],?$", sys.stdin.read(), re.M)
args = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1)) if m else []
def expand(a):
    def one(x):
        label = x.group(2).lstrip("/")
        pkg, _, name = label.partition(":")
        # "./" so that a shell started by the test finds a top-level tool in the working
        # directory (a bare "commir-run" would be looked up on PATH).
        return f"./{pkg}/{name}" if pkg else f"./{name}"
    return re.sub(r"\$\((rootpath|location|execpath) ([^)]+)\)", one, a)
print(" ".join(expand(a) for a in args))')
  printf '%s\t%s\t%s\n' "${label#//}" "tests/$rel" "$args" >>"$DEST/tests.tsv"
done

# Shared libraries of this machine (Debian) that the device image lacks: Abseil, OpenBLAS
# (and its Fortran runtime), Google Benchmark... into lib/, which gpu_run.sh puts first
# on LD_LIBRARY_PATH. glibc and the CUDA, NCCL and driver libraries are the device's own;
# the C++ runtime goes to lib-fallback/, used only if the device's is older.
mkdir -p "$DEST/lib" "$DEST/lib-fallback"
find "$DEST/bin" "$DEST/tests" -type f -perm -u+x -exec ldd {} \; 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r soname path; do
    case $soname in
      ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libresolv.so* | libutil.so*) ;;
      libcuda.so* | libcudart.so* | libcublas* | libnccl.so* | libcudnn* | libnvrtc* | libnvidia*) ;;
      libstdc++.so* | libgcc_s.so*) cp -L "$path" "$DEST/lib-fallback/$soname" ;;
      *) cp -L "$path" "$DEST/lib/$soname" && strip --strip-unneeded "$DEST/lib/$soname" ;;
    esac
  done

# The shared examples (../shared/examples beside the checkout, else the byte-identical
# copies in testdata/examples) and what to run on each: the program itself with --check;
# spmd programs with --check-against their global reference (as scripts/demo.sh does); and
# every schedule of every global program, checked against the program. Each run's exit
# status on the cpu backend here is the expected one on the GPU.
EXAMPLES_SRC=$(realpath -m "$ROOT/../shared/examples")
[[ -d $EXAMPLES_SRC ]] || EXAMPLES_SRC=$ROOT/testdata/examples
cp "$EXAMPLES_SRC"/*.commir "$DEST/examples/"
declare -A REFERENCE=([ring_ag_matmul.commir]=ag_matmul_global4.commir)
LOWER='propagate-sharding,lower-to-spmd,canonicalize,cse,dce'
SCHEDULES=(
  ''
  'pipeline-collective-matmul'
  'pipeline-collective-matmul{chunks=2,streams=1}'
  'ring-collective-matmul{direction=uni}'
  'ring-collective-matmul{direction=bi}'
  'ring-attention'
  'ring-attention{zigzag=true}'
  'ulysses-attention'
)
RUN="$DEST/bin/commir-run"
OPT="$DEST/bin/commir-opt"
scratch=$STAGE_ROOT/scratch
mkdir -p "$scratch"
printf '# name\tfile\tpipeline\treference\texpected_exit\n' >"$DEST/examples.tsv"
for path in "$DEST"/examples/*.commir; do
  file=$(basename "$path")
  if grep -q '^spmd func' "$path"; then
    ref=${REFERENCE[$file]:-}
    [[ -n $ref ]] || { log "skipping $file: spmd program without a reference"; continue; }
    set +e; "$RUN" "$path" --check-against="$DEST/examples/$ref" >/dev/null 2>&1; code=$?; set -e
    printf '%s\t%s\t-\t%s\t%s\n' "${file%.commir}" "$file" "$ref" "$code" >>"$DEST/examples.tsv"
    continue
  fi
  for schedule in "${SCHEDULES[@]}"; do
    if [[ -z $schedule ]]; then
      set +e; "$RUN" "$path" --check >/dev/null 2>&1; code=$?; set -e
      printf '%s\t%s\t-\t-\t%s\n' "${file%.commir}" "$file" "$code" >>"$DEST/examples.tsv"
      [[ $code -eq 0 ]] || break  # a program meant to fail: no schedules
      continue
    fi
    pipeline="$LOWER,$schedule"
    # Only schedules that rewrite something and succeed here are worth a GPU run.
    "$OPT" "$path" --pass-pipeline="$LOWER" >"$scratch/lowered.commir" 2>/dev/null || continue
    "$OPT" "$path" --pass-pipeline="$pipeline" >"$scratch/scheduled.commir" 2>/dev/null || continue
    cmp -s "$scratch/lowered.commir" "$scratch/scheduled.commir" && continue
    set +e; "$RUN" "$scratch/scheduled.commir" --check-against="$path" >/dev/null 2>&1; code=$?; set -e
    name="${file%.commir}+${schedule//[^A-Za-z0-9=_-]/_}"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$file" "$pipeline" "$file" "$code" >>"$DEST/examples.tsv"
  done
done

{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "bazel flags: ${BAZEL_FLAGS[*]}"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  echo "nvcc: $("$nvcc" --version | tail -1)"
  echo "examples from: $EXAMPLES_SRC"
} >"$DEST/BUILD_INFO"

# MANIFEST: sha256, size and path (relative to the bundle) of every regular file; links
# are listed with their target.
(
  cd "$DEST"
  find . -type f ! -name MANIFEST -printf '%P\n' | sort | while read -r f; do
    printf '%s  %s  %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"
  done
  find . -type l -printf 'link  %l  %P\n' | sort
) >"$DEST/MANIFEST"

unpacked=$(du -sb "$DEST" | cut -f1)
rm -rf "$CARRY"
mkdir -p "$CARRY"
log "packing (xz)"
tar -C "$STAGE_ROOT" -cf - gpu | xz -T0 -6 >"$CARRY/bundle.tar.xz"
cp "$DEST/MANIFEST" "$DEST/tests.tsv" "$DEST/examples.tsv" "$DEST/BUILD_INFO" "$CARRY/"
bundle=$(du -sb "$CARRY" | cut -f1)
# Everything else that travels: tracked files and untracked files git does not ignore.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null |
         awk '{s += $1} END {print s + 0}')
total=$((bundle + tree))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
log "bundle $CARRY: $(mib "$bundle") packed, $(mib "$unpacked") unpacked ($(grep -vc '^#' "$DEST/tests.tsv") tests, $(find "$DEST/bin" -type f | wc -l) tools, $(find "$DEST/lib" -type f | wc -l) libraries, $(grep -vc '^#' "$DEST/examples.tsv") example runs)"
log "with the working tree ($(mib "$tree")): $(mib "$total") of the device tool's 64 MiB"
if ((total > LIMIT)); then
  die "too large for the device tool's carry limit ($(mib "$total") > 64 MiB)"
fi
log "largest files:"
sort -k2 -n -r "$DEST/MANIFEST" | grep -v '^link' | head -5 | awk '{printf "  %8.1f MiB  %s\n", $2 / 1048576, $3}' >&2
log "ok; on the device: run(command=\"scripts/gpu_run.sh\", carry=[\".carry/gpu\"])"
