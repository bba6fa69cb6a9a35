"""Builds the `commir` wheel: the Python sources of python/commir plus the C++ extension
`_commir.so`, placed inside the package (commir/_commir.so).

The extension is the one Bazel builds (//python:_commir.so), so Python and the command-line
tools share one build of the C++ sources. By default this runs
`bazel build -c opt //python:_commir.so` in the repository root (the folder above this
one); set COMMIR_EXTENSION=/path/to/_commir.so to package an extension built already (the
packaging test does, since Bazel cannot run inside a Bazel test).
"""

import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)


def _extension_path():
    prebuilt = os.environ.get("COMMIR_EXTENSION")
    if prebuilt:
        if not os.path.isfile(prebuilt):
            raise SystemExit("commir setup: COMMIR_EXTENSION=%s is not a file" % prebuilt)
        return prebuilt
    if not os.path.isfile(os.path.join(REPO_ROOT, "WORKSPACE")):
        raise SystemExit(
            "commir setup: no WORKSPACE in %s: install from a CommIR checkout "
            "(pip install ./python), or set COMMIR_EXTENSION to a built _commir.so" % REPO_ROOT)
    bazel = shutil.which("bazel")
    if bazel is None:
        raise SystemExit("commir setup: bazel is not on PATH (run scripts/setup.sh first), "
                         "or set COMMIR_EXTENSION to a built _commir.so")
    subprocess.check_call([bazel, "build", "-c", "opt", "//python:_commir.so"], cwd=REPO_ROOT)
    bin_dir = subprocess.check_output([bazel, "info", "-c", "opt", "bazel-bin"], cwd=REPO_ROOT,
                                      text=True).strip()
    return os.path.join(bin_dir, "python", "_commir.so")


class BuildPyWithExtension(build_py):
    """Copies the Bazel-built extension into the package being built."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "commir", "_commir.so")
        self.mkpath(os.path.dirname(target))
        self.copy_file(_extension_path(), target)


class BinaryDistribution(Distribution):
    """The wheel holds a compiled extension: tag it for this platform, not "any"."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithExtension}, distclass=BinaryDistribution)
