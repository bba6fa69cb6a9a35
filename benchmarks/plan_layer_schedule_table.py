#!/usr/bin/env python3
"""Prints the layer schedule the plan search chooses at tensor parallelism 4 and 8 inside
a node of 8 H100s, for GPT-3 175B, Llama-3 70B and Llama-3 405B, beside plain collectives.

For each row the script runs, on h100-sxm (8 GPUs per node, so tp stays inside a node),

    commir-search --plan MODEL --gpus=N --top=1 --plan-eval=PLAN --layer-schedule=none
    commir-search --plan MODEL --gpus=N --top=1 --plan-eval=PLAN   (the schedule search)

and reads the given plan's line (its time, MFU, fit and layer schedule) and the first
ranked plan (the search's best on the same cluster, with its layer schedule). "plain" is
what the plan search chose for every one of these layers before the sim priced the
blocks a GEMM reads and writes in place (sim/gemm_views.h) and before a collective-matmul
schedule was credited with keeping what plain collectives keep (search/plan/layer_cost.h).
A TransformerEngine-style schedule is `ring-collective-matmul` (TransformerEngine's
ring-exchange userbuffers overlap: all_gather + GEMM before QKV and FC1, GEMM +
reduce_scatter after the projection and FC2, on the copy engines) or
`pipeline-collective-matmul{chunks=,streams=}` (its pipelined split overlap).
All figures are the sim's predictions, not measurements.

Usage:
    benchmarks/plan_layer_schedule_table.py --commir-search bazel-bin/commir-search
Exit status: 0 on success, 1 if the tool fails or its output cannot be read.
"""
import argparse
import re
import subprocess
import sys

# (model as --plan text, GPUs, plan as --plan-eval text). The plans are the shapes
# NVIDIA's recipes run these models with (GPT-3 175B: NeMo's TP4 PP8 VP6 on 128 GPUs;
# Llama 3 70B: TP4 PP4 VP5 on 64 GPUs; Llama 3.1 405B: TP8 with pipelining), at tp 4 and
# 8, without context parallelism (whose attention schedules are another family), with
# selective recomputation and as many pipeline stages as needed for the plan to fit by
# our memory model (GPT-3 at tp 4 with 12 virtual stages, Llama 3 70B at tp 4 with 8
# stages); global batches whose micro-batch count interleaving accepts.
ROWS = [
    ("gpt3-175b,global_batch=256", 128,
     "tp=4,sp,pp=8,v=12,dp=4,mb=1,zero=1,recompute=selective"),
    ("gpt3-175b,global_batch=256", 128,
     "tp=8,sp,pp=8,v=6,dp=2,mb=1,zero=1,recompute=selective"),
    ("llama3-70b,global_batch=128", 64,
     "tp=4,sp,pp=8,v=5,dp=2,mb=1,zero=1,recompute=selective"),
    ("llama3-70b,global_batch=128", 64,
     "tp=8,sp,pp=4,v=5,dp=2,mb=1,zero=1,recompute=selective"),
    ("llama3-405b,global_batch=576", 576,
     "tp=4,sp,pp=18,v=7,dp=8,mb=1,zero=1,recompute=selective"),
    ("llama3-405b,global_batch=576", 576,
     "tp=8,sp,pp=9,v=7,dp=8,mb=1,zero=1,recompute=selective"),
]

GIVEN = re.compile(
    r"^given plan: (?P<plan>.*?), (?P<ms>[0-9.]+) ms \(compute [0-9.]+, recompute [0-9.]+, "
    r"exposed comm [0-9.]+, bubble [0-9.]+\), MFU (?P<mfu>[0-9.]+)%, "
    r"peak (?P<gb>[0-9.]+) GB, (?P<fits>fits|does not fit), layer schedule (?P<schedule>[^;]+)"
    r"(?:; best plan: (?P<best>.*), MFU (?P<best_mfu>[0-9.]+)% \((?P<gain>[0-9.]+)x\))?$")
# A ranked plan's row: rank, plan, time, tokens/s, MFU, ..., peak GB, layer schedule.
RANKED = re.compile(r"^\s+1\s+\*?\s*(?P<plan>tp=.*?)\s{2,}(?P<ms>[0-9.]+) ms\s+\d+\s+"
                    r"(?P<mfu>[0-9.]+)%.*\s(?P<gb>[0-9.]+)\s+(?P<schedule>\S+)$")


class ToolError(Exception):
    pass


def run(search, model, gpus, plan, schedule):
    cmd = [search, "--plan", model, f"--gpus={gpus}", "--hardware=h100-sxm", "--top=1",
           f"--plan-eval={plan}", f"--layer-schedule={schedule}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolError(f"cannot run {' '.join(cmd)}: {e}")
    if done.returncode != 0:
        raise ToolError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[:400]}")
    lines = done.stdout.strip().splitlines()
    given = GIVEN.match(lines[-1]) if lines else None
    ranked = next((m for m in map(RANKED.match, lines) if m), None)
    if not given or not ranked:
        raise ToolError(f"{model} {plan}: cannot read commir-search's output")
    return given, ranked


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commir-search", required=True)
    args = ap.parse_args()
    print("| model | GPUs | plan | layer schedule chosen | plain: time, MFU | chosen: time, MFU "
          "| gain | search's best plan | its layer schedule, MFU |")
    print("|---|---|---|---|---|---|---|---|---|")
    try:
        for model, gpus, plan in ROWS:
            plain, _ = run(args.commir_search, model, gpus, plan, "none")
            chosen, best = run(args.commir_search, model, gpus, plan, "search")
            fits = "" if chosen["fits"] == "fits" else " (does not fit)"
            gain = float(plain["ms"]) / float(chosen["ms"])
            print(f"| {model.split(',')[0]} | {gpus} | {chosen['plan']} | "
                  f"{chosen['schedule']}{fits} | {float(plain['ms']):.0f} ms, {plain['mfu']}% | "
                  f"{float(chosen['ms']):.0f} ms, {chosen['mfu']}% | {gain:.3f}x | "
                  f"{best['plan']} | {best['schedule']}, {best['mfu']}% |")
    except ToolError as e:
        print(f"plan_layer_schedule_table.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
