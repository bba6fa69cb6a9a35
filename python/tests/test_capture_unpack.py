"""Model code that unpacks multi-result ops (split, chunk, unbind, a shape) is captured:
nanoGPT's `q, k, v = self.c_attn(x).split(n_embd, dim=2)` and a GPT-NeoX-style parallel
block's `.split(head_dim, dim=-1)`, checked against the module's own forward on one
device and partitioned on the cpu mesh."""

import pytest
import torch

import commir
import commir.torch
from models import NanoGPTAttention, NeoXParallelBlock

BATCH, SEQ, DIM = 2, 8, 32
MESHES = {"none": None, "4": {"tp": 4}, "2x2": {"dp": 2, "tp": 2}}


def make(factory):
    torch.manual_seed(0)
    model = factory().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def sequence_layout(mesh):
    return {"x": ["dp" if "dp" in mesh else None, "tp", None]}


@pytest.mark.parametrize("mesh", list(MESHES))
@pytest.mark.parametrize("factory", [lambda: NanoGPTAttention(DIM, 4, 16), lambda: NeoXParallelBlock(DIM, 4, 16)],
                         ids=["nanogpt", "neox_parallel"])
def test_split_attention_matches_pytorch(factory, mesh):
    model = make(factory)
    x = torch.randn(BATCH, SEQ, DIM)
    axes = MESHES[mesh]
    cap = commir.torch.capture(model, (x,), mesh=axes, layouts=sequence_layout(axes) if axes else None)
    # The three parts are slices of the fused projection, and written-out attention
    # with its causal buffer is still one causal attention op.
    assert cap.text.count("slice(") == 3 and "attention(" in cap.text and "causal" in cap.text
    with torch.no_grad():
        expected = model(x)
    module = cap.partition() if axes else None
    torch.testing.assert_close(torch.from_numpy(cap.run(x, module=module)), expected)


def test_nanogpt_with_megatron_weight_layouts():
    # c_attn column-parallel: each device holds a quarter of the fused [q; k; v] rows,
    # so the split's boundaries do not follow the shards; the result must not change.
    model = make(lambda: NanoGPTAttention(DIM, 4, 16))
    x = torch.randn(BATCH, SEQ, DIM)
    layouts = {"c_attn.weight": ["tp", None], "c_attn.bias": ["tp"], "c_proj.weight": [None, "tp"]}
    cap = commir.torch.capture(model, (x,), mesh={"tp": 4}, layouts=layouts)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(torch.from_numpy(cap.run(x, module=cap.partition())), expected)


def test_chunk_unbind_split_sizes_stack_and_shape_unpacking():
    def f(x):
        b, s, d = x.shape                       # a traced shape unpacks into numbers
        a, c = x.chunk(2, dim=-1)               # [2, 3, 5] and [2, 3, 5]
        first, *rest = torch.unbind(x, dim=1)   # three [2, 10]
        p, q, r = torch.split(x, [2, 3, 5], dim=2)
        odd = x.chunk(4, dim=2)                 # 10 in chunks of 3: four parts, the last of 1
        y = torch.cat([c, a], dim=-1) * first.unsqueeze(1) + rest[-1].reshape(b, 1, d)
        return y, torch.cat([r, p, q], dim=-1), odd[3], len(odd) * odd[0], torch.stack([a, c], dim=-2)

    x = torch.randn(2, 3, 10)
    cap = commir.torch.capture(f, (x,))
    got = cap.run(x)
    expected = f(x)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(torch.from_numpy(g), e)
    # Only the parts the model reads are sliced out (rest[0] of unbind is not).
    assert "unbind.1" not in cap.text and "unbind.2" in cap.text


def test_dtype_of_a_traced_tensor_is_known():
    def f(x):  # HF-style mask fill with the dtype's lowest value
        return torch.where(x > 0, x, torch.finfo(x.dtype).min)

    x = torch.randn(4, 6)
    cap = commir.torch.capture(f, (x,))
    torch.testing.assert_close(torch.from_numpy(cap.run(x)), f(x))
