"""Checks benchmarks/moe_alltoall.md against commir-opt and Megatron-LM's closed form.

Runs testdata/partitioning/moe_ep_report.commir (Mixtral 8x7B's MoE layer, expert
parallelism over 8 devices, and its gradient) through the partitioner and reads the
comm-report of @moe (the forward) and @moe_grad (forward and backward). Checks every
CommIR cell of the table against it, the forward's all_to_alls against Megatron-LM's
(equal), and every Megatron-LM all_to_all cell against its
MoEAlltoAllTokenDispatcher computed here from the layer's sizes: each all_to_all sends
each token's hidden vector to its k experts' ranks, T_local k H dtype (ep-1)/ep bytes per
device when the routing is balanced (with capacity factor 1 and drop-and-pad, exactly the
capacity buffer's (ep-1)/ep). Exit status 1 with one line per mismatch.

Usage: moe_alltoall_check.py PATH/TO/commir-opt [TABLE.md]
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comm_report_reading import parse_comm_reports, table_rows  # noqa: E402

CASE = "testdata/partitioning/moe_ep_report.commir"
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")

# The layer of CASE: Mixtral 8x7B (hidden 4096, 8 experts, top-2), bf16, 8 devices of
# expert parallelism, 4096 tokens per device, capacity factor 1.
EP, T_LOCAL, K, HIDDEN, DTYPE_BYTES, EXPERTS = 8, 4096, 2, 4096, 2, 8


def megatron_all_to_all_bytes():
    """Bytes per device of one dispatch (or combine) all_to_all of Megatron-LM's
    alltoall dispatcher: every routed copy of a token's hidden vector whose expert lives
    on another rank, balanced routing."""
    return T_LOCAL * K * HIDDEN * DTYPE_BYTES * (EP - 1) // EP


def comm_reports(opt):
    with open(CASE) as source:
        text = source.read()
    pipeline = re.search(r"--pass-pipeline=(\S+)", text).group(1)
    run = subprocess.run([opt, CASE, "--pass-pipeline=" + pipeline, "-o", os.devnull],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"commir-opt exited {run.returncode}: {run.stderr.strip()}")
    reports = parse_comm_reports(run.stderr, KINDS)
    for name in ("moe", "moe_grad"):
        if name not in reports:
            raise RuntimeError(f"no comm-report of @{name} in: {run.stderr.strip()}")
    return reports


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    table = argv[2] if len(argv) == 3 else "benchmarks/moe_alltoall.md"
    try:
        reports = comm_reports(argv[1])
    except (OSError, RuntimeError) as error:
        print(f"moe_alltoall_check: {error}", file=sys.stderr)
        return 1
    forward, both = reports["moe"], reports["moe_grad"]
    ours = {"forward": forward,
            "backward": {k: (both.get(k, (0, 0))[0] - forward.get(k, (0, 0))[0],
                             both.get(k, (0, 0))[1] - forward.get(k, (0, 0))[1]) for k in KINDS}}
    megatron = {("forward", "all_to_all"): (2, 2 * megatron_all_to_all_bytes()),
                ("backward", "all_to_all"): (2, 2 * megatron_all_to_all_bytes())}
    problems = []
    rows = table_rows(table)
    if not rows:
        problems.append(f"{table} has no table")
    seen = set()
    for row in rows:
        kind, when = row["collective"], row["pass"]
        label = f"{when} {kind}"
        if kind not in KINDS or when not in ours:
            problems.append(f"unknown row: {label}")
            continue
        seen.add((when, kind))
        cells = (int(row["CommIR"]), int(row["CommIR bytes/device"]))
        want = ours[when].get(kind, (0, 0))
        if cells != want:
            problems.append(f"{label}: the table says {cells}, commir-opt gives {want}")
        if (when, kind) in megatron:
            theirs = (int(row["Megatron-LM"]), int(row["Megatron-LM bytes/device"]))
            if theirs != megatron[(when, kind)]:
                problems.append(f"{label}: the table's Megatron-LM cells {theirs}, the closed "
                                f"form gives {megatron[(when, kind)]}")
            # The backward's differences are explained in the table's notes.
            if when == "forward" and want != theirs:
                problems.append(f"{label}: CommIR {want}, Megatron-LM {theirs}")
    for when in ("forward", "backward"):
        for kind in KINDS:
            if ours[when].get(kind, (0, 0))[0] and (when, kind) not in seen:
                problems.append(f"{when} {kind}: commir-opt reports {ours[when][kind]}, the "
                                "table has no row")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print(f"{table} matches commir-opt's comm-report and Megatron-LM's closed form")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
