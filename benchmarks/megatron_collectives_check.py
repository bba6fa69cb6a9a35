"""Checks benchmarks/megatron_collectives.md against what commir-opt does now.

Runs the shared transformer block and its gradient function through the partitioner,
reads the comm-report of @block (the forward) and @block_grad (forward and backward), and
checks every CommIR cell of the table, and that CommIR's all_gather and reduce_scatter
rows and the backward's all_reduce bytes equal Megatron-LM TP+SP's. Exit status 1 with
one line per mismatch.

Usage: megatron_collectives_check.py PATH/TO/commir-opt [TABLE.md]
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comm_report_reading import parse_comm_reports, table_rows  # noqa: E402

PIPELINE = ("autodiff{seed=cotangents},propagate-sharding,lower-to-spmd,canonicalize,cse,dce,"
            "comm-report")
EXAMPLE = "testdata/examples/transformer_block.commir"
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


def comm_reports(opt):
    """{function: {kind: (count, bytes)}} from commir-opt's comm-report on the example."""
    with open(EXAMPLE) as source:
        run = subprocess.run([opt, "-", "--pass-pipeline=" + PIPELINE], stdin=source,
                             capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"commir-opt exited {run.returncode}: {run.stderr.strip()}")
    reports = parse_comm_reports(run.stderr, KINDS)
    for name in ("block", "block_grad"):
        if name not in reports:
            raise RuntimeError(f"no comm-report of @{name} in: {run.stderr.strip()}")
    return reports


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    table = argv[2] if len(argv) == 3 else "benchmarks/megatron_collectives.md"
    try:
        reports = comm_reports(argv[1])
    except (OSError, RuntimeError) as error:
        print(f"megatron_collectives_check: {error}", file=sys.stderr)
        return 1
    forward = reports["block"]
    both = reports["block_grad"]
    ours = {"forward": forward, "both": both,
            "backward": {k: (both.get(k, (0, 0))[0] - forward.get(k, (0, 0))[0],
                             both.get(k, (0, 0))[1] - forward.get(k, (0, 0))[1]) for k in KINDS}}
    problems = []
    rows = table_rows(table)
    if len(rows) < 8:
        problems.append(f"{table} has {len(rows)} rows, want 8")
    totals = {"all_gather": 0, "reduce_scatter": 0}
    for row in rows:
        label = f"{row['pass']} {row['collective']}"
        kind = row["collective"].split()[0]
        if kind not in KINDS or row["pass"] not in ours:
            problems.append(f"unknown row: {label}")
            continue
        count, nbytes = int(row["CommIR"]), int(row["CommIR bytes/device"])
        megatron = (int(row["Megatron-LM TP+SP"]), int(row["TP+SP bytes/device"]))
        if "re-gather" in row["collective"]:
            want = (0, 0)  # counted in the plain all_gather row: CommIR keeps the gathers
        else:
            want = ours[row["pass"]].get(kind, (0, 0))
            if kind in totals and row["pass"] != "both":
                totals[kind] += want[0]
                if want != megatron:
                    problems.append(f"{label}: CommIR {want}, Megatron-LM TP+SP {megatron}")
            if kind == "all_reduce" and row["pass"] == "backward" and want[1] != megatron[1]:
                problems.append(f"{label}: CommIR sends {want[1]} bytes, Megatron-LM {megatron[1]}")
        if (count, nbytes) != want:
            problems.append(f"{label}: the table says {(count, nbytes)}, commir-opt gives {want}")
    # Korthikanti et al.: four all-gathers and four reduce-scatters per layer.
    if totals != {"all_gather": 4, "reduce_scatter": 4}:
        problems.append(f"forward + backward: {totals}, want 4 all_gathers and 4 reduce_scatters")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print(f"{table} matches commir-opt's comm-report")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
