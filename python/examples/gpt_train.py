"""A small GPT written in PyTorch, captured, and trained with AdamW and gradient clipping
by CommIR on a 2x4 mesh (data parallel over dp, Megatron tensor parallel over tp with a
vocabulary-parallel embedding, tied head and loss) and on one device, beside PyTorch's
own training loop on the same model, from the same initial weights and the same batches.

    bazel build //python:_commir.so
    PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/gpt_train.py --steps=200

The text is a licence text Debian ships (/usr/share/common-licenses/GPL-3, from
base-files), its bytes byte-pair encoded into a `vocab`-token vocabulary learned from the
text itself (2048 by default; 256 is the bytes alone). Each step trains on `batch` windows
of `seq` + 1 tokens at offsets drawn from a seeded generator: the model reads the first
`seq` tokens and predicts the next at each position. At the default size the partitioner
itself keeps the batch over dp and the vocabulary-parallel embedding and loss
(docs/gpt-demo.md, "Why these sizes"); `--report` prints what the partitioned forward and
step communicate.

The model: token embedding and learned positions, `layers` pre-norm blocks (LayerNorm,
causal self-attention with separate q/k/v projections, LayerNorm, GELU MLP), a final
LayerNorm, a head tied to the token embedding, and cross-entropy. PyTorch's loop is
torch.optim.AdamW (foreach=False) and torch.nn.utils.clip_grad_norm_, f32, dropout off;
CommIR's is `training-step{optimizer=adamw{...},clip_grad_norm=C}` on the captured
forward, its state from @<step>_init, each step's results fed back as the next step's
arguments. Prints the three loss curves side by side and the largest relative
differences; exits 1 when CommIR's losses are not within `--rtol` of PyTorch's or the
mesh's not within it of one device's.
"""

import argparse
import collections
import math
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import commir
import commir.torch

# The demos' shared training code, beside this file (also when a test runs it by path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from adamw_training import (TEXT, CommirTrainer, Hyperparameters, batches, read_text,  # noqa: E402
                            relative, torch_losses)

MESH = {"dp": 2, "tp": 4}


class Attention(nn.Module):
    def __init__(self, dim, heads, seq, dropout):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q = self.q(x).view(b, t, self.heads, hd).transpose(1, 2)
        k = self.k(x).view(b, t, self.heads, hd).transpose(1, 2)
        v = self.v(x).view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.causal[:t, :t], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, d)
        return self.drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, dim, heads, seq, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, seq, dropout)
        self.ln_2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.fc_proj = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.drop(self.fc_proj(F.gelu(self.fc(self.ln_2(x)))))


class GPT(nn.Module):
    def __init__(self, vocab=256, dim=64, heads=4, layers=4, seq=64, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(dim, heads, seq, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        # GPT-2's initialisation (as nanoGPT writes it).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02)

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def megatron_layouts(model):
    """Batch over dp; q/k/v and the MLP's first linear split by output features, their
    output projections by input features over tp (one head per device at 4 heads); the
    token table (and so the tied head, the logits and the loss) over the vocabulary."""
    layouts = {"idx": ["dp", None], "targets": ["dp", None], "wte.weight": ["tp", None]}
    for i in range(len(model.blocks)):
        p = "blocks.%d." % i
        for column in ("attn.q", "attn.k", "attn.v", "fc"):
            layouts[p + column + ".weight"] = ["tp", None]
            layouts[p + column + ".bias"] = ["tp"]
        for row in ("attn.proj", "fc_proj"):
            layouts[p + row + ".weight"] = [None, "tp"]
    return layouts


def byte_pair_encoding(data, merges):
    """Byte-pair encoding learned from the text itself (Gage's compression, as GPT-2's
    tokenizer learns its merges, without a pre-split into words): starting from the bytes,
    `merges` times the most frequent pair of adjacent tokens (ties: the smallest pair) becomes
    a new token 256, 257, ..., its occurrences replaced left to right without overlap.
    Returns (the text's token ids, int64; the merged pairs in order)."""
    tokens = data.astype(np.int64)
    pairs = []
    for new in range(256, 256 + merges):
        codes = tokens[:-1] * 65536 + tokens[1:]  # token ids stay below 65536 (merges bounded)
        unique, counts = np.unique(codes, return_counts=True)
        best = int(np.argmax(counts))  # the first of the most frequent: the smallest pair
        if counts[best] < 2:
            raise SystemExit("the text has no pair of tokens left that occurs twice after %d merges; "
                             "give a smaller --vocab (at most %d) or a longer --text" % (len(pairs), new))
        first, second = divmod(int(unique[best]), 65536)
        at = np.flatnonzero(codes == unique[best])
        if first == second:  # a run of one token: "aaa" merges as (aa)a, not twice
            taken, last = [], -2
            for i in at.tolist():
                if i != last + 1:
                    taken.append(i)
                    last = i
            at = np.array(taken, dtype=np.int64)
        tokens[at] = new
        tokens = np.delete(tokens, at + 1)
        pairs.append((first, second))
    return tokens, pairs


def trainer(model, example, hp, mesh):
    """The GPT's CommIR training step, laid out as Megatron-LM's on `mesh` (None: one device)."""
    return CommirTrainer(model, example, hp, mesh, "gpt", megatron_layouts(model))


ELEMENT_BYTES = {"f32": 4, "i64": 8, "i32": 4, "bf16": 2, "f16": 2}
# Bytes each device sends for a collective of this result, in ring algorithms as NCCL's
# (and comm-report's): all_reduce 2 (n-1)/n of it, all_gather and all_to_all (n-1)/n;
# reduce_scatter (n-1)/n of its operand, n times its result.
RING_FACTOR = {"all_reduce": lambda n: 2.0 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "all_to_all": lambda n: (n - 1) / n, "reduce_scatter": lambda n: n - 1.0}


def collectives(module, func):
    """The collectives of a partitioned function, from its text: {(kind, axes, reduction,
    local result type): (count, bytes per device)}, with the axes as written (tp, dp,
    (dp, tp)). Reads what lower-to-spmd wrote; the comm-report pass gives the totals."""
    table, inside = collections.OrderedDict(), False
    for line in module.text().splitlines():
        if not line.startswith(" "):
            inside = re.search(r"@%s\(" % func, line) is not None
            continue
        m = re.search(r"= (all_reduce|all_gather|reduce_scatter|all_to_all)\(.*\{axis = (\([^)]*\)|\w+)"
                      r"(?:, reduce = (\w+))?[^}]*\} : (\w+)\[([^\]]*)\]", line) if inside else None
        if m is None:
            continue
        kind, axes, reduction, dtype, dims = m.groups()
        devices = math.prod(MESH[a.strip()] for a in axes.strip("()").split(","))
        size = math.prod(int(d) for d in dims.split(",") if d.strip()) * ELEMENT_BYTES[dtype]
        reduction = reduction or ("" if kind in ("all_gather", "all_to_all") else "sum")
        key = (kind, axes, reduction, "%s[%s]" % (dtype, dims))
        count, sent = table.get(key, (0, 0.0))
        table[key] = (count + 1, sent + size * RING_FACTOR[kind](devices))
    return table


def print_collectives(title, table, out=sys.stdout):
    print(title, file=out)
    for (kind, axes, reduction, result), (count, sent) in table.items():
        print("  %-14s over %-8s %-4s x%-3d %-22s %12.0f bytes/device"
              % (kind, axes, reduction, count, result, sent), file=out)
    print("  total %d collectives, %.0f bytes/device" % (sum(c for c, _ in table.values()),
                                                         sum(b for _, b in table.values())), file=out)


VOCAB, BATCH, SEQ, DIM, HEADS, LAYERS = 2048, 16, 64, 64, 4, 4


def train(steps, batch=BATCH, seq=SEQ, dim=DIM, heads=HEADS, layers=LAYERS, vocab=VOCAB, text=TEXT, every=1,
          out=sys.stdout):
    """Trains the three ways; returns (torch, mesh, one-device losses)."""
    raw = read_text(text)
    tokens, _ = byte_pair_encoding(raw, vocab - 256)
    data = batches(tokens, steps, batch, seq)
    torch.manual_seed(0)
    model = GPT(vocab=vocab, dim=dim, heads=heads, layers=layers, seq=seq).train()  # dropout 0: nothing drawn
    hp = Hyperparameters()
    # Both CommIR runs start from these weights (capture copies them) ...
    mesh = trainer(model, data[0], hp, MESH)
    one = trainer(model, data[0], hp, None)
    print("GPT: vocab %d (256 bytes, %d merges), %d layers, hidden %d, %d heads, seq %d, batch %d, %d "
          "parameters; %d steps on %s (%d bytes, %d tokens)"
          % (vocab, vocab - 256, layers, dim, heads, seq, batch, sum(p.numel() for p in model.parameters()), steps,
             text, len(raw), len(tokens)), file=out)
    print("AdamW lr %g betas (%g, %g) eps %g weight_decay %g, clip_grad_norm %g, f32, dropout off"
          % (hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.clip), file=out)
    # ... and PyTorch's loop trains the model itself afterwards.
    # Wall and processor seconds of each: on a machine shared with other work the wall
    # time says little, the processor time (all threads of this process) what it cost.
    def clock():
        return time.time(), time.process_time()

    start = clock()
    reference = torch_losses(model, data, hp)
    torch_s, start = [b - a for a, b in zip(start, clock())], clock()
    mesh_losses = [mesh.step(idx, targets) for idx, targets in data]
    mesh_s, start = [b - a for a, b in zip(start, clock())], clock()
    one_losses = [one.step(idx, targets) for idx, targets in data]
    one_s = [b - a for a, b in zip(start, clock())]
    print("%5s  %12s  %12s  %12s  %9s  %9s" % ("step", "pytorch", "commir 2x4", "commir 1", "rel 2x4", "rel 1"),
          file=out)
    for s in range(steps):
        if (s + 1) % every == 0 or s == 0 or s == steps - 1:
            print("%5d  %12.7f  %12.7f  %12.7f  %9.2e  %9.2e"
                  % (s + 1, reference[s], mesh_losses[s], one_losses[s], relative(mesh_losses[s], reference[s]),
                     relative(one_losses[s], reference[s])), file=out)
    print("time (wall / processor): pytorch %.1f / %.1f s, commir 2x4 (8 cpu devices in one process) %.1f / %.1f s, "
          "commir 1 device %.1f / %.1f s" % (*torch_s, *mesh_s, *one_s), file=out)
    return reference, mesh_losses, one_losses


def report(batch=BATCH, seq=SEQ, dim=DIM, heads=HEADS, layers=LAYERS, vocab=VOCAB, text=TEXT, out=sys.stdout):
    """What the partitioned forward and training step communicate on the 2x4 mesh, and
    the sim backend's predicted step times (h100-sxm). Trains nothing."""
    raw = read_text(text)
    tokens, _ = byte_pair_encoding(raw, vocab - 256)
    example = batches(tokens, 1, batch, seq)[0]
    torch.manual_seed(0)
    model = GPT(vocab=vocab, dim=dim, heads=heads, layers=layers, seq=seq).train()
    mesh = trainer(model, example, Hyperparameters(), MESH)
    forward = commir.opt(mesh.captured.module, commir.DEFAULT_SPMD_PIPELINE)
    print("GPT: vocab %d, %d layers, hidden %d, %d heads, seq %d, batch %d on the 2x4 mesh (dp=2, tp=4)"
          % (vocab, layers, dim, heads, seq, batch), file=out)
    print_collectives("forward @gpt:", collectives(forward, "gpt"), out)
    print_collectives("step @gpt_step (forward, backward, clipping, AdamW; combine-all-reduces):",
                      collectives(mesh.step_module, "gpt_step"), out)
    one = commir.predict(mesh.module, "gpt_step")
    step = commir.predict(mesh.step_module, "gpt_step")
    print("predicted step (sim, h100-sxm): 2x4 mesh %.3f ms, one device %.3f ms"
          % (step.time_s * 1e3, one.time_s * 1e3), file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=20, help="print every N-th step")
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--vocab", type=int, default=VOCAB,
                        help="the 256 bytes and vocab - 256 byte-pair merges learned from the text")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--seq", type=int, default=SEQ)
    parser.add_argument("--dim", type=int, default=DIM)
    parser.add_argument("--heads", type=int, default=HEADS)
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--report", action="store_true",
                        help="print what the partitioned forward and step communicate, and their predicted "
                        "times; train nothing")
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= 100000 or args.every < 1:
        parser.error("--steps must be in [1, 100000] and --every at least 1")
    # Bounded before anything is allocated; the mesh splits the vocabulary, q/k/v and the
    # MLP over tp and the batch over dp, so those sizes must divide.
    tp, dp = MESH["tp"], MESH["dp"]
    if not 256 <= args.vocab <= 65536 or args.vocab % tp:
        parser.error("--vocab must be in [256, 65536] and divisible by %d (tp)" % tp)
    if not 1 <= args.batch <= 1024 or args.batch % dp:
        parser.error("--batch must be in [1, 1024] and divisible by %d (dp)" % dp)
    if not 1 <= args.seq <= 4096:
        parser.error("--seq must be in [1, 4096]")
    if not 1 <= args.layers <= 64:
        parser.error("--layers must be in [1, 64]")
    if not 1 <= args.heads <= 256 or args.heads % tp or not 1 <= args.dim <= 8192 or args.dim % args.heads:
        parser.error("--heads must be in [1, 256] and divisible by %d (tp), --dim in [1, 8192] and divisible "
                     "by --heads" % tp)
    if args.report:
        report(batch=args.batch, seq=args.seq, dim=args.dim, heads=args.heads, layers=args.layers, vocab=args.vocab,
               text=args.text)
        return 0
    reference, mesh, one = train(args.steps, batch=args.batch, seq=args.seq, dim=args.dim, heads=args.heads,
                                 layers=args.layers, vocab=args.vocab, text=args.text, every=args.every)
    vs_torch = max(max(relative(m, r), relative(o, r)) for m, o, r in zip(mesh, one, reference))
    mesh_vs_one = max(relative(m, o) for m, o in zip(mesh, one))
    ok = vs_torch < args.rtol and mesh_vs_one < args.rtol
    print("max relative difference: CommIR vs PyTorch %.2e, 2x4 mesh vs one device %.2e (rtol %g): %s"
          % (vs_torch, mesh_vs_one, args.rtol, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
