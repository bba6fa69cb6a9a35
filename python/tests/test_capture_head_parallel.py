"""nn.MultiheadAttention's packed in-projection laid out head-parallel.

in_proj_weight stacks q, k and v ([3E, E]); contiguous blocks of its first dimension
cut across the three thirds (on tp=4 device 0 would hold three quarters of q and no k or
v), so the partitioner all_gathered the whole weight every step. The capture takes it as [3, H, D, E] (and the bias as [3, H, D]): a layout on the
packed dimension splits the heads, each device holding its heads' q, k and v rows, as
Megatron-LM's column-parallel QKV projection does. Checked here: no all_gather of a
weight remains (on tp=4 and 2x2) and the results match PyTorch's module.
"""

import re

import pytest
import torch

import commir
import commir.torch
from torchvision.models.vision_transformer import EncoderBlock  # Debian's python3-torchvision

BATCH, SEQ, DIM, HEADS = 2, 8, 32, 4
MESHES = {"tp4": {"tp": 4}, "2x2": {"dp": 2, "tp": 2}}


def _megatron(prefix, mlp):
    """Head-parallel attention, column- then row-parallel MLP (weights are [out, in])."""
    up, down = mlp
    return {prefix + "in_proj_weight": ["tp", None], prefix + "in_proj_bias": ["tp"],
            prefix + "out_proj.weight": [None, "tp"],
            up + ".weight": ["tp", None], up + ".bias": ["tp"], down + ".weight": [None, "tp"]}


def _encoder_layer():
    return torch.nn.TransformerEncoderLayer(DIM, HEADS, 64, dropout=0.0, batch_first=True)


# model factory, input name, weight layouts
MODELS = {
    "encoder_layer": (_encoder_layer, "src", _megatron("self_attn.", ("linear1", "linear2"))),
    "vit_encoder_block": (lambda: EncoderBlock(HEADS, DIM, 64, 0.0, 0.0), "input",
                          _megatron("self_attention.", ("mlp.0", "mlp.3"))),
}


def _model(name):
    torch.manual_seed(0)
    factory, input_name, layouts = MODELS[name]
    model = factory().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model, input_name, layouts


def _gathered_arguments(module, weights):
    """The parameters some all_gather in `module` reads."""
    gathered = re.findall(r"= all_gather\(%([\w.]+)\)", module.text())
    return sorted(set(gathered) & set(weights))


@pytest.mark.parametrize("mesh", list(MESHES))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_packed_in_projection_is_split_by_heads(model_name, mesh):
    model, input_name, weights = _model(model_name)
    axes = MESHES[mesh]
    x = torch.randn(BATCH, SEQ, DIM)
    layouts = dict(weights)
    layouts[input_name] = ["dp" if "dp" in axes else None, "tp", None]
    cap = commir.torch.capture(model, (x,), mesh=axes, layouts=layouts)
    signature = dict(cap.module.signature())
    packed = [n for n in signature if n.endswith("in_proj_weight")][0]
    # [3, H, D, E] with the heads split: the layout written for [3E, E] went to the heads.
    assert str(signature[packed]) == "f32[3, %d@tp, %d, %d]" % (HEADS, DIM // HEADS, DIM)
    spmd = cap.partition()
    params = [n for n, (kind, _) in cap.arguments if kind == "state"]
    assert _gathered_arguments(spmd, params) == [], spmd.text()
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(torch.from_numpy(cap.run(x, module=spmd)), expected)


def test_no_weight_gathered_on_tp4_comm_report():
    # The all_gathers left on tp=4 move activations only: the sequence-parallel input
    # of each residual branch, [B, S, E] f32 gathered from quarters. Before the head
    # layout the packed weight (3E x E) and bias were gathered as well.
    model, input_name, weights = _model("encoder_layer")
    x = torch.randn(BATCH, SEQ, DIM)
    layouts = dict(weights, **{input_name: [None, "tp", None]})
    spmd = commir.torch.capture(model, (x,), mesh={"tp": 4}, layouts=layouts).partition()
    report = spmd.comm_report()
    gathers = re.search(r"all_gather\s+count (\d+)\s+bytes/device (\d+)", report)
    count, moved = int(gathers.group(1)), int(gathers.group(2))
    # Each gather receives 3/4 of a [2, 8, 32] f32 activation per device.
    activation_share = BATCH * SEQ * DIM * 4 * 3 // 4
    assert moved == count * activation_share, report


def test_head_layout_may_be_written_per_head():
    # The [3, H, D, E] argument also takes a layout written for its own shape.
    mha = torch.nn.MultiheadAttention(DIM, HEADS, batch_first=True).eval()
    q = torch.randn(BATCH, SEQ, DIM)
    cap = commir.torch.capture(mha, (q, q, q), mesh={"tp": 2},
                               layouts={"in_proj_weight": [None, "tp", None, None], "in_proj_bias": [None, "tp", None],
                                        "out_proj.weight": [None, "tp"]})
    spmd = cap.partition()
    assert _gathered_arguments(spmd, ["in_proj_weight", "in_proj_bias", "out_proj.weight"]) == []
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(q, q, q, module=spmd)), mha(q, q, q)[0])


def test_head_split_that_does_not_divide_the_heads_is_refused():
    # 4 heads over 3 devices: no whole number of heads per device.
    mha = torch.nn.MultiheadAttention(DIM, HEADS, batch_first=True).eval()
    q = torch.randn(BATCH, SEQ, DIM)
    with pytest.raises(commir.CaptureError, match="layout of in_proj_weight: 4 heads cannot be split over 3 devices"):
        commir.torch.capture(mha, (q, q, q), mesh={"tp": 3}, layouts={"in_proj_weight": ["tp", None]})


def test_a_layout_of_another_rank_names_both_accepted_forms():
    mha = torch.nn.MultiheadAttention(DIM, HEADS, batch_first=True).eval()
    q = torch.randn(BATCH, SEQ, DIM)
    with pytest.raises(commir.CaptureError, match=r"layout of in_proj_weight has 3 entries: it takes 2 "
                       r"\(the parameter's own shape \[96, 32\], the first entry splitting the heads\) "
                       r"or 4 \(per head, \[3, 4, 8, 32\]\)"):
        commir.torch.capture(mha, (q, q, q), mesh={"tp": 2}, layouts={"in_proj_weight": ["tp", None, None]})
