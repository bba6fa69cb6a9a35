"""Comparisons, torch.where, masked_fill and bool logic are captured as CommIR `compare`
and `select` and compute exactly what PyTorch computes (both pick, never round)."""

import pytest
import torch

import commir
import commir.torch


def comparisons(x, y):
    return (x < y, x <= 0.25, x > y, x >= 0, x == y, x != y,
            torch.gt(x, y), torch.lt(x, 1), x.ge(y), x.le(y), torch.eq(x, 0.5), x.ne(y),
            torch.greater(y, x), torch.less_equal(x, y))


def choices(x, y):
    a = torch.where(x > y, x, y)                    # an elementwise max written as where
    b = torch.where(x.abs() < 0.5, 0.0, x)          # a number as one choice
    c = x.masked_fill(y < 0, float("-inf"))         # masked_fill outside attention
    d = torch.where(~(x > 0) & (y > 0) | (x == y), x * y, -x)
    e = torch.where(torch.logical_not(x > 0), 1.0, 2.0)
    f = x.where(y > 0, y)                           # the method: x where y > 0, else y
    return a, b, c, d, e, f


def mixed_types(i, x):
    # i64 against f32 compares in f32, as torch.result_type says; where picks an i64.
    return i > x, torch.where(i > 2, i, 0), i == 3


@pytest.mark.parametrize("fn", [comparisons, choices])
def test_float_comparisons_and_choices_match_pytorch_exactly(fn):
    torch.manual_seed(0)
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    x[0, :2] = y[0, :2]  # some equal elements for ==, !=, <=, >=
    x[1, 0] = 0.5
    cap = commir.torch.capture(fn, (x, y))
    assert "compare(" in cap.text
    got, expected = cap.run(x, y), fn(x, y)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert torch.equal(torch.from_numpy(g), e), (g, e)


def test_comparison_predicates_in_the_text():
    cap = commir.torch.capture(lambda x, y: (x < y, x >= y, x != 0), (torch.randn(4), torch.randn(4)))
    for cmp in ("lt", "ge", "ne"):
        assert "{cmp = %s}" % cmp in cap.text
    assert cap.text.count(": i1[4]") >= 3


def test_integer_and_float_operands_are_promoted_as_pytorch_does():
    i = torch.arange(6).reshape(2, 3)
    x = torch.full((2, 3), 2.5)
    cap = commir.torch.capture(mixed_types, (i, x))
    assert "convert(" in cap.text
    for g, e in zip(cap.run(i, x), mixed_types(i, x)):
        assert torch.equal(torch.from_numpy(g), e), (g, e)


class LeakyLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.layer(x)
        return torch.where(h > 0, h, 0.1 * h)  # leaky ReLU written with where


def test_where_on_a_mesh_matches_pytorch():
    torch.manual_seed(1)
    model = LeakyLinear().eval()
    x = torch.randn(4, 8)
    cap = commir.torch.capture(model, (x,), mesh={"tp": 4}, layouts={"x": ["tp", None]})
    assert "select(" in cap.text
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x, module=cap.partition())), model(x))


def test_where_with_one_argument_is_refused():
    def f(x):
        return torch.where(x > 0)[0]  # indices: a data-dependent shape

    with pytest.raises(commir.CaptureError, match="torch.where with one argument") as info:
        commir.torch.capture(f, (torch.randn(4),))
    assert "test_capture_compare.py" in str(info.value)
