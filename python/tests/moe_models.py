"""Mixtral-style sparse mixture-of-experts blocks, in the two forms model code takes (written
for these tests, not copied from any library).

LoopMoE is organised as Hugging Face's `MixtralSparseMoeBlock` is: a router linear, a
softmax in f32, torch.topk and the top-k weights renormalised, then a Python loop over the
experts that finds each expert's tokens with a one-hot mask and `torch.where`, runs the
expert on exactly those rows and adds them back with `index_add_`. Nothing is dropped, and
each expert's row count depends on the data: no static program holds it.

CapacityMoE is the same layer routed into buffers of fixed capacity with commir.nn
(GShard's and Switch's form): every expert's weights are one batched tensor, the dispatch
and collect are the two copies, choices past the capacity are dropped.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

import commir.nn


class SwiGLUExpert(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LoopMoE(nn.Module):
    def __init__(self, hidden=16, ffn=24, experts=4, k=2):
        super().__init__()
        self.k, self.num_experts = k, experts
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList([SwiGLUExpert(hidden, ffn) for _ in range(experts)])

    def forward(self, x):
        batch, seq, hidden = x.shape
        rows = x.view(-1, hidden)
        weights = F.softmax(self.gate(rows), dim=1, dtype=torch.float)
        weights, chosen = torch.topk(weights, self.k, dim=-1)
        weights /= weights.sum(dim=-1, keepdim=True)
        weights = weights.to(rows.dtype)
        result = torch.zeros((batch * seq, hidden), dtype=rows.dtype, device=rows.device)
        # [experts, k, tokens]: which choice of which token went to each expert.
        assignment = F.one_hot(chosen, num_classes=self.num_experts).permute(2, 1, 0)
        for e in range(self.num_experts):
            choice, token = torch.where(assignment[e])  # marker: token lists
            picked = rows[None, token].reshape(-1, hidden)
            update = self.experts[e](picked) * weights[token, choice, None]
            result.index_add_(0, token, update.to(rows.dtype))  # marker: index_add_
        return result.reshape(batch, seq, hidden)


class CapacityMoE(nn.Module):
    """Top-k routing, SwiGLU experts as [experts, ...] weights, and the Mixtral output
    `x + sum_j gate_j * expert_j(x)` (the residual included, so that a token whose every
    choice is dropped comes out as its input). `groups`: the tokens are that many
    contiguous groups, each routed alone (one group per device of an expert-parallel
    mesh, as Megatron-LM routes)."""

    def __init__(self, hidden=16, ffn=24, experts=4, k=2, capacity_factor=1.0, groups=1):
        super().__init__()
        self.k, self.num_experts = k, experts
        self.capacity_factor, self.groups = capacity_factor, groups
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, hidden, ffn) * hidden ** -0.5)
        self.w3 = nn.Parameter(torch.randn(experts, hidden, ffn) * hidden ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, hidden) * ffn ** -0.5)

    def routed(self, x):
        """(the block's output, each choice's expert output [tokens, k, hidden])."""
        batch, seq, hidden = x.shape
        rows = x.reshape(batch * seq, hidden)
        probs = F.softmax(self.router(rows), dim=-1)
        gates, chosen = torch.topk(probs, self.k, dim=-1)
        gates = gates / gates.sum(dim=-1, keepdim=True)
        buf = commir.nn.moe_dispatch(rows, chosen, experts=self.num_experts,
                                     capacity_factor=self.capacity_factor, groups=self.groups)
        out = torch.matmul(F.silu(torch.matmul(buf, self.w1)) * torch.matmul(buf, self.w3), self.w2)
        back = commir.nn.moe_collect(out, chosen, groups=self.groups)
        y = (back * gates.unsqueeze(-1)).sum(dim=1)
        return x + y.reshape(batch, seq, hidden), back

    def forward(self, x):
        return self.routed(x)[0]


class CapacityMoELoss(nn.Module):
    """The block, a squared error against a target, and the routed outputs (to compare
    which choices were dropped)."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x, target):
        y, back = self.block.routed(x)
        return ((y - target) ** 2).mean(), y, back
