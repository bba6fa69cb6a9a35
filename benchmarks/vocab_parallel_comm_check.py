"""Checks benchmarks/vocab_parallel_comm.md against commir-opt and Megatron-LM's closed forms.

Partitions benchmarks/vocab_parallel_comm.commir (GPT-2 sizes on tp = 8), reads the
comm-report of each function, and checks every row of the table: the CommIR cells equal
the report, the Megatron-LM cells equal the collectives Megatron-LM's code issues for the
same sizes (computed here from their shapes, not by any tool), and the two agree. Exit
status 1 with one line per mismatch.

Megatron-LM (megatron/core/tensor_parallel/layers.py, mappings.py, cross_entropy.py):
VocabParallelEmbedding masks the ids outside its shard and sums the partial rows with
reduce_from_tensor_model_parallel_region (an all_reduce of [s, b, h] in the activation
type) or, with sequence parallelism, reduce_scatter_to_sequence_parallel_region (a
reduce_scatter of the same); _VocabParallelCrossEntropy all_reduces the logits' maximum
(MAX), the predicted (target) logits and the sums of exponentials (SUM), each [s, b] in
f32 (the fused variant concatenates the last two into one all_reduce of the same bytes).
Ring algorithms as NCCL's: an all_reduce sends 2 (n-1)/n of its operand per device, a
reduce_scatter (n-1)/n.

Usage: vocab_parallel_comm_check.py PATH/TO/commir-opt [TABLE.md]
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comm_report_reading import parse_comm_reports, table_rows  # noqa: E402

PROGRAM = "benchmarks/vocab_parallel_comm.commir"
PIPELINE = "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,comm-report"
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "shift")

# The program's sizes (GPT-2 with Megatron-LM's padded vocabulary).
TP = 8
TOKENS = 8 * 1024
HIDDEN = 768
BF16, F32 = 2, 4


def megatron():
    """{function: {kind: (count, bytes per device)}} from Megatron-LM's collectives."""
    ring = (TP - 1) / TP
    rows = TOKENS * HIDDEN * BF16  # the embedding's partial rows, [s, b, h] bf16
    per_token = TOKENS * F32       # one f32 per token
    return {
        "embedding": {"all_reduce": (1, 2 * ring * rows)},
        "embedding_sp": {"reduce_scatter": (1, ring * rows)},
        "head_loss": {"all_reduce": (3, 3 * 2 * ring * per_token)},
    }


def comm_reports(opt):
    """{function: {kind: (count, bytes)}} from commir-opt's comm-report."""
    run = subprocess.run([opt, PROGRAM, "--pass-pipeline=" + PIPELINE, "-o", "/dev/null"],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"commir-opt exited {run.returncode}: {run.stderr.strip()}")
    return parse_comm_reports(run.stderr, KINDS)


def cells(collectives):
    """('all_reduce x3', '172,032') for {kind: (count, bytes)}."""
    kinds = " + ".join(f"{k} x{c}" for k, (c, _) in sorted(collectives.items()))
    total = sum(b for _, b in collectives.values())
    return kinds or "none", f"{round(total):,}"


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    table = argv[2] if len(argv) == 3 else "benchmarks/vocab_parallel_comm.md"
    try:
        ours = comm_reports(argv[1])
    except (OSError, RuntimeError) as error:
        print(f"vocab_parallel_comm_check: {error}", file=sys.stderr)
        return 1
    theirs = megatron()
    problems = []
    rows = {r.get("function", "").strip("`@"): r for r in table_rows(table)}
    for name, expected in theirs.items():
        row = rows.get(name)
        if row is None:
            problems.append(f"{table}: no row for @{name}")
            continue
        want = {"CommIR collectives": cells(ours.get(name, {}))[0],
                "CommIR bytes/device": cells(ours.get(name, {}))[1],
                "Megatron-LM collectives": cells(expected)[0],
                "Megatron-LM bytes/device": cells(expected)[1]}
        for column, value in want.items():
            if row.get(column) != value:
                problems.append(f"@{name} {column}: table says {row.get(column)!r}, now {value!r}")
        if ours.get(name) != {k: (c, round(b)) for k, (c, b) in expected.items()}:
            problems.append(f"@{name}: CommIR {ours.get(name)} differs from Megatron-LM {expected}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
