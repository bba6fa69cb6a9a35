#!/usr/bin/env python3
"""Prints the predicted time of a DeepSeek-V3-shaped MoE layer on 8, 64 and 256 H100s,
plain and with moe-pipeline's overlapped dispatch/combine, beside DeepEP's figures.

The layer (the MoE block alone: the attention before it does not change what the
experts and their exchanges cost, and is left out): 4096 tokens per GPU of hidden 7168
(DeepEP's benchmark batch), a sigmoid router over 256 routed experts, top-8, SwiGLU
experts of width 2048, bf16; expert parallelism over every GPU (ep = GPUs, 8 per node),
the tokens routed in one group per GPU (docs/language.md, "Expert parallelism"). The
shared expert is left out (it is a dense FFN, no exchange). Each program is

    commir-opt LAYER --pass-pipeline='propagate-sharding,lower-to-spmd,canonicalize,cse,dce[,moe-pipeline{chunks=N}]'
    commir-run LOWERED --backend=sim --format=json        (h100-sxm, 8 GPUs per node)

Load imbalance is the capacity factor F: the busiest expert's tokens over the mean
(F = its share of the tokens x 256 / 8). The programs have static shapes, so every GPU's
buffer holds C = ceil(4096 x 8 x F / 256) = 128 F slots per expert: every GPU computes
and exchanges what the busiest does, as a dropless layer's GPUs wait for the busiest at
each all_to_all. F = 1 is a perfectly balanced router.

Columns of the first table (the slowest device, as commir-run prints it):
    schedule       plain, or moe-pipeline with N chunks (best: the fastest N of 2, 4, 8)
    time           predicted time of the layer's forward
    compute        time the device's compute stream is busy (router, dispatch copy, GEMMs)
    communication  time its all_to_alls take
    exposed        communication not hidden under compute
    speedup        plain's time over this schedule's

The second table: the plain program's dispatch all_to_all, its bytes per GPU (the whole
buffer [256, C, 7168] bf16: NCCL moves every slot, empty or not), which link bounds it
(NVLink inside a node; across nodes the NIC, with 7 of the n-1 peers on the node), and
the bandwidth in DeepEP's terms (bytes over the bounding link per second: 7/8 of the
buffer over NVLink, (n-8)/n of it over RDMA) beside DeepEP's dispatch/combine figures
(H800 with CX7 400G; calibration.md). DeepEP's NVLink figure is on H800, whose NVLink is
less than half of H100's: the fraction of each GPU's NVLink is compared there.

Usage:
    benchmarks/moe_sim_table.py                  # builds //:commir-opt and //:commir-run
    benchmarks/moe_sim_table.py --commir-run bazel-bin/commir-run --commir-opt bazel-bin/commir-opt

Exit status: 0 on success, 1 if a tool fails.
"""

import argparse
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schedule_table import LOWER, build_missing_tools, run  # noqa: E402

TOKENS_PER_GPU = 4096
EXPERTS = 256
TOP_K = 8
HIDDEN = 7168
FFN = 2048
GPUS_PER_NODE = 8
GPU_COUNTS = (8, 64, 256)
IMBALANCE = (1.0, 1.5)
CHUNKS = (2, 4, 8)
BF16 = 2

# DeepEP normal kernels (deepseek-ai/DeepEP docs/legacy.md; calibration.md): dispatch and
# combine GB/s by EP size, H800 + CX7 400G. H800's NVLink: about 400 GB/s both ways, 200
# each way; the NIC 50 GB/s.
DEEPEP = {8: (153, 158, "NVLink"), 16: (43, 43, "RDMA"), 32: (58, 57, "RDMA"),
          64: (51, 50, "RDMA")}
H800_NVLINK_ONE_WAY = 200
H100_NVLINK_ONE_WAY = 450


def capacity(f):
    return math.ceil(TOKENS_PER_GPU * TOP_K * f / EXPERTS)


def layer(gpus, f):
    tokens = TOKENS_PER_GPU * gpus
    c = capacity(f)
    return f"""mesh @m(ep={gpus})

func @moe(%x: bf16[{tokens}@ep, {HIDDEN}], %wr: bf16[{HIDDEN}, {EXPERTS}], %w1: bf16[{EXPERTS}@ep, {HIDDEN}, {FFN}], %w3: bf16[{EXPERTS}@ep, {HIDDEN}, {FFN}], %w2: bf16[{EXPERTS}@ep, {FFN}, {HIDDEN}]) -> bf16[{tokens}@ep, {HIDDEN}] {{
  %logits = matmul(%x, %wr)
  %probs = sigmoid(%logits)
  %top, %experts = top_k(%probs) {{k = {TOP_K}}}
  %buf = moe_dispatch(%x, %experts) {{experts = {EXPERTS}, capacity_factor = {f}, groups = {gpus}}} : bf16[{EXPERTS}@ep, {gpus * c}, {HIDDEN}]
  %a = matmul(%buf, %w1)
  %b = matmul(%buf, %w3)
  %act = silu(%a)
  %h = mul(%act, %b)
  %out = matmul(%h, %w2)
  %back = moe_collect(%out, %experts) {{groups = {gpus}}}
  %g = reshape(%top) : bf16[{tokens}, {TOP_K}, 1]
  %weighted = mul(%back, %g)
  %moe = reduce_sum(%weighted) {{dims = [1]}}
  %y = add(%x, %moe)
  return %y
}}
"""


def predict(tools, tmp, gpus, f, chunks):
    src = os.path.join(tmp, f"moe_{gpus}_{f}.commir")
    with open(src, "w") as out:
        out.write(layer(gpus, f))
    pipeline = LOWER if chunks is None else f"{LOWER},moe-pipeline{{chunks={chunks}}}"
    lowered = os.path.join(tmp, f"moe_{gpus}_{f}_{chunks}.commir")
    run([tools.commir_opt, src, f"--pass-pipeline={pipeline}", "-o", lowered])
    trace = os.path.join(tmp, "trace.json")
    text = run([tools.commir_run, lowered, "--backend=sim", "--format=json", f"--trace={trace}"])
    prediction = json.loads(text)
    with open(trace) as t:
        events = json.load(t)
    events = events["traceEvents"] if isinstance(events, dict) else events
    exchanges = sorted((e for e in events if e.get("ph") == "X" and e.get("pid") == 0
                        and e.get("name") == "all_to_all"), key=lambda e: e["ts"])
    device = max(prediction["devices"], key=lambda d: d["time_s"])
    return {"time": prediction["time_s"], "compute": device["compute_s"],
            "communication": device["communication_s"],
            "exposed": device["exposed_communication_s"],
            "exchanges_us": [e["dur"] for e in exchanges]}


def ms(seconds):
    return f"{seconds * 1e3:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commir-run")
    parser.add_argument("--commir-opt")
    args = parser.parse_args()
    try:
        build_missing_tools(args, ["commir-run", "commir-opt"])
        tools = args
        with tempfile.TemporaryDirectory() as tmp:
            results = {}
            for gpus in GPU_COUNTS:
                for f in IMBALANCE:
                    results[(gpus, f, None)] = predict(tools, tmp, gpus, f, None)
                    for n in CHUNKS:
                        results[(gpus, f, n)] = predict(tools, tmp, gpus, f, n)
    except (RuntimeError, json.JSONDecodeError, OSError, IndexError) as error:
        print(f"moe_sim_table.py: {error}", file=sys.stderr)
        return 1

    print("# A DeepSeek-V3-shaped MoE layer on H100s: plain and overlapped dispatch/combine\n")
    print("Generated by `/usr/bin/python3 benchmarks/moe_sim_table.py --commir-run "
          "bazel-bin/commir-run --commir-opt bazel-bin/commir-opt > "
          "benchmarks/moe_sim_table.md`; `//benchmarks:moe_sim_table_test` fails when this "
          "file and the script's output differ. The script's docstring says how each "
          "figure is made.\n")
    print(f"The MoE block alone (no attention: it does not change what the experts and "
          f"their exchanges cost): {TOKENS_PER_GPU} tokens per GPU of hidden {HIDDEN}, "
          f"{EXPERTS} routed experts, top-{TOP_K}, SwiGLU experts of width {FFN}, bf16, "
          f"ep = GPUs ({GPUS_PER_NODE} per node), capacity {capacity(1.0)} F slots per "
          f"expert and GPU (F: the busiest expert's tokens over the mean; F = 1.5 is the "
          f"busiest expert taking {1.5 * TOP_K / EXPERTS:.1%} of the tokens, against "
          f"{TOP_K / EXPERTS:.1%} when balanced). Forward only.\n")
    print("| GPUs | nodes | F | schedule | time ms | compute ms | communication ms | "
          "exposed ms | speedup |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for gpus in GPU_COUNTS:
        for f in IMBALANCE:
            plain = results[(gpus, f, None)]
            best = min(CHUNKS, key=lambda n: results[(gpus, f, n)]["time"])
            for n in (None,) + CHUNKS:
                r = results[(gpus, f, n)]
                name = "plain" if n is None else f"moe-pipeline{{chunks={n}}}"
                if n == best:
                    name += " (best)"
                print(f"| {gpus} | {gpus // GPUS_PER_NODE} | {f:g} | {name} | {ms(r['time'])} | "
                      f"{ms(r['compute'])} | {ms(r['communication'])} | {ms(r['exposed'])} | "
                      f"{plain['time'] / r['time']:.2f} |")
    print()
    print("## The exchanges beside DeepEP\n")
    print("The plain program's dispatch and combine all_to_alls (F = 1). Bandwidth in "
          "DeepEP's terms: the bytes over the bounding link per second (NVLink: 7/8 of "
          "the buffer; RDMA: (n-8)/n of it). DeepEP's NVLink figures are on H800 "
          f"({H800_NVLINK_ONE_WAY} GB/s each way): there the fraction of the link is "
          f"compared (H100: {H100_NVLINK_ONE_WAY} GB/s).\n")
    print("| GPUs | crosses nodes | peers off the node | buffer per GPU MiB | dispatch ms | "
          "combine ms | model GB/s (dispatch/combine) | DeepEP GB/s (dispatch/combine) | "
          "model / DeepEP |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for gpus in GPU_COUNTS:
        r = results[(gpus, 1.0, None)]
        buffer = EXPERTS * capacity(1.0) * HIDDEN * BF16
        across = gpus > GPUS_PER_NODE
        share = (gpus - GPUS_PER_NODE) / gpus if across else (gpus - 1) / gpus
        dispatch_us, combine_us = r["exchanges_us"][0], r["exchanges_us"][1]
        model = [buffer * share / (t * 1e-6) / 1e9 for t in (dispatch_us, combine_us)]
        if gpus in DEEPEP:
            d, c, link = DEEPEP[gpus]
            if link == "NVLink":
                ratio = (f"{model[0] / H100_NVLINK_ONE_WAY:.2f} of H100's NVLink vs "
                         f"{d / H800_NVLINK_ONE_WAY:.2f} of H800's")
            else:
                ratio = f"{model[0] / d:.2f}"
            published = f"{d} / {c} ({link})"
        else:
            published, ratio = "none published", "n/a"
        print(f"| {gpus} | {'yes' if across else 'no'} | "
              f"{gpus - GPUS_PER_NODE if across else 0} of {gpus - 1} | {buffer / 2**20:.0f} | "
              f"{dispatch_us / 1e3:.2f} | {combine_us / 1e3:.2f} | "
              f"{model[0]:.1f} / {model[1]:.1f} | {published} | {ratio} |")
    print()
    print("""## Reading it, and where the model is weakest

- Inside a node (8 GPUs) the exchanges take about half the GEMMs' time, and
  moe-pipeline hides most of them: the best chunking hides the dispatch of chunk i+1
  under chunk i's GEMMs and chunk i's combine under chunk i+1's. More chunks are not
  better: below about 256 rows per expert the expert GEMMs read the weights (32 experts
  x 7168 x 2048 x 3 matrices) at HBM speed whatever the rows, so each chunk pays that
  read again (sim/moe_time_test.cc).
- Across nodes (64, 256 GPUs) both exchanges send 7/8 or more of the buffer through the
  GPU's NIC and take several times the GEMMs: the layer is bound by the network, and
  overlap can hide at most the GEMMs' time. Each chunk's all_to_all also pays NCCL's
  per-peer set-up (63 and 255 peers), so at 256 GPUs more than 2 chunks lose.
- Weakest: (1) the exchanged bytes. NCCL's all_to_all of a capacity buffer moves every
  slot, empty or not, in bf16; DeepEP sends each token once per destination node (FP8
  dispatch) and forwards it over NVLink, so its RDMA bytes are several times fewer
  (top-8 over 256 experts reaches at most 8 nodes) and its bandwidth figures are higher
  than the model's NCCL rate. The model's per-GPU rate across nodes is one fitted figure
  (all_to_all_network_efficiency, 48 GB/s bus bandwidth at 32 GPUs); at 256 GPUs no
  measurement checks it, and the per-peer latency (5 us per peer, one after another) is
  an estimate. (2) Imbalance is a capacity factor, so every GPU is padded to the
  busiest expert's load: a dropless grouped GEMM would run the busiest GPU's rows only.
  (3) The dispatch copy, the zero-filled combine buffer and the chunk slices are priced
  as the sim prices them (the slices and the receive as in place: sim/moe_exchange_views.h);
  the cpu and cuda backends copy them.""")
    return 0


if __name__ == "__main__":
    sys.exit(main())
