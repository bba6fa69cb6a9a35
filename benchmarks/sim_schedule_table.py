#!/usr/bin/env python3
"""Prints the predicted time of every shared example under each of its schedules on 8 H100s.

The companion of schedule_table.py (which counts what each schedule sends): the same
examples and the same schedules (imported from it), but scaled to sizes where the time
matters and predicted with the sim backend:

    commir-opt SCALED --pass-pipeline='propagate-sharding,lower-to-spmd,canonicalize,cse,dce,SCHEDULE'
    commir-run SCHEDULED --backend=sim --format=json          (h100-sxm, 8 GPUs, one node)

Scaling (SCALES below): each example's mesh axis becomes 8 devices, its element type bf16
(--dtype), and its sequence, batch-free and hidden dims are multiplied by --factor (default
16: the GEMMs become 2048-16384 wide). Attention heads and head dims go to Llama-like
values instead (head dim 128, heads a multiple of 8 so that Ulysses can split them).

Columns (the slowest device's figures, as commir-run prints them):
    time           predicted time of one run
    speedup        the plain lowering's time over this schedule's
    compute        time the device's compute streams are busy
    communication  time its collectives and shifts take
    exposed        communication not hidden under compute
    overlap        the fraction of communication hidden (1 - exposed / communication)
    TFLOP/s        achieved per GPU

ring_ag_matmul.commir (the ring written by hand for 4 devices; its loop bounds and offsets
are written for that size) and errors_divisibility.commir (it does not compile) are not
scaled; ag_matmul_global4's "ring uni" row is the same schedule produced by the pass.

Usage:
    benchmarks/sim_schedule_table.py                  # builds //:commir-opt and //:commir-run
    benchmarks/sim_schedule_table.py --commir-opt bazel-bin/commir-opt \\
        --commir-run bazel-bin/commir-run [--factor 16] [--dtype bf16]

Exit status: 0 on success, 1 if a tool fails or an example cannot be scaled.
"""

import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schedule_table import EXAMPLES, LOWER, build_missing_tools, run  # noqa: E402  (the same examples and schedules)

DEVICES = 8
HEAD_DIM = 128


def scales(factor):
    """Per example: its mesh axis and {original dim: scaled dim} for the dims in its types."""
    def times(*dims):
        return {d: d * factor for d in dims}
    return {
        # a: [seq@tp, hidden], b: [hidden, out@tp]
        "ag_matmul": ("tp", times(1024, 256, 512)),
        "ag_matmul_global4": ("tp", times(512, 256, 128)),
        # x: [seq@tp, hidden], w1: [hidden, ffn@tp], w2: [ffn@tp, hidden]
        "mlp": ("tp", times(256, 128, 512)),
        # seq = hidden = 256, ffn 1024, 8 heads of 32: heads x head dim stays the hidden size.
        "transformer_block": ("tp", {**times(256, 1024), 8: 256 * factor // HEAD_DIM,
                                     32: HEAD_DIM}),
        # [batch 1, 4 heads, seq 512@sp, head dim 64]
        "attention": ("sp", {4: 32, 512: 512 * factor, 64: HEAD_DIM}),
    }


TYPE = re.compile(r"\b(f64|f32|f16|bf16)\[([^\]]*)\]")
DIM = re.compile(r"^\s*(\d+)(@\w+)?\s*$")


def scale_program(text, axis, dims, dtype):
    """The example's text with its mesh axis at DEVICES devices and its types scaled."""
    mesh = re.compile(r"^(mesh @\w+\(\s*" + axis + r"\s*=\s*)\d+(\s*\))", re.MULTILINE)
    text, meshes = mesh.subn(lambda m: f"{m.group(1)}{DEVICES}{m.group(2)}", text)
    if meshes != 1:
        raise ValueError(f"expected one mesh with the single axis '{axis}'")

    def scale_type(match):
        scaled = []
        for dim in match.group(2).split(","):
            parsed = DIM.match(dim)
            if not parsed:
                raise ValueError(f"cannot scale the type '{match.group(0)}'")
            size = int(parsed.group(1))
            scaled.append(f"{dims.get(size, size)}{parsed.group(2) or ''}")
        return f"{dtype}[{', '.join(scaled)}]"
    return TYPE.sub(scale_type, text)


def signature(text):
    """The scaled function's arguments, on one line (what the reader needs to see the sizes)."""
    match = re.search(r"func @\w+\((.*?)\)\s*->", text, re.DOTALL)
    return " ".join(match.group(1).split()) if match else "?"


def predict(tools, workdir, name, index, schedule):
    """The slowest device's figures of the scaled example under one schedule."""
    scheduled = os.path.join(workdir, f"{name}.{index}.commir")
    pipeline = ",".join(p for p in (LOWER, schedule) if p)
    with open(scheduled, "w", encoding="utf-8") as f:
        f.write(run([tools.commir_opt, os.path.join(workdir, name + ".commir"),
                     "--pass-pipeline=" + pipeline]))
    prediction = json.loads(run([tools.commir_run, scheduled, "--backend=sim", "--format=json"]))
    slowest = max(prediction["devices"], key=lambda d: d["time_s"])
    return {
        "time": prediction["time_s"],
        "compute": slowest["compute_s"],
        "communication": slowest["communication_s"],
        "exposed": slowest["exposed_communication_s"],
        "tflops": prediction["achieved_tflops_per_gpu"],
    }


def ms(seconds):
    return f"{seconds * 1e3:.3f}"


def overlap(row):
    if row["communication"] == 0:
        return "-"
    return f"{(1 - row['exposed'] / row['communication']) * 100:.0f}%"

# Why the figures come out as they do: what the model charges each schedule for (true of
# the model at any --factor; the rows above give the sizes).
READING_NOTES = """
How the model prices the schedules (why the rows look as they do):

- Pipelined schedules issue each chunk's slice, all_gather and GEMM on the chunk's stream
  and every accumulator update on stream 0. GEMMs share the SMs (one at a time per GPU),
  so with more chunks than streams the gather of chunk k + 2 queues on its stream behind
  the update of chunk k + 1, which waits for that chunk's GEMM: one transfer per round of
  streams is exposed. More chunks also mean smaller GEMMs (fewer full waves over the 132
  SMs) and more collective latency.
- Ring schedules split each GEMM into one per ring step (two per step for bi), which fill
  fewer SMs, and write every partial result with dynamic_update_slice (in place: the
  block's bytes). Their shifts go by the copy engines (hardware p2p "ce": about 375 GB/s
  per direction, no SMs), so the GEMMs beside them keep every SM; the NCCL collectives of
  the other schedules keep 32 SMs (hardware nccl_collective_sms) from the GEMMs they
  overlap. A ring still pays for its smaller GEMMs (fewer full waves).
- Ring attention merges each step's partial result with one attention_merge kernel
  (memory-bound: the f32 accumulator and the step's output read, the accumulator
  written); the zigzag layout adds all_to_alls, a merge per query chunk and
  half-length attention kernels.
- Ulysses swaps the sequence split for a head split with all_to_all, which the model
  prices as a ring collective (see the all_to_all note of benchmarks/sim_calibration.md).
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commir-opt", help="path to commir-opt (default: build it)")
    parser.add_argument("--commir-run", help="path to commir-run (default: build it)")
    parser.add_argument("--examples", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "testdata", "examples"))
    parser.add_argument("--factor", type=int, default=16,
                        help="multiplies sequence and hidden dims (a multiple of 4; default 16)")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    args = parser.parse_args()
    if args.factor < 4 or args.factor % 4:
        parser.error("--factor must be a positive multiple of 4 (heads split over 8 devices)")
    build_missing_tools(args, ("commir-opt", "commir-run"))

    example_scales = scales(args.factor)
    table, sizes = [], []
    with tempfile.TemporaryDirectory() as workdir:
        try:
            for name, schedules in EXAMPLES:
                axis, dims = example_scales[name]
                with open(os.path.join(args.examples, name + ".commir"), encoding="utf-8") as f:
                    scaled = scale_program(f.read(), axis, dims, args.dtype)
                with open(os.path.join(workdir, name + ".commir"), "w", encoding="utf-8") as f:
                    f.write(scaled)
                sizes.append((name, axis, signature(scaled)))
                rows = [(label, predict(args, workdir, name, index, schedule))
                        for index, (label, schedule) in enumerate(schedules)]
                table.append((name, rows))
        except (RuntimeError, ValueError, OSError) as e:
            sys.stderr.write(f"sim_schedule_table.py: {e}\n")
            return 1

    print(f"# Predicted time of each schedule on {DEVICES} H100s (sim backend, h100-sxm)\n")
    print(f"Generated by `/usr/bin/python3 benchmarks/sim_schedule_table.py --commir-opt "
          f"bazel-bin/commir-opt --commir-run bazel-bin/commir-run --factor {args.factor} "
          f"--dtype {args.dtype} > benchmarks/sim_schedule_table.md`; "
          f"`//benchmarks:sim_schedule_table_test` fails when this file and the script's "
          f"output differ. See the script's docstring for the scaling and the columns.\n")
    print(f"Scaled examples (factor {args.factor}, {args.dtype}, mesh axis of {DEVICES}):\n")
    for name, axis, args_text in sizes:
        print(f"- {name} ({axis}={DEVICES}): `{args_text}`")
    print()
    print("| example | schedule | time (ms) | speedup | compute (ms) | communication (ms) | "
          "exposed (ms) | overlap | TFLOP/s per GPU |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, rows in table:
        plain = rows[0][1]["time"]
        for label, row in rows:
            print(f"| {name} | {label} | {ms(row['time'])} | {plain / row['time']:.2f}x | "
                  f"{ms(row['compute'])} | {ms(row['communication'])} | {ms(row['exposed'])} | "
                  f"{overlap(row)} | {row['tflops']:.0f} |")

    # Where overlap pays and where it does not, read off the figures above.
    print("\nWhere overlap pays (read off the rows above):\n")
    for name, rows in table:
        plain_label, plain = rows[0]
        best_label, best = min(rows[1:], key=lambda r: r[1]["time"])
        slower = [label for label, row in rows[1:] if row["time"] > plain["time"]]
        line = f"- {name}: the plain lowering exposes {ms(plain['exposed'])} ms of communication. "
        if best["time"] < plain["time"]:
            line += (f"Best: {best_label}, {plain['time'] / best['time']:.2f}x "
                     f"(exposed {ms(best['exposed'])} ms")
            line += ")."
        else:
            line += "No schedule beats the plain lowering."
        if slower:
            line += f" Slower than the plain lowering: {', '.join(slower)}."
        print(line)
    print(READING_NOTES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
