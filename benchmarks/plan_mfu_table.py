#!/usr/bin/env python3
"""Prints the plan search's predicted MFU for published Megatron-LM runs beside the
published figures, with the error of each row and the plan the search prefers.

GPT rows (A100) first, then Llama rows (LLAMA_ROWS below: on H100s Llama 3.1 405B from
Meta, 8B and 70B from NVIDIA's NeMo recipes; on A100s Llama 3 70B with FSDP from
torchtitan; the same command with the row's model text, hardware, plan and layer schedule).

Each row is one published configuration: a GPT model (vocabulary 51,200, sequence 2,048),
a GPU count, its tensor/pipeline/data parallel sizes, global batch, recomputation and
sequence parallelism. For each the script runs

    commir-search --plan MODEL --gpus=N --hardware=a100-sxm-80g --top=1 --quiet \\
                  --layer-schedule=none --plan-eval=tp=..,pp=..,dp=..,mb=1,zero=0,recompute=..

and reads its last line: the given plan's predicted MFU, and the search's best plan on
the same cluster with its predicted gain (given plan's time / best plan's time).

MFU here is model FLOPs (forward and backward, 3 passes, no recomputation) per second
over the GPUs' bf16 peak (A100: 312 TFLOP/s; H100 SXM: 989 TFLOP/s). Narayanan et al. count the recomputed
forward too (4 passes), so their figures are scaled by 3/4 to compare; Korthikanti et al.
and NVIDIA's recipes report MFU directly (NVIDIA's with our model FLOPs formula: the script
checks each such MFU against its published step time through commir-search's FLOPs);
a published tokens/s per GPU is converted with that formula (checked against the tool's).
All predictions are the sim's (sim/), not measurements.

Usage:
    benchmarks/plan_mfu_table.py --commir-search bazel-bin/commir-search [--rows ID ...]
    benchmarks/plan_mfu_table.py ... --check benchmarks/plan_mfu_table.md
        regenerates the selected rows and fails unless each is in the file as printed

Exit status: 0 on success, 1 if the tool fails, its output cannot be read, a row's
published step time and MFU disagree, or --check finds a difference.
"""
import argparse
import collections
import re
import subprocess
import sys

A100_PEAK_TFLOPS = 312.0
H100_PEAK_TFLOPS = 989.0  # sim/hardware.cc's h100-sxm bf16 peak (dense)

# (id, source, params label, heads, hidden, layers, tp, pp, gpus, global batch,
#  recompute, sequence parallel, published TFLOP/s per GPU or None, published MFU %)
# sc21: Narayanan et al., SC'21, Table 1 (full recomputation, no sequence parallelism;
#       published MFU = their % of peak x 3/4, their FLOPs counting the recomputation).
# mlsys23: Korthikanti et al., MLSys'23, selective recomputation + sequence parallelism.
# Both ran before FlashAttention: Megatron-LM's attention materialised the s x s scores
# (a batched GEMM, its fused scale-mask-softmax kernel, dropout, a batched GEMM; the
# s^2 terms of Korthikanti et al.'s activation formula, and what their selective
# recomputation re-runs), so these rows' models are costed with attention=unfused
# (search/plan/layer_program.h), not the FlashAttention default.
ROWS = [
    ("sc21-1.7b", "sc21", "1.7B", 24, 2304, 24, 1, 1, 32, 512, "full", False, 137, None),
    ("sc21-3.6b", "sc21", "3.6B", 32, 3072, 30, 2, 1, 64, 512, "full", False, 138, None),
    ("sc21-7.5b", "sc21", "7.5B", 32, 4096, 36, 4, 1, 128, 512, "full", False, 142, None),
    ("sc21-18.4b", "sc21", "18.4B", 48, 6144, 40, 8, 1, 256, 1024, "full", False, 135, None),
    ("sc21-39.1b", "sc21", "39.1B", 64, 8192, 48, 8, 2, 512, 1536, "full", False, 138, None),
    ("sc21-76.1b", "sc21", "76.1B", 80, 10240, 60, 8, 4, 1024, 1792, "full", False, 140, None),
    ("sc21-145.6b", "sc21", "145.6B", 96, 12288, 80, 8, 8, 1536, 2304, "full", False, 148, None),
    ("sc21-310.1b", "sc21", "310.1B", 128, 16384, 96, 8, 16, 1920, 2160, "full", False, 155, None),
    ("sc21-529.6b", "sc21", "529.6B", 128, 20480, 105, 8, 35, 2520, 2520, "full", False, 163, None),
    ("sc21-1008b", "sc21", "1008B", 160, 25600, 128, 8, 64, 3072, 3072, "full", False, 163, None),
    ("mlsys23-22b", "mlsys23", "22B", 64, 6144, 48, 8, 1, 8, 4, "selective", True, None, 41.5),
    ("mlsys23-175b", "mlsys23", "175B", 96, 12288, 96, 8, 8, 64, 64, "selective", True, None, 51.4),
    ("mlsys23-530b", "mlsys23", "530B", 128, 20480, 105, 8, 35, 280, 280, "selective", True, None, 56.0),
    ("mlsys23-1t", "mlsys23", "1T", 160, 25600, 128, 8, 64, 512, 512, "selective", True, None, 56.3),
]

# Llama rows. Each is a LlamaRow: the model as commir-search's --plan text, the GPUs, the
# hardware description, the plan as --plan-eval text, the layer schedule it is costed with
# (--layer-schedule), and one published figure: TFLOP/s per GPU, MFU (%, with the step time
# in s when published), or tokens/s per GPU.
LlamaRow = collections.namedtuple(
    "LlamaRow", "id source label model gpus hardware plan schedule tflops mfu step_s tokens_s",
    defaults=(None, None, None, None))

# balaji-sc24: Llama 3.1 405B pre-training (Meta's 8K-context stage), as read in
# https://glennklockwood.com/garden/llama-3.1 ("Hyperparameters": Pavan Balaji's SC'24
# slide of the Llama 3 run: GPUs, TP, CP, PP, tokens/batch 16M, TFLOPS/GPU) with the 8K
# sequence of that stage from https://ai-papers.xuzou.cn/papers/llama3_2024 ("initial 8K
# context stage"): 16M tokens / 8,192 = 2,048 sequences. DP follows as GPUs / (TP x CP x
# PP). The schedule is Meta's (The Llama 3 Herd of Models, arXiv:2407.21783, section
# 3.3.2, "Pipeline parallelism improvements"): interleaved 1F1B with V chunks per rank
# (bubble ratio (PP-1)/(V*M)), one layer fewer on the first and the last stage so that the
# first model chunk holds only the embedding and the last only the output and loss, and
# no activation checkpointing at 8K. V is not given as a number: a chunk left with none
# after losing one layer held one, so 126 layers as 7 + 14 x 8 + 7 over the 16 ranks
# (first=7 last=7) in 8 chunks each, v = 8; it is also the only interleaving Megatron-LM's
# equal virtual stages allow beside ends of 7 and a middle of 8 (one layer a stage). The
# data parallelism is Meta's FSDP as section 3.3.2 describes it (zero=2): "Our use of FSDP
# for Llama 3 shards optimizer states and gradients, but for model shards we do not
# reshard after forward computation to avoid an extra all-gather communication during
# backward passes", with "FP32 gradient accumulation during backward computation over
# multiple micro-batches" and gradients reduce-scattered "in FP32 across data parallel
# workers in FSDP": the parameters are gathered once a micro-batch and its gradients
# reduce-scattered into the sharded fp32 accumulator (search/plan/pipeline_model.h). Our
# reading, said in the table's notes, as is our choice where the sources say nothing:
# micro-batch 1.
#
# dgxc-25.02: NVIDIA's DGX Cloud benchmarking recipes (NeMo 24.12, Megatron-Core), github
# NVIDIA/dgxc-benchmarking at 8f5cbb3799ea8cc031ed2c2cee1cbdbc15b240ad (release v25.02),
# llama3.1/README_8b.md and README_70b.md, the "BF16" tables (step time and MFU per GPU
# count; MFU over 989 TFLOP/s with the model FLOPs formula of their "Notes", which is
# ours: sim's ModelFlopsPerIteration) and llama3.1/llama3.1_{8b,70b}.yaml (what ran:
# micro-batch 1, no activation checkpointing, distributed_fused_adam, 8B sequence
# parallelism off (tp=1), 70B on, 70B ub_tp_comm_overlap: true) and configure.sh (the
# global batch scales with the GPUs: 128 per 8 GPUs for 8B, per 64 for 70B).
#
# torchtitan-2404: pytorch/torchtitan at 1ea476e9f24be439eda358aa864f45c1c37a8a88,
# docs/performance.md, "Llama 3 performance numbers": 70B with FSDP (our zero=3) on 64
# A100s of 80 GB, local batch 1 (global 64), full activation checkpointing, 331 tokens/s
# per GPU (train.py: tokens over time and model-parallel size). The sequence is the
# config's (train_configs/llama3_70b.toml: seq_len = 8192; its 51.7% MFU by torchtitan's
# own FLOPs count, 6 x parameters + 12 l h q t per token, is 331 tokens/s at 8,192).
LLAMA_ROWS = [
    LlamaRow("meta-405b-8k-8192", "balaji-sc24", "Llama 3.1 405B",
             "llama3-405b,seq=8192,global_batch=2048", 8192, "h100-sxm",
             "tp=8,cp=1,pp=16,v=8,dp=64,sp,mb=1,zero=2,recompute=none,first=7,last=7", "none",
             tflops=430),
    LlamaRow("meta-405b-8k-16384", "balaji-sc24", "Llama 3.1 405B",
             "llama3-405b,seq=8192,global_batch=2048", 16384, "h100-sxm",
             "tp=8,cp=1,pp=16,v=8,dp=128,sp,mb=1,zero=2,recompute=none,first=7,last=7", "none",
             tflops=400),
    # The published runs overlapped their communication (Megatron-Core's context
    # parallelism exchanges K/V in a ring under the attention; 70B also ran TP overlap), so
    # their layers are costed with the schedule search rather than plain collectives.
    LlamaRow("nemo-8b-8", "dgxc-25.02", "Llama 3.1 8B", "llama3-8b,seq=8192,global_batch=128",
             8, "h100-sxm", "tp=1,cp=2,pp=1,dp=4,mb=1,zero=1,recompute=none", "search",
             mfu=59.99, step_s=12.78),
    LlamaRow("nemo-8b-128", "dgxc-25.02", "Llama 3.1 8B", "llama3-8b,seq=8192,global_batch=2048",
             128, "h100-sxm", "tp=1,cp=2,pp=1,dp=64,mb=1,zero=1,recompute=none", "search",
             mfu=58.28, step_s=13.16),
    LlamaRow("nemo-70b-64", "dgxc-25.02", "Llama 3.1 70B", "llama3-70b,seq=8192,global_batch=128",
             64, "h100-sxm", "tp=4,cp=2,pp=4,v=5,dp=2,sp,mb=1,zero=1,recompute=none", "search",
             mfu=54.52, step_s=14.61),
    LlamaRow("nemo-70b-1024", "dgxc-25.02", "Llama 3.1 70B",
             "llama3-70b,seq=8192,global_batch=2048", 1024, "h100-sxm",
             "tp=4,cp=2,pp=4,v=5,dp=32,sp,mb=1,zero=1,recompute=none", "search",
             mfu=53.63, step_s=14.86),
    # FSDP over 64 GPUs with plain collectives (no tensor or context parallelism to
    # overlap); the model spelled out, so the script can count its FLOPs per token.
    LlamaRow("titan-70b-64", "torchtitan-2404", "Llama 3 70B",
             "name=llama3-70b,arch=llama,layers=80,hidden=8192,heads=64,kv_heads=8,ffn=28672,"
             "seq=8192,vocab=128256,global_batch=64", 64, "a100-sxm-80g",
             "tp=1,cp=1,pp=1,dp=64,mb=1,zero=3,recompute=full", "none", tokens_s=331),
]

PEAK_TFLOPS = {"a100-sxm-80g": A100_PEAK_TFLOPS, "h100-sxm": H100_PEAK_TFLOPS}

# A published MFU and step time must agree through our model FLOPs (the given plan's
# predicted MFU x predicted time = model FLOPs over peak). The tool prints MFU to 0.1%
# and the sources round step times to 0.01 s, so they may differ by about a tenth of a
# point; a mistyped figure or a different FLOPs count differs by more than this.
STEP_TIME_MFU_TOLERANCE = 0.3
# The script's FLOPs count (flops_per_token) against commir-search's, relative: the tool's
# MFU to 0.1% is good to about 0.2% of itself.
FLOPS_RELATIVE_TOLERANCE = 0.005

GIVEN = re.compile(
    r"^given plan: (?P<plan>.*?), (?P<ms>[0-9.]+) ms \(compute [0-9.]+, recompute [0-9.]+, "
    r"exposed comm [0-9.]+, bubble [0-9.]+\), MFU (?P<mfu>[0-9.]+)%, "
    r"peak (?P<gb>[0-9.]+) GB, (?P<fits>fits|does not fit), layer schedule (?P<schedule>[^;]+)"
    r"(?:; best plan: (?P<best>.*), MFU (?P<best_mfu>[0-9.]+)% \((?P<gain>[0-9.]+)x\))?$")

HEADER = ("| row | model | GPUs | published setting | published TFLOP/s/GPU | published MFU "
          "| predicted MFU | error (points) | search's plan | its MFU | predicted gain |")
RULE = "|---|---|---|---|---|---|---|---|---|---|---|"


class ToolError(Exception):
    pass


def model_text(row):
    rid, _, label, heads, hidden, layers, _, _, _, batch = row[:10]
    return (f"name=gpt-{label.lower()},arch=gpt,layers={layers},hidden={hidden},heads={heads},"
            f"kv_heads={heads},ffn={4 * hidden},seq=2048,vocab=51200,global_batch={batch},"
            "attention=unfused")


def plan_text(row):
    tp, pp, gpus, recompute, sp = row[6], row[7], row[8], row[10], row[11]
    dp = gpus // (tp * pp)
    return f"tp={tp},pp={pp},dp={dp},mb=1,zero=0,recompute={recompute}" + (",sp" if sp else "")


def published_mfu(row):
    tflops, mfu = row[12], row[13]
    if mfu is not None:
        return mfu
    return tflops * 0.75 / A100_PEAK_TFLOPS * 100


def run_row(search, row):
    # The 2021-22 runs used Megatron-LM's plain collectives (no tensor-parallel
    # communication overlap), so the given plans and the search's alternatives are costed
    # with plain collectives too.
    return run_eval(search, row[0], model_text(row), row[8], "a100-sxm-80g", plan_text(row),
                    "none")


def run_eval(search, rid, model, gpus, hardware, plan, layer_schedule):
    cmd = [search, "--plan", model, f"--gpus={gpus}", f"--hardware={hardware}",
           "--top=1", "--quiet", f"--plan-eval={plan}", f"--layer-schedule={layer_schedule}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except OSError as e:
        raise ToolError(f"cannot run {search}: {e}")
    if done.returncode != 0:
        raise ToolError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[:400]}")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    m = GIVEN.match(last)
    if not m:
        raise ToolError(f"{rid}: no 'given plan' line in commir-search's output: {last[:200]!r}")
    return m


def format_row(row, m):
    rid, source, label = row[0], row[1], row[2]
    tp, pp, gpus = row[6], row[7], row[8]
    setting = (f"tp={tp} pp={pp} dp={gpus // (tp * pp)} batch={row[9]} "
               f"recompute={row[10]}" + (" sp" if row[11] else "") + " attention=unfused")
    pub = published_mfu(row)
    pub_tflops = f"{row[12]}" if row[12] is not None else "-"
    return table_row(rid, f"GPT {label}", gpus, setting, pub_tflops, pub, m)


def model_fields(model):
    """The key=value fields of a --plan model text (after its preset name, if any)."""
    return dict(kv.split("=", 1) for kv in model.split(",") if "=" in kv)


def flops_per_token(fields):
    """Model FLOPs per token, forward and backward, of a spelled-out Llama model: NVIDIA's
    formula (dgxc-benchmarking llama3.1/README_8b.md, "Notes"), the same count as
    sim's ModelFlopsPerIteration (llama_published_mfu checks the two agree)."""
    layers, h, heads, kv = (int(fields[k]) for k in ("layers", "hidden", "heads", "kv_heads"))
    ffn, seq, vocab = int(fields["ffn"]), int(fields["seq"]), int(fields["vocab"])
    attention = 12 * layers * h * h * (1 + kv / heads + seq / h)
    return attention + 18 * layers * ffn * h + 6 * vocab * h


def llama_published_mfu(row, m):
    """The row's published MFU (%) in our FLOPs over the row's hardware's bf16 peak: given,
    or from its TFLOP/s per GPU, or from its tokens/s per GPU. A published step time must
    agree with the MFU, and our FLOPs count with commir-search's, within the tolerance."""
    peak = PEAK_TFLOPS[row.hardware] * 1e12
    if row.tflops is not None:
        return row.tflops / PEAK_TFLOPS[row.hardware] * 100
    # The tool's model FLOPs over peak, per GPU: its MFU x its time.
    tool_flops_s = float(m["mfu"]) / 100 * float(m["ms"]) / 1e3
    if row.tokens_s is not None:
        fields = model_fields(row.model)
        mfu = row.tokens_s * flops_per_token(fields) / peak * 100
        ours_s = (flops_per_token(fields) * int(fields["seq"]) * int(fields["global_batch"])
                  / row.gpus / peak)
        if abs(ours_s - tool_flops_s) / ours_s > FLOPS_RELATIVE_TOLERANCE:
            raise ToolError(f"{row.id}: the script's model FLOPs ({ours_s:.3f} s at peak per "
                            f"GPU) are not commir-search's ({tool_flops_s:.3f} s)")
        return mfu
    if row.step_s is not None:
        implied = tool_flops_s / row.step_s * 100
        if abs(implied - row.mfu) > STEP_TIME_MFU_TOLERANCE:
            raise ToolError(f"{row.id}: the published step time {row.step_s} s gives MFU "
                            f"{implied:.2f}% by commir-search's model FLOPs, not the published "
                            f"{row.mfu}%: the row's figures or the model FLOPs are wrong")
    return row.mfu


def format_llama_row(row, m):
    fields = model_fields(row.model)
    setting = (f"{row.plan.replace(',', ' ')} batch={fields['global_batch']} "
               f"seq={fields['seq']}")
    if row.step_s is not None:
        setting += f" ({row.step_s} s/step)"
    if row.tokens_s is not None:
        setting += f" ({row.tokens_s} tokens/s/GPU)"
    if row.hardware != "h100-sxm":
        setting += f" on {row.hardware}"
    if row.schedule != "none":
        setting += f"; layers costed with --layer-schedule={row.schedule}"
    pub = llama_published_mfu(row, m)
    pub_tflops = f"{row.tflops}" if row.tflops is not None else "-"
    return table_row(row.id, row.label, row.gpus, setting, pub_tflops, pub, m)


def table_row(rid, label, gpus, setting, pub_tflops, pub, m):
    """One table line: the published figures beside commir-search's parsed last line `m`."""
    predicted = float(m["mfu"])
    note = "" if m["fits"] == "fits" else " (does not fit by our memory model)"
    best = m["best"] or "none fits"
    best_mfu = f"{float(m['best_mfu']):.1f}%" if m["best_mfu"] else "-"
    gain = f"{float(m['gain']):.2f}x" if m["gain"] else "-"
    return (f"| {rid} | {label} | {gpus} | {setting} | {pub_tflops} | {pub:.1f}% | "
            f"{predicted:.1f}%{note} | {predicted - pub:+.1f} | {best} | {best_mfu} | {gain} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commir-search", required=True)
    ap.add_argument("--rows", nargs="+", help="row ids (default: all)")
    ap.add_argument("--check", help="fail unless each generated row is in this file")
    args = ap.parse_args()
    rows, llama_rows = ROWS, LLAMA_ROWS
    if args.rows:
        known = {r[0] for r in ROWS + LLAMA_ROWS}
        unknown = [r for r in args.rows if r not in known]
        if unknown:
            print(f"plan_mfu_table.py: unknown rows {unknown}; known: {sorted(known)}", file=sys.stderr)
            return 1
        rows = [r for r in ROWS if r[0] in args.rows]
        llama_rows = [r for r in LLAMA_ROWS if r[0] in args.rows]
    lines = []
    try:
        for row in rows:
            lines.append(format_row(row, run_row(args.commir_search, row)))
        for row in llama_rows:
            m = run_eval(args.commir_search, row.id, row.model, row.gpus, row.hardware,
                         row.plan, row.schedule)
            lines.append(format_llama_row(row, m))
    except ToolError as e:
        print(f"plan_mfu_table.py: error: {e}", file=sys.stderr)
        return 1
    if args.check:
        with open(args.check) as f:
            checked_in = set(f.read().splitlines())
        missing = [l for l in lines if l not in checked_in]
        for l in missing:
            print(f"not in {args.check}: {l}", file=sys.stderr)
        return 1 if missing else 0
    print(HEADER)
    print(RULE)
    for l in lines:
        print(l)
    return 0


if __name__ == "__main__":
    sys.exit(main())
