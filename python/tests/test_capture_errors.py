"""commir.torch.capture refuses what it cannot express, naming the op and the model line."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import commir
import commir.torch


class Cumsum(nn.Module):
    def forward(self, x):
        y = x * 2
        return torch.cumsum(y, dim=0)  # the line the error names


class WithEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(10, 4, max_norm=1.0)

    def forward(self, ids):
        return self.tok(ids)


class OddMask(nn.Module):
    def forward(self, q, k, v):
        scores = q @ k.transpose(-2, -1)
        mask = torch.ones(4, 4, dtype=torch.bool).triu(2)  # not the causal pattern
        scores = scores.masked_fill(mask, float("-inf"))
        return F.softmax(scores, dim=-1) @ v


def test_unsupported_op_names_op_and_line():
    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(Cumsum().eval(), (torch.randn(4, 4),))
    message = str(info.value)
    assert "torch.cumsum" in message
    assert "test_capture_errors.py" in message and "torch.cumsum(y, dim=0)" in message


def test_embedding_with_max_norm_is_refused_with_reason():
    with pytest.raises(commir.CaptureError, match="nn.Embedding tok with max_norm: it renormalises"):
        commir.torch.capture(WithEmbedding().eval(), (torch.tensor([[1, 2]]),))


def test_mask_other_than_causal_is_refused():
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(commir.CaptureError, match="neither causal nor empty"):
        commir.torch.capture(OddMask().eval(), (q, q, q))


def test_dropout_of_everything_and_bad_layouts_are_refused():
    layer = nn.Linear(8, 8)
    # Training mode is captured (dropout follows each call's flag); p = 1 has no rate.
    with pytest.raises(commir.CaptureError, match=r"nn.Dropout 1 with p=1: it zeroes everything"):
        commir.torch.capture(nn.Sequential(layer, nn.Dropout(1.0)), (torch.randn(2, 8),))
    with pytest.raises(commir.CaptureError, match="layouts name nosuch"):
        commir.torch.capture(layer, (torch.randn(2, 8),), mesh={"tp": 2}, layouts={"nosuch": [None]})
    with pytest.raises(commir.CaptureError, match="layout of weight"):
        commir.torch.capture(layer, (torch.randn(2, 8),), mesh={"tp": 2}, layouts={"weight": ["tp"]})


def test_layout_the_verifier_rejects_raises_verify_error():
    layer = nn.Linear(8, 6).eval()
    with pytest.raises(commir.VerifyError, match="divisible"):
        commir.torch.capture(layer, (torch.randn(2, 8),), mesh={"tp": 4}, layouts={"weight": ["tp", None]})


def test_control_flow_on_tensor_values_is_refused_at_its_line():
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(commir.CaptureError, match="function operator.gt: control flow on tensor values") as info:
        commir.torch.capture(branchy, (torch.randn(3),))
    assert info.value.line == _line_of("if x.sum() > 0:") and "    if x.sum() > 0:" in str(info.value)


def test_control_flow_on_sizes_takes_the_branch_of_these_shapes():
    def sized(x):
        if x.dim() == 3 and x.size(-1) % 2 == 0:  # shapes only: known while tracing
            x = x * 2
        out = x
        for i in range(x.size(0)):
            out = out + x[i:i + 1]
        if x.mean().item() > 10:  # never taken here, and not decided by shapes: refused
            out = -out
        return out

    x = torch.randn(2, 3, 4)
    with pytest.raises(commir.CaptureError, match="function operator.gt: control flow on tensor values") as info:
        commir.torch.capture(sized, (x,))
    assert info.value.line == _line_of("if x.mean().item() > 10:")

    def without_data_branch(x):
        if x.dim() == 3 and x.size(-1) % 2 == 0 and x.is_floating_point() and torch.numel(x) > 4:
            x = x * 2
        out = x
        for i in range(x.size(0)):
            out = out + x[i:i + 1]
        return out

    cap = commir.torch.capture(without_data_branch, (x,))
    assert cap.text.count("slice(") == 2 and "mul(" in cap.text
    assert torch.equal(torch.from_numpy(cap.run(x)), without_data_branch(x))


def test_a_tensor_value_as_a_number_is_refused_at_its_line():
    def converts(x):
        return x * float(x.sum())  # marker: float of a traced value

    with pytest.raises(commir.CaptureError, match="tensor method .sum\\(\\): a tensor value used as a "
                                                  "Python number") as info:
        commir.torch.capture(converts, (torch.randn(3),))
    assert info.value.line == _line_of("# marker: float of a traced value")


def test_an_error_raised_while_tracing_names_the_model_line():
    def unfinished(x):
        raise NotImplementedError("not written yet")  # marker: raised by the model

    with pytest.raises(commir.CaptureError, match="torch.fx cannot trace unfinished: not written yet") as info:
        commir.torch.capture(unfinished, (torch.randn(3),))
    assert info.value.line == _line_of("# marker: raised by the model")
    assert 'raise NotImplementedError("not written yet")' in str(info.value)


def test_bad_arguments_to_capture():
    layer = nn.Linear(8, 4).eval()
    x = torch.randn(2, 8)
    with pytest.raises(commir.CaptureError, match="takes 1 inputs \\(input\\) but 2 example inputs"):
        commir.torch.capture(layer, (x, x))
    with pytest.raises(commir.CaptureError, match="running the traced model on the example inputs failed"):
        commir.torch.capture(layer, (torch.randn(2, 5),))
    with pytest.raises(commir.CaptureError, match="mesh must be a dict"):
        commir.torch.capture(layer, (x,), mesh={"tp": 0})
    with pytest.raises(commir.CaptureError, match="mesh must be a dict"):
        commir.torch.capture(layer, (x,), mesh=4)
    with pytest.raises(commir.CaptureError, match="must be a list with one entry per dimension"):
        commir.torch.capture(layer, (x,), mesh={"tp": 2}, layouts={"input": "tp"})


def _line_of(marker):
    """The line of this file holding `marker`: where the model code the refusals name is."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


class TopK(nn.Module):
    def forward(self, x):
        w, idx = torch.topk(x, 2)  # marker: topk
        return w * 2


def test_topk_of_integers_unpacks_and_is_refused_with_op_reason_and_line():
    # Of floats it is captured (test_capture_moe.py); integers tie, and which tied index
    # torch 1.13 returns follows no rule.
    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(TopK().eval(), (torch.tensor([[1, 3, 3, 2, 0]]),))
    (refusal,) = info.value.refusals
    assert refusal.what == ("function torch.topk of a torch.int64 tensor: integers tie, and torch 1.13's topk picks "
                            "among tied entries in no specified order where CommIR's top_k takes the lower index")
    assert (refusal.source.file, refusal.source.line) == (__file__, _line_of("# marker: topk"))
    assert str(info.value).startswith("%s:%d: cannot capture function torch.topk" % (__file__, refusal.source.line))
    assert "w, idx = torch.topk(x, 2)" in str(info.value)
    assert (info.value.file, info.value.line) == (__file__, refusal.source.line)


class Router(nn.Module):
    """Several things CommIR cannot express, spread over a submodule and the root."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(16, 8, scale_grad_by_freq=True)
        self.conv = nn.Conv1d(8, 8, 1)
        self.gate = nn.Linear(8, 4)

    def forward(self, ids, x):
        h = self.tok(ids) + self.gate_scores(x)            # marker: embedding
        y = self.conv(x.transpose(1, 2)).transpose(1, 2)   # marker: conv
        return h, torch.cumsum(y, dim=1)                   # marker: cumsum

    def gate_scores(self, x):
        scores, chosen = self.gate(x).long().topk(1, dim=-1)  # marker: method topk
        return scores * x


def test_all_refusals_come_in_one_error_in_source_order():
    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(Router().eval(), (torch.tensor([[1, 2, 3]]), torch.randn(1, 3, 8)))
    refusals = info.value.refusals
    assert [(r.source.line, r.what) for r in refusals] == [
        (_line_of("# marker: embedding"),
         "nn.Embedding tok with scale_grad_by_freq: gather's derivative sums the rows' cotangents unscaled"),
        (_line_of("# marker: method topk"), "tensor method .topk() of a torch.int64 tensor: integers tie, and torch 1.13's topk picks among tied entries in no specified order where CommIR's top_k takes the lower index"),
        (_line_of("# marker: conv"), "nn.Conv1d conv: CommIR has no lowering for this module"),
        (_line_of("# marker: cumsum"), "function torch.cumsum: CommIR has no scan (cumulative) op"),
    ]
    message = str(info.value)
    assert message.startswith("4 parts of Router cannot be captured:\n")
    # Each with its file:line and the line of code, in that order.
    positions = [message.index("%s:%d: cannot capture" % (__file__, r.source.line)) for r in refusals]
    assert positions == sorted(positions)
    assert "scores, chosen = self.gate(x).long().topk(1, dim=-1)" in message


class OptionalMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, mask=None, unused=None):
        y = self.lin(x)
        if mask is not None:  # fx would see a traced value here, not None
            y = y.masked_fill(mask, 0.0)
        return y


def test_parameters_not_given_stay_none():
    model = OptionalMask().eval()
    x = torch.randn(2, 8)
    cap = commir.torch.capture(model, (x,))
    assert [n for n, _ in cap.module.signature()] == ["x", "lin.weight", "lin.bias"]
    assert "select(" not in cap.text
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x)), model(x))
    # Given, the mask is an input and is applied.
    mask = torch.tensor([[True] * 4 + [False] * 4, [False] * 8])
    cap = commir.torch.capture(model, (x, mask))
    assert [n for n, _ in cap.module.signature()][:2] == ["x", "mask"] and "select(" in cap.text
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x, mask)), model(x, mask))


class KdimAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, kdim=8, vdim=8, batch_first=True)

    def forward(self, q, kv):
        return self.mha(q, kv, kv)[0]  # marker: kdim


def test_refusal_inside_a_reimplemented_module_names_the_model_line():
    with pytest.raises(commir.CaptureError, match="nn.MultiheadAttention with kdim/vdim") as info:
        commir.torch.capture(KdimAttention().eval(), (torch.randn(1, 4, 16), torch.randn(1, 3, 8)))
    assert "%s:%d:" % (__file__, _line_of("# marker: kdim")) in str(info.value)


def test_unpacking_what_is_not_a_sequence_names_the_line():
    def f(x):
        total, rest = x.sum()  # marker: unpack a number
        return total

    with pytest.raises(commir.CaptureError, match="tensor method .sum\\(\\): cannot unpack or take len\\(\\) "
                                                  "of its result: it is not a sequence") as info:
        commir.torch.capture(f, (torch.randn(4, 3),))
    assert info.value.line == _line_of("# marker: unpack a number")


def test_an_op_commir_rejects_is_a_refusal_at_the_model_line():
    def f(i, x):
        return torch.exp(i) + x  # marker: exp of an integer

    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(f, (torch.ones(3, dtype=torch.long), torch.ones(3)))
    (refusal,) = info.value.refusals
    assert refusal.what.startswith("function torch.exp: CommIR's op rejects it: exp: the operand must have a "
                                   "floating-point element type")
    assert refusal.source.line == _line_of("# marker: exp of an integer")


def test_indices_of_max_are_refused():
    def f(x):
        values, where = torch.max(x, dim=-1)  # marker: max with indices
        return values * 2, where

    with pytest.raises(commir.CaptureError, match="the indices of function torch.max along a dimension: "
                                                  "CommIR has no argmax op") as info:
        commir.torch.capture(f, (torch.randn(3, 4),))
    assert info.value.line == _line_of("# marker: max with indices")
