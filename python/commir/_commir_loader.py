"""Finds the extension module _commir.so that Bazel builds (//python:_commir.so).

It is looked up on sys.path as the top-level module ``_commir`` (bazel-bin/python on
PYTHONPATH, as the README and the test runner set it up).
"""

import importlib


def load():
    try:
        return importlib.import_module("_commir")
    except ImportError as error:
        raise ImportError(
            "commir: cannot import the extension module _commir (%s). Build it with "
            "`bazel build //python:_commir.so` and put bazel-bin/python on PYTHONPATH "
            "(see python/README.md)." % error) from error
