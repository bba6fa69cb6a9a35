#!/usr/bin/env python3
"""Prints commir-search's best candidate against hand-written baselines on 8 and 64 H100s.

The workloads are global CommIR programs written by this script at real sizes in bf16,
with no layouts (the search chooses the mesh and every layout):

    attention       causal GQA attention: q [1, 32, S, 128], k and v [1, 8, S, 128]
                    (Llama-3-8B heads), S = 32k on 8 GPUs, 128k on 64
    attention/seq   the same with the sequence split written in the signature (a mesh of
                    one axis and `S@sp` on q, k, v and the result): the premise of ring
                    attention, Ulysses and USP, whose inputs arrive split by sequence. The
                    search must split the sequence (a pinned class) and fills in the rest.
    mlp             the Megatron MLP, y = gelu(x w1) w2, FFN 4x hidden: 8k tokens x hidden
                    4096 on 8 GPUs, 32k tokens x hidden 8192 on 64
    block           the pre-norm transformer block of ../shared/examples/transformer_block
                    with GQA (8 kv heads, head dim 128) and a GELU MLP of 4x: sequence 8k,
                    hidden 4096, 32 heads on 8 GPUs (Llama-3-8B-like); sequence 32k, hidden 8192,
                    64 heads on 64 (Llama-3-70B-like)

The best candidate:

    commir-search PROG --devices=N --format=json --top=1 --verify=V --hardware=h100-sxm
                  --gpus-per-node=8 --quiet -o BEST --emit=global

The baselines are explicit recipes: the same program with a mesh and layouts written,

    commir-opt LAID_OUT --pass-pipeline='propagate-sharding,lower-to-spmd,canonicalize,cse,dce,combine-all-reduces[,SCHEDULE]'
    commir-run LOWERED --backend=sim --format=json --hardware=h100-sxm --gpus-per-node=8

    Megatron TP+SP  mesh tp=N; x [S@tp, hidden], column-parallel wq/wk/wv/w1 (output dim
                    @tp), row-parallel wo/w2 (input dim @tp), norms replicated, result
                    [S@tp, hidden]; plain collectives (mlp, block). On 64 GPUs also
                    mesh dp=8, tp=8 (tensor parallelism inside each node, x [S@(dp,tp),
                    hidden]); the faster of the two is shown.
    ring            mesh sp=N; the sequence of every activation argument and of the result
                    @sp, weights replicated; ring-attention (attention, block)
    ring zigzag     the same with ring-attention{zigzag=true}
    Ulysses         the same with ulysses-attention
    USP             mesh a x b (every factorization with a, b >= 2), the sequence @(a,b);
                    ulysses-attention{axes=b},ring-attention{axes=a}; the fastest mesh is
                    shown. When the passes lack the axes= option the cell says so.

A baseline that does not apply to a workload is "-"; one whose schedule pass leaves the
program unchanged (Ulysses with fewer heads than devices) is "n/a", and one whose recipe
the tools refuse is "fails", each with the reason under Recipes.
All figures are the sim backend's predictions (sim/), not measurements.

Usage:
    benchmarks/search_table.py --commir-search bazel-bin/commir-search \\
        --commir-opt bazel-bin/commir-opt --commir-run bazel-bin/commir-run \\
        [--devices 8 64] [--workloads attention mlp ...] [--verify none|top] [--cache DIR]
        (--cache keeps each search's JSON and reuses it for the same program and flags:
        the block's search on 64 GPUs takes many minutes)
    benchmarks/search_table.py ... --check benchmarks/search_table.md
        regenerates the selected rows and fails unless each is in the file as printed
        (search times, which vary from run to run, are not compared)

Exit status: 0 on success, 1 if a tool fails (or --check finds a difference).
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schedule_table import build_missing_tools  # noqa: E402  (shared with the other table scripts)

# The default spmd pipeline (transforms/sharding/lower.h, kDefaultSpmdPipeline).
LOWER = "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,combine-all-reduces"
SIM_FLAGS = ["--backend=sim", "--format=json", "--hardware=h100-sxm", "--gpus-per-node=8"]
GPUS_PER_NODE = 8
HEAD_DIM = 128
KV_HEADS = 8

# Per device count: the sizes of each workload (see the docstring).
ATTENTION_SEQ = {8: 32768, 64: 131072}
ATTENTION_HEADS = 32
MLP_SIZES = {8: (8192, 4096), 64: (32768, 8192)}  # tokens, hidden
BLOCK_SIZES = {8: (8192, 4096), 64: (32768, 8192)}  # sequence, hidden (heads = hidden / 128)


# --- Programs ---------------------------------------------------------------------------
#
# A layout maps a dimension's role ("seq", "hidden", "heads", "kv", "ffn") to the axes
# that split it ("tp", "(a,b)"); roles not in the layout are whole.

def tensor(dims, layout):
    """bf16[...] with each (size, role) dimension split as the layout says."""
    parts = []
    for size, role in dims:
        axes = layout.get(role)
        parts.append(f"{size}@{axes}" if axes else str(size))
    return f"bf16[{', '.join(parts)}]"


def header(mesh):
    return f"mesh @m({mesh})\n\n" if mesh else ""


def attention_program(seq, mesh="", layout=None):
    layout = layout or {}
    q = tensor([(1, None), (ATTENTION_HEADS, "heads"), (seq, "seq"), (HEAD_DIM, None)], layout)
    kv = tensor([(1, None), (KV_HEADS, "kv"), (seq, "seq"), (HEAD_DIM, None)], layout)
    return (header(mesh) +
            f"func @attention(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{\n"
            "  %o = attention(%q, %k, %v) {causal}\n"
            "  return %o\n"
            "}\n")


def mlp_program(tokens, hidden, mesh="", layout=None, weights=None):
    """weights: the layout of w1 and w2 (Megatron's column/row split), default whole."""
    layout, weights = layout or {}, weights or {}
    ffn = 4 * hidden
    x = tensor([(tokens, "seq"), (hidden, None)], layout)
    w1 = tensor([(hidden, None), (ffn, "ffn")], weights)
    w2 = tensor([(ffn, "ffn"), (hidden, None)], weights)
    return (header(mesh) +
            f"func @mlp(%x: {x}, %w1: {w1}, %w2: {w2}) -> {x} {{\n"
            "  %h = matmul(%x, %w1)\n"
            "  %a = gelu(%h)\n"
            "  %y = matmul(%a, %w2)\n"
            "  return %y\n"
            "}\n")


def block_program(seq, hidden, mesh="", layout=None, weights=None):
    """The pre-norm block with GQA; weights: the layout of the projections (default whole)."""
    layout, weights = layout or {}, weights or {}
    heads, kv_width, ffn = hidden // HEAD_DIM, KV_HEADS * HEAD_DIM, 4 * hidden
    x = tensor([(seq, "seq"), (hidden, None)], layout)
    norm = tensor([(hidden, None)], {})
    wq = tensor([(hidden, None), (hidden, "out")], weights)
    wkv = tensor([(hidden, None), (kv_width, "out")], weights)
    wo = tensor([(hidden, "out"), (hidden, None)], weights)
    w1 = tensor([(hidden, None), (ffn, "out")], weights)
    w2 = tensor([(ffn, "out"), (hidden, None)], weights)
    return (header(mesh) +
            f"func @block(%x: {x},\n"
            f"            %g1: {norm}, %b1: {norm},\n"
            f"            %wq: {wq}, %wk: {wkv}, %wv: {wkv},\n"
            f"            %wo: {wo},\n"
            f"            %g2: {norm}, %b2: {norm},\n"
            f"            %w1: {w1}, %w2: {w2}) -> {x} {{\n"
            "  %h = layernorm(%x, %g1, %b1) {eps = 1e-5}\n"
            "  %q = matmul(%h, %wq)\n"
            "  %k = matmul(%h, %wk)\n"
            "  %v = matmul(%h, %wv)\n"
            f"  %q3 = reshape(%q) : bf16[{seq}, {heads}, {HEAD_DIM}]\n"
            f"  %k3 = reshape(%k) : bf16[{seq}, {KV_HEADS}, {HEAD_DIM}]\n"
            f"  %v3 = reshape(%v) : bf16[{seq}, {KV_HEADS}, {HEAD_DIM}]\n"
            "  %qh = transpose(%q3) {perm = [1, 0, 2]}\n"
            "  %kh = transpose(%k3) {perm = [1, 0, 2]}\n"
            "  %vh = transpose(%v3) {perm = [1, 0, 2]}\n"
            f"  %q4 = reshape(%qh) : bf16[1, {heads}, {seq}, {HEAD_DIM}]\n"
            f"  %k4 = reshape(%kh) : bf16[1, {KV_HEADS}, {seq}, {HEAD_DIM}]\n"
            f"  %v4 = reshape(%vh) : bf16[1, {KV_HEADS}, {seq}, {HEAD_DIM}]\n"
            "  %o4 = attention(%q4, %k4, %v4) {causal}\n"
            f"  %o3 = reshape(%o4) : bf16[{heads}, {seq}, {HEAD_DIM}]\n"
            "  %ot = transpose(%o3) {perm = [1, 0, 2]}\n"
            f"  %o = reshape(%ot) : bf16[{seq}, {hidden}]\n"
            "  %attn = matmul(%o, %wo)\n"
            "  %r1 = add(%x, %attn)\n"
            "  %h2 = layernorm(%r1, %g2, %b2) {eps = 1e-5}\n"
            "  %u = matmul(%h2, %w1)\n"
            "  %a = gelu(%u)\n"
            "  %d = matmul(%a, %w2)\n"
            "  %y = add(%r1, %d)\n"
            "  return %y\n"
            "}\n")


def two_axis_meshes(devices):
    """(a, b) with a * b = devices, both >= 2, in order of a."""
    return [(a, devices // a) for a in range(2, devices // 2 + 1) if devices % a == 0]


def sequence_baselines(make):
    """Ring, zigzag, Ulysses and USP recipes for a program maker make(mesh, seq_axes)."""
    def one_axis(schedule):
        return lambda n: [(f"sp={n}", make(f"sp={n}", "sp"), schedule)]

    def usp(n):
        return [(f"a={a}, b={b}", make(f"a={a}, b={b}", "(a,b)"),
                 "ulysses-attention{axes=b},ring-attention{axes=a}")
                for a, b in two_axis_meshes(n)]
    return {
        "ring": one_axis("ring-attention"),
        "ring zigzag": one_axis("ring-attention{zigzag=true}"),
        "Ulysses": one_axis("ulysses-attention"),
        "USP": usp,
    }


def megatron_recipes(make):
    """Megatron TP+SP over all n devices, and beyond a node tensor parallelism inside each
    node with the sequence split further over the nodes (dp x tp, tp = GPUS_PER_NODE)."""
    def recipes(n):
        found = [(f"tp={n}", make(f"tp={n}", "tp"), "")]
        if n > GPUS_PER_NODE:
            mesh = f"dp={n // GPUS_PER_NODE}, tp={GPUS_PER_NODE}"
            found.append((mesh, make(mesh, "(dp,tp)"), ""))
        return found
    return recipes


BASELINES = ["Megatron TP+SP", "ring", "ring zigzag", "Ulysses", "USP"]


def workloads(devices):
    """(name, sizes, the search's program, {baseline: n -> [(mesh, program, schedule)]})."""
    seq = ATTENTION_SEQ[devices]
    attention_sizes = (f"q [1, {ATTENTION_HEADS}, {seq}, {HEAD_DIM}], "
                       f"k/v [1, {KV_HEADS}, {seq}, {HEAD_DIM}], causal")
    attention_sequence = sequence_baselines(
        lambda mesh, axes: attention_program(seq, mesh, {"seq": axes}))
    tokens, hidden = MLP_SIZES[devices]
    mlp_megatron = {"Megatron TP+SP": megatron_recipes(
        lambda mesh, seq_axes: mlp_program(tokens, hidden, mesh, {"seq": seq_axes},
                                           {"ffn": "tp"}))}
    block_seq, block_hidden = BLOCK_SIZES[devices]
    block_baselines = sequence_baselines(
        lambda mesh, axes: block_program(block_seq, block_hidden, mesh, {"seq": axes}))
    block_baselines["Megatron TP+SP"] = megatron_recipes(
        lambda mesh, seq_axes: block_program(block_seq, block_hidden, mesh, {"seq": seq_axes},
                                             {"out": "tp"}))
    return [
        ("attention", attention_sizes, attention_program(seq), attention_sequence),
        ("attention/seq", attention_sizes + ", sequence split pinned",
         attention_program(seq, f"sp={devices}", {"seq": "sp"}), attention_sequence),
        ("mlp", f"x [{tokens}, {hidden}], w1 [{hidden}, {4 * hidden}], GELU",
         mlp_program(tokens, hidden), mlp_megatron),
        ("block", f"x [{block_seq}, {block_hidden}], {block_hidden // HEAD_DIM} heads "
         f"({KV_HEADS} kv) of {HEAD_DIM}, FFN {4 * block_hidden}",
         block_program(block_seq, block_hidden), block_baselines),
    ]


# --- Tools ------------------------------------------------------------------------------

class ToolError(Exception):
    def __init__(self, cmd, status, stderr):
        super().__init__(f"{' '.join(cmd)} exited {status}:\n{stderr}")
        self.stderr = stderr


class SearchTimeout(Exception):
    pass


def run(cmd, timeout=None):
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise SearchTimeout() from e
    except OSError as e:
        raise ToolError(cmd, "(could not start)", str(e)) from e
    if result.returncode != 0:
        raise ToolError(cmd, result.returncode, result.stderr)
    return result.stdout


def write(workdir, name, text):
    path = os.path.join(workdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def signature(text):
    """A global program's arguments and results on one line (the layouts a recipe writes)."""
    match = re.search(r"func @\w+(\(.*?)\{\s*$", text, re.DOTALL | re.MULTILINE)
    return " ".join(match.group(1).split()) if match else "?"


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# The 64-GPU block's search over meshes of up to three axes took 16 minutes on a quiet
# 2-core VM (search/README.md) (thousands of layouts, each predicted on 64 simulated devices); the table
# searches it over meshes of at most two axes, which USP's 2-D layouts need, and says so.
MAX_MESH_AXES = {("block", 64): 2}


def search(tools, workdir, name, program, devices, verify, cache, timeout, max_mesh_axes=3):
    """commir-search's best candidate: its figures, recipe and the search's statistics;
    {"timed_out": seconds} when it did not finish within the timeout."""
    flags = [f"--devices={devices}", "--format=json", "--top=1", f"--verify={verify}",
             "--hardware=h100-sxm", "--gpus-per-node=8", "--quiet",
             f"--max-mesh-axes={max_mesh_axes}"]
    cached = cached_timeout = None
    if cache:
        # The binary is part of the key: a rebuilt search must not reuse an old answer.
        key = hashlib.sha256("\n".join([program, file_digest(tools.commir_search)] + flags)
                             .encode()).hexdigest()[:16]
        cached = os.path.join(cache, f"{name}.{key}.json")
        cached_timeout = os.path.join(cache, f"{name}.{key}.timeout{timeout}.json")
    if cached and os.path.exists(cached):
        with open(cached, encoding="utf-8") as f:
            report, laid_out = json.load(f)
    elif timeout and cached_timeout and os.path.exists(cached_timeout):
        return {"timed_out": timeout}
    else:
        source = write(workdir, f"{name}.search.commir", program)
        best = os.path.join(workdir, f"{name}.best.commir")
        try:
            report = json.loads(run([tools.commir_search, source] + flags +
                                    ["-o", best, "--emit=global"], timeout))
        except SearchTimeout:
            if cached_timeout:
                with open(cached_timeout, "w", encoding="utf-8") as f:
                    json.dump({"timed_out": timeout}, f)
            return {"timed_out": timeout}
        if not report["ranked"]:
            raise ToolError([tools.commir_search, source], 0, "no candidate")
        with open(best, encoding="utf-8") as f:
            laid_out = f.read()
        if cached:
            with open(cached, "w", encoding="utf-8") as f:
                json.dump([report, laid_out], f)
    top = report["ranked"][0]
    return {"time": top["time_s"], "mesh": top["mesh"], "layouts": top["layouts"],
            "pipeline": top["pipeline"], "signature": signature(laid_out),
            "verified": top["verified"], "exposed": top["exposed_communication_s"],
            "bytes": top["bytes_per_device"], "peak": top["peak_memory_bytes"],
            "stats": report["stats"]}


# The passes' answer when they lack the axes= option USP needs.
NO_AXES_OPTION = re.compile(r"has no option 'axes'")


def baseline(tools, workdir, tag, recipes):
    """The fastest of a baseline's recipes: {time, mesh, pipeline} or {error}."""
    best, errors, unchanged = None, [], []
    for index, (mesh, program, schedule) in enumerate(recipes):
        source = write(workdir, f"{tag}.{index}.commir", program)
        pipeline = ",".join(p for p in (LOWER, schedule) if p)
        try:
            scheduled = run([tools.commir_opt, source, "--pass-pipeline=" + pipeline])
            if schedule and scheduled == run([tools.commir_opt, source, "--pass-pipeline=" + LOWER]):
                unchanged.append(f"`{schedule}` leaves the program on `mesh @m({mesh})` as "
                                 "the plain lowering prints it")
                continue
            lowered = write(workdir, f"{tag}.{index}.spmd.commir", scheduled)
        except ToolError as e:
            if NO_AXES_OPTION.search(e.stderr):
                return {"error": "n/a (axes= not available)"}
            if "error:" not in e.stderr:
                raise  # not a refusal of this recipe: the tool itself failed
            errors.append(first_error(e.stderr))
            continue
        prediction = json.loads(run([tools.commir_run, lowered] + SIM_FLAGS))
        if best is None or prediction["time_s"] < best["time"]:
            best = {"time": prediction["time_s"], "mesh": mesh, "pipeline": pipeline,
                    "signature": signature(program)}
    if best:
        return best
    if errors:
        return {"error": "fails", "why": errors[0]}
    return {"error": "n/a", "why": unchanged[0]}


def first_error(stderr):
    return next(line.strip() for line in stderr.splitlines() if "error:" in line)


# --- Report -----------------------------------------------------------------------------

def ms(seconds):
    return f"{seconds * 1e3:.3f}"


def mib(count):
    return f"{count / 2**20:.1f} MiB"


def baseline_cell(result, best_time):
    if result is None:
        return "-"
    if "error" in result:
        return result["error"]
    if best_time is None:  # the search did not finish: no speedup to show
        return ms(result["time"])
    return f"{ms(result['time'])} ({result['time'] / best_time:.2f}x)"


def print_report(rows, args, check_rows):
    """The Markdown report; with check_rows, the lines that must match go there instead."""
    lines = []
    out = lines.append
    out("| workload | GPUs | search best (ms) | " + " | ".join(BASELINES) +
        " | best baseline | speedup | search time |")
    out("|---|---:|---:|" + "---:|" * len(BASELINES) + "---|---:|---:|")
    for row in rows:
        best = row["search"]
        finished = "timed_out" not in best
        usable = [(name, r) for name, r in row["baselines"].items() if r and "error" not in r]
        if usable:
            best_name, best_baseline = min(usable, key=lambda nr: nr[1]["time"])
            versus = f"{best_name} {ms(best_baseline['time'])}"
            speedup = f"{best_baseline['time'] / best['time']:.2f}x" if finished else "-"
        else:
            versus, speedup = "-", "-"
        if finished:
            cells = [row["name"], str(row["devices"]), ms(best["time"])]
            cells += [baseline_cell(row["baselines"].get(b), best["time"]) for b in BASELINES]
            cells += [versus, speedup, f"{best['stats']['search_seconds']:.2f} s"]
        else:
            cells = [row["name"], str(row["devices"]), "not finished"]
            cells += [baseline_cell(row["baselines"].get(b), None) for b in BASELINES]
            cells += [versus, speedup, f"> {best['timed_out']} s"]
        out("| " + " | ".join(cells) + " |")
    table = lines[:]

    details = []
    for row in rows:
        best = row["search"]
        details.append(f"- **{row['name']} on {row['devices']} GPUs** ({row['sizes']}):")
        if "timed_out" in best:
            details.append(f"  - search: did not finish within {best['timed_out']} s "
                           "(`--search-timeout`)")
        else:
            stats = best["stats"]
            details.append(
                f"  - search best: `{best['mesh']}`, layouts `{best['layouts']}`, "
                f"`--pass-pipeline='{best['pipeline']}'`; exposed communication "
                f"{ms(best['exposed'])} ms, {mib(best['bytes'])} sent and "
                f"{mib(best['peak'])} peak per device; verified: {best['verified']}")
            details.append(f"    - laid out: `{best['signature']}`")
            details.append(f"    - space: {stats['meshes']} meshes, {stats['layouts']} layouts, "
                           f"{stats['schedules_tried']} schedules, {stats['duplicates_merged']} "
                           f"duplicates merged, {stats['candidates']} candidates")
        for name in BASELINES:
            result = row["baselines"].get(name)
            if result is None:
                continue
            if "error" in result:
                why = f": {result['why']}" if "why" in result else ""
                details.append(f"  - {name}: {result['error']}{why}")
            else:
                details.append(f"  - {name}: {ms(result['time'])} ms, `mesh @m({result['mesh']})`, "
                               f"`{result['signature']}`, `--pass-pipeline='{result['pipeline']}'`")
    if check_rows is not None:
        check_rows.extend(table[2:] + details + findings(rows).splitlines()[2:])
        return
    print(PREAMBLE.format(devices=" ".join(str(d) for d in args.devices), verify=args.verify))
    print("\n".join(table))
    print(COLUMNS)
    print("## Recipes\n")
    print("\n".join(details))
    print()
    print(findings(rows))
    print(NOTES.strip())


PREAMBLE = """# commir-search against hand-written baselines on H100s (sim backend, h100-sxm)

Generated by `/usr/bin/python3 benchmarks/search_table.py --commir-search bazel-bin/commir-search
--commir-opt bazel-bin/commir-opt --commir-run bazel-bin/commir-run --devices {devices}
--verify {verify} --cache DIR > benchmarks/search_table.md` (the cache only saves
re-running searches: their results and times are those of each search's one run).
`//benchmarks:search_table_test` regenerates the 8-GPU rows of attention, attention/seq
and mlp (the others' searches take minutes) and fails unless they are in this file as
printed (search times aside). The workloads, the baselines' recipes and the columns are
described in the script's docstring; each recipe is spelled out under Recipes.

Every figure is a prediction of the sim backend's model (`commir-run --backend=sim`, 8
GPUs per node, one node per 8 GPUs), not a measurement. The search ran with
`--verify={verify}`: with `top`, its best candidate is proven on the cpu mesh against the
one-device program on a shrunken copy (every dimension keeps its divisibility by the
device count and 16), and each recipe below says whether it matched. The 64-GPU block is
searched over meshes of at most two axes (`--max-mesh-axes=2`): over three (3,124 layouts,
`--max-layouts=0`) it took 16 minutes on a quiet run here (search/README.md). Search times are wall times on a 2-core VM shared with other jobs.
"""

COLUMNS = """
Columns: `search best` is the predicted time of commir-search's best candidate; each
baseline cell is the baseline's predicted time in ms and, in brackets, the search's
predicted speedup over it (baseline time / search time); `best baseline` is the fastest
applicable baseline and `speedup` the search's speedup over it; `search time` is the
wall time of enumerating, partitioning, scheduling, predicting and ranking (from the
search's JSON; not compared by the drift test).
"""

NOTES = """
## Reading the table

- The programs of **attention**, **mlp** and **block** write no layouts, so the search may
  choose layouts the baselines do not start from: heads split for attention (as
  Megatron's column-parallel projections would deliver q, k and v), replicated weights
  and split tokens for the MLP and the block. The model charges nothing for holding a
  replicated weight beyond the peak-memory figure, and one forward pass has no gradients
  to reduce, so such plans are cheap here. The **attention/seq** rows pin the premise of
  ring attention, Ulysses and USP (the sequence arrives split) and compare like with like.
- The search's space holds the baselines' meshes, schedules and, for the sequence-split
  baselines, their layouts (USP's sequence over two axes included), so it should never be slower
  than the best baseline; where it is, Findings says so with both recipes.
"""


def findings(rows):
    """One line per row: the search against its best baseline, read off the figures."""
    lines = ["## Findings\n"]
    for row in rows:
        best = row["search"]
        if "timed_out" in best:
            lines.append(f"- {row['name']} on {row['devices']} GPUs: the search did not finish "
                         f"within {best['timed_out']} s, so there is no best candidate to "
                         "compare.")
            continue
        usable = [(n, r) for n, r in row["baselines"].items() if r and "error" not in r]
        head = (f"- {row['name']} on {row['devices']} GPUs: the search's best "
                f"({best['mesh']}, `{best['layouts']}`, {schedule_name(best['pipeline'])}) "
                f"predicts {ms(best['time'])} ms and sends {mib(best['bytes'])} per device")
        if not usable:
            lines.append(head + "; no baseline applies.")
            continue
        name, base = min(usable, key=lambda nr: nr[1]["time"])
        ratio = base["time"] / best["time"]
        if abs(ratio - 1) < 5e-4:
            verdict = f"the same time as {name}, the best baseline"
        elif ratio > 1:
            verdict = f"{ratio:.2f}x faster than {name}, the best baseline ({ms(base['time'])} ms)"
        else:
            verdict = (f"**slower** than {name} ({ms(base['time'])} ms, "
                       f"`mesh @m({base['mesh']})`, `{base['pipeline']}`): {1 / ratio:.2f}x")
        lines.append(f"{head}: {verdict}.")
    return "\n".join(lines) + "\n"


def schedule_name(pipeline):
    schedule = pipeline[len(LOWER):].lstrip(",")
    return schedule or "plain collectives"


def compare(rows_now, path):
    """Each regenerated line must be a line of the checked-in file (search times aside)."""
    def masked(line):
        return re.sub(r"\| [0-9.]+ s \|$", "| (time) |", line)
    with open(path, encoding="utf-8") as f:
        checked_in = {masked(line.rstrip("\n")) for line in f}
    missing = [line for line in rows_now if masked(line) not in checked_in]
    for line in missing:
        sys.stderr.write(f"search_table.py: not in {path} as printed now:\n  {line}\n")
    return not missing


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commir-search", help="path to commir-search (default: build it)")
    parser.add_argument("--commir-opt", help="path to commir-opt (default: build it)")
    parser.add_argument("--commir-run", help="path to commir-run (default: build it)")
    parser.add_argument("--devices", type=int, nargs="+", default=[8, 64],
                        choices=sorted(ATTENTION_SEQ))
    parser.add_argument("--workloads", nargs="+",
                        choices=["attention", "attention/seq", "mlp", "block"],
                        help="the workloads to run (default: all)")
    parser.add_argument("--verify", default="top", choices=["none", "top"],
                        help="commir-search's --verify (default top; see the preamble)")
    parser.add_argument("--search-timeout", type=int, metavar="SECONDS",
                        help="give up a search after this long (its row says so)")
    parser.add_argument("--cache", metavar="DIR",
                        help="keep each search's JSON in DIR and reuse it when the program "
                             "and flags are the same (the 64-GPU searches take minutes)")
    parser.add_argument("--check", metavar="FILE.md",
                        help="compare the regenerated rows with FILE.md instead of printing")
    args = parser.parse_args()
    build_missing_tools(args, ("commir-search", "commir-opt", "commir-run"))

    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        try:
            for devices in args.devices:
                for name, sizes, program, baselines in workloads(devices):
                    if args.workloads and name not in args.workloads:
                        continue
                    tag = f"{name.replace('/', '_')}.{devices}"
                    rows.append({
                        "name": name, "devices": devices, "sizes": sizes,
                        "search": search(args, workdir, tag, program, devices, args.verify,
                                         args.cache, args.search_timeout,
                                         MAX_MESH_AXES.get((name, devices), 3)),
                        "baselines": {b: baseline(args, workdir, f"{tag}.{i}", make(devices))
                                      for i, (b, make) in enumerate(baselines.items())},
                    })
        except (ToolError, ValueError, KeyError, OSError) as e:
            sys.stderr.write(f"search_table.py: {e}\n")
            return 1
    if args.check:
        regenerated = []
        print_report(rows, args, regenerated)
        return 0 if compare(regenerated, args.check) else 1
    print_report(rows, args, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
