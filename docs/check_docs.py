#!/usr/bin/python3
"""Checks that what the documentation shows is what the tools do.

For each Markdown file given:

  * every ```commir block must be a module that `commir-opt` accepts (exit 0); one
    preceded by the line `<!-- file: PATH -->` must also equal the file PATH (relative
    to the repository root) line for line;
  * every ```sh block preceded by the line `<!-- test -->` is run, one command line
    at a time, with bash in a scratch directory; each command must exit 0. If the next
    fenced block is ```text, the commands' output (stdout and stderr together) must
    equal it line for line, where a line `...` matches any number of lines. The figures
    after `rel_l2=` and `max_abs=` are not compared (they depend on the BLAS library and
    its thread count); the PASS or FAIL after them is.

The scratch directory holds `bazel-bin/commir-opt` and `bazel-bin/commir-run` (links to
the tools given with --bin) and links to the repository's `docs/`, `testdata/` and
`benchmarks/`, so that the commands run exactly as written from the repository root.
The directory is shared by all blocks of a file, in order, so a block may read files an
earlier block wrote.

Usage: check_docs.py --bin DIR [--root REPO] FILE.md...
Exit status: 0 if every block checks, 1 otherwise.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\S*)\s*$")
TEST_MARK = "<!-- test -->"
FILE_MARK = re.compile(r"^<!-- file: (\S+) -->$")


def fenced_blocks(text):
    """Yields (language, first line number, body lines, the comment line before it)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match or not match.group(1):
            i += 1
            continue
        language = match.group(1)
        start = i + 1
        j = start
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        yield language, start + 1, lines[start:j], previous
        i = j + 1


# Error figures of `commir-run --check` lines, which vary with the summation order.
ERROR_FIGURE = re.compile(r"\b(rel_l2|max_abs)=\S+")


def normalized(lines):
    return [ERROR_FIGURE.sub(r"\1=*", line) for line in lines]


def matches(expected, actual):
    """Line-by-line equality where an expected line '...' matches any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def commands(body):
    """Command lines of a sh block: comments and blank lines dropped, `\\` joined."""
    joined, pending = [], ""
    for line in body:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = pending + line
        pending = ""
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            joined.append(stripped)
    return joined


def check_file(path, bin_dir, root):
    failures = 0
    with open(path, encoding="utf-8") as f:
        blocks = list(fenced_blocks(f.read()))
    work = tempfile.mkdtemp(prefix="check_docs_")
    os.mkdir(os.path.join(work, "bazel-bin"))
    for tool in ("commir-opt", "commir-run"):
        os.symlink(os.path.abspath(os.path.join(bin_dir, tool)), os.path.join(work, "bazel-bin", tool))
    for sub in ("docs", "testdata", "benchmarks"):
        if os.path.isdir(os.path.join(root, sub)):
            os.symlink(os.path.abspath(os.path.join(root, sub)), os.path.join(work, sub))
    opt = os.path.join(work, "bazel-bin", "commir-opt")

    def fail(line, message):
        nonlocal failures
        failures += 1
        sys.stderr.write(f"{path}:{line}: {message}\n")

    for index, (language, line, body, mark) in enumerate(blocks):
        shown_file = FILE_MARK.match(mark)
        if language == "commir" and shown_file:
            with open(os.path.join(root, shown_file.group(1)), encoding="utf-8") as f:
                if f.read().splitlines() != body:
                    fail(line, f"block differs from {shown_file.group(1)}")
        if language == "commir":
            module = os.path.join(work, "block.commir")
            with open(module, "w", encoding="utf-8") as f:
                f.write("\n".join(body) + "\n")
            run = subprocess.run([opt, module, "-o", os.devnull], capture_output=True, text=True)
            if run.returncode != 0:
                fail(line, f"commir block rejected by commir-opt (exit {run.returncode}):\n"
                           + run.stderr.replace(module, "block.commir"))
        elif language == "sh" and mark == TEST_MARK:
            output = []
            for command in commands(body):
                run = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                output += run.stdout.splitlines()
                if run.returncode != 0:
                    fail(line, f"`{command}` exited {run.returncode}:\n{run.stdout}")
            following = blocks[index + 1] if index + 1 < len(blocks) else None
            if following is not None and following[0] == "text":
                expected = following[2]
                if not matches(normalized(expected), normalized(output)):
                    fail(following[1], "the tools print:\n" + "\n".join(output)
                         + "\nbut the document shows:\n" + "\n".join(expected))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="directory holding commir-opt and commir-run")
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="repository root (default: the parent of docs/)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    failures = sum(check_file(path, args.bin, args.root) for path in args.files)
    print(f"check_docs: {failures} failure(s)" if failures else "check_docs: all blocks check")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
