#!/usr/bin/env python3
"""Checks figures of the generated sim tables against closed forms and published figures.

The tables' own tests (generated_table_test.sh) only say that a table is what its script
prints now: a regenerated table passes whatever the model predicts. Here some predicted
figures are recomputed independently, from the hardware's documented parameters
(sim/hardware.cc, each with its source) and NCCL's published tuning model, or compared
with measurements in calibration.md, within a stated tolerance. Nothing here calls the
sim; the expected side is arithmetic written out below.

Covered:
  * benchmarks/sim_calibration.md: all_gather and reduce_scatter bus bandwidth on 8 H100s
    at 1 GiB and 16 MiB (NCCL's ring model), copy-engine `shift` bandwidth one way (1 GiB,
    32 MiB) and both ways, NCCL send/recv `shift` (latency + bytes / bandwidth); the bf16
    8192^3 GEMM (2mnk / (peak x efficiency), with its wave quantization); the published
    ranges of calibration.md for the same rows.
  * benchmarks/sim_overlap_table.md: nvFuser's all_gather + GEMM, plain schedule, whose
    GEMM time is 2mnk / (peak x efficiency) per device.
  * benchmarks/sim_schedule_table.md: the shared ag_matmul example scaled by 16 in bf16,
    lowered: its one GEMM per device against 2mnk / (peak x efficiency).
  * benchmarks/search_table.md: the Megatron TP+SP baseline of the MLP on 8 GPUs (an
    all_gather, two GEMMs, a GELU, a reduce_scatter, none overlapped) against the sum of
    their closed forms.
  * benchmarks/plan_mfu_table.md: the predicted MFU of the ten GPT runs of Narayanan et
    al. 2021 (SC21, Table 1: TFLOP/s per A100) against their published throughput.
  * benchmarks/ring_attention_table.md: causal attention under the plain ring and the
    zigzag ring (zigzag inputs) on 8 and 64 GPUs: the work-ratio column against an
    enumeration of the blocks each device meets (empty, diagonal, full), zigzag's speedup
    below that ratio; on 8 GPUs (copy-engine shifts, nothing exposed) each compute column
    and the speedup against the kernels' closed form: FlashAttention's 4 h s_q s_k d FLOPs
    per full block at 0.70 of the peak with each CTA's 1.6 blocks of overhead and its
    waves, half the FLOPs plus the diagonal tiles for the diagonal, empty blocks' output
    writes, and the online-softmax merges (one attention_merge kernel a step, per query
    chunk for zigzag) and conversions at the HBM bandwidth (zigzag's
    q and k/v halves are read in place, no copy);
    on 64 GPUs that closed form as a lower bound (cross-node shifts take SMs from it),
    each ring's exposed communication against a step's k and v shifts (NCCL send/recv
    through the NIC): none where they fit in every step, at least their excess over
    step 0 where they do not; and with the shifts hidden, zigzag's speedup against the
    closed forms' ratio. Multi-head and grouped-query attention (8 kv heads): the
    kernels' FLOPs, outputs and merges follow the query heads, their k/v reads and the
    shifts the kv heads.

Rows left alone on purpose: all_reduce (NVLS changes its pricing), all_to_all and
multi-node rows (their pricing is being reworked), the calibration table's attention rows
(checked against FlashAttention's published curves there; their closed form would be the
tiling model, which check_ring_attention writes out for the rings' blocks), and the
ring attention table's all_gather, Ulysses and contiguous-input zigzag rows (bound by
all_gather or all_to_all).

Usage: closed_form_check.py BENCHMARKS_DIR   (exit 0: all checks pass, 1: a check failed)
"""

import os
import sys

MiB = 1024.0 ** 2
GiB = 1024.0 ** 3

# H100 SXM (calibration.md, "GPUs"): dense bf16 peak and NVLink 4 per direction.
PEAK_BF16 = 989e12
NVLINK_PER_DIRECTION = 450e9
# sim/hardware.cc documented parameters (with their sources there):
NVLINK_BUS_EFFICIENCY = 0.82     # nccl-tests busbw 360-370 of 450 GB/s at >= 1 GiB
BUS_HALF_EFFICIENCY_BYTES = 0.75 * MiB  # message size at half the large-message bandwidth
GEMM_PEAK_FRACTION = 0.86        # the GEMM main loop's share of the tensor-core peak
GEMM_WAVE_LATENCY = 2e-6         # each wave's prologue before its first MMA
KERNEL_LAUNCH = 3e-6             # once per kernel
SM_COUNT = 132
HBM_BANDWIDTH = 3.35e12          # calibration.md, "GPUs"
COPY_ENGINE_ONE_WAY = 378e9      # p2pBandwidthLatencyTest, 376-380 GB/s
COPY_ENGINE_BOTH_WAYS = 745e9    # 740-750 GB/s both ways
COPY_ENGINE_LATENCY = 3e-6
P2P_NCCL_BANDWIDTH = 140e9       # NCCL send/recv, 120-160 GB/s
# NCCL's tuning model (calibration.md, "NCCL's own tuning model"; src/graph/tuning.cc):
# ring base latency, per-step NVLink latency and bandwidth fraction per protocol
# (LL, LL128, Simple).
NCCL_BASE = (6.6e-6, 14.0e-6, 8.4e-6)
NCCL_STEP = (0.6e-6, 1.9e-6, 3.4e-6)
NCCL_FRACTION = (0.5, 0.92, 1.0)


def ring_bus_bandwidth(n, size_bytes):
    """nccl-tests bus bandwidth of a ring all_gather/reduce_scatter of `size_bytes` (the
    whole gathered buffer) on n GPUs of one node: NCCL's time = base + (n-1) steps x step
    latency + bus bytes / (bus bandwidth x protocol fraction), the fastest protocol, with
    the bus bandwidth 450 GB/s x 0.82 falling with the message size as S / (S + 0.75 MiB)."""
    bus_bytes = (n - 1) / n * size_bytes
    bus = NVLINK_PER_DIRECTION * NVLINK_BUS_EFFICIENCY * size_bytes / (size_bytes + BUS_HALF_EFFICIENCY_BYTES)
    time = min(NCCL_BASE[p] + (n - 1) * NCCL_STEP[p] + bus_bytes / (bus * NCCL_FRACTION[p]) for p in range(3))
    return bus_bytes / time


def gemm_time(m, n, k, tile_m=128, tile_n=256):
    """2mnk / (peak x 0.86), and the same in waves: the output's 128x256 tiles run in
    waves of 132 (one per SM), the last one partly idle, each wave paying 2 us before its
    first MMA, plus one launch."""
    ideal = 2.0 * m * n * k / (PEAK_BF16 * GEMM_PEAK_FRACTION)
    tiles = -(-m // tile_m) * -(-n // tile_n)
    waves = -(-tiles // SM_COUNT)
    return ideal, ideal * waves * SM_COUNT / tiles + waves * GEMM_WAVE_LATENCY + KERNEL_LAUNCH


def read_table(path, first_only=False):
    """Rows of the Markdown tables in `path` as lists of cell strings, or with
    `first_only` of its first table alone (plan_mfu_table.md goes on with a before/after
    comparison whose columns differ)."""
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("| ") and not line.startswith("|---"):
                rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            elif first_only and rows and not line.startswith("|"):
                break
    return rows[1:]  # without the header


class Checker:
    def __init__(self):
        self.failures = 0
        self.checks = 0

    def near(self, what, got, want, tolerance):
        self.checks += 1
        error = got / want - 1
        ok = abs(error) <= tolerance
        print("%s %s: %.4g vs %.4g (%+.2f%%, tolerance %.1f%%)" % (
            "ok  " if ok else "FAIL", what, got, want, 100 * error, 100 * tolerance))
        self.failures += not ok

    def within(self, what, got, low, high, tolerance):
        self.checks += 1
        ok = low * (1 - tolerance) <= got <= high * (1 + tolerance)
        print("%s %s: %.4g in %g-%g (tolerance %.1f%%)" % (
            "ok  " if ok else "FAIL", what, got, low, high, 100 * tolerance))
        self.failures += not ok


def row_of(rows, first, second):
    """The row whose first cell is `first` and whose second is `second` (or satisfies it,
    when it is a function)."""
    matches = second if callable(second) else (lambda cell: cell == second)
    for row in rows:
        if row[0] == first and matches(row[1]):
            return row
    raise SystemExit("no row %r / %r in the table" % (first, second))


def find(rows, measurement, configuration):
    return float(row_of(rows, measurement, configuration)[2])


def check_calibration(rows, c):
    # Ring collectives inside one node. The message-size curve and the protocol latencies
    # make the 16 MiB figure; at 1 GiB it is the bandwidth term alone within 1.3%.
    for name in ("all_gather bus bandwidth", "reduce_scatter bus bandwidth"):
        for config, size in (("8 H100, 1 GiB", GiB), ("8 H100, 16 MiB", 16 * MiB)):
            c.near("%s, %s (NCCL ring closed form)" % (name, config), find(rows, name, config) * 1e9,
                   ring_bus_bandwidth(8, size), 0.01)
        # Published: nccl-tests 360-370 GB/s (calibration.md).
        c.within("%s, 8 H100, 1 GiB (nccl-tests, calibration.md)" % name, find(rows, name, "8 H100, 1 GiB"),
                 360, 370, 0.01)
    # Copy-engine shift: its latency then bytes at the one-way (or half the both-ways) rate.
    ce = "copy-engine `shift` bandwidth, one way (p2p ce)"
    c.near(ce + ", 1 GiB", find(rows, ce, "8 H100 ring, 1 GiB") * 1e9,
           GiB / (COPY_ENGINE_LATENCY + GiB / COPY_ENGINE_ONE_WAY), 0.005)
    c.within(ce + ", 1 GiB (p2pBandwidthLatencyTest, calibration.md)", find(rows, ce, "8 H100 ring, 1 GiB"),
             376, 380, 0.005)
    ce32 = "copy-engine `shift` bandwidth (latency included)"
    c.near(ce32 + ", 32 MiB", find(rows, ce32, "8 H100 ring, 32 MiB") * 1e9,
           32 * MiB / (COPY_ENGINE_LATENCY + 32 * MiB / COPY_ENGINE_ONE_WAY), 0.005)
    # cudaMemcpyBatchAsync moved 32 MB at 354 GiB/s (calibration.md): within 5%.
    c.near(ce32 + ", 32 MiB (cudaMemcpyBatchAsync, calibration.md)", find(rows, ce32, "8 H100 ring, 32 MiB"),
           354 * GiB / 1e9, 0.05)
    both = "copy-engine `shift` bandwidth per direction, both ways"
    c.near(both + ", 1 GiB", find(rows, both, "2 H100 pair, 1 GiB") * 1e9,
           GiB / (COPY_ENGINE_LATENCY + GiB / (COPY_ENGINE_BOTH_WAYS / 2)), 0.005)
    c.within(both + " (740-750 both ways / 2, calibration.md)", find(rows, both, "2 H100 pair, 1 GiB"),
             370, 375, 0.005)
    # NCCL send/recv: at 1 GiB the few microseconds of latency are 0.02% of the time, so
    # the bandwidth itself within 1%.
    p2p = "point-to-point `shift` bandwidth, NCCL send/recv (p2p nccl)"
    c.near(p2p + ", 1 GiB", find(rows, p2p, "8 H100 ring, 1 GiB") * 1e9, P2P_NCCL_BANDWIDTH, 0.01)
    c.within(p2p + " (120-160 GB/s, calibration.md)", find(rows, p2p, "8 H100 ring, 1 GiB"), 120, 160, 0)
    # The 8192^3 GEMM: 2048 tiles of 128x256 make 16 waves for 15.5 of work, 3% over the
    # ideal 2mnk / (peak x 0.86); the model may choose another tiling only if it is faster,
    # so within 1% of the waves' closed form.
    gemm = find(rows, "bf16 GEMM 8192 x 8192 x 8192", "1 H100") * 1e12
    flops = 2.0 * 8192 ** 3
    c.near("bf16 GEMM 8192^3 FLOP/s (2mnk / (peak x 0.86) in 16 waves)", gemm, flops / gemm_time(8192, 8192, 8192)[1],
           0.01)
    # Published: 750-800 TFLOP/s in public cuBLAS measurements; the model is 0.3% above.
    c.within("bf16 GEMM 8192^3 TFLOP/s (public cuBLAS measurements, calibration.md)", gemm / 1e12,
             750, 800, 0.01)


def check_overlap(rows, c):
    # nvFuser's all_gather + GEMM on 8 H100s: per device C[32768, 1024] = A[32768, 16384] B
    # (the column split of B), the same FLOPs whichever operand the lowering gathers:
    # 1024 tiles of 128x256, 8 waves for 7.76 of work. The plain schedule's compute with
    # copy-engine shifts (no NCCL kernel beside it, so no SM contention) is that GEMM's
    # waves' closed form within 1%.
    compute_ms = float(row_of(rows, "nvfuser ag+gemm", "plain")[6])
    c.near("nvfuser ag+gemm plain, compute ce (ms) vs 2mnk / (peak x 0.86) in 8 waves", compute_ms,
           gemm_time(32768, 1024, 16384)[1] * 1e3, 0.01)


def check_schedule_table(rows, c):
    # ag_matmul x16 in bf16 on 8 H100s (a: [16384@tp, 4096], b: [4096, 8192@tp]): the
    # lowering gathers b and multiplies each device's rows, [2048, 4096] x [4096, 8192]:
    # 512 tiles of 128x256, 4 waves for 3.88 of work. Its compute column (printed to
    # 1 us of 180) is that GEMM's closed form within 2%. (The communication is an
    # all_gather and an all_to_all, whose pricing is being reworked: not checked here.)
    compute_ms = float(row_of(rows, "ag_matmul", lambda cell: cell.startswith("lowered"))[4])
    c.near("ag_matmul x16 lowered, compute (ms) vs 2mnk / (peak x 0.86) in 4 waves", compute_ms,
           gemm_time(2048, 8192, 4096)[1] * 1e3, 0.02)


def check_search_table(rows, c):
    # The MLP on 8 H100s as Megatron TP+SP runs it (x: bf16[8192@tp, 4096], w1: [4096,
    # 16384@tp], w2: [16384@tp, 4096]): all_gather x (64 MiB gathered), [8192, 4096] x
    # [4096, 2048], GELU over [8192, 2048] (memory-bound: read and write at the HBM
    # bandwidth, plus a launch), [8192, 2048] x [2048, 4096], reduce_scatter (64 MiB), one
    # after another. Within 2%: the GELU's roofline leaves out its math (~5 us of 780).
    megatron_ms = float(row_of(rows, "mlp", "8")[3].split()[0])
    collectives = 2 * (7 / 8) * 64 * MiB / ring_bus_bandwidth(8, 64 * MiB)
    gelu = 2 * 8192 * 2048 * 2 / HBM_BANDWIDTH + KERNEL_LAUNCH
    want = collectives + gemm_time(8192, 2048, 4096)[1] + gelu + gemm_time(8192, 4096, 2048)[1]
    c.near("mlp on 8 GPUs, Megatron TP+SP (ms) vs all_gather + GEMM + GELU + GEMM + reduce_scatter",
           megatron_ms, want * 1e3, 0.02)


# Rows known to be outside the 6 points, each with why; listed rows must stay within 12
# points, and a listed row that comes back within 6 fails until it is taken off the list,
# so the list cannot hide a regression or outlive its reason.
KNOWN_OUTSIDE_6_POINTS = {
    # Empty: sc21-1.7b (+10.1) came back to +2.4 once the GPT rows were costed with the
    # unfused attention their 2021 runs had (attention=unfused, search/plan/layer_program.h).
}


def check_plan_mfu(rows, c):
    # SC21's TFLOP/s per GPU count the recomputation pass (its eq. 3: 96 B s l h^2 ...,
    # four passes); model FLOPs are three of them, so the published MFU is TFLOP/s x 3/4
    # over the A100's 312 TFLOP/s (calibration.md). (The logits are not recomputed, which
    # makes 3/4 up to 0.5 points low for the smallest model.) Each row within 6 points
    # (the spread of analytical models against Megatron-LM, calibration.md "Accuracy
    # others reach", is 3-4% on average and 9% at worst), their mean within 4.
    errors = []
    for row in rows:
        if row[0].startswith("sc21-"):
            published = float(row[4]) * 0.75 / 312 * 100
            predicted = float(row[6].split("%")[0])
            errors.append(predicted - published)
            what = "%s predicted MFU (SC21: %s TFLOP/s per A100)" % (row[0], row[4])
            if row[0] in KNOWN_OUTSIDE_6_POINTS:
                c.checks += 1
                ok = 6 < abs(predicted - published) <= 12
                print("%s %s: %.4g vs %.4g (%+.1f points; known outside 6: %s; must stay within 12, "
                      "and fails once within 6 so that it comes off the list)" % (
                          "ok  " if ok else "FAIL", what, predicted, published, predicted - published,
                          KNOWN_OUTSIDE_6_POINTS[row[0]]))
                c.failures += not ok
                continue
            c.near(what, predicted, published, 6 / published)
    c.checks += 1
    mean = sum(abs(e) for e in errors) / max(len(errors), 1)
    ok = len(errors) == 10 and mean <= 4
    print("%s SC21 rows: %d, mean absolute error %.2f points (at most 4)" % ("ok  " if ok else "FAIL", len(errors), mean))
    c.failures += not ok


# sim/hardware.cc's fused-attention parameters (fitted there to FlashAttention-3's
# non-causal H100 forward curve, calibration.md; sim/attention_time.h describes the
# kernel): the share of the bf16 peak a CTA's main loop reaches, and each CTA's fixed
# cost (loading its tile, the epilogue) in blocks of 128 x 128.
ATTENTION_PEAK_FRACTION = 0.70
ATTENTION_TILE_OVERHEAD_BLOCKS = 1.6
ATTENTION_TILE = 128
PEAK_F32 = 67e12                 # H100 SXM non-tensor f32 (calibration.md, "GPUs")
HEAD_DIM = 128                   # ring_attention_table.py's programs: batch 1, head dim 128, bf16


def attention_kernel(heads, kv_heads, queries, keys, mask):
    """One FlashAttention forward kernel of `heads` query heads and `kv_heads` k/v heads
    (batch 1; grouped-query attention when fewer) on a `queries` x `keys` block
    whose causal mask leaves it "full" (all keys before the queries), "diagonal" (the same
    positions) or "empty" (all keys after). Full: 4 h s_q s_k d FLOPs at 0.70 of the peak,
    each CTA (128 queries) also paying 1.6 blocks of the 128 x 128 it walks, its CTAs in
    waves of 132; diagonal: CTA t walks t + 1 blocks (half the full FLOPs plus half the
    diagonal tiles, computed in full before the mask); empty: the CTAs exit at once, and
    the kernel writes its zero output (o in bf16, lse in f32). The FLOPs and the output
    follow the query heads; the inputs read are q (query heads) and k, v (kv heads), each
    once. A launch each."""
    tiles = queries // ATTENTION_TILE
    out_bytes = heads * queries * (HEAD_DIM * 2 + 4)
    if mask == "empty":
        return KERNEL_LAUNCH + out_bytes / HBM_BANDWIDTH
    blocks, longest = (tiles * keys // ATTENTION_TILE, keys // ATTENTION_TILE) if mask == "full" else (
        tiles * (tiles + 1) / 2, tiles)
    block_flops = 4.0 * ATTENTION_TILE * ATTENTION_TILE * HEAD_DIM
    rate = PEAK_BF16 * ATTENTION_PEAK_FRACTION
    work = heads * (tiles * ATTENTION_TILE_OVERHEAD_BLOCKS + blocks) * block_flops / rate
    ctas = heads * tiles
    wave_share = ctas / (-(-ctas // SM_COUNT) * SM_COUNT)
    compute = max(work / wave_share, (ATTENTION_TILE_OVERHEAD_BLOCKS + longest) * block_flops * SM_COUNT / rate)
    in_bytes = (heads * queries + 2 * kv_heads * keys) * HEAD_DIM * 2
    return KERNEL_LAUNCH + max(compute, (in_bytes + out_bytes) / HBM_BANDWIDTH)


def memory_bound(elements, nbytes):
    """An elementwise or copy kernel: its bytes at the HBM bandwidth (one FLOP an element at
    the f32 peak never binds), plus a launch."""
    return KERNEL_LAUNCH + max(elements / PEAK_F32, nbytes / HBM_BANDWIDTH)


def online_softmax_merge(heads, queries, partials=1):
    """One attention_merge kernel (commir/online_softmax.h) folding `partials` partial
    results into the f32 accumulator: it reads the accumulator (o: h x s_q x d f32, lse:
    h x s_q f32) and each partial (o in bf16, lse in f32) once and writes the new
    accumulator; per partial about 8 FLOPs a row and 3 an output element (never binding at
    the f32 peak)."""
    n = heads * queries
    acc = 4.0 * n * HEAD_DIM + 4.0 * n
    partial = 2.0 * n * HEAD_DIM + 4.0 * n
    return memory_bound(partials * (8 * n + 3 * n * HEAD_DIM), 2 * acc + partials * partial)


def convert(heads, queries, from_bytes, to_bytes):
    return memory_bound(heads * queries * HEAD_DIM, heads * queries * HEAD_DIM * (from_bytes + to_bytes))


def plain_ring_compute(devices, heads, kv_heads, sequence):
    """The plain ring's last device (ring_attention.h): step 0 its own block (the diagonal),
    its bf16 output converted to the f32 accumulator (its lse is f32 already); steps
    1..n-1 the blocks of devices n-2 .. 0 (all full), each merged by one attention_merge
    that widens the bf16 output itself; the result converted back to bf16."""
    first, step, last = plain_ring_steps(devices, heads, kv_heads, sequence)
    return first + (devices - 1) * step + last


def plain_ring_steps(devices, heads, kv_heads, sequence):
    """The plain ring's last device: step 0 (the diagonal and its conversion), each of
    steps 1..n-1 (a full block and its merge), and the final conversion. The merges and
    conversions are over the query heads."""
    block = sequence // devices
    step = attention_kernel(heads, kv_heads, block, block, "full") + online_softmax_merge(heads, block)
    first = attention_kernel(heads, kv_heads, block, block, "diagonal") + convert(heads, block, 2, 4)
    return first, step, convert(heads, block, 4, 2)


def zigzag_ring_compute(devices, heads, kv_heads, sequence):
    """Any device of the zigzag ring on zigzag inputs (every device does the same): it holds
    query chunks r and 2n-1-r; each step reads the halves of the k/v block it holds in
    place (the attention kernel takes an offset pointer and the block's strides, as
    FlashAttention does: no copy, runtime/in_place.h), and runs one attention per (query
    chunk, key chunk) pair but one: query chunk r never sees key chunk 2n-1-s (positions
    aligned), which is not emitted; one attention_merge per query chunk folds its pairs
    in. Step 0: two diagonals (each converted to its query chunk's f32 accumulator) and
    one full pair (chunk 2n-1-r against chunk r), merged into its accumulator. Steps
    1..n-1: two full pairs and one empty one (which of r's and 2n-1-r's own-half pairs is
    full depends on the block's source), merged by one attention_merge of one partial
    (chunk r) and one of two (chunk 2n-1-r). q's two halves are read in place too; after:
    the halves' concat and the conversion to bf16."""
    first, step, last = zigzag_ring_steps(devices, heads, kv_heads, sequence)
    return first + (devices - 1) * step + last


def zigzag_ring_steps(devices, heads, kv_heads, sequence):
    """zigzag_ring_compute's step 0, each of steps 1..n-1, and what follows them."""
    block = sequence // devices
    chunk = block // 2
    attend = {mask: attention_kernel(heads, kv_heads, chunk, chunk, mask) for mask in ("diagonal", "empty", "full")}
    first = (2 * (attend["diagonal"] + convert(heads, chunk, 2, 4)) + attend["full"]
             + online_softmax_merge(heads, chunk))
    step = (2 * attend["full"] + attend["empty"] + online_softmax_merge(heads, chunk)
            + online_softmax_merge(heads, chunk, partials=2))
    concat = memory_bound(0, 2 * 4.0 * heads * block * HEAD_DIM)
    return first, step, concat + convert(heads, block, 4, 2)


# sim/hardware.cc's network parameters for a shift between nodes (NCCL send/recv through
# one 400 Gb/s NIC per GPU), each with its source there: 50 GB/s at 0.94 (nccl-tests'
# 46-48 GB/s, calibration.md), 5 us a step through NIC, proxy and switch.
NETWORK_BANDWIDTH = 50e9
NETWORK_EFFICIENCY = 0.94
NETWORK_LATENCY = 5e-6


def network_shift(nbytes):
    """One shift of `nbytes` to a GPU of another node: NCCL send/recv, the fastest protocol
    of base latency + one network step + bytes at the NIC rate, which falls with the
    message size as S / (S + 0.75 MiB) (as ring_bus_bandwidth)."""
    rate = NETWORK_BANDWIDTH * NETWORK_EFFICIENCY * nbytes / (nbytes + BUS_HALF_EFFICIENCY_BYTES)
    return min(NCCL_BASE[p] + NETWORK_LATENCY + nbytes / (rate * NCCL_FRACTION[p]) for p in range(3))


def causal_work_ratio(devices, sequence):
    """The plain ring's critical-path causal (query, key) pairs over the zigzag ring's, by
    enumerating the blocks each device meets: ring device r at step s holds the keys of
    block (r - s) mod n: full (block^2 pairs) if that block is before r's, the diagonal
    (block (block + 1) / 2) if it is r's own, empty otherwise; zigzag device r holds chunks
    r and 2n-1-r of 2n, and at step s meets key chunks (r - s) mod n and its mirror."""
    n, block = devices, sequence // devices
    chunk = block // 2

    def pairs(q, k, size):
        return size * size if k < q else size * (size + 1) // 2 if k == q else 0

    ring = max(sum(pairs(r, (r - s) % n, block) for s in range(n)) for r in range(n))
    zigzag = max(sum(pairs(qc, kc, chunk) for s in range(n) for qc in (r, 2 * n - 1 - r)
                     for kc in ((r - s) % n, 2 * n - 1 - (r - s) % n)) for r in range(n))
    return ring / zigzag


def ring_row(rows, devices, kv_heads, sequence, schedule):
    for row in rows:
        if row[0] == str(devices) and row[2] == str(kv_heads) and row[3] == str(sequence) and row[4] == schedule:
            return row
    raise SystemExit("no row %d GPUs / %d kv heads / %d / %r in the table" % (devices, kv_heads, sequence, schedule))


# ring_attention_table.py's configurations: (GPUs, query heads, kv heads, sequence), multi-
# head attention and grouped-query attention with 8 kv heads (Llama 3 70B's).
RING_ATTENTION_CONFIGS = ((8, 32, 32, 32768), (8, 32, 32, 131072), (64, 64, 64, 262144), (64, 64, 64, 1048576),
                          (8, 32, 8, 32768), (8, 32, 8, 131072), (64, 64, 8, 262144), (64, 64, 8, 1048576))


def check_ring_attention(rows, c):
    # Causal attention under the plain ring and the zigzag ring (inputs in zigzag order),
    # batch 1, head dim 128, bf16 on H100s. Cells: 6 after (ms), 7 compute (ms), 8
    # exposed (ms), 10 work ratio. (The all_gather lowering, Ulysses and the zigzag ring on
    # contiguous inputs are bound by all_gather/all_to_all, whose pricing is being
    # reworked: not checked here.)
    for devices, heads, kv_heads, sequence in RING_ATTENTION_CONFIGS:
        ring = ring_row(rows, devices, kv_heads, sequence, "ring")
        zigzag = ring_row(rows, devices, kv_heads, sequence, "zigzag ring, zigzag inputs")
        where = "%d GPUs, %d/%d heads, %dk queries per GPU" % (devices, heads, kv_heads, sequence // devices // 1024)
        work = causal_work_ratio(devices, sequence)
        # The table's work ratio, printed to 3 decimals: the enumeration within rounding.
        c.near("%s: work ratio column vs enumerated critical-path causal pairs" % where, float(zigzag[10]), work,
               0.0005 / work)
        # Balance is the most zigzag can buy: it runs the same attention work in more,
        # shorter kernels with more merges and copies, so its speedup stays below the
        # ratio of critical-path pairs (1.875 on 8 GPUs, 1.984 on 64).
        speedup = float(ring[6]) / float(zigzag[6])
        c.checks += 1
        ok = speedup < work
        print("%s %s: zigzag's speedup over the ring %.4g below the work ratio %.4g" % (
            "ok  " if ok else "FAIL", where, speedup, work))
        c.failures += not ok
        ring_steps = plain_ring_steps(devices, heads, kv_heads, sequence)
        zigzag_steps = zigzag_ring_steps(devices, heads, kv_heads, sequence)
        ring_cf = plain_ring_compute(devices, heads, kv_heads, sequence) * 1e3
        zigzag_cf = zigzag_ring_compute(devices, heads, kv_heads, sequence) * 1e3
        if devices == 8:
            # In one node the shifts go over copy engines: no SM is taken from the kernels,
            # and the table shows the copies' HBM traffic beside the memory-bound merges
            # below 0.05%. So each compute column is its kernels' closed form, and the time
            # too where nothing is exposed; 0.5% leaves the columns' 3-decimal rounding and
            # still fails on a change of a tenth of one full block's price.
            c.near("%s: ring compute (ms) vs 7 full blocks + the diagonal + merges" % where,
                   float(ring[7]), ring_cf, 0.005)
            c.near("%s: zigzag compute (ms) vs 8 steps of 2 full chunk pairs and 1 empty (step 0: a full "
                   "pair and 2 diagonals) + merges (halves read in place)" % where, float(zigzag[7]), zigzag_cf, 0.005)
            c.checks += 1
            ok = float(ring[8]) == 0 and float(zigzag[8]) == 0
            print("%s %s: nothing exposed (ring %s, zigzag %s ms): both rings hide their shifts" % (
                "ok  " if ok else "FAIL", where, ring[8], zigzag[8]))
            c.failures += not ok
            c.near("%s: zigzag's speedup over the ring (after) vs the closed forms' ratio" % where,
                   speedup, ring_cf / zigzag_cf, 0.005)
            continue
        # Across nodes a shift runs as an NCCL send/recv that takes 32 SMs beside the
        # kernels (sim/contention.h), which the closed form leaves out: it is a lower
        # bound only, within 0.5% for the columns' rounding.
        for name, row, want in (("ring", ring, ring_cf), ("zigzag", zigzag, zigzag_cf)):
            c.checks += 1
            got = float(row[7])
            ok = got >= want * (1 - 0.005)
            print("%s %s: %s compute %.4g ms at least its kernels' closed form %.4g ms "
                  "(SMs shared with cross-node shifts only slow it)" % (
                      "ok  " if ok else "FAIL", where, name, got, want))
            c.failures += not ok
        # Each step shifts the k and v blocks it holds (kv heads x block x d in bf16, each)
        # one after the other on the communication stream, which starts with step 0's
        # compute and runs ahead of it (a shift needs only the block the previous one
        # brought). Where one step's pair of shifts takes no longer than the shortest step
        # of compute, every block arrives before its step: nothing is exposed. Where it
        # takes longer than step 0 (the diagonal, before any shift is issued, so never
        # slowed), step 1 waits at least the difference.
        block = sequence // devices
        shifts = 2 * network_shift(kv_heads * block * HEAD_DIM * 2.0)
        for name, row, (first, step, _) in (("ring", ring, ring_steps), ("zigzag", zigzag, zigzag_steps)):
            exposed = float(row[8])
            c.checks += 1
            if shifts <= min(first, step):
                ok = exposed == 0
                print("%s %s: %s exposes nothing (%s ms): a step's shifts %.4g ms within its shortest step "
                      "of compute %.4g ms" % ("ok  " if ok else "FAIL", where, name, row[8], shifts * 1e3,
                                               min(first, step) * 1e3))
            elif shifts > first:
                ok = exposed >= (shifts - first) * 1e3 * (1 - 0.005)
                print("%s %s: %s exposes %.4g ms, at least a step's shifts %.4g ms less step 0's compute %.4g ms" % (
                    "ok  " if ok else "FAIL", where, name, exposed, shifts * 1e3, first * 1e3))
            else:
                ok = True
                print("ok   %s: %s exposes %.4g ms (shifts %.4g ms between its steps %.4g and %.4g ms: "
                      "no closed form)" % (where, name, exposed, shifts * 1e3, first * 1e3, step * 1e3))
            c.failures += not ok
        if shifts <= min(ring_steps[0], ring_steps[1], zigzag_steps[0], zigzag_steps[1]):
            # Both rings hide their shifts (grouped-query attention: 8x smaller k/v blocks):
            # zigzag's speedup is its kernels' balance, the closed forms' ratio. This holds
            # within 0.5% because in the sim's timeline the shifts run ahead of the compute
            # (their stream needs no buffer back: the IR bounds none), so only the first
            # steps' kernels are priced beside a send/recv and its 32 SMs.
            c.near("%s: zigzag's speedup over the ring (after) vs the closed forms' ratio (shifts hidden)" % where,
                   speedup, ring_cf / zigzag_cf, 0.005)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    directory = sys.argv[1]
    c = Checker()
    check_calibration(read_table(os.path.join(directory, "sim_calibration.md")), c)
    check_overlap(read_table(os.path.join(directory, "sim_overlap_table.md")), c)
    check_schedule_table(read_table(os.path.join(directory, "sim_schedule_table.md")), c)
    check_search_table(read_table(os.path.join(directory, "search_table.md")), c)
    check_plan_mfu(read_table(os.path.join(directory, "plan_mfu_table.md"), first_only=True), c)
    check_ring_attention(read_table(os.path.join(directory, "ring_attention_table.md")), c)
    print("%d checks, %d failed" % (c.checks, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
