#!/bin/bash
# Runs docs/check_docs.py on the tutorial and the language reference with the tools
# built by Bazel. Usage: check_docs_test.sh PATH/TO/commir-opt PATH/TO/commir-run
# (both in one directory, as //:commir-opt and //:commir-run are).
set -eu
bin_dir="$(dirname "$1")"
[[ "$(dirname "$2")" == "$bin_dir" ]] || { echo "commir-opt and commir-run must share a directory" >&2; exit 1; }
exec /usr/bin/python3 docs/check_docs.py --bin "$bin_dir" --root . docs/tutorial.md docs/language.md
