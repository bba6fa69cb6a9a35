#!/usr/bin/env python3
"""Prints, for the shared examples, what each communication schedule costs a device.

For each example (testdata/examples copies of ../shared/examples: ag_matmul,
ag_matmul_global4, mlp, transformer_block with the collective-matmul schedules;
attention with the attention schedules) and each schedule, runs

    commir-opt EXAMPLE --pass-pipeline='propagate-sharding,lower-to-spmd,canonicalize,
                                        cse,dce,SCHEDULE,schedule-report'

and reads the schedule-report line (transforms/schedules/schedule_report.h) from stderr:

    collectives  collectives executed other than shift (loop trips counted)
    shifts       shifts executed; ring-steps: those on the busiest stream
    ring stream  bytes the shifts on the busiest stream send (a ring's link time)
    gemms        matmuls executed
    attentions   attention ops executed
    bytes        bytes each device sends (OpDef cost formulas, as comm-report)
    peak extra   most bytes live at once beyond arguments and returned buffers

Schedules: the plain lowering, pipeline-collective-matmul with 2 and 4 chunks on 2
streams, ring-collective-matmul uni and bi; for attention the plain lowering,
ring-attention (contiguous and zigzag) and ulysses-attention. Prints a Markdown table.

Programs of your own: name them, and each gets a row per schedule that applies to it.
A program with a global function is lowered first; a program of spmd functions is
scheduled as written (its first row is then "(as written)"). A schedule applies when it
changes the program; a schedule that fails on it (chunks that do not divide) is left
out with a note on stderr. --pipelines names the schedules instead (each a pass
pipeline run after the lowering, '' for none); then every one is shown and any failure
is an error. A file with several functions gets one row per function and schedule.

Usage:
    benchmarks/schedule_table.py                     # builds //:commir-opt first
    benchmarks/schedule_table.py --commir-opt bazel-bin/commir-opt --examples DIR
    benchmarks/schedule_table.py my.commir [more.commir ...]
    benchmarks/schedule_table.py my.commir --pipelines 'ring-collective-matmul{direction=bi}' ''

Exit status: 0 on success, 1 if commir-opt fails or prints no report.
"""

import argparse
import os
import re
import subprocess
import sys

LOWER = "propagate-sharding,lower-to-spmd,canonicalize,cse,dce"
MATMUL_SCHEDULES = [
    ("lowered (all_gather / reduce_scatter)", ""),
    ("pipeline chunks=2 streams=2", "pipeline-collective-matmul{chunks=2,streams=2}"),
    ("pipeline chunks=4 streams=2", "pipeline-collective-matmul{chunks=4,streams=2}"),
    ("ring uni", "ring-collective-matmul{direction=uni}"),
    ("ring bi", "ring-collective-matmul{direction=bi}"),
]
ATTENTION_SCHEDULES = [
    ("lowered (all_gather k, v)", ""),
    ("ring attention", "ring-attention,cse"),
    ("ring attention zigzag", "ring-attention{zigzag=true},cse"),
    ("ulysses (all_to_all)", "ulysses-attention,cse"),
]
# (example, its schedules)
EXAMPLES = [
    ("ag_matmul", MATMUL_SCHEDULES),
    ("ag_matmul_global4", MATMUL_SCHEDULES),
    ("mlp", MATMUL_SCHEDULES),
    ("transformer_block", MATMUL_SCHEDULES),
    ("attention", ATTENTION_SCHEDULES),
]
REPORT = re.compile(
    r"// schedule-report @(\S+): collectives (\d+)  shifts (\d+)  ring-steps (\d+)  "
    r"ring-bytes (\d+)  gemms (\d+)  attentions (\d+)  bytes/device (\d+)  peak-extra/device (\d+)")


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_missing_tools(args, tools):
    """For each tool ("commir-run", ...) whose --tool option was not given, builds
    //:tool and points args.tool at bazel-bin/tool (the table scripts' shared default)."""
    for tool in tools:
        attribute = tool.replace("-", "_")
        if getattr(args, attribute) is None:
            subprocess.run(["bazel", "build", "//:" + tool], cwd=repo_root(), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            setattr(args, attribute, os.path.join(repo_root(), "bazel-bin", tool))


def run(cmd):
    """The command's stdout; RuntimeError with its stderr when it fails."""
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stderr}")
    return result.stdout


def kib(value):
    return f"{int(value) / 1024:g} KiB"


def row_label(example, function, reports):
    return example if reports == 1 else f"{example} @{function}"


def print_rows(example, label, reports):
    for function, coll, shifts, steps, ring, gemms, attentions, sent, peak in reports:
        print(f"| {row_label(example, function, len(reports))} | {label} | {coll} | "
              f"{shifts} ({steps}) | {gemms} | {attentions} | "
              f"{kib(sent)} | {kib(ring)} | {kib(peak)} |")


def run_schedule(tool, path, prefix, schedule):
    """Runs prefix,schedule,schedule-report on path: (exit status, module, reports, stderr)."""
    pipeline = ",".join(p for p in (prefix, schedule, "schedule-report") if p)
    run = subprocess.run([tool, path, "--pass-pipeline=" + pipeline], capture_output=True,
                         text=True)
    return run.returncode, run.stdout, REPORT.findall(run.stderr), run.stderr


def has_global_function(path):
    with open(path, encoding="utf-8") as f:
        return re.search(r"^\s*func\s+@", f.read(), re.MULTILINE) is not None


def user_program_rows(tool, path, pipelines):
    """Prints the rows of one program a user named; returns the exit status."""
    example = os.path.splitext(os.path.basename(path))[0]
    prefix = LOWER if has_global_function(path) else ""
    if pipelines is not None:
        for schedule in pipelines:
            status, _, reports, stderr = run_schedule(tool, path, prefix, schedule)
            if status != 0 or not reports:
                sys.stderr.write(f"{example} / {schedule or 'no schedule'}: commir-opt failed "
                                 f"(exit {status}):\n{stderr}")
                return 1
            print_rows(example, schedule or ("lowered" if prefix else "(as written)"), reports)
        return 0
    status, baseline, base_reports, stderr = run_schedule(tool, path, prefix, "")
    if status != 0 or not base_reports:
        sys.stderr.write(f"{example}: commir-opt failed (exit {status}):\n{stderr}")
        return 1
    rows, kinds = [], set()
    for kind, schedules in (("matmul", MATMUL_SCHEDULES[1:]), ("attention", ATTENTION_SCHEDULES[1:])):
        for label, schedule in schedules:
            status, module, reports, stderr = run_schedule(tool, path, prefix, schedule)
            if status != 0 or not reports:
                sys.stderr.write(f"{example} / {label}: left out, commir-opt failed "
                                 f"(exit {status}):\n{stderr}")
            elif module != baseline:
                rows.append((label, reports))
                kinds.add(kind)
    if not prefix:
        base_label = "(as written)"
    elif kinds == {"matmul"}:
        base_label = MATMUL_SCHEDULES[0][0]
    elif kinds == {"attention"}:
        base_label = ATTENTION_SCHEDULES[0][0]
    else:
        base_label = "lowered"
    print_rows(example, base_label, base_reports)
    for label, reports in rows:
        print_rows(example, label, reports)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", metavar="PROGRAM.commir",
                        help="programs of your own (default: the shared examples)")
    parser.add_argument("--commir-opt", help="path to commir-opt (default: build it)")
    parser.add_argument("--examples", default=os.path.join(repo_root(), "testdata", "examples"))
    parser.add_argument("--pipelines", nargs="+", metavar="PIPELINE",
                        help="with programs: the schedules to apply ('' for none)")
    args = parser.parse_args()
    if args.pipelines is not None and not args.programs:
        parser.error("--pipelines needs programs to apply them to")

    tool = args.commir_opt
    if tool is None:
        subprocess.run(["bazel", "build", "//:commir-opt"], cwd=repo_root(), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tool = os.path.join(repo_root(), "bazel-bin", "commir-opt")

    print("| example | schedule | collectives | shifts (ring steps) | GEMMs | attentions | "
          "bytes sent / device | on the busiest ring stream | peak extra memory / device |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    if args.programs:
        for path in args.programs:
            if user_program_rows(tool, path, args.pipelines) != 0:
                return 1
        return 0
    for example, schedules in EXAMPLES:
        path = os.path.join(args.examples, example + ".commir")
        for label, schedule in schedules:
            status, _, reports, stderr = run_schedule(tool, path, LOWER, schedule)
            if status != 0 or not reports:
                sys.stderr.write(f"{example} / {label}: commir-opt failed (exit "
                                 f"{status}):\n{stderr}")
                return 1
            print_rows(example, label, reports[:1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
