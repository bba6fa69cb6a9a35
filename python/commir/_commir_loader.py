"""Finds the extension module _commir.so (the C++ core, built by Bazel as //python:_commir.so).

An installed package (`pip install ./python`) carries it inside the package as
``commir._commir``; a source checkout finds it as the top-level module ``_commir`` (with
bazel-bin/python on PYTHONPATH, as the test runner sets it up).
"""

import importlib


def load():
    try:
        return importlib.import_module("commir._commir")
    except ImportError:
        pass
    try:
        return importlib.import_module("_commir")
    except ImportError as error:
        raise ImportError(
            "commir: cannot import the extension module _commir (%s). Install the package "
            "with `pip install --no-build-isolation ./python`, or build it with "
            "`bazel build //python:_commir.so` and put bazel-bin/python on PYTHONPATH "
            "(see python/README.md)." % error) from error
