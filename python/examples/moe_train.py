"""A small mixture-of-experts language model written in PyTorch, captured, and trained with
AdamW by CommIR on a dp x ep mesh (the batch over dp and ep, the experts over ep) and on
one device, beside PyTorch's own training loop on the same model, from the same initial
weights and the same batches.

    bazel build //python:_commir.so
    PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/moe_train.py --steps=40

The text is byte-level, as in the GPT demo (docs/gpt-demo.md): the bytes of
/usr/share/common-licenses/GPL-3, windows of `seq` + 1 bytes at seeded offsets.

The model: token embedding and learned positions, `layers` pre-norm blocks (LayerNorm,
causal self-attention, LayerNorm, a Mixtral-style top-2 mixture of SwiGLU experts routed
with commir.nn.moe_dispatch / moe_collect at capacity factor 1, so that overflowing
choices are dropped), a final LayerNorm, a head, cross-entropy plus 0.01 x the Switch
load-balancing loss of every layer. The tokens are routed in `groups` = dp x ep groups,
one per device of the mesh, as Megatron-LM routes each device's tokens alone: the same
choices are dropped in PyTorch, on one device and on the mesh. PyTorch's loop is
torch.optim.AdamW (foreach=False) and clip_grad_norm_, f32, dropout off; CommIR's is
`training-step{optimizer=adamw{...},clip_grad_norm=C}` on the captured forward. Prints
the loss curves side by side, the partitioned step's comm-report, and exits 1 when
CommIR's losses are not within `--rtol` of PyTorch's or the mesh's not within it of one
device's.
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import commir
import commir.nn
import commir.torch

# The demos' shared training code, beside this file (also when a test runs it by path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from adamw_training import (TEXT, CommirTrainer, Hyperparameters, batches, read_text,  # noqa: E402
                            relative, torch_losses)

MESH = {"dp": 2, "ep": 2}
# The dispatch buffer [experts, groups x capacity, hidden] on the mesh: the experts over ep,
# each expert's columns (the tokens of the dp ranks) over dp (commir.nn.moe_dispatch).
DISPATCH_LAYOUT = ("ep", "dp", None)


class Attention(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.causal[:t, :t], float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.proj(y)


class MoE(nn.Module):
    """Top-k routing over `experts` SwiGLU experts held as [experts, ...] weights."""

    def __init__(self, dim, ffn, experts, k, capacity_factor, groups, layout):
        super().__init__()
        self.experts, self.k, self.capacity_factor, self.groups = experts, k, capacity_factor, groups
        self.layout = layout
        self.router = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, dim, ffn) * 0.02)
        self.w3 = nn.Parameter(torch.randn(experts, dim, ffn) * 0.02)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, dim) * 0.02)

    def forward(self, x):
        """(output [tokens, dim], the Switch balancing loss E sum_e f_e P_e)."""
        probs = F.softmax(self.router(x), dim=-1)
        gates, chosen = torch.topk(probs, self.k, dim=-1)
        gates = gates / gates.sum(dim=-1, keepdim=True)
        buf = commir.nn.moe_dispatch(x, chosen, experts=self.experts, capacity_factor=self.capacity_factor,
                                     groups=self.groups, layout=self.layout)
        out = torch.matmul(F.silu(torch.matmul(buf, self.w1)) * torch.matmul(buf, self.w3), self.w2)
        y = (commir.nn.moe_collect(out, chosen, groups=self.groups) * gates.unsqueeze(-1)).sum(dim=1)
        # f_e: the share of the routing choices that picked e (no gradient, as in Switch).
        share = F.one_hot(chosen, num_classes=self.experts).float().mean(dim=(0, 1))
        balance = self.experts * (share * probs.mean(dim=0)).sum()
        return y, balance


class Block(nn.Module):
    def __init__(self, dim, heads, seq, ffn, experts, k, capacity_factor, groups, layout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, seq)
        self.ln_2 = nn.LayerNorm(dim)
        self.moe = MoE(dim, ffn, experts, k, capacity_factor, groups, layout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        b, t, d = x.shape
        y, balance = self.moe(self.ln_2(x).reshape(b * t, d))
        return x + y.reshape(b, t, d), balance


class MoEGPT(nn.Module):
    def __init__(self, vocab=256, dim=64, heads=4, layers=2, seq=32, ffn=128, experts=4, k=2,
                 capacity_factor=1.0, groups=1, balance_coef=0.01, layout=None):
        super().__init__()
        self.balance_coef = balance_coef
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList([Block(dim, heads, seq, ffn, experts, k, capacity_factor, groups, layout)
                                     for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        b, t = idx.size()
        x = self.wte(idx) + self.wpe(torch.arange(0, t, dtype=torch.long))
        balance = 0.0
        for block in self.blocks:
            x, layer_balance = block(x)
            balance = balance + layer_balance
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return loss + self.balance_coef * balance


def expert_parallel_layouts(model):
    """The batch over dp and ep (each device routes its own tokens); every expert's weights
    on one ep rank, replicated over dp (expert-data parallelism); the rest replicated."""
    layouts = {"idx": [("dp", "ep"), None], "targets": [("dp", "ep"), None]}
    for i in range(len(model.blocks)):
        for w in ("w1", "w3", "w2"):
            layouts["blocks.%d.moe.%s" % (i, w)] = ["ep", None, None]
    return layouts


def trainer(model, example, hp, mesh):
    """The MoE model's CommIR training step, its experts over ep on `mesh` (None: one device)."""
    return CommirTrainer(model, example, hp, mesh, "moe", expert_parallel_layouts(model))


def collectives(report):
    """{collective: count} from a comm-report's lines."""
    counts = {}
    for line in report.splitlines():
        parts = line.replace("//", "").split()
        if len(parts) >= 3 and parts[1] == "count" and parts[0] != "total":
            counts[parts[0]] = int(parts[2])
    return counts


def train(steps, batch=4, seq=32, dim=512, heads=8, layers=2, ffn=512, experts=4, text=TEXT, every=1,
          mesh=None, out=sys.stdout):
    """Trains the three ways; returns (torch, mesh, one-device losses, the mesh step's comm-report)."""
    mesh = dict(mesh or MESH)
    groups = mesh["dp"] * mesh["ep"]
    data = batches(read_text(text), steps, batch, seq)
    torch.manual_seed(0)
    model = MoEGPT(dim=dim, heads=heads, layers=layers, seq=seq, ffn=ffn, experts=experts, groups=groups,
                   layout=DISPATCH_LAYOUT).train()
    hp = Hyperparameters()
    start = time.time()
    on_mesh = trainer(model, data[0], hp, mesh)
    one = trainer(model, data[0], hp, None)
    build_s = time.time() - start
    report = on_mesh.step_module.comm_report()
    print("MoE GPT: vocab 256, %d layers, hidden %d, %d heads, %d SwiGLU experts of width %d (top-2, capacity "
          "factor 1, %d routing groups), seq %d, batch %d, %d parameters; %d steps on %s"
          % (layers, dim, heads, experts, ffn, groups, seq, batch, sum(p.numel() for p in model.parameters()),
             steps, text), file=out)
    print("AdamW lr %g betas (%g, %g) eps %g weight_decay %g, clip_grad_norm %g, f32, dropout off"
          % (hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.clip), file=out)
    start = time.time()
    reference = torch_losses(model, data, hp)
    torch_s = time.time() - start
    name = "x".join(str(n) for n in mesh.values())
    mesh_losses, one_losses = [], []
    start = time.time()
    for idx, targets in data:
        mesh_losses.append(on_mesh.step(idx, targets))
    mesh_s = time.time() - start
    start = time.time()
    for idx, targets in data:
        one_losses.append(one.step(idx, targets))
    one_s = time.time() - start
    print("%5s  %12s  %12s  %12s  %9s  %9s" % ("step", "pytorch", "commir " + name, "commir 1", "rel " + name,
                                              "rel 1"), file=out)
    for s in range(steps):
        if (s + 1) % every == 0 or s == 0 or s == steps - 1:
            print("%5d  %12.7f  %12.7f  %12.7f  %9.2e  %9.2e"
                  % (s + 1, reference[s], mesh_losses[s], one_losses[s], relative(mesh_losses[s], reference[s]),
                     relative(one_losses[s], reference[s])), file=out)
    print("time: pytorch %.1f s, commir %s (%d cpu devices in one process) %.1f s, commir 1 device %.1f s; "
          "capture and passes %.1f s" % (torch_s, name, groups, mesh_s, one_s, build_s), file=out)
    print(report, file=out)
    return reference, mesh_losses, one_losses, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5, help="print every N-th step")
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--rtol", type=float, default=1e-5)
    # The model's size (the defaults are docs/moe-demo.md's; //python:moe_demo_test runs a
    # smaller one).
    sizes = {"batch": 4, "seq": 32, "dim": 512, "heads": 8, "layers": 2, "ffn": 512}
    for name, default in sizes.items():
        parser.add_argument("--" + name, type=int, default=default)
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= 100000 or args.every < 1:
        parser.error("--steps must be in [1, 100000] and --every at least 1")
    for name in sizes:
        if not 1 <= getattr(args, name) <= 4096:
            parser.error("--%s must be in [1, 4096]" % name)
    if args.dim % args.heads or args.batch % (MESH["dp"] * MESH["ep"]):
        parser.error("--heads must divide --dim, and the %d devices --batch" % (MESH["dp"] * MESH["ep"]))
    reference, mesh, one, report = train(args.steps, text=args.text, every=args.every,
                                         **{name: getattr(args, name) for name in sizes})
    vs_torch = max(max(relative(m, r), relative(o, r)) for m, o, r in zip(mesh, one, reference))
    mesh_vs_one = max(relative(m, o) for m, o in zip(mesh, one))
    ok = vs_torch < args.rtol and mesh_vs_one < args.rtol
    print("max relative difference: CommIR vs PyTorch %.2e, mesh vs one device %.2e (rtol %g): %s"
          % (vs_torch, mesh_vs_one, args.rtol, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
