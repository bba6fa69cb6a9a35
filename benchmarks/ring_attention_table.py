#!/usr/bin/env python3
"""Prints the predicted time of causal attention under the sequence-parallel schedules.

Causal attention, Llama-like (batch 1, head dim 128, bf16), its sequence split over 8 GPUs
(one node) and 64 GPUs (8 nodes), at two lengths each: 4k and 16k queries per GPU, with
multi-head attention (k and v with as many heads as q: 32 on 8 GPUs, 64 on 64) and with
grouped-query attention (8 kv heads, as Llama 3 70B and 405B: q and the output keep the
query heads, k and v have 8). Each program goes through

    commir-opt PROGRAM --pass-pipeline='propagate-sharding,lower-to-spmd,canonicalize,cse,dce,SCHEDULE'
    commir-run SCHEDULED --backend=sim --format=json          (h100-sxm, 8 GPUs per node)

with SCHEDULE one of: none (the plain lowering: all_gather k and v), `ring-attention`
(plain ring), `ring-attention{zigzag=true}` on the contiguous sequence (its all_to_alls
permute q, k, v and the output) and on a sequence the data loader provides in zigzag
order (`S@sp zigzag`: no permutation), and `ulysses-attention` (with fewer kv heads than
devices it repeats each kv head before its all_to_alls; a row whose schedule pass leaves
the attention as lowered says "n/a" and the pass's reason instead of times).

Columns:
    heads          query heads (q and the output)
    kv heads       k and v heads (as many as the query heads: multi-head attention)
    before         the time the sim predicted at commit 60f62c3, before it priced causal
                   blocks by their positions (every causal block at the average: half
                   the pairs); recorded below (BEFORE), not recomputed; multi-head rows
                   only ("-" for grouped-query attention)
    after          the time the sim predicts now
    compute        the slowest device's busy compute time (now)
    exposed        its communication not hidden under compute (now)
    vs ring        the plain ring's time over this row's (now; > 1: faster)
    work ratio     for the zigzag rows: the plain ring's critical-path attention work
                   (the last device: n - 1 full blocks and its diagonal) over zigzag's
                   (every device: n/2 blocks' worth), in exact (query, key) pairs

Usage:
    benchmarks/ring_attention_table.py                  # builds //:commir-opt and //:commir-run
    benchmarks/ring_attention_table.py --commir-opt bazel-bin/commir-opt \\
        --commir-run bazel-bin/commir-run

Exit status: 0 on success, 1 if a tool fails.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schedule_table import build_missing_tools, run  # noqa: E402  (shared with the other table scripts)

LOWER = "propagate-sharding,lower-to-spmd,canonicalize,cse,dce"
HEAD_DIM = 128

# (devices, heads, kv heads, sequence): 4k and 16k queries per GPU. 64 heads on 64 GPUs so
# that Ulysses can split them. Multi-head attention (k and v with as many heads as q) and
# grouped-query attention with 8 kv heads, as Llama 3 70B (64 query heads) and 405B (128)
# have (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3; search/plan/model_spec.cc's
# presets): its k/v blocks, which the rings shift, are 8x (64 GPUs)
# or 4x (8 GPUs) smaller, its attention FLOPs the same.
CONFIGS = [(8, 32, 32, 32768), (8, 32, 32, 131072), (64, 64, 64, 262144), (64, 64, 64, 1048576),
           (8, 32, 8, 32768), (8, 32, 8, 131072), (64, 64, 8, 262144), (64, 64, 8, 1048576)]

# (label, schedule, zigzag inputs)
SCHEDULES = [
    ("plain lowering (all_gather k, v)", "", False),
    ("ring", "ring-attention,cse", False),
    ("zigzag ring, contiguous inputs", "ring-attention{zigzag=true},cse", False),
    ("zigzag ring, zigzag inputs", "ring-attention{zigzag=true},cse", True),
    ("ulysses", "ulysses-attention,cse", False),
]

# Predicted times (ms) with commir-opt and commir-run built at commit 60f62c3, before
# causal blocks were priced by their positions; same programs and pipelines. Multi-head
# rows only (keyed by GPUs and sequence): the grouped-query rows came later.
BEFORE = {
    (8, 32768): [5.166, 4.098, 8.981, 6.803, 2.368],
    (8, 131072): [66.309, 36.092, 53.233, 45.193, 31.985],
    (64, 262144): [249.735, 192.738, 387.804, 193.391, 37.810],
    (64, 1048576): [1715.349, 764.731, 1545.381, 772.048, 506.376],
}


def program(devices, heads, kv_heads, sequence, zigzag):
    mark = " zigzag" if zigzag else ""
    t = f"bf16[1, {heads}, {sequence}@sp{mark}, {HEAD_DIM}]"
    kv = f"bf16[1, {kv_heads}, {sequence}@sp{mark}, {HEAD_DIM}]"
    return (f"mesh @m(sp={devices})\n\n"
            f"func @attention(%q: {t}, %k: {kv}, %v: {kv}) -> {t} {{\n"
            f"  %o = attention(%q, %k, %v) {{causal}}\n"
            f"  return %o\n}}\n")


def predict(tools, workdir, name, text, schedule):
    """The sim's prediction of `text` under `schedule`, or {"skipped": why} when the
    schedule's pass leaves the attention as lowered (its remark says why)."""
    source = os.path.join(workdir, name + ".commir")
    with open(source, "w", encoding="utf-8") as f:
        f.write(text)
    scheduled = os.path.join(workdir, name + ".scheduled.commir")
    pipeline = ",".join(p for p in (LOWER, schedule) if p)
    opt = subprocess.run([tools.commir_opt, source, "--pass-pipeline=" + pipeline],
                         capture_output=True, text=True)
    if opt.returncode != 0:
        raise RuntimeError(f"commir-opt {pipeline} exited {opt.returncode}:\n{opt.stderr}")
    skipped = SKIPPED.search(opt.stderr)
    if skipped:
        return {"skipped": skipped.group(1)}
    with open(scheduled, "w", encoding="utf-8") as f:
        f.write(opt.stdout)
    prediction = json.loads(run([tools.commir_run, scheduled, "--backend=sim", "--format=json"]))
    slowest = max(prediction["devices"], key=lambda d: d["time_s"])
    return {"time": prediction["time_s"], "compute": slowest["compute_s"],
            "exposed": slowest["exposed_communication_s"]}


# The remark a schedule pass makes when it rewrites nothing (transforms/pass.h); the
# attention passes say which attention and why ("@attention: attention at 4:8: ...").
SKIPPED = re.compile(r"rewrote nothing: (?:@\w+: \w+ at \d+:\d+: )?([^\n;]*)")


def work_ratio(devices, sequence):
    """Plain ring's critical-path pairs over zigzag's, per (batch, head)."""
    block = sequence // devices
    chunk = block // 2
    ring = (devices - 1) * block * block + block * (block + 1) // 2
    zigzag = 2 * devices * chunk * chunk + chunk
    return ring / zigzag


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commir-opt", help="path to commir-opt (default: build it)")
    parser.add_argument("--commir-run", help="path to commir-run (default: build it)")
    args = parser.parse_args()
    build_missing_tools(args, ("commir-opt", "commir-run"))

    table = []
    with tempfile.TemporaryDirectory() as workdir:
        try:
            for devices, heads, kv_heads, sequence in CONFIGS:
                rows = []
                for index, (label, schedule, zigzag) in enumerate(SCHEDULES):
                    text = program(devices, heads, kv_heads, sequence, zigzag)
                    name = f"a{devices}_{kv_heads}_{sequence}_{index}"
                    rows.append((label, zigzag, index, predict(args, workdir, name, text, schedule)))
                table.append(((devices, heads, kv_heads, sequence), rows))
        except (RuntimeError, ValueError, OSError) as e:
            sys.stderr.write(f"ring_attention_table.py: {e}\n")
            return 1

    print("# Causal attention under the sequence-parallel schedules (sim backend, h100-sxm)\n")
    print("Generated by `/usr/bin/python3 benchmarks/ring_attention_table.py --commir-opt "
          "bazel-bin/commir-opt --commir-run bazel-bin/commir-run > "
          "benchmarks/ring_attention_table.md`; `//benchmarks:ring_attention_table_test` "
          "fails when this file and the script's output differ. See the script's docstring "
          "for the programs and the columns; times in ms, the slowest device's.\n")
    print("| GPUs | heads | kv heads | sequence | schedule | before | after | compute | exposed | "
          "vs ring | work ratio |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for (devices, heads, kv_heads, sequence), rows in table:
        ring = rows[1][3]["time"]
        for label, zigzag, index, row in rows:
            start = f"| {devices} | {heads} | {kv_heads} | {sequence} | {label} | "
            before = f"{BEFORE[(devices, sequence)][index]:.3f}" if kv_heads == heads else "-"
            if "skipped" in row:
                print(f"{start}{before} | n/a: {row['skipped']} | - | - | - | - |")
                continue
            ratio = f"{work_ratio(devices, sequence):.3f}" if "zigzag" in label else "-"
            print(f"{start}{before} | {row['time'] * 1e3:.3f} | "
                  f"{row['compute'] * 1e3:.3f} | {row['exposed'] * 1e3:.3f} | "
                  f"{ring / row['time']:.2f}x | {ratio} |")
    # zigzag (zigzag inputs) over the plain ring, by (GPUs, kv heads, sequence)
    speed = {(d, kv, s): rows[1][3]["time"] / rows[3][3]["time"] for (d, _, kv, s), rows in table}
    print(READING_NOTES.format(
        speedups=f"{speed[(8, 32, 131072)]:.2f}x (8 GPUs) and {speed[(64, 64, 1048576)]:.2f}x (64 GPUs)",
        short=f"{speed[(8, 32, 32768)]:.2f}x",
        gqa64=f"{speed[(64, 8, 262144)]:.2f}x (4k per GPU) and {speed[(64, 8, 1048576)]:.2f}x (16k)",
        gqa8=f"{speed[(8, 8, 32768)]:.2f}x (4k) and {speed[(8, 8, 131072)]:.2f}x (16k)"))
    return 0


READING_NOTES = """
How to read it:

- Before, every causal block cost the same: the diagonal, a block whose keys all come
  after its queries (nothing to compute) and one whose keys all come before (twice the
  diagonal's work). The plain ring's last device, which meets only full blocks, was
  charged half its work, and the zigzag ring, which exists to balance that work, came
  out slower.
- Now each device and ring step is priced for the block it holds (sim/attention_time.h):
  the plain ring's time follows its last device (n - 1 full blocks and its diagonal),
  zigzag's every device's n/2 blocks' worth. Each step's online-softmax merge is one
  `attention_merge` kernel (one per query chunk for zigzag, folding both of its key
  chunks), as TransformerEngine's context parallelism runs one correction kernel per
  step. At 16k queries per GPU zigzag with its inputs in zigzag order runs {speedups}
  the ring's speed. The pair of query chunk r and key chunk 2n-1-s is masked on every
  step and not run. On 8 GPUs zigzag is short of the work ratio by its own per-step
  work: two merges (of one and of two partials) over the half-length chunks, one
  attention call on the chunk pair the block's source masks (a launch and its output),
  and half-length attention kernels whose per-CTA fixed cost weighs more
  (benchmarks/closed_form_check.py prices each). The halves of q and of each k/v block are read in place, as FlashAttention
  with offsets reads them in TransformerEngine's context parallelism (an offset pointer
  and the block's strides; runtime/in_place.h): no copy is priced. At 4k per GPU on 8
  GPUs it runs {short} the ring's speed: there the merges weigh more against the
  shorter attention kernels. With contiguous inputs zigzag also pays all_to_alls in and
  out.
- On 64 GPUs the ring steps' shifts cross nodes. At 4k queries per GPU they take longer
  than either ring's step of attention: both rings are bound by communication, not by
  the balance. At 16k zigzag's shorter steps now wait for the shift too (its exposed
  column), while the plain ring's longer steps still hide it: the speedup is the ring's
  compute over the shifts' time, below the work ratio.
- With grouped-query attention (8 kv heads) the rings shift k/v blocks 8x smaller on 64
  GPUs (4x on 8) for the same attention FLOPs. On 64 GPUs a step's two shifts now take
  less than the shortest step of compute, so neither ring exposes any: zigzag runs
  {gqa64} the ring's speed, its kernels' balance as on 8 GPUs, short of the work ratio
  by its own per-step work (benchmarks/closed_form_check.py prices it). On 8 GPUs the
  copy-engine shifts were hidden already: {gqa8}, as with multi-head attention. In the
  sim the shifts run ahead of the compute (the IR bounds no receive buffers), so on 64
  GPUs few kernels are priced beside a send/recv's 32 SMs; a ring that double-buffers
  its blocks keeps a shift beside every step's kernel, which this leaves out. The
  all_gather lowering and the contiguous zigzag's all_to_alls move the smaller k/v too;
  Ulysses repeats each kv head up to the devices (8 kv heads over 64 devices: 8 copies
  each) before its all_to_alls, so it moves what multi-head attention moves.
"""

if __name__ == "__main__":
    sys.exit(main())
