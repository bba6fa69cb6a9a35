#!/usr/bin/env bash
# //python:pip_install_test: `pip install ./python` as a user runs it (offline, no build
# isolation, into a virtual environment that sees Debian's numpy), then `import commir`
# from another folder with no PYTHONPATH, and one program run against NumPy. The
# extension is the one Bazel built for this test (COMMIR_EXTENSION), since Bazel cannot
# run inside a Bazel test; setup.py's own `bazel build` path is what users get.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="${TEST_TMPDIR}/pip"
rm -rf "$work"
mkdir -p "$work/src/python/commir" "$work/elsewhere"
cp "$root/python/setup.py" "$root/python/pyproject.toml" "$work/src/python/"
cp "$root"/python/commir/*.py "$work/src/python/commir/"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
unset PYTHONPATH
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
COMMIR_EXTENSION="$root/python/_commir.so" \
  "$work/venv/bin/python" -m pip install -q --no-build-isolation "$work/src/python"
rm -rf "$work/src"  # the installed copy must not need its sources
cd "$work/elsewhere"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
import numpy as np
import commir

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(commir.__file__)
assert where.startswith(venv + os.sep), f"commir imported from {where}, not the venv {venv}"
m = commir.parse(
    "func @f(%a: f32[3, 4], %b: f32[4, 2]) -> f32[3, 2] {\n"
    "  %c = matmul(%a, %b) : f32[3, 2]\n"
    "  %d = tanh(%c) : f32[3, 2]\n"
    "  return %d\n}\n")
rng = np.random.default_rng(0)
a = rng.standard_normal((3, 4)).astype(np.float32)
b = rng.standard_normal((4, 2)).astype(np.float32)
d = commir.run(m, a=a, b=b)
expected = np.tanh(a.astype(np.float64) @ b.astype(np.float64))
assert np.allclose(d, expected, rtol=1e-5, atol=1e-6), (d, expected)
print("installed commir from", where, "ran matmul+tanh matching NumPy")
PY
