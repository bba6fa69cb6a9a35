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

Usage:
    benchmarks/schedule_table.py                     # builds //:commir-opt first
    benchmarks/schedule_table.py --commir-opt bazel-bin/commir-opt --examples DIR

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


def kib(value):
    return f"{int(value) / 1024:g} KiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commir-opt", help="path to commir-opt (default: build it)")
    parser.add_argument("--examples", default=os.path.join(repo_root(), "testdata", "examples"))
    args = parser.parse_args()

    tool = args.commir_opt
    if tool is None:
        subprocess.run(["bazel", "build", "//:commir-opt"], cwd=repo_root(), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tool = os.path.join(repo_root(), "bazel-bin", "commir-opt")

    print("| example | schedule | collectives | shifts (ring steps) | GEMMs | attentions | "
          "bytes sent / device | on the busiest ring stream | peak extra memory / device |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for example, schedules in EXAMPLES:
        path = os.path.join(args.examples, example + ".commir")
        for label, schedule in schedules:
            pipeline = ",".join(p for p in (LOWER, schedule, "schedule-report") if p)
            run = subprocess.run([tool, path, "--pass-pipeline=" + pipeline, "-o", os.devnull],
                                 capture_output=True, text=True)
            match = REPORT.search(run.stderr)
            if run.returncode != 0 or match is None:
                sys.stderr.write(f"{example} / {label}: commir-opt failed (exit "
                                 f"{run.returncode}):\n{run.stderr}")
                return 1
            _, coll, shifts, steps, ring, gemms, attentions, sent, peak = match.groups()
            print(f"| {example} | {label} | {coll} | {shifts} ({steps}) | {gemms} | {attentions} | "
                  f"{kib(sent)} | {kib(ring)} | {kib(peak)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
