#!/usr/bin/env python3
"""Offline coverage_report_generator: combines the per-test lcov files.

Invoked by Bazel after `bazel coverage` as
  coverage_report_generator --reports_file=LIST --output_file=F
where LIST names one lcov file per line.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import coverage_lib  # noqa: E402


def main(argv):
    flags = coverage_lib.parse_flags(argv)
    reports_file = flags.get("reports_file", [None])[-1]
    output_file = flags.get("output_file", [None])[-1]
    if not reports_file or not output_file:
        sys.stderr.write("coverage_report_generator: --reports_file and --output_file are required\n")
        return 1
    result = {}
    with open(reports_file, encoding="utf-8") as f:
        reports = [l.strip() for l in f if l.strip()]
    for report in reports:
        if os.path.exists(report) and os.path.getsize(report) > 0:
            coverage_lib.parse_lcov(report, result)
    coverage_lib.write_lcov(result, output_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
