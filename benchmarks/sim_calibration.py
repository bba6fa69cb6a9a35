#!/usr/bin/env python3
"""Prints the sim backend's calibration table: predictions next to published measurements.

Every row is one published figure from ../shared/calibration.md (copied into MEASUREMENTS
below with its source) and the model's prediction of the same thing. The prediction comes
from running a small generated CommIR program through

    commir-run PROGRAM --backend=sim --format=json [--trace=FILE]

on 8 H100s (one for the single-GPU GEMM), never from the model's formulas directly, so the
table checks what a user of `--backend=sim` sees:

  * GEMM TFLOP/s: achieved_tflops_per_gpu of a program doing one bf16 matmul (with
    --hardware=h200 for the H200 rows).
  * GEMM model parameters: one program doing all 375 matmuls of XLA's measured H100 table
    (sim/testdata/xla_sm90_bf16_gemm.txt), each matmul's TFLOP/s from its duration in the
    --trace timeline; the mean and worst absolute error over the table with each GEMM
    parameter at its value and at -10%/+10% of it (a JSON hardware file based on
    h100-sxm). The script first checks that the built-in h100-sxm carries the values it
    lists (same predictions as the JSON file setting them).
  * bus bandwidth of a collective: algbw = bytes / predicted time of a spmd program doing
    just that collective, busbw = algbw x the nccl-tests factor ((n-1)/n for all_gather,
    reduce_scatter and all_to_all, 2(n-1)/n for all_reduce, 1 for send/recv = `shift`).
    bytes is nccl-tests' size: the whole gathered buffer for all_gather, the whole input
    for reduce_scatter, the buffer for all_reduce, one device's buffer for all_to_all and
    shift. Groups of 32 run on 4 nodes of 8 (the built-in's gpus_per_node). all_reduce
    inside a node runs by NVLS where that is faster (h100-sxm has it); the ring row runs
    with a hardware file {"base": "h100-sxm", "nvls": false}.
  * collective, transfer, overlap and attention model parameters: each one's value as
    sim/hardware.cc sets it (checked against the built-in: the same predictions as a JSON
    file setting them all), its source, and the errors of the rows that check it.
  * latency: the predicted time of a small collective, in microseconds.
  * attention TFLOP/s: FlashAttention's benchmark (head dim 128, 16 heads, batch 16k / seq)
    on one GPU: a program doing one attention (forward) or one attention_grad (backward),
    its FLOPs counted as the benchmark counts them (4 B H S^2 D, halved when causal; the
    backward's 2.5 times that) over the predicted time. The forward is compared with
    FlashAttention-3's forward, the backward with FlashAttention-2's forward+backward
    (sim/attention_time.h says why); the non-causal curves set the two attention
    parameters of sim/hardware.cc, the causal rows check the mask model.
  * GEMM slowdown under a collective: the matmul's duration in the --trace timeline when an
    all_gather runs on stream 1 beside it, over its duration alone.
  * `shift` inside a node goes by the copy engines (hardware "p2p": "ce", the default): its
    bandwidth is the shift's bytes over its predicted time, one way on a ring of 8, both
    ways on a pair (per direction, against half the both-ways figure). The NCCL send/recv
    row runs with a hardware file {"base": "h100-sxm", "p2p": "nccl"}.

error = (model - published) / published, against the middle of a published range ("in
range" says whether the model falls inside it). Rows whose error is over 10% get a note
saying why. The model is not tuned to this table (sim/hardware.cc says which parameters
come from calibration.md).

Usage:
    benchmarks/sim_calibration.py                    # builds //:commir-run first
    benchmarks/sim_calibration.py --commir-run bazel-bin/commir-run > benchmarks/sim_calibration.md

Exit status: 0 on success, 1 if commir-run fails or prints something unreadable.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

GPUS = 8
KIB, MIB, GIB = 1024, 1024 ** 2, 1024 ** 3
# Every generated tensor is bf16 with rows of this many elements.
ROW = 8192
BF16_BYTES = 2
LARGE_ERROR = 0.10

def bus_factor(kind, gpus=GPUS):
    """nccl-tests' bus-bandwidth factor of `kind` on `gpus` devices (calibration.md)."""
    if kind == "all_reduce":
        return 2 * (gpus - 1) / gpus
    if kind == "shift":
        return 1.0
    return (gpus - 1) / gpus

SRC_GEMM = "calibration.md: public PyTorch/cuBLAS measurements"
SRC_FA3 = ("calibration.md: FlashAttention-3 forward, H100 (Dao-AILab/flash-attention "
           "assets/flash3_fp16_fwd.png)")
SRC_FA2 = ("calibration.md: FlashAttention-2 forward+backward, H100 (Dao-AILab/flash-attention "
           "assets/flash2_h100_fwd_bwd_benchmark.png)")
SRC_XLA = "calibration.md: XLA matmul_interpolator_data.h, sm_90 (measured)"
SRC_H200 = "H200, our cuda backend's cuBLASLt (measured)"
XLA_TABLE = os.path.join("sim", "testdata", "xla_sm90_bf16_gemm.txt")
# The rows of XLA's table that calibration.md quotes: (batch, m, n, k, TFLOP/s).
XLA_QUOTED = [(1, 4096, 4096, 4096, 783.3), (2, 4096, 4096, 2048, 763.0),
              (1, 2048, 2048, 2048, 632.0), (1, 1024, 2048, 2048, 524.3),
              (1, 4096, 4096, 256, 392.2), (1, 256, 2048, 4096, 285.9)]
# bf16 GEMMs measured on one H200 through the cuda backend's cuBLASLt: (m, n, k, TFLOP/s).
H200_MEASURED = [(8192, 8192, 8192, 776.5), (4096, 14336, 4096, 782.1),
                 (4096, 4096, 14336, 822.3), (8192, 4096, 4096, 808.2),
                 (8192, 6144, 4096, 813.3)]
# The GEMM model's parameters as sim/hardware.cc sets them for h100-sxm (checked against
# the built-in before use): JSON key, value in the key's unit, where it comes from.
GEMM_PARAMETERS = [
    ("gemm_peak_fraction", 0.86,
     "fitted to XLA's table (best alone 0.88) with 8192^3 kept near calibration.md's 750-800"),
    ("gemm_operand_bandwidth_gb_per_s", 14000, "fitted to XLA's table (no L2 figure published)"),
    ("gemm_wave_latency_us", 2, "fitted to XLA's table: the floor of its smallest shapes"),
    ("kernel_launch_overhead_us", 3, "estimate (not in calibration.md), shared by every kernel"),
]
SRC_NCCL_TESTS = "calibration.md: nccl-tests, 8xH100 NVLink 4 + NVSwitch"
SRC_EFFICIENCY = "calibration.md: public simulator's NVLink efficiency table (x 450 GB/s)"
SRC_TP = "calibration.md: the same simulator's tensor-parallel calibration file"
SRC_DEEPEP = ("calibration.md: DeepEP normal-kernel dispatch, H800 + CX7 400G "
              "(deepseek-ai/DeepEP docs/legacy.md)")
SRC_P2P = "calibration.md: NCCL send/recv between two H100s"
SRC_TUNING = "calibration.md: NCCL tuning model, LL ring latency (no bytes term)"
SRC_OVERLAP = "calibration.md: published overlap studies (average; up to 40%)"
SRC_CE = "calibration.md: p2pBandwidthLatencyTest, HGX H100 (NVIDIA/nccl issue 1264)"
SRC_CE_BATCH = ("calibration.md: cudaMemcpyBatchAsync 32 MB at 354 GiB/s = 380.1 GB/s "
                "(NVIDIA/nccl issue 2177)")
SRC_NVLS = ("calibration.md: NVIDIA/nccl issue 1455, nccl-tests issue 212 (8xH100, messages "
            "2-4 GB)")
SRC_GTC = ("calibration.md: GTC24 S62129 via stas00/ml-engineering network/benchmarks "
           "(4 DGX H100, 8x400G per node)")
SRC_VP = ("calibration.md: 32 H100, 4 nodes, 3.2 Tb/s IB per node, NCCL 2.24 "
          "(ZiyanIshani/vpbenchmarking)")
# The hardware file that turns `shift` into an NCCL send/recv.
P2P_NCCL = {"base": "h100-sxm", "name": "h100-sxm-p2p-nccl", "p2p": "nccl"}
# The same hardware without NVLink SHARP: all_reduce as a ring.
NO_NVLS = {"base": "h100-sxm", "name": "h100-sxm-no-nvls", "nvls": False}
# The collective model's parameters as sim/hardware.cc sets them for h100-sxm (checked
# against the built-in before use): JSON key, value, where it comes from, and the keys of
# the table's rows that check it.
COLLECTIVE_PARAMETERS = [
    ("nvlink_bus_efficiency", 0.82,
     "fitted: nccl-tests all_gather/reduce_scatter 360-370 GB/s at >= 1 GiB",
     ["all_gather 1 GiB", "reduce_scatter 1 GiB", "all_reduce ring 1 GiB", "all_gather 1 GiB eff"]),
    ("bus_half_efficiency_mib", 0.75,
     "fitted: the efficiency table's 0.45 of peak at 16 MiB",
     ["all_gather 16 MiB", "reduce_scatter 16 MiB"]),
    ("nvls_bus_efficiency", 0.686,
     "fitted to NVLS all_reduce's 480 GB/s at 8 GPUs; 5-7 GPUs check it",
     ["nvls 5", "nvls 6", "nvls 7", "nvls 8"]),
    ("nccl_nvls_latency_us", 25, "NCCL src/graph/tuning.cc (NVLS, NVLink, Simple)", []),
    ("nccl_nvls_sms", 16, "NCCL src/transport/nvls.cc (NVLS_NCHANNELS_SM90)", []),
    ("all_to_all_bus_efficiency", 0.71,
     "fitted to all_to_all's 320 GB/s on 8 GPUs (GTC24)",
     ["a2a 8", "tp all_to_all", "a2a 32"]),
    ("all_to_all_network_efficiency", 0.80,
     "fitted to all_to_all's 48 GB/s on 32 GPUs across 4 nodes (GTC24)",
     ["a2a 32", "deepep 16", "deepep 32", "deepep 64"]),
    ("network_efficiency", 0.94, "measured: one 400G NIC gives 46-48 GB/s",
     ["ar 32 gtc", "ar 32 8 GiB", "ag 32 8 GiB", "a2a 32"]),
    ("network_latency_us", 5, "estimate (not in calibration.md), checked on the 32-GPU curve",
     ["ar 32 1 MiB", "ar 32 16 MiB", "ar 32 64 MiB", "ar 32 128 MiB"]),
]
# Programs whose predictions must not change when the listed values are written out.
CHECK_PROGRAMS = [("all_reduce", GIB, 8), ("all_to_all", GIB, 32), ("all_reduce", MIB, 32)]
# The transfer, overlap and attention parameters as sim/hardware.cc sets them for h100-sxm
# (checked against the built-in before use, as COLLECTIVE_PARAMETERS): JSON key, value,
# where it comes from, and the keys of the table's rows that check it.
OTHER_PARAMETERS = [
    ("copy_engine_bandwidth_one_way_gb_per_s", 378,
     "measured: p2pBandwidthLatencyTest 376-380 GB/s one way, HGX H100 (NVIDIA/nccl issue 1264)",
     ["shift ce", "shift ce 32"]),
    ("copy_engine_bandwidth_both_ways_gb_per_s", 745,
     "measured: the same test's 740-750 GB/s both ways", ["shift ce both"]),
    ("copy_engine_latency_us", 3,
     "estimate (not in calibration.md): about one kernel launch; checked at 32 MiB",
     ["shift ce 32"]),
    ("copy_engines", 4,
     "estimate; only whether there are any is used (0: peer copies go through NCCL)", []),
    ("p2p_bandwidth_gb_per_s", 140, "measured: NCCL send/recv 120-160 GB/s between two H100s",
     ["shift"]),
    ("nccl_collective_sms", 32,
     "estimate: NCCL's 32 ring channels on H100, one SM each (16 logged on H800's 8 NVLinks, "
     "NVIDIA/nccl issue 892)", ["gemm slowdown"]),
    ("nccl_p2p_sms", 32, "estimate: as many p2p channels per peer (the same log)", []),
    ("nccl_base_latency_us", [6.6, 14.0, 8.4],
     "NCCL src/graph/tuning.cc, ring base latency (LL, LL128, Simple)", []),
    ("nccl_nvlink_step_latency_us", [0.6, 1.9, 3.4],
     "NCCL src/graph/tuning.cc, NVLink latency per ring step (LL, LL128, Simple)", []),
    ("nccl_protocol_bandwidth_fraction", [0.5, 0.92, 1.0],
     "NCCL's protocols: LL sends half its bytes as flags, LL128 about 92% payload", []),
    ("attention_peak_fraction", 0.70,
     "fitted to FlashAttention-3's non-causal forward (seq 512-16k); causal rows check it",
     [f"attention fwd {mask} {seq}" for mask in ("non-causal", "causal")
      for seq in (512, 2048, 16384)]),
    ("attention_tile_overhead_blocks", 1.6, "fitted with attention_peak_fraction",
     [f"attention fwd {mask} {seq}" for mask in ("non-causal", "causal")
      for seq in (512, 2048, 16384)]),
    ("attention_backward_peak_fraction", 0.36,
     "fitted to FlashAttention-2's non-causal forward+backward (seq 512-16k); causal rows "
     "check it",
     [f"attention bwd {mask} {seq}" for mask in ("non-causal", "causal")
      for seq in (512, 2048, 16384)]),
    ("attention_backward_tile_overhead_blocks", 1.5,
     "fitted with attention_backward_peak_fraction",
     [f"attention bwd {mask} {seq}" for mask in ("non-causal", "causal")
      for seq in (512, 2048, 16384)]),
]


def rows_of(rows):
    return rows // GPUS * GPUS


def tensor_rows(nbytes):
    """Rows of a bf16[rows, ROW] tensor of nbytes (nbytes is a multiple of a row)."""
    rows = nbytes // (ROW * BF16_BYTES)
    assert rows * ROW * BF16_BYTES == nbytes, nbytes
    return rows


def collective_program(kind, nbytes, gpus=GPUS):
    """A spmd program on `gpus` devices doing one `kind` over nbytes (nccl-tests' size)."""
    if nbytes < ROW * BF16_BYTES * gpus:  # small messages: one short row per device
        rows, cols = gpus, nbytes // (gpus * BF16_BYTES)
    else:
        rows, cols = tensor_rows(nbytes), ROW
    full, block = f"bf16[{rows}, {cols}]", f"bf16[{rows // gpus}, {cols}]"
    if kind == "all_gather":
        arg, op, result = f"bf16[{rows}@tp, {cols}]", "all_gather(%x) {axis = tp, dim = 0}", full
    elif kind == "reduce_scatter":
        arg, op, result = full, "reduce_scatter(%x) {axis = tp, dim = 0}", block
    elif kind == "all_reduce":
        arg, op, result = full, "all_reduce(%x) {axis = tp}", full
    elif kind == "all_to_all":
        arg, op, result = full, "all_to_all(%x) {axis = tp, split_dim = 0, concat_dim = 0}", full
    elif kind == "shift":
        arg, op, result = full, "shift(%x) {axis = tp, offset = 1}", full
    else:
        raise ValueError(kind)
    return (f"mesh @m(tp={gpus})\n"
            f"spmd func @{kind}(%x: {arg}) -> {result} {{\n"
            f"  %y = {op} : {result}\n"
            f"  return %y\n"
            f"}}\n")


def gemm_program(n, gpus=1, overlap_gather_bytes=0, overlap_op="all_gather"):
    """n x n x n bf16 matmul; with overlap_gather_bytes, an all_gather of that many bytes
    (or with overlap_op "shift", a shift of them) on stream 1 beside it."""
    args = [f"%a: bf16[{n}, {n}]", f"%b: bf16[{n}, {n}]"]
    body, results, names = [], [f"bf16[{n}, {n}]"], ["%c"]
    if overlap_gather_bytes:
        rows = tensor_rows(overlap_gather_bytes)
        # Issued first, so the GEMM that follows on stream 0 runs under it.
        if overlap_op == "shift":
            args.append(f"%x: bf16[{rows}, {ROW}]")
            body.append(f"  %g = shift(%x) {{axis = tp, offset = 1, stream = 1}} : "
                        f"bf16[{rows}, {ROW}]")
        else:
            args.append(f"%x: bf16[{rows}@tp, {ROW}]")
            body.append(f"  %g = all_gather(%x) {{axis = tp, dim = 0, stream = 1}} : "
                        f"bf16[{rows}, {ROW}]")
        results.append(f"bf16[{rows}, {ROW}]")
        names.append("%g")
    body.append("  %c = matmul(%a, %b)")
    return (f"mesh @m(tp={gpus})\n"
            f"spmd func @gemm({', '.join(args)}) -> ({', '.join(results)}) {{\n"
            + "\n".join(body) + "\n"
            f"  return {', '.join(names)}\n"
            f"}}\n")


def attention_program(seq, causal, backward):
    """FlashAttention's benchmark shape: batch 16k / seq, 16 heads of 128, bf16."""
    t = f"bf16[{16384 // seq}, 16, {seq}, 128]"
    lse = f"f32[{16384 // seq}, 16, {seq}]"
    attrs = " {causal}" if causal else ""
    if backward:
        return (f"mesh @m(tp=1)\n"
                f"spmd func @attn(%q: {t}, %k: {t}, %v: {t}, %o: {t}, %l: {lse}, %d: {t}) -> {t} {{\n"
                f"  %dq, %dk, %dv = attention_grad(%q, %k, %v, %o, %l, %d){attrs}\n"
                f"  return %dq\n}}\n")
    return (f"mesh @m(tp=1)\n"
            f"spmd func @attn(%q: {t}, %k: {t}, %v: {t}) -> {t} {{\n"
            f"  %o = attention(%q, %k, %v){attrs}\n"
            f"  return %o\n}}\n")


def attention_tflops(runner, seq, causal, backward):
    prediction, _ = runner.predict(attention_program(seq, causal, backward))
    flops = 4.0 * 16384 * 16 * seq * 128 / (2 if causal else 1) * (2.5 if backward else 1)
    return flops / prediction["time_s"] / 1e12


def bf16_gemm_program(shapes):
    """One device doing a bf16 matmul per (batch, m, n, k) of shapes, in order."""
    args, results, body, names = [], [], [], []
    for i, (b, m, n, k) in enumerate(shapes):
        lead = f"{b}, " if b > 1 else ""
        args += [f"%a{i}: bf16[{lead}{m}, {k}]", f"%b{i}: bf16[{lead}{k}, {n}]"]
        results.append(f"bf16[{lead}{m}, {n}]")
        body.append(f"  %c{i} = matmul(%a{i}, %b{i})")
        names.append(f"%c{i}")
    return ("mesh @m(tp=1)\n"
            f"spmd func @gemms({', '.join(args)}) -> ({', '.join(results)}) {{\n"
            + "\n".join(body) + "\n"
            f"  return {', '.join(names)}\n"
            "}\n")


def read_xla_table(root):
    """[(batch, m, n, k, TFLOP/s)] of sim/testdata/xla_sm90_bf16_gemm.txt."""
    rows = []
    with open(os.path.join(root, XLA_TABLE), encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                b, m, n, k, tflops = line.split()
                rows.append((int(b), int(m), int(n), int(k), float(tflops)))
    return rows


class Runner:
    def __init__(self, tool, workdir):
        self.tool, self.workdir, self.count = tool, workdir, 0

    def write_hardware(self, fields):
        """A JSON hardware file: h100-sxm with `fields` changed."""
        self.count += 1
        path = os.path.join(self.workdir, f"hw{self.count}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(dict({"base": "h100-sxm"}, **fields), f)
        return path

    def predict(self, program, trace=False, hardware=None):
        """(the --format=json prediction, the trace's events or None) of a program; with
        `hardware` (a built-in name or file path, or a dict written to a file), run on that
        description instead of h100-sxm."""
        self.count += 1
        path = os.path.join(self.workdir, f"p{self.count}.commir")
        with open(path, "w", encoding="utf-8") as f:
            f.write(program)
        cmd = [self.tool, path, "--backend=sim", "--format=json"]
        if isinstance(hardware, dict):
            hardware_path = os.path.join(self.workdir, f"p{self.count}.hardware.json")
            with open(hardware_path, "w", encoding="utf-8") as f:
                json.dump(hardware, f)
            cmd.append("--hardware=" + hardware_path)
        elif hardware:
            cmd.append("--hardware=" + hardware)
        trace_path = os.path.join(self.workdir, f"p{self.count}.trace.json")
        if trace:
            cmd.append("--trace=" + trace_path)
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"commir-run exited {run.returncode} on\n{program}\n{run.stderr}")
        prediction = json.loads(run.stdout)
        events = None
        if trace:
            with open(trace_path, encoding="utf-8") as f:
                events = json.load(f)["traceEvents"]
        return prediction, events


def busbw_gbs(runner, kind, nbytes, gpus=GPUS, hardware=None):
    prediction, _ = runner.predict(collective_program(kind, nbytes, gpus), hardware=hardware)
    return nbytes / prediction["time_s"] * bus_factor(kind, gpus) / 1e9


def rdma_gbs(runner, nbytes, gpus):
    """Bytes each GPU sends to other nodes per second in an all_to_all of nbytes per GPU
    (8 GPUs per node): what DeepEP reports as its RDMA bandwidth."""
    prediction, _ = runner.predict(collective_program("all_to_all", nbytes, gpus))
    return nbytes * (gpus - 8) / gpus / prediction["time_s"] / 1e9


def latency_us(runner, kind, nbytes):
    prediction, _ = runner.predict(collective_program(kind, nbytes))
    return prediction["time_s"] * 1e6


def gemm_tflops(runner, n):
    prediction, _ = runner.predict(gemm_program(n))
    return prediction["achieved_tflops_per_gpu"]


def shape_tflops(runner, b, m, n, k, hardware=None):
    prediction, _ = runner.predict(bf16_gemm_program([(b, m, n, k)]), hardware=hardware)
    return prediction["achieved_tflops_per_gpu"]


def table_tflops(runner, shapes, hardware=None):
    """Predicted TFLOP/s of each (batch, m, n, k), from one program's trace."""
    _, events = runner.predict(bf16_gemm_program(shapes), trace=True, hardware=hardware)
    matmuls = sorted((e for e in events if e.get("ph") == "X" and e.get("pid") == 0
                      and e.get("name") == "matmul"), key=lambda e: e["ts"])
    if len(matmuls) != len(shapes):
        raise RuntimeError(f"expected {len(shapes)} matmuls in the trace, got {len(matmuls)}")
    return [2.0 * b * m * n * k / (e["dur"] * 1e-6) / 1e12
            for (b, m, n, k), e in zip(shapes, matmuls)]


def table_errors(runner, table, fields=None):
    """(mean, worst) absolute relative error over XLA's table, h100-sxm with `fields`."""
    hardware = runner.write_hardware(fields) if fields else None
    predicted = table_tflops(runner, [row[:4] for row in table], hardware)
    errors = [abs(p - row[4]) / row[4] for p, row in zip(predicted, table)]
    return sum(errors) / len(errors), max(errors)


def gemm_parameter_rows(runner, table):
    """(key, value, source, errors at value, at -10%, at +10%) of every GEMM parameter."""
    shapes = [row[:4] for row in table]
    builtin = table_tflops(runner, shapes)
    listed = table_tflops(runner, shapes, runner.write_hardware(
        {key: value for key, value, _ in GEMM_PARAMETERS}))
    if any(abs(a - b) > 1e-9 * a for a, b in zip(builtin, listed)):
        raise ValueError("GEMM_PARAMETERS differ from the built-in h100-sxm (sim/hardware.cc)")
    at = table_errors(runner, table)
    rows = []
    for key, value, source in GEMM_PARAMETERS:
        lower = table_errors(runner, table, {key: value * 0.9})
        upper = table_errors(runner, table, {key: min(value * 1.1, 1.0) if "fraction" in key
                                             else value * 1.1})
        rows.append((key, value, source, at, lower, upper))
    return rows


def check_collective_parameters(runner):
    """Raises unless the built-in h100-sxm carries the values COLLECTIVE_PARAMETERS lists."""
    listed = runner.write_hardware({key: value for key, value, _, _ in COLLECTIVE_PARAMETERS})
    for kind, nbytes, gpus in CHECK_PROGRAMS:
        program = collective_program(kind, nbytes, gpus)
        builtin = runner.predict(program)[0]["time_s"]
        written = runner.predict(program, hardware=listed)[0]["time_s"]
        if abs(builtin - written) > 1e-9 * builtin:
            raise ValueError("COLLECTIVE_PARAMETERS differ from the built-in h100-sxm "
                             "(sim/hardware.cc)")


def check_other_parameters(runner):
    """Raises unless the built-in h100-sxm carries the values OTHER_PARAMETERS lists: the
    same predictions (time, and each matmul's duration beside a transfer) from a file
    setting them, for programs that use each of them."""
    listed = {key: value for key, value, _, _ in OTHER_PARAMETERS}
    checks = [(collective_program("shift", GIB), {}, False),
              (collective_program("shift", 32 * MIB), {}, False),
              (collective_program("shift", GIB, gpus=2), {}, False),
              (collective_program("shift", GIB), {"p2p": "nccl"}, False),
              (collective_program("all_reduce", 8 * KIB), {"nvls": False}, False),
              (collective_program("all_gather", 8 * KIB), {}, False),
              (collective_program("all_gather", 64 * MIB), {}, False),
              (gemm_program(8192, gpus=GPUS, overlap_gather_bytes=GIB), {}, True),
              (gemm_program(8192, gpus=GPUS, overlap_gather_bytes=GIB, overlap_op="shift"),
               {"p2p": "nccl"}, True),
              (attention_program(2048, False, False), {}, False),
              (attention_program(2048, False, True), {}, False)]
    for program, fields, trace in checks:
        seen = []
        for hardware in (runner.write_hardware(fields) if fields else None,
                         runner.write_hardware(dict(fields, **listed))):
            prediction, events = runner.predict(program, trace=trace, hardware=hardware)
            seen.append((prediction["time_s"],
                         matmul_duration_us(events) if trace else None))
        if any(abs(a - b) > 1e-9 * a for a, b in zip(seen[0], seen[1]) if a is not None):
            raise ValueError("OTHER_PARAMETERS differ from the built-in h100-sxm "
                             "(sim/hardware.cc)")


def parameter_rows(rows, parameters):
    """(key, value, source, mean and worst |error| over the rows that check it, their count)
    of each of `parameters` (COLLECTIVE_PARAMETERS or OTHER_PARAMETERS)."""
    errors = {}
    for key, _, _, model, _, (low, high), _ in rows:
        reference = (low + high) / 2
        errors[key] = abs(model - reference) / reference
    out = []
    for key, value, source, checked_by in parameters:
        found = [errors[k] for k in checked_by]
        if len(found) != len(checked_by):
            raise KeyError(f"{key}: a row it names is missing")
        summary = (sum(found) / len(found), max(found)) if found else None
        out.append((key, value, source, summary, len(found)))
    return out


def matmul_duration_us(events):
    durations = [e["dur"] for e in events
                 if e.get("ph") == "X" and e.get("pid") == 0 and e.get("name") == "matmul"]
    if len(durations) != 1:
        raise RuntimeError(f"expected one matmul on device 0 in the trace, got {len(durations)}")
    return durations[0]


def gemm_slowdown_percent(runner, n, gather_bytes):
    _, alone = runner.predict(gemm_program(n, gpus=GPUS), trace=True)
    _, beside = runner.predict(gemm_program(n, gpus=GPUS, overlap_gather_bytes=gather_bytes),
                               trace=True)
    return (matmul_duration_us(beside) / matmul_duration_us(alone) - 1) * 100


def size_label(nbytes):
    if nbytes >= GIB:
        return f"{nbytes // GIB} GiB"
    if nbytes >= MIB:
        return f"{nbytes // MIB} MiB"
    return f"{nbytes // KIB} KiB"


def tuning_latency_us(kind):
    """NCCL's LL ring latency: 6.6 us base + steps x 0.6 us per NVLink step (calibration.md)."""
    steps = 2 * (GPUS - 1) if kind == "all_reduce" else GPUS - 1
    return 6.6 + steps * 0.6


# Why a row may miss by more than LARGE_ERROR: printed under the table for the rows that do.
NOTES = {
    "all_reduce 16 MiB": "The efficiency table is one curve for every collective, without "
                         "NVLS. The model runs a 16 MiB all_reduce by NVLS (in-switch "
                         "reduction: each GPU's links carry 9/8 of the buffer, not 2 x 7/8), "
                         "as NCCL picks it on H100 from a few MiB up; the nccl-tests bus "
                         "factor 2(n-1)/n then reports more than the link carries.",
    "tp all_gather": "The simulator's tensor-parallel figures are single numbers for all "
                     "message sizes (calibration.md gives no size); the model's bandwidth "
                     "rises with size and 128 MiB is near its large-message plateau.",
    "tp reduce_scatter": "As for all_gather: one figure for every size vs. the model's curve.",
    "tp all_reduce": "As for all_gather; and the model runs all_reduce by NVLS, which the "
                     "simulator's single figure does not.",
    "tp all_to_all": "As for all_gather: one figure for every size. The model's pairwise "
                     "exchange reaches 0.71 of NVLink at large sizes (the 320 GB/s row); "
                     "the simulator's 230 GB/s is 0.82 of its own all_gather figure, the "
                     "model's ratio is 0.88.",
    "a2a 32": "Fitted (all_to_all_network_efficiency): 24 of the 31 pairs leave the node "
              "through the GPU's NIC, at 0.80 of the single-NIC rate (47 GB/s) while the 7 "
              "on the node move over NVLink at the same time; the bound without the "
              "factor, 47 x 31/24 = 61 GB/s, is 27% above the measurement: many flows "
              "collide in the fabric.",
    "deepep 16": "DeepEP sends each token once per destination node over RDMA and forwards "
                 "it over NVLink inside the node; NCCL's all_to_all (what the model prices) "
                 "sends every pair's bytes over the network, at the fitted 0.80 x 47 GB/s. "
                 "DeepEP's figures are FP8 dispatches on H800, whose NICs are H100's.",
    "deepep 32": "As at 16 GPUs. DeepEP's 58 GB/s is above the 50 GB/s line rate: its figure "
                 "counts the bytes its kernels deliver, some of which the per-node "
                 "deduplication never sends twice; the model prices NCCL, which has none.",
    "deepep 64": "As at 32 GPUs.",
    "ar 32 8 GiB": "The two published 32-GPU figures disagree by 13% (380 GB/s at GTC24, "
                   "330.9 in this benchmark); the model's NVLink bound (369 GB/s, from the "
                   "single-node measurements) lies between them.",
    "ag 32 8 GiB": "As for all_reduce at 8 GiB: the benchmark's cross-node figures sit "
                   "below both the single-node ring measurement and the GTC24 figure.",
    "latency all_reduce": "The reference is NCCL's latency term alone. The model adds the "
                          "bytes term at LL's half bandwidth times the size efficiency fitted "
                          "at >= 16 MiB (~7 us at 8 KiB). calibration.md's measurements only "
                          "say 'a few tens of us' for small messages.",
    "latency all_gather": "As for all_reduce: latency term alone vs. latency + bytes term.",
    "gemm slowdown": "The model derives the slowdown: NCCL's all_gather keeps 32 SMs (hardware "
                     "nccl_collective_sms, NCCL's 32 ring channels on H100: an estimate from "
                     "NCCL logs, not a measurement), and the GEMM's best tiling on the 100 SMs "
                     "left (4096 tiles of 128x128 in 41 waves) does 1.28 times the work per SM "
                     "of its best on 132 (2048 of 128x256 in 16 waves). The published 19% is "
                     "an average over kernels and NCCL settings (up to 40%); 16 channels "
                     "(H800-class links) would leave 116 SMs and give about 12%.",
}


def measurements(runner):
    """(key, measurement, configuration, model, unit, (low, high), source) of every row."""
    rows = [("gemm", "bf16 GEMM 8192 x 8192 x 8192", "1 H100", gemm_tflops(runner, 8192),
             "TFLOP/s", (750, 800), SRC_GEMM)]
    for b, m, n, k, figure in XLA_QUOTED:
        shape = f"{b} x {m} x {n} x {k}" if b > 1 else f"{m} x {n} x {k}"
        rows.append((f"gemm {b}x{m}x{n}x{k}", f"bf16 GEMM {shape}", "1 H100",
                     shape_tflops(runner, b, m, n, k), "TFLOP/s", (figure, figure), SRC_XLA))
    for m, n, k, figure in H200_MEASURED:
        rows.append((f"h200 {m}x{n}x{k}", f"bf16 GEMM {m} x {n} x {k}", "1 H200",
                     shape_tflops(runner, 1, m, n, k, hardware="h200"), "TFLOP/s",
                     (figure, figure), SRC_H200))
    for kind in ("all_gather", "reduce_scatter"):
        rows.append((f"{kind} 1 GiB", f"{kind} bus bandwidth", f"8 H100, {size_label(GIB)}",
                     busbw_gbs(runner, kind, GIB), "GB/s", (360, 370), SRC_NCCL_TESTS))
    rows.append(("all_reduce ring 1 GiB", "all_reduce bus bandwidth, ring (hardware nvls false)",
                 f"8 H100, {size_label(GIB)}",
                 busbw_gbs(runner, "all_reduce", GIB, hardware=NO_NVLS), "GB/s", (365, 370),
                 SRC_NVLS))
    for gpus, figure in ((5, 420), (6, 440), (7, 460), (8, 480)):
        rows.append((f"nvls {gpus}", "all_reduce bus bandwidth, NVLS",
                     f"{gpus} H100, {size_label(2 * GIB)}",
                     busbw_gbs(runner, "all_reduce", 2 * GIB, gpus=gpus), "GB/s",
                     (figure, figure), SRC_NVLS))
    rows.append(("a2a 8", "all_to_all bus bandwidth", f"8 H100, {size_label(GIB)}",
                 busbw_gbs(runner, "all_to_all", GIB), "GB/s", (320, 320), SRC_GTC))
    rows.append(("a2a 32", "all_to_all bus bandwidth across nodes",
                 f"32 H100 on 4 nodes, {size_label(GIB)}",
                 busbw_gbs(runner, "all_to_all", GIB, gpus=32), "GB/s", (48, 48), SRC_GTC))
    # DeepEP's benchmark: 4096 tokens per GPU of hidden 7168, top-8, dispatched in FP8 (1
    # byte an element): each GPU's buffer is 4096 x 8 x 7168 bytes when every choice goes
    # to another GPU. H800's NICs are H100's (CX7 400G); its NVLink is not, so only the
    # cross-node figures are compared.
    deepep_bytes = 4096 * 8 * 7168
    for gpus, figure in ((16, 43), (32, 58), (64, 51)):
        rows.append((f"deepep {gpus}", "EP all_to_all RDMA bandwidth per GPU (DeepEP dispatch)",
                     f"{gpus} H100 on {gpus // 8} nodes, {size_label(deepep_bytes)}",
                     rdma_gbs(runner, deepep_bytes, gpus), "GB/s", (figure, figure), SRC_DEEPEP))
    rows.append(("ar 32 gtc", "all_reduce bus bandwidth across nodes",
                 f"32 H100 on 4 nodes, {size_label(8 * GIB)}",
                 busbw_gbs(runner, "all_reduce", 8 * GIB, gpus=32), "GB/s", (380, 380), SRC_GTC))
    for nbytes, figure in ((8 * GIB, 330.9), (128 * MIB, 275), (64 * MIB, 224),
                           (16 * MIB, 120), (MIB, 22)):
        key = f"ar 32 {size_label(nbytes)}"
        rows.append((key, "all_reduce bus bandwidth across nodes",
                     f"32 H100 on 4 nodes, {size_label(nbytes)}",
                     busbw_gbs(runner, "all_reduce", nbytes, gpus=32), "GB/s", (figure, figure),
                     SRC_VP))
    rows.append(("ag 32 8 GiB", "all_gather bus bandwidth across nodes",
                 f"32 H100 on 4 nodes, {size_label(8 * GIB)}",
                 busbw_gbs(runner, "all_gather", 8 * GIB, gpus=32), "GB/s", (323.5, 323.5),
                 SRC_VP))
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        rows.append((f"{kind} 16 MiB", f"{kind} bus bandwidth", f"8 H100, {size_label(16 * MIB)}",
                     busbw_gbs(runner, kind, 16 * MIB), "GB/s", (0.45 * 450,) * 2,
                     SRC_EFFICIENCY))
    rows.append(("all_gather 1 GiB eff", "all_gather bus bandwidth", f"8 H100, {size_label(GIB)}",
                 busbw_gbs(runner, "all_gather", GIB), "GB/s", (0.77 * 450,) * 2, SRC_EFFICIENCY))
    tp_bytes = 128 * MIB  # sequence 8192 x hidden 8192 in bf16: a tensor-parallel activation
    for kind, figure in (("all_gather", 280), ("reduce_scatter", 280), ("all_reduce", 300),
                         ("all_to_all", 230)):
        rows.append((f"tp {kind}", f"tensor-parallel {kind} bus bandwidth",
                     f"8 H100, {size_label(tp_bytes)}", busbw_gbs(runner, kind, tp_bytes), "GB/s",
                     (figure, figure), SRC_TP))
    rows.append(("shift", "point-to-point `shift` bandwidth, NCCL send/recv (p2p nccl)",
                 f"8 H100 ring, {size_label(GIB)}",
                 busbw_gbs(runner, "shift", GIB, hardware=P2P_NCCL), "GB/s", (120, 160), SRC_P2P))
    rows.append(("shift ce", "copy-engine `shift` bandwidth, one way (p2p ce)",
                 f"8 H100 ring, {size_label(GIB)}", busbw_gbs(runner, "shift", GIB), "GB/s",
                 (376, 380), SRC_CE))
    rows.append(("shift ce both", "copy-engine `shift` bandwidth per direction, both ways",
                 f"2 H100 pair, {size_label(GIB)}", busbw_gbs(runner, "shift", GIB, gpus=2),
                 "GB/s", (370, 375), SRC_CE + ", 740-750 both ways / 2"))
    rows.append(("shift ce 32", "copy-engine `shift` bandwidth (latency included)",
                 f"8 H100 ring, {size_label(32 * MIB)}", busbw_gbs(runner, "shift", 32 * MIB),
                 "GB/s", (round(354 * GIB / 1e9, 1),) * 2, SRC_CE_BATCH))
    for kind in ("all_reduce", "all_gather"):
        reference = tuning_latency_us(kind)
        rows.append((f"latency {kind}", f"{kind} latency (small message)",
                     f"8 H100, {size_label(8 * KIB)}", latency_us(runner, kind, 8 * KIB), "us",
                     (reference, reference), SRC_TUNING))
    # FlashAttention's H100 curves (calibration.md), seq 512 / 2k / 16k.
    for backward, causal, figures, source in (
            (False, False, (467, 625, 648), SRC_FA3), (False, True, (292, 521, 616), SRC_FA3),
            (True, False, (248, 320, 338), SRC_FA2), (True, True, (163, 265, 328), SRC_FA2)):
        for seq, figure in zip((512, 2048, 16384), figures):
            mask = "causal" if causal else "non-causal"
            what = (f"attention backward vs FA2 forward+backward, {mask}" if backward
                    else f"attention forward vs FA3 forward, {mask}")
            rows.append((f"attention {'bwd' if backward else 'fwd'} {mask} {seq}", what,
                         f"1 H100, seq {seq}, 16 heads of 128, batch {16384 // seq}",
                         attention_tflops(runner, seq, causal, backward), "TFLOP/s",
                         (figure, figure), source))
    rows.append(("gemm slowdown", "GEMM slowdown under an overlapping all_gather",
                 "8 H100, 8192^3 GEMM beside a 1 GiB all_gather",
                 gemm_slowdown_percent(runner, 8192, GIB), "%", (19, 19), SRC_OVERLAP))
    return rows


def published_label(low, high):
    return f"{low:g}" if low == high else f"{low:g}-{high:g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commir-run", help="path to commir-run (default: build it)")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tool = args.commir_run
    if tool is None:
        subprocess.run(["bazel", "build", "//:commir-run"], cwd=root, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tool = os.path.join(root, "bazel-bin", "commir-run")

    with tempfile.TemporaryDirectory() as workdir:
        try:
            runner = Runner(tool, workdir)
            rows = measurements(runner)
            check_collective_parameters(runner)
            collective_parameters = parameter_rows(rows, COLLECTIVE_PARAMETERS)
            check_other_parameters(runner)
            other_parameters = parameter_rows(rows, OTHER_PARAMETERS)
            table = read_xla_table(root)
            parameters = gemm_parameter_rows(runner, table)
        except (RuntimeError, ValueError, KeyError, OSError) as e:
            sys.stderr.write(f"sim_calibration.py: {e}\n")
            return 1

    print("# Calibration of the sim backend (h100-sxm) against published measurements\n")
    print("Generated by `/usr/bin/python3 benchmarks/sim_calibration.py --commir-run "
          "bazel-bin/commir-run > benchmarks/sim_calibration.md`; "
          "`//benchmarks:sim_calibration_test` fails when this file and the script's output "
          "differ. See the script's docstring for how each prediction is made.\n")
    print("| measurement | configuration | model | published | unit | in range | error | source |")
    print("|---|---|---:|---:|---|---|---:|---|")
    notes = []
    for key, what, config, model, unit, (low, high), source in rows:
        reference = (low + high) / 2
        error = (model - reference) / reference
        in_range = "yes" if low <= model <= high else "no"
        if low == high:
            in_range = "-"
        mark = ""
        if abs(error) > LARGE_ERROR:
            notes.append((len(notes) + 1, what, config, NOTES.get(key, "")))
            mark = f" [{len(notes)}]"
        print(f"| {what}{mark} | {config} | {model:.1f} | {published_label(low, high)} | {unit} | "
              f"{in_range} | {error * 100:+.1f}% | {source} |")
    if notes:
        print(f"\nNotes (rows whose error is over {LARGE_ERROR * 100:.0f}%):\n")
        for number, what, config, why in notes:
            print(f"{number}. {what}, {config}: {why or 'no explanation recorded.'}")
    print("\n## Collective model parameters (h100-sxm)\n")
    print("Each parameter of the collective model (`sim/collective_time.h`) with its value, "
          "where it comes from and the mean / worst absolute error of the table rows above "
          "that check it (the rows a fitted parameter was fitted to included; \"-\": no "
          "published figure checks it on its own). The script first checks that the built-in "
          "h100-sxm carries these values.\n")
    print("| parameter | value | source | error (rows) |")
    print("|---|---:|---|---:|")
    for key, value, source, summary, count in collective_parameters:
        cell = "-" if summary is None else \
            f"{summary[0] * 100:.1f}% / {summary[1] * 100:.0f}% ({count})"
        print(f"| `{key}` | {value:g} | {source} | {cell} |")
    print("\n## Transfer, overlap and attention model parameters (h100-sxm)\n")
    print("As above, for `shift` by the copy engines and as NCCL send/recv "
          "(`sim/collective_time.h`), the SMs an NCCL kernel keeps from a GEMM beside it "
          "(`sim/contention.h`), NCCL's latency constants and the attention model "
          "(`sim/attention_time.h`); the script checks these values against the built-in "
          "too. The datasheet figures (peaks, SMs, HBM, NVLink, NIC) are in "
          "`sim/hardware.cc` with their sources; the GEMM parameters follow.\n")
    print("| parameter | value | source | error (rows) |")
    print("|---|---:|---|---:|")
    for key, value, source, summary, count in other_parameters:
        cell = "-" if summary is None else \
            f"{summary[0] * 100:.1f}% / {summary[1] * 100:.0f}% ({count})"
        shown = ", ".join(f"{v:g}" for v in value) if isinstance(value, list) else f"{value:g}"
        print(f"| `{key}` | {shown} | {source} | {cell} |")
    print("\n## GEMM model parameters (h100-sxm)\n")
    print(f"Error of the GEMM model (`sim/gemm_time.h`) over all {len(table)} shapes of XLA's "
          "measured H100 bf16 table (`sim/testdata/xla_sm90_bf16_gemm.txt`, source in its "
          "header), as mean / worst absolute error of the predicted TFLOP/s, with each "
          "parameter at its value and moved by 10% (the others at theirs). "
          "`//sim:gemm_time_test` bounds the mean at 5% and every row at 35%. The formula "
          "this model replaced (0.8 of the peak times the wave efficiency of the best of "
          "three tiles, or bytes over HBM when longer) scored 24.8% / 75% on the same "
          "table.\n")
    print("| parameter | value | source | error | at -10% | at +10% |")
    print("|---|---:|---|---:|---:|---:|")
    for key, value, source, at, lower, upper in parameters:
        cells = [f"{mean * 100:.1f}% / {worst * 100:.0f}%" for mean, worst in (at, lower, upper)]
        print(f"| `{key}` | {value:g} | {source} | {cells[0]} | {cells[1]} | {cells[2]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
