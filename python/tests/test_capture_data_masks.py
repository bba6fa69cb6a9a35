"""Attention masks passed as data (inputs of the model), as model code applies them:
masked_fill with a bool mask, torch.where, an additive mask made from Hugging Face's
0/1 int64 attention_mask, nn.MultiheadAttention's key_padding_mask and attn_mask. A mask
that is data cannot be folded into `attention {causal}`: the softmax stays written out
(compare/select and add), and heads split over tp need no mask communication beyond the
mask's own layout. Checked against PyTorch on one device, tp=4 and 2x2."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import commir
import commir.torch

BATCH, SEQ, DIM, HEADS = 2, 8, 32, 4
MESHES = {"1": None, "tp4": {"tp": 4}, "2x2": {"dp": 2, "tp": 2}}


class MaskedSelfAttention(nn.Module):
    """Self-attention with a padding mask applied one of three ways."""

    def __init__(self, style):
        super().__init__()
        self.style = style
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x, mask):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(DIM, dim=2)
        q, k, v = (t.view(b, s, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(DIM // HEADS)
        if self.style == "masked_fill":  # mask: bool [B, S], True = a real token
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        elif self.style == "where":      # mask: bool [B, 1, S, S], True = visible
            scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        else:                            # mask: int64 [B, S] of 1/0, as tokenizers return it
            extended = mask[:, None, None, :].to(scores.dtype)
            scores = scores + (1.0 - extended) * torch.finfo(scores.dtype).min
        p = F.softmax(scores, dim=-1)
        y = (p @ v).transpose(1, 2).reshape(b, s, DIM)
        return self.proj(y)


def _padding(dtype):
    # Batch entry 0 has all 8 tokens, entry 1 has 5 (3 padded keys); no row is all masked.
    mask = torch.ones(BATCH, SEQ, dtype=dtype)
    mask[1, 5:] = 0
    return mask


MASKS = {
    "masked_fill": lambda: _padding(torch.bool),
    "where": lambda: torch.ones(SEQ, SEQ, dtype=torch.bool).tril()[None, None].repeat(BATCH, 1, 1, 1)
    & _padding(torch.bool)[:, None, None, :],
    "additive_from_int64": lambda: _padding(torch.int64),
}
LAYOUTS = {"qkv.weight": ["tp", None], "qkv.bias": ["tp"], "proj.weight": [None, "tp"]}


@pytest.mark.parametrize("mesh", list(MESHES))
@pytest.mark.parametrize("style", list(MASKS))
def test_attention_with_a_mask_passed_as_data_matches_pytorch(style, mesh):
    torch.manual_seed(0)
    model = MaskedSelfAttention(style).eval()
    axes = MESHES[mesh]
    x, mask = torch.randn(BATCH, SEQ, DIM), MASKS[style]()
    layouts = {}
    if axes:
        layouts = dict(LAYOUTS, x=["dp" if "dp" in axes else None, None, None])
    cap = commir.torch.capture(model, (x, mask), mesh=axes, layouts=layouts)
    text = cap.text
    assert [n for n, _ in cap.module.signature()][:2] == ["x", "mask"]
    assert "attention(" not in text and "softmax(" in text  # a data mask is not folded
    if style == "additive_from_int64":
        assert "convert(" in text and "i64[2, 8]" in text
    else:
        assert "select(" in text and "i1[" in text
    with torch.no_grad():
        expected = model(x, mask)
    got = cap.run(x, mask, module=cap.partition() if axes else None)
    torch.testing.assert_close(torch.from_numpy(got), expected)


@pytest.mark.parametrize("mesh", list(MESHES))
def test_multihead_attention_with_padding_and_attention_masks_as_data(mesh):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(DIM, HEADS, batch_first=True).eval()
    axes = MESHES[mesh]
    x = torch.randn(BATCH, SEQ, DIM)
    padding = ~_padding(torch.bool)  # True = ignore this key
    bias = torch.randn(SEQ, SEQ)     # a float attn_mask is added to the scores
    layouts = {}
    if axes:
        layouts = {"in_proj_weight": ["tp", None], "in_proj_bias": ["tp"], "out_proj.weight": [None, "tp"]}
    cap = commir.torch.capture(mha, (x, x, x, padding, False, bias), mesh=axes, layouts=layouts)
    names = [n for n, _ in cap.module.signature()]
    assert names[:5] == ["query", "key", "value", "key_padding_mask", "attn_mask"]
    with torch.no_grad():
        expected = mha(x, x, x, key_padding_mask=padding, need_weights=False, attn_mask=bias)[0]
    got = cap.run(x, x, x, padding, bias, module=cap.partition() if axes else None)
    torch.testing.assert_close(torch.from_numpy(got), expected)


class FusedAttention(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.skipif(hasattr(F, "scaled_dot_product_attention"), reason="torch >= 2.0 has it")
def test_scaled_dot_product_attention_is_refused_at_its_line_on_torch_1_13():
    # torch 1.13 has no F.scaled_dot_product_attention: the model itself fails there.
    q = torch.randn(BATCH, HEADS, SEQ, DIM // HEADS)
    mask = torch.ones(SEQ, SEQ, dtype=torch.bool)
    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(FusedAttention().eval(), (q, q, q, mask))
    message = str(info.value)
    assert "test_capture_data_masks.py:%d" % (FusedAttention.forward.__code__.co_firstlineno + 1) in message
    assert "scaled_dot_product_attention" in message and "has no attribute" in message
