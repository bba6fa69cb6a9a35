"""A Llama decoder layer in the forms of Hugging Face's modeling_llama.py
(tests/hf_llama_models.py): RMSNorm in f32, rotate_half RoPE, repeat_kv GQA, SwiGLU.
Captured and checked against the module's forward on one device, tp=4 and 2x2 with
Megatron-style layouts."""

import re

import pytest
import torch

import commir
import commir.torch
from hf_llama_models import LlamaCausalBlock, LlamaDecoderLayer

BATCH, SEQ, DIM, HEADS, KV_HEADS = 2, 8, 64, 8, 4
MESHES = {"1": None, "tp4": {"tp": 4}, "2x2": {"dp": 2, "tp": 2}}


def _init(model):
    torch.manual_seed(0)
    with torch.no_grad():  # away from RMSNorm's initial ones
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def _layouts(prefix, axes):
    if axes is None:
        return {}
    layouts = {prefix + name + ".weight": ["tp", None] for name in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")}
    layouts.update({prefix + name + ".weight": [None, "tp"] for name in ("self_attn.o_proj", "mlp.down_proj")})
    layouts["hidden_states"] = ["dp" if "dp" in axes else None, None, None]
    return layouts


def _run(cap, axes, *inputs):
    return torch.from_numpy(cap.run(*inputs, module=cap.partition() if axes else None))


@pytest.mark.parametrize("mesh", list(MESHES))
def test_causal_block_with_rotary_embedding_matches_pytorch(mesh):
    # Positions arange(S), cos/sin from the rotary table (inv_freq @ positions), the
    # causal mask from torch.full(...).triu(1): all constants of the traced program.
    model = _init(LlamaCausalBlock(DIM, HEADS, KV_HEADS, 128))
    axes = MESHES[mesh]
    x = torch.randn(BATCH, SEQ, DIM)
    cap = commir.torch.capture(model, (x,), mesh=axes, layouts=_layouts("layer.", axes))
    text = cap.text
    # cos and sin (no CommIR op) became arguments holding their values; the mask folded
    # into {causal}; repeat_kv undone (attention reads the 4 kv heads); RMSNorm as rmsnorm.
    signature = dict(cap.module.signature())
    assert str(signature["cos"]) == str(signature["sin"]) == "f32[%d, %d, %d]" % (BATCH, SEQ, DIM // HEADS)
    assert "attention(" in text and "causal" in text
    assert "broadcast(" not in text
    assert text.count("rmsnorm(") == 2 and "rsqrt(" not in text
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(_run(cap, axes, x), expected)


def test_tensor_parallel_block_communicates_as_megatron():
    # Megatron-LM (Shoeybi et al. 2019, section 3): a tensor-parallel transformer layer's
    # forward has two all-reduces of the [B, S, E] activations, after the attention's and
    # the MLP's row-parallel projections, and nothing else; the folded cos/sin and the
    # per-head RoPE move nothing. A ring all-reduce sends 2 (n - 1) / n of the buffer.
    model = _init(LlamaCausalBlock(DIM, HEADS, KV_HEADS, 128))
    x = torch.randn(BATCH, SEQ, DIM)
    cap = commir.torch.capture(model, (x,), mesh={"tp": 4}, layouts=_layouts("layer.", {"tp": 4}))
    report = cap.partition().comm_report()
    activation = BATCH * SEQ * DIM * 4
    assert re.search(r"all_reduce\s+count 2\s+bytes/device %d\n" % (2 * activation * 2 * 3 // 4), report), report
    assert re.search(r"total\s+count 2\s", report), report


def test_folded_cos_sin_are_the_rotary_embedding_values():
    # Independent of the capture's code path: the arguments hold cos(p * theta^(-2i/d)).
    model = _init(LlamaCausalBlock(DIM, HEADS, KV_HEADS, 128))
    cap = commir.torch.capture(model, (torch.randn(BATCH, SEQ, DIM),))
    arrays = cap.argument_arrays(torch.randn(BATCH, SEQ, DIM))
    d = DIM // HEADS
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.outer(torch.arange(SEQ, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    torch.testing.assert_close(torch.from_numpy(arrays["cos"][0]), angles.cos().float())
    torch.testing.assert_close(torch.from_numpy(arrays["sin"][1]), angles.sin().float())


@pytest.mark.parametrize("mesh", list(MESHES))
def test_layer_with_cos_sin_and_mask_passed_in_matches_pytorch(mesh):
    # HF's decoder layer as LlamaModel calls it: position_embeddings (cos, sin) and the
    # additive 4-D attention mask are data. The mask stays an input of a written-out
    # masked softmax (here with padding: batch entry 1 cannot see its first two keys).
    layer = _init(LlamaDecoderLayer(DIM, HEADS, KV_HEADS, 128))
    axes = MESHES[mesh]
    rotary = LlamaCausalBlock(DIM, HEADS, KV_HEADS, 128).rotary
    x = torch.randn(BATCH, SEQ, DIM)
    cos, sin = rotary(x, torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ))
    min_value = torch.finfo(torch.float32).min
    mask = torch.full((SEQ, SEQ), min_value).triu(1)[None, None].repeat(BATCH, 1, 1, 1)
    mask[1, :, :, :2] = min_value
    mask[1, :, :2, :2] = 0.0  # padded queries see the padding (HF keeps rows finite)
    layouts = _layouts("", axes)
    if axes:
        dp = "dp" if "dp" in axes else None
        layouts.update({"attention_mask": [dp, None, None, None], "cos": [dp, None, None], "sin": [dp, None, None]})
    cap = commir.torch.capture(layer, (x, mask, cos, sin), mesh=axes, layouts=layouts)
    assert [n for n, _ in cap.module.signature()][:4] == ["hidden_states", "attention_mask", "cos", "sin"]
    assert "softmax(" in cap.text
    with torch.no_grad():
        expected = layer(x, mask, cos, sin)
    torch.testing.assert_close(_run(cap, axes, x, mask, cos, sin), expected)


class RotaryFromPositionInputs(torch.nn.Module):
    """cos/sin of positions that are an input: no constant to fold."""

    def __init__(self):
        super().__init__()
        self.rotary = LlamaCausalBlock(DIM, HEADS, KV_HEADS, 128).rotary

    def forward(self, x, position_ids):
        cos, sin = self.rotary(x, position_ids)
        return x[:, :, : DIM // HEADS] * cos + sin


def test_cos_of_input_positions_is_refused_at_its_line():
    x = torch.randn(BATCH, SEQ, DIM)
    positions = torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ)
    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(RotaryFromPositionInputs().eval(), (x, positions))
    refusals = info.value.refusals
    assert [r.source.code for r in refusals] == ["cos = angles.cos()", "sin = angles.sin()"]
    assert all(r.source.file.endswith("hf_llama_models.py") for r in refusals)
    assert "cannot capture tensor method .cos(): CommIR has no trigonometric op" in str(info.value)
