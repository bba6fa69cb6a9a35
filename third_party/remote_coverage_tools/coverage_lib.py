"""Tiny lcov reader/merger used by lcov_merger.py and coverage_report_generator.py."""

import gzip
import json
import os
import re


class FileCov:
    def __init__(self):
        self.lines = {}  # line -> hits
        self.functions = {}  # name -> [line, hits]

    def add_line(self, line, hits):
        self.lines[line] = self.lines.get(line, 0) + hits

    def add_function(self, name, line=None, hits=0):
        entry = self.functions.setdefault(name, [line, 0])
        if line is not None and entry[0] is None:
            entry[0] = line
        entry[1] += hits


def parse_lcov(path, result):
    current = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.strip()
            if line.startswith("SF:"):
                current = result.setdefault(line[3:], FileCov())
            elif current is None:
                continue
            elif line.startswith("DA:"):
                parts = line[3:].split(",")
                if len(parts) >= 2:
                    current.add_line(int(parts[0]), int(float(parts[1])))
            elif line.startswith("FN:"):
                parts = line[3:].split(",", 1)
                if len(parts) == 2:
                    current.add_function(parts[1], int(parts[0]))
            elif line.startswith("FNDA:"):
                parts = line[5:].split(",", 1)
                if len(parts) == 2:
                    current.add_function(parts[1], None, int(float(parts[0])))
            elif line == "end_of_record":
                current = None


def parse_gcov_json(path, result):
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        data = json.load(f)
    for fdata in data.get("files", []):
        cov = result.setdefault(fdata["file"], FileCov())
        for fn in fdata.get("functions", []):
            cov.add_function(fn.get("name", "?"), fn.get("start_line"), fn.get("execution_count", 0))
        for ln in fdata.get("lines", []):
            cov.add_line(ln["line_number"], ln.get("count", 0))


def write_lcov(result, out_path, keep=lambda path: True):
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as out:
        for path in sorted(result):
            if not keep(path):
                continue
            cov = result[path]
            out.write("SF:%s\n" % path)
            for name, (line, _) in sorted(cov.functions.items()):
                out.write("FN:%d,%s\n" % (line or 0, name))
            for name, (_, hits) in sorted(cov.functions.items()):
                out.write("FNDA:%d,%s\n" % (hits, name))
            out.write("FNF:%d\n" % len(cov.functions))
            out.write("FNH:%d\n" % sum(1 for _, h in cov.functions.values() if h))
            for line, hits in sorted(cov.lines.items()):
                out.write("DA:%d,%d\n" % (line, hits))
            out.write("LH:%d\n" % sum(1 for h in cov.lines.values() if h))
            out.write("LF:%d\n" % len(cov.lines))
            out.write("end_of_record\n")


def parse_flags(argv):
    """Parses --name=value / --name value flags; repeated flags become lists."""
    flags = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            if "=" in arg:
                name, value = arg[2:].split("=", 1)
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                name, value = arg[2:], argv[i + 1]
                i += 1
            else:
                name, value = arg[2:], "true"
            flags.setdefault(name, []).append(value)
        i += 1
    return flags


def make_filter(patterns, manifest_sources=None):
    regexes = [re.compile(p) for p in patterns]

    def keep(path):
        if any(r.match(path) for r in regexes):
            return False
        if manifest_sources is not None and path not in manifest_sources:
            return False
        return True

    return keep
