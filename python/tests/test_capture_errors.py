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
        self.tok = nn.Embedding(10, 4)

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


def test_embedding_is_refused_with_reason():
    with pytest.raises(commir.CaptureError, match="nn.Embedding tok: an embedding lookup needs a gather"):
        commir.torch.capture(WithEmbedding().eval(), (torch.tensor([[1, 2]]),))


def test_mask_other_than_causal_is_refused():
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(commir.CaptureError, match="neither causal nor empty"):
        commir.torch.capture(OddMask().eval(), (q, q, q))


def test_training_mode_and_bad_layouts_are_refused():
    layer = nn.Linear(8, 8)
    with pytest.raises(commir.CaptureError, match="training mode"):
        commir.torch.capture(layer, (torch.randn(2, 8),))
    layer.eval()
    with pytest.raises(commir.CaptureError, match="layouts name nosuch"):
        commir.torch.capture(layer, (torch.randn(2, 8),), mesh={"tp": 2}, layouts={"nosuch": [None]})
    with pytest.raises(commir.CaptureError, match="layout of weight"):
        commir.torch.capture(layer, (torch.randn(2, 8),), mesh={"tp": 2}, layouts={"weight": ["tp"]})


def test_layout_the_verifier_rejects_raises_verify_error():
    layer = nn.Linear(8, 6).eval()
    with pytest.raises(commir.VerifyError, match="divisible"):
        commir.torch.capture(layer, (torch.randn(2, 8),), mesh={"tp": 4}, layouts={"weight": ["tp", None]})


def test_untraceable_control_flow_is_a_capture_error():
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(commir.CaptureError, match="torch.fx cannot trace branchy"):
        commir.torch.capture(branchy, (torch.randn(3),))


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
