#!/usr/bin/env python3
"""Prints the predicted time of two published overlap cases under each schedule on 8 H100s.

Where the copy-engine transfer model and the SM/HBM contention model (sim/README of the
timeline in sim/sim_backend.h) decide whether overlap pays:

  * Llama-3-70B MLP in Megatron-SP layout: x: bf16[4096@tp, 8192], w1: bf16[8192, 28672@tp],
    gelu, w2: bf16[28672@tp, 8192] (all_gather before the first GEMM, reduce_scatter after
    the second).
  * nvFuser's all_gather + GEMM: A bf16[32768@tp, 16384] gathered, times B
    bf16[16384, 8192@tp] (the Megatron column split of B), as the objective's text reads
    the shape, and again with 8192 columns per GPU (B bf16[16384, 65536@tp]), the reading
    the published figures fit (see the notes at the end).

Each runs through

    commir-opt PROGRAM --pass-pipeline='propagate-sharding,lower-to-spmd,canonicalize,cse,dce,SCHEDULE'
    commir-run SCHEDULED --backend=sim --format=json --hardware=HW

on h100-sxm (shifts by the copy engines, the default) and on h100-sxm with "p2p": "nccl"
(shifts as NCCL send/recv). "before" is what the same commands printed before the copy
engines and the SM contention model (commit 60f62c3: shifts at NCCL's 140 GB/s, a flat
19% GEMM slowdown beside any NCCL kernel); it is a record, not recomputed.

Usage:
    benchmarks/sim_overlap_table.py                  # builds //:commir-opt and //:commir-run
    benchmarks/sim_overlap_table.py --commir-opt bazel-bin/commir-opt \\
        --commir-run bazel-bin/commir-run

Exit status: 0 on success, 1 if a tool fails.
"""

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schedule_table import LOWER, build_missing_tools, run  # noqa: E402  (the same lowering)

PROGRAMS = {
    "llama3-70b mlp": """mesh @m(tp=8)

func @mlp(%x: bf16[4096@tp, 8192], %w1: bf16[8192, 28672@tp], %w2: bf16[28672@tp, 8192]) -> bf16[4096@tp, 8192] {
  %h = matmul(%x, %w1) : bf16[4096, 28672@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2) : bf16[4096@tp, 8192]
  return %y
}
""",
    "nvfuser ag+gemm": """mesh @m(tp=8)

func @ag_matmul(%a: bf16[32768@tp, 16384], %b: bf16[16384, 8192@tp]) -> bf16[32768, 8192@tp] {
  %c = matmul(%a, %b) : bf16[32768, 8192@tp]
  return %c
}
""",
    "nvfuser ag+gemm, n 8192 per gpu": """mesh @m(tp=8)

func @ag_matmul(%a: bf16[32768@tp, 16384], %b: bf16[16384, 65536@tp]) -> bf16[32768, 65536@tp] {
  %c = matmul(%a, %b) : bf16[32768, 65536@tp]
  return %c
}
""",
}

SCHEDULES = [
    ("plain", ""),
    ("ring uni", "ring-collective-matmul{direction=uni}"),
    ("ring bi", "ring-collective-matmul{direction=bi}"),
    ("pipeline chunks=2 streams=2", "pipeline-collective-matmul{chunks=2,streams=2}"),
    ("pipeline chunks=4 streams=4", "pipeline-collective-matmul{chunks=4,streams=4}"),
]

# Predicted ms at commit 60f62c3 (before), by program and schedule: (time, compute).
BEFORE = {
    "llama3-70b mlp": {
        "plain": (1.040, 0.654),
        "ring uni": (1.285, 0.970),
        "ring bi": (1.537, 1.537),
        "pipeline chunks=2 streams=2": (1.120, 0.802),
        "pipeline chunks=4 streams=4": (1.163, 0.860),
    },
    "nvfuser ag+gemm": {
        "plain": (2.300, 1.436),
        "ring uni": (2.183, 1.544),
        "ring bi": (1.821, 1.628),
        "pipeline chunks=2 streams=2": (2.072, 1.544),
        "pipeline chunks=4 streams=4": (1.922, 1.582),
    },
}

NCCL_HARDWARE = {"base": "h100-sxm", "name": "h100-sxm-p2p-nccl", "p2p": "nccl"}

# Published TFLOP/s per GPU without and with overlap, by program (calibration.md: nvFuser
# on 8 H100s, its peer-to-peer pipeline); the Llama-3-70B MLP has none.
PUBLISHED_TFLOPS = {"nvfuser ag+gemm": (560, 678), "nvfuser ag+gemm, n 8192 per gpu": (560, 678)}


def predict(tools, source, index, schedule, hardware):
    scheduled = f"{source}.{index}.commir"
    pipeline = ",".join(p for p in (LOWER, schedule) if p)
    with open(scheduled, "w", encoding="utf-8") as f:
        f.write(run([tools.commir_opt, source, "--pass-pipeline=" + pipeline]))
    prediction = json.loads(run([tools.commir_run, scheduled, "--backend=sim", "--format=json",
                                 "--hardware=" + hardware]))
    slowest = max(prediction["devices"], key=lambda d: d["time_s"])
    return {"time": prediction["time_s"], "compute": slowest["compute_s"],
            "exposed": slowest["exposed_communication_s"],
            "tflops": prediction["achieved_tflops_per_gpu"]}


def ms(seconds):
    return "-" if seconds is None else f"{seconds:.3f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commir-opt", help="path to commir-opt (default: build it)")
    parser.add_argument("--commir-run", help="path to commir-run (default: build it)")
    parser.add_argument("--print-before", action="store_true",
                        help="print this model's figures as a BEFORE dictionary (to record them)")
    args = parser.parse_args()
    build_missing_tools(args, ("commir-opt", "commir-run"))

    table = []
    with tempfile.TemporaryDirectory() as workdir:
        nccl = os.path.join(workdir, "h100_p2p_nccl.json")
        with open(nccl, "w", encoding="utf-8") as f:
            json.dump(NCCL_HARDWARE, f)
        try:
            for name, text in PROGRAMS.items():
                source = os.path.join(workdir, name.replace(" ", "_").replace("+", "_") + ".commir")
                with open(source, "w", encoding="utf-8") as f:
                    f.write(text)
                rows = []
                for index, (label, schedule) in enumerate(SCHEDULES):
                    if args.print_before:
                        rows.append((label, predict(args, source, index, schedule, "h100-sxm"),
                                     None))
                        continue
                    rows.append((label, predict(args, source, index, schedule, "h100-sxm"),
                                 predict(args, source, index, schedule, nccl)))
                table.append((name, rows))
        except (RuntimeError, ValueError, OSError) as e:
            sys.stderr.write(f"sim_overlap_table.py: {e}\n")
            return 1

    if args.print_before:
        for name, rows in table:
            print(f'    "{name}": {{')
            for label, ce, _ in rows:
                print(f'        "{label}": ({ce["time"] * 1e3:.3f}, {ce["compute"] * 1e3:.3f}),')
            print("    },")
        return 0

    print("# Overlap on 8 H100s: copy-engine shifts and SM contention (sim backend)\n")
    print("Generated by `/usr/bin/python3 benchmarks/sim_overlap_table.py --commir-opt "
          "bazel-bin/commir-opt --commir-run bazel-bin/commir-run > "
          "benchmarks/sim_overlap_table.md`; `//benchmarks:sim_overlap_table_test` fails when "
          "this file and the script's output differ. The script's docstring gives the programs "
          "and commands.\n")
    print("Columns: predicted time of one run (ms) before this model (shifts at NCCL's "
          "140 GB/s, a flat 19% GEMM slowdown), now with shifts by the copy engines (`p2p` "
          "`ce`, the default), now with shifts as NCCL send/recv (`p2p` `nccl`); the compute "
          "(busy compute streams) and exposed communication of the copy-engine run, its "
          "TFLOP/s per GPU and its speedup over the plain lowering.\n")
    print("| case | schedule | before (ms) | ce (ms) | nccl (ms) | compute before (ms) | "
          "compute ce (ms) | exposed ce (ms) | TFLOP/s ce | speedup ce |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rows in table:
        plain = rows[0][1]["time"]
        for label, ce, nccl_row in rows:
            # The n-per-GPU reading was added after that model: it has no "before".
            before_time, before_compute = BEFORE.get(name, {}).get(label, (None, None))
            print(f"| {name} | {label} | {ms(before_time)} | {ms(ce['time'] * 1e3)} | "
                  f"{ms(nccl_row['time'] * 1e3)} | {ms(before_compute)} | "
                  f"{ms(ce['compute'] * 1e3)} | {ms(ce['exposed'] * 1e3)} | "
                  f"{ce['tflops']:.0f} | {plain / ce['time']:.2f}x |")
    print()
    print("Against the published overlap results (../shared/calibration.md):\n")
    for name, rows in table:
        plain = rows[0][1]
        best_label, best, _ = min(rows[1:], key=lambda r: r[1]["time"])
        ring = rows[1][1]
        print(f"- {name}: best schedule {best_label}, {plain['time'] / best['time']:.2f}x the "
              f"plain lowering ({plain['tflops']:.0f} -> {best['tflops']:.0f} TFLOP/s per GPU); "
              f"ring uni over the copy engines {plain['time'] / ring['time']:.2f}x, exposing "
              f"{ms(ring['exposed'] * 1e3)} ms of communication; its GEMMs take "
              f"{ms(ring['compute'] * 1e3)} ms against the plain lowering's "
              f"{ms(plain['compute'] * 1e3)} ms (one GEMM per ring step, fewer full waves).")
        if name in PUBLISHED_TFLOPS:
            without, overlapped = PUBLISHED_TFLOPS[name]
            print(f"  Against nvFuser's own figures: the plain lowering {plain['tflops']:.0f} "
                  f"TFLOP/s per GPU against {without} measured without overlap "
                  f"({(plain['tflops'] / without - 1) * 100:+.1f}%), the best schedule "
                  f"{best['tflops']:.0f} against its pipeline's {overlapped} "
                  f"({(best['tflops'] / overlapped - 1) * 100:+.1f}%).")
    print(NOTES)
    return 0


NOTES = """
Published: nvFuser's peer-to-peer pipeline 560 -> 678 TFLOP/s per GPU (1.21x) on the
all_gather + GEMM shape, TransformerEngine 660 (1.18x); Flux on 8 H800, all_gather + GEMM
M=4096 K=12288 N=49152: 1.429 -> 0.957 ms (1.49x against unoverlapped PyTorch). No
published figure for the Llama-3-70B MLP shape is in calibration.md: there the ring's
gain is bounded by its per-step GEMMs (512 rows each), whose wave quantization the GEMM
efficiency model (sim/op_time.h) decides, not the transfer model.

The nvFuser shape as the objective's text reads it (B 16384 x 8192 in all, 1024 columns
per GPU) is 2 m k n / 8 = 1.10e12 FLOPs per GPU: the published 560 TFLOP/s without overlap
would be 1.96 ms, less than the 1 GiB all_gather of A alone takes at nccl-tests' 360-370
GB/s (about 2.5 ms), so that reading cannot be what was measured. The published pair fits
n = 8192 per GPU (8.8e12 FLOPs: 15.7 ms without overlap, 13.0 ms with it, the difference
about that gather), the "n 8192 per gpu" rows: there the plain lowering gathers A, as
nvFuser does, and the overlap gain is to be compared with the published 1.21x. In the
literal reading's rows the plain lowering gathers B, the smaller operand, and returns the
product to its column split with an all_to_all; their gain is for a shape with 8 times
less GEMM per byte gathered.
"""


if __name__ == "__main__":
    sys.exit(main())
