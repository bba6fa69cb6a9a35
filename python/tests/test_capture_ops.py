"""commir.torch.capture on single ops and small functions as model code writes them."""

import torch
import torch.nn as nn
import torch.nn.functional as F

import commir
import commir.torch


def test_plain_function_with_gelu_forms_and_conversions():
    def f(x, w):
        h = x @ w
        a = F.gelu(h) + F.gelu(h, approximate="tanh")
        return F.silu(a.to(torch.bfloat16)).float().permute(1, 0).reshape(-1)

    x, w = torch.randn(4, 8), torch.randn(8, 6)
    cap = commir.torch.capture(f, (x, w))
    assert "convert(" in cap.text and "approximate = tanh" in cap.text
    # silu ran in bf16: torch's bf16 tolerances (one rounding may differ).
    torch.testing.assert_close(torch.from_numpy(cap.run(x, w)), f(x, w), rtol=1.6e-2, atol=1e-5)


def test_hf_conv1d_style_addmm():
    class Conv1D(nn.Module):  # as transformers' GPT-2 writes its projections
        def __init__(self, nf, nx):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(nx, nf))
            self.bias = nn.Parameter(torch.randn(nf))
            self.nf = nf

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    layer = Conv1D(12, 8).eval()
    x = torch.randn(2, 3, 8)
    cap = commir.torch.capture(layer, (x,))
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x)), layer(x))


def test_layout_and_reduction_ops():
    def f(x, w):
        a = x.split(4, dim=-1)[1]                 # [2, 3, 4]
        b = torch.chunk(x, 2, dim=1)[0]           # [2, 2, 12]
        c = torch.cat([a, x[:, :, 0:4]], dim=-1)  # [2, 3, 8]
        d = c.flatten(0, 1).t() @ w               # [8, 6] @ [6, 5]
        e = d.unsqueeze(0).squeeze(0).sum(dim=0, keepdim=True) + d.amax(dim=-1).reshape(8, 1)
        return e * b.mean(), torch.sigmoid(e).permute(1, 0)

    x, w = torch.randn(2, 3, 12), torch.randn(6, 5)
    cap = commir.torch.capture(f, (x, w))
    got = cap.run(x, w)
    expected = f(x, w)
    assert len(got) == 2
    for g, e in zip(got, expected):
        torch.testing.assert_close(torch.from_numpy(g), e)


def test_max_and_min_forms():
    def f(x, y):
        stable = x - x.max(dim=-1, keepdim=True).values  # a written-out stable softmax's shift
        return (stable, torch.max(x), torch.min(x, y), torch.max(x, 1)[0], x.min(dim=0).values,
                torch.min(x), y.max(x))

    x, y = torch.randn(4, 6), torch.randn(4, 6)
    cap = commir.torch.capture(f, (x, y))
    assert "reduce_max(" in cap.text and "argmax" not in cap.text
    got, expected = cap.run(x, y), f(x, y)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert torch.equal(torch.from_numpy(g).reshape(e.shape), e), (g, e)  # max picks: exact


def test_tensors_built_from_constants_and_buffers():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("keep", torch.tensor([[True, False, True], [False, True, True]]))

        def forward(self, x):
            y = x * torch.tensor([1.0, 2.0, 3.0])           # fx keeps it as _tensor_constant0
            return torch.where(self.keep[:, 1:], y[:, 1:], 0.0), y.masked_fill(self.keep, -1.0)

    model = Scaled().eval()
    x = torch.randn(2, 3)
    cap = commir.torch.capture(model, (x,))
    # The slice of the bool buffer is computed in the program, from the buffer argument.
    assert "%keep: i1[2, 3]" in cap.text and "slice(%keep)" in cap.text
    for g, e in zip(cap.run(x), model(x)):
        assert torch.equal(torch.from_numpy(g), e)
