"""Transformer blocks captured from PyTorch, partitioned on 1, 4 and 2x4 meshes with and
without overlap schedules, run on the cpu mesh and checked against the module's forward."""

import pytest
import torch

import commir
import commir.torch
from models import GPT2Block, LlamaBlock

BATCH, SEQ, DIM = 2, 8, 32


def encoder_layer(norm_first):
    return torch.nn.TransformerEncoderLayer(DIM, 4, 64, dropout=0.0, batch_first=True,
                                            norm_first=norm_first)


# model factory, input argument name, Megatron-style weight layouts (column-parallel
# then row-parallel linears, weights stored [out, in]).
ENCODER_MLP = {"linear1.weight": ["tp", None], "linear1.bias": ["tp"], "linear2.weight": [None, "tp"]}
MODELS = {
    "encoder_post_norm": (lambda: encoder_layer(False), "src", ENCODER_MLP),
    "encoder_pre_norm": (lambda: encoder_layer(True), "src", ENCODER_MLP),
    "gpt2": (lambda: GPT2Block(DIM, 4, 16), "x", {
        "attn.c_attn.weight": ["tp", None], "attn.c_attn.bias": ["tp"],
        "attn.c_proj.weight": [None, "tp"], "mlp.c_fc.weight": ["tp", None],
        "mlp.c_fc.bias": ["tp"], "mlp.c_proj.weight": [None, "tp"]}),
    "llama_gqa_swiglu": (lambda: LlamaBlock(DIM, 4, 2, 64, 16), "x", {
        "attention.wq.weight": ["tp", None], "attention.wk.weight": ["tp", None],
        "attention.wv.weight": ["tp", None], "attention.wo.weight": [None, "tp"],
        "feed_forward.w1.weight": ["tp", None], "feed_forward.w3.weight": ["tp", None],
        "feed_forward.w2.weight": [None, "tp"]}),
}
MESHES = {"1": {"tp": 1}, "4": {"tp": 4}, "2x4": {"dp": 2, "tp": 4}}
# schedule pipeline, and which layouts it is exercised with: "megatron" splits the
# weights and the input's sequence (sequence-parallel residual stream), "sequence" only
# the input's sequence (attention over a split sequence).
SCHEDULES = {
    "none": (None, "megatron"),
    "pipeline-collective-matmul": ("pipeline-collective-matmul{chunks=2}", "megatron"),
    "ring-attention": ("ring-attention", "sequence"),
}


def make_model(name):
    torch.manual_seed(0)
    factory, input_name, weights = MODELS[name]
    model = factory().eval()
    with torch.no_grad():  # away from the initial ones and zeros of norms and biases
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model, input_name, weights


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("mesh", list(MESHES))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_captured_block_matches_pytorch(model_name, mesh, schedule):
    model, input_name, weights = make_model(model_name)
    axes = MESHES[mesh]
    x = torch.randn(BATCH, SEQ, DIM)
    pipeline, kind = SCHEDULES[schedule]
    layouts = {input_name: ["dp" if "dp" in axes else None, "tp", None]}
    if kind == "megatron":
        layouts.update(weights)
    cap = commir.torch.capture(model, (x,), mesh=axes, layouts=layouts)
    spmd = cap.partition()
    if pipeline is not None:
        scheduled = commir.opt(spmd, pipeline)
        # The schedule really rewrote something. Except ring-attention on the 1-D mesh:
        # there the partitioner gathers the normed input once for the q, k and v
        # projections (no more bytes than gathering k and v, one collective instead of
        # two), which leaves no gathered key/value sequence to turn into a ring.
        sequence_on_1d = kind == "sequence" and len(axes) == 1
        if (len(axes) > 1 or axes.get("tp", 1) > 1) and not sequence_on_1d:
            assert scheduled.text() != spmd.text(), "%s left the program unchanged" % pipeline
        spmd = scheduled
    with torch.no_grad():
        expected = model(x)
    got = cap.run(x, module=spmd)
    torch.testing.assert_close(torch.from_numpy(got), expected)


@pytest.mark.parametrize("model_name", list(MODELS))
def test_global_function_without_mesh_matches_pytorch(model_name):
    model, _, _ = make_model(model_name)
    x = torch.randn(BATCH, SEQ, DIM)
    cap = commir.torch.capture(model, (x,))
    assert "attention(" in cap.text  # written-out attention became one op
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x)), model(x))


def test_parameters_become_state_dict_named_arguments():
    model, _, _ = make_model("llama_gqa_swiglu")
    cap = commir.torch.capture(model, (torch.randn(BATCH, SEQ, DIM),))
    names = [name for name, _ in cap.module.signature()]
    assert names[0] == "x"
    params = [k for k in model.state_dict() if k != "attention.mask"]
    assert names[1:] == params  # the mask buffer was folded into {causal}
    assert "causal" in cap.text
    # RMS norm as written (x * rsqrt(mean(x^2) + eps) * w, through .float()/.type_as).
    assert cap.text.count("rmsnorm(") == 2 and "rsqrt(" not in cap.text
    # GQA: repeat_kv is undone, attention reads the 2 kv heads directly.
    assert "broadcast(" not in cap.text
    assert ".kv = transpose(%view_1) {perm = [0, 2, 1, 3]} : f32[2, 2, 8, 8]" in cap.text


def test_text_is_canonical():
    model, _, _ = make_model("gpt2")
    cap = commir.torch.capture(model, (torch.randn(BATCH, SEQ, DIM),), mesh={"tp": 4})
    text = cap.text
    assert commir.parse(text).text() == text


@pytest.mark.parametrize("model_name", ["gpt2", "llama_gqa_swiglu"])
def test_bf16_block_within_spec_tolerance(model_name):
    # bf16 rounds every intermediate, and PyTorch and CommIR round in different places:
    # elementwise closeness is not expected, the spec's bf16 check is (relative L2 <= 2e-2).
    model, input_name, _ = make_model(model_name)
    model = model.to(torch.bfloat16)
    x = torch.randn(BATCH, SEQ, DIM).to(torch.bfloat16)
    cap = commir.torch.capture(model, (x,), mesh={"tp": 4}, layouts={input_name: [None, "tp", None]})
    assert "bf16[2, 8, 32]" in cap.text
    got = torch.from_numpy(cap.run(x, module=cap.partition()))
    with torch.no_grad():
        expected = model(x).float()
    assert (torch.linalg.norm(got - expected) / torch.linalg.norm(expected)).item() <= 2e-2


class SequenceFirstAttention(torch.nn.Module):
    """nn.MultiheadAttention used directly in a module, sequence-first ([S, B, E])."""

    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 4)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        return self.ln(x + self.mha(x, x, x, need_weights=False)[0])


def test_multihead_attention_inside_a_module_on_a_mesh():
    torch.manual_seed(0)
    model = SequenceFirstAttention().eval()
    x = torch.randn(8, 2, 16)
    cap = commir.torch.capture(model, (x,), mesh={"tp": 2}, layouts={"x": ["tp", None, None]})
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x, module=cap.partition())), model(x))


def test_multihead_attention_as_the_root_with_cross_attention():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    q, kv = torch.randn(2, 8, 16), torch.randn(2, 4, 16)
    cap = commir.torch.capture(mha, (q, kv, kv))
    assert [n for n, _ in cap.module.signature()][:4] == ["query", "key", "value", "in_proj_weight"]
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(q, kv, kv)), mha(q, kv, kv)[0])


def test_encoder_layer_with_gelu_and_dropout_in_eval():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(DIM, 4, 64, dropout=0.1, activation="gelu",
                                             batch_first=True).eval()
    x = torch.randn(BATCH, SEQ, DIM)
    cap = commir.torch.capture(layer, (x,), mesh={"tp": 4}, layouts={"src": [None, "tp", None]})
    assert "gelu(" in cap.text
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x, module=cap.partition())), layer(x))
