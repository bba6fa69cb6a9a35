#!/usr/bin/env bash
# //python:pytest: the package's pytest suite with Debian's /usr/bin/python3 (numpy,
# torch and pytest come from Debian packages, see scripts/setup.sh) and the extension
# module Bazel built beside the package sources in the runfiles tree.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export PYTHONPATH="${root}/python${PYTHONPATH:+:${PYTHONPATH}}"
export PYTHONDONTWRITEBYTECODE=1
cd "${root}/python"
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tests "$@"
