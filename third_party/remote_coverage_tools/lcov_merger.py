#!/usr/bin/env python3
"""Offline lcov_merger: merges per-test coverage into one lcov file.

Invoked by Bazel's collect_coverage.sh as
  lcov_merger --coverage_dir=D --output_file=F [--filter_sources=RE ...]
              [--source_file_manifest=M] [--sources_to_replace_file=R]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import coverage_lib  # noqa: E402


def main(argv):
    flags = coverage_lib.parse_flags(argv)
    coverage_dir = flags.get("coverage_dir", [None])[-1]
    output_file = flags.get("output_file", [None])[-1]
    if not coverage_dir or not output_file:
        sys.stderr.write("lcov_merger: --coverage_dir and --output_file are required\n")
        return 1
    result = {}
    out_abs = os.path.abspath(output_file)
    for root, _, files in os.walk(coverage_dir):
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.abspath(path) == out_abs:
                continue
            try:
                if name.endswith(".dat") or name.endswith(".info"):
                    coverage_lib.parse_lcov(path, result)
                elif name.endswith(".gcov.json.gz"):
                    coverage_lib.parse_gcov_json(path, result)
            except (OSError, ValueError) as e:
                sys.stderr.write("lcov_merger: skipping %s: %s\n" % (path, e))
    manifest_sources = None
    manifest = flags.get("source_file_manifest", [None])[-1]
    if manifest and os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            entries = [l.strip() for l in f if l.strip()]
        # Only C/C++ sources are filtered by the manifest (like upstream).
        cc = [e for e in entries if e.endswith((".c", ".cc", ".cpp", ".cxx", ".h", ".hpp"))]
        if cc:
            manifest_sources = set(cc)
    keep = coverage_lib.make_filter(flags.get("filter_sources", []), manifest_sources)
    coverage_lib.write_lcov(result, output_file, keep)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
