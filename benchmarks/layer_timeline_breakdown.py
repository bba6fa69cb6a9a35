#!/usr/bin/env python3
"""Where a layer's ring schedule gains and loses against plain collectives: one layer's
forward + backward (`@layer_grad`, one micro-batch) predicted on h100-sxm with plain
collectives and with `ring-collective-matmul`, and device 0's kernel time summed by op,
so that each kernel family the ring adds (block GEMMs, per-step adds, zero-filled
buffers, block copies) stands beside the communication it hides.

For each MODEL:TP it runs, as benchmarks/plan_layer_schedule_table.md shows by hand,

    print_layer_program MODEL TP 1 1 1 > layer.commir
    commir-opt layer.commir --pass-pipeline='autodiff{func=layer,seed=cotangents},
        propagate-sharding,lower-to-spmd,canonicalize,cse,dce'          -> plain
    commir-opt plain --pass-pipeline=ring-collective-matmul              -> ring
    commir-run plain|ring --func=@layer_grad --backend=sim --format=json --trace=...

and prints one markdown table per layer: each op's time (us, summed over its kernels on
device 0's streams) under plain and ring and the difference, then the layer's time,
compute and exposed communication. The layer computes Q, K and V with one GEMM, as
Megatron-LM's `linear_qkv` does (search/plan/layer_program.h; an earlier version of this
script rewrote three projections into one with --fused-qkv). All figures are the sim's
predictions, not measurements.

Usage:
    benchmarks/layer_timeline_breakdown.py --commir-opt bazel-bin/commir-opt \
        --commir-run bazel-bin/commir-run \
        --print-layer-program bazel-bin/tools/print_layer_program \
        gpt3-175b:8 gpt3-175b:4
Exit status: 0 on success, 1 if a tool fails or its output cannot be read, 2 on bad usage.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

SPMD = "autodiff{func=layer,seed=cotangents},propagate-sharding,lower-to-spmd,canonicalize,cse,dce"


class ToolError(Exception):
    pass


def run(cmd, stdout=None):
    try:
        done = subprocess.run(cmd, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolError(f"cannot run {' '.join(cmd)}: {e}")
    if done.returncode != 0:
        raise ToolError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[:400]}")
    return done.stdout


def kernel_times(trace_path):
    """Device 0's kernel time per op (us), summed over its streams."""
    with open(trace_path) as f:
        events = json.load(f)
    if isinstance(events, dict):
        events = events["traceEvents"]
    times = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == 0:
            times[e["name"]] += e["dur"]
    return times


def predict(tools, program, work, tag):
    trace = os.path.join(work, tag + ".trace.json")
    report = json.loads(run([tools.commir_run, program, "--func=@layer_grad",
                             "--backend=sim", "--format=json", "--trace=" + trace]))
    device = report["devices"][0]
    return report["time_s"], device, kernel_times(trace)


def breakdown(tools, model, tp, work):
    layer = os.path.join(work, f"{model}_{tp}.commir")
    text = run([tools.print_layer_program, model, str(tp), "1", "1", "1"])
    with open(layer, "w") as f:
        f.write(text)
    plain = os.path.join(work, f"{model}_{tp}.plain.commir")
    ring = os.path.join(work, f"{model}_{tp}.ring.commir")
    opt = tools.commir_opt
    run([opt, layer, "-o", plain, "--pass-pipeline=" + SPMD])
    run([opt, plain, "-o", ring, "--pass-pipeline=ring-collective-matmul"])
    p_time, p_dev, p_ops = predict(tools, plain, work, "plain")
    r_time, r_dev, r_ops = predict(tools, ring, work, "ring")
    title = f"{model}, tp {tp}"
    print(f"\n{title}: plain {p_time * 1e3:.2f} ms, ring {r_time * 1e3:.2f} ms "
          f"(ring / plain {r_time / p_time:.3f})\n")
    print("| op (device 0) | plain, us | ring, us | ring - plain, us |")
    print("|---|---|---|---|")
    ops = sorted(set(p_ops) | set(r_ops), key=lambda o: -abs(r_ops[o] - p_ops[o]))
    for op in ops:
        if abs(r_ops[op] - p_ops[op]) < 1:
            continue
        print(f"| {op} | {p_ops[op]:.0f} | {r_ops[op]:.0f} | {r_ops[op] - p_ops[op]:+.0f} |")
    for key, label in (("compute_s", "compute"), ("exposed_communication_s", "exposed communication")):
        print(f"| *{label}* | {p_dev[key] * 1e6:.0f} | {r_dev[key] * 1e6:.0f} | "
              f"{(r_dev[key] - p_dev[key]) * 1e6:+.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commir-opt", required=True)
    ap.add_argument("--commir-run", required=True)
    ap.add_argument("--print-layer-program", required=True)
    ap.add_argument("layers", nargs="+", metavar="MODEL:TP")
    args = ap.parse_args()
    layers = []
    for spec in args.layers:
        model, _, tp = spec.partition(":")
        if not model or not tp.isdigit() or not 1 <= int(tp) <= 64:
            ap.error(f"a layer is MODEL:TP with TP from 1 to 64, got '{spec}'")
        layers.append((model, int(tp)))
    try:
        with tempfile.TemporaryDirectory() as work:
            for model, tp in layers:
                breakdown(args, model, tp, work)
    except (ToolError, ValueError, KeyError) as e:
        print(f"layer_timeline_breakdown.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
