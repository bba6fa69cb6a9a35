#!/usr/bin/env bash
# Installs the Debian (bookworm) packages CommIR needs to build and test.
#
# Idempotent and quick: one dpkg-query call; apt-get runs only when something
# is missing, and then installs exactly the missing packages (plus their
# dependencies) from the configured Debian mirrors. Nothing else is downloaded.
#
# CUDA is optional and not installed here: it is detected by Bazel at
# $CUDA_PATH or /usr/local/cuda (see docs/building.md, "CUDA").
set -euo pipefail

PACKAGES=(
  # Toolchain
  build-essential
  pkg-config
  python3
  # Bazel 4.2.3 (offline) + the rule repositories WORKSPACE points at
  bazel-bootstrap
  bazel-rules-java
  bazel-platforms
  # C++ libraries (used via pkg-config, see third_party/system_libs.bzl)
  libabsl-dev
  libre2-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  libopenblas-dev  # only the speed baseline of benchmarks/cpu_backend_benchmarks
  libsleef-dev  # transcendental functions with the same bits on every x86-64 CPU
  nlohmann-json3-dev  # hardware description files of the sim backend
  # clang + libFuzzer/sanitizer runtimes for --config=fuzz
  clang-14
  libclang-rt-14-dev
  # MLIR tools (mlir-opt etc. for cross-checking) and graphviz (dot) for graph dumps
  mlir-14-tools
  graphviz
  # The Python package (python/): extension headers, and what its tests use with
  # Debian's /usr/bin/python3
  python3-dev
  pybind11-dev
  python3-numpy
  python3-torch
  python3-torchvision  # the ViT EncoderBlock capture test uses the real torchvision block
  python3-pytest
  # `pip install ./python` into a virtual environment (python/README.md, Installing)
  python3-venv
  python3-setuptools
  python3-wheel
)

# One dpkg-query call for all packages (unknown packages are simply absent
# from its output, hence "|| true").
declare -A installed=()
while IFS=' ' read -r pkg status; do
  [[ "${status}" == "installed" ]] && installed["${pkg%%:*}"]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)

missing=()
for pkg in "${PACKAGES[@]}"; do
  [[ -n "${installed[${pkg}]:-}" ]] || missing+=("${pkg}")
done

if ((${#missing[@]} == 0)); then
  echo "setup.sh: all ${#PACKAGES[@]} required packages are installed."
  exit 0
fi

echo "setup.sh: installing missing packages: ${missing[*]}"
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "setup.sh: not root and no sudo; run as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup.sh: done."
