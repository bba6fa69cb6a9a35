"""index_select, index_add, torch.gather/scatter_add in their whole-slice forms as CommIR
gather/scatter_add, the refusals of the other forms, and dtype conversions (.long(),
.int(), .bool(), .to(dtype), .float()) as convert, against PyTorch on one device and
partitioned (tp=4, 2x2)."""

import pytest
import torch

import commir
import commir.torch

NODES, EDGES, DIM = 6, 10, 16
MESHES = {"1": None, "tp4": {"tp": 4}, "2x2": {"dp": 2, "tp": 2}}


class MessagePassing(torch.nn.Module):
    """One round of graph message passing as GNN code writes it: gather the source
    nodes' features per edge, transform, sum the messages into the destination nodes."""

    def __init__(self, style):
        super().__init__()
        self.style = style
        self.lin = torch.nn.Linear(DIM, DIM)

    def forward(self, x, src, dst):
        if self.style == "index":
            messages = self.lin(x.index_select(0, src))
            return x.index_add(0, dst, messages, alpha=0.5)
        # torch.gather / scatter_add with a 1-D index repeated along the features.
        gathered = torch.gather(x, 0, src[:, None].expand(-1, DIM))
        messages = self.lin(gathered)
        index = dst.unsqueeze(-1).expand_as(messages)
        return torch.zeros_like(x).scatter_add(0, index, messages) + x


def _graph():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(NODES, DIM, generator=g)
    src = torch.randint(0, NODES, (EDGES,), generator=g)
    dst = torch.randint(0, NODES, (EDGES,), generator=g)  # repeated destinations sum
    return x, src, dst


@pytest.mark.parametrize("mesh", list(MESHES))
@pytest.mark.parametrize("style", ["index", "gather_scatter"])
def test_message_passing_matches_pytorch(style, mesh):
    torch.manual_seed(0)
    model = MessagePassing(style).eval()
    axes = MESHES[mesh]
    x, src, dst = _graph()
    layouts = {}
    if axes:  # features and the linear's outputs split over tp
        layouts = {"x": [None, "tp"], "lin.weight": ["tp", None], "lin.bias": ["tp"]}
    cap = commir.torch.capture(model, (x, src, dst), mesh=axes, layouts=layouts)
    assert "gather(" in cap.text and "scatter_add(" in cap.text
    assert "i64[10]" in cap.text
    with torch.no_grad():
        expected = model(x, src, dst)
    got = cap.run(x, src, dst, module=cap.partition() if axes else None)
    torch.testing.assert_close(torch.from_numpy(got), expected)


class Refused(torch.nn.Module):
    def forward(self, x, index):
        a = torch.gather(x, 1, index)                  # a different column per element
        b = x.scatter(0, index, 1.0)                   # overwrites
        return a + b


def test_elementwise_gather_and_scatter_are_refused_with_reasons_and_lines():
    x = torch.randn(4, 4)
    index = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(Refused().eval(), (x, index))
    refusals = info.value.refusals
    assert [r.source.code for r in refusals] == [
        "a = torch.gather(x, 1, index)                  # a different column per element",
        "b = x.scatter(0, index, 1.0)                   # overwrites"]
    assert "torch.gather: an index that may pick a different row for each element" in refusals[0].what
    assert "CommIR has no op that overwrites rows" in refusals[1].what


class InPlaceReadAfter(torch.nn.Module):
    def forward(self, x, index, updates):
        y = x * 2
        z = y.index_add_(0, index, updates)
        return z + y  # y is modified in place in PyTorch


def test_in_place_index_add_read_afterwards_is_refused():
    x, index, updates = torch.randn(4, 3), torch.tensor([0, 2]), torch.randn(2, 3)
    with pytest.raises(commir.CaptureError, match="in place on a tensor also read elsewhere"):
        commir.torch.capture(InPlaceReadAfter().eval(), (x, index, updates))


class InPlaceOnly(torch.nn.Module):
    def forward(self, x, index, updates):
        y = x * 2
        return y.index_add_(0, index, updates)


def test_in_place_index_add_read_by_nothing_else_is_captured():
    x, index, updates = torch.randn(4, 3), torch.tensor([0, 2, 0]), torch.randn(3, 3)
    cap = commir.torch.capture(InPlaceOnly().eval(), (x, index, updates))
    expected = InPlaceOnly()(x, index, updates)
    torch.testing.assert_close(torch.from_numpy(cap.run(x, index, updates)), expected)


class Conversions(torch.nn.Module):
    def forward(self, x, ids):
        truncated = (x * 3).long()                    # toward zero, as C converts
        as_int32 = (x * 3).to(torch.int32)
        nonzero = ids.bool()                          # int -> bool: nonzero
        counts = nonzero.long().sum(-1, keepdim=True)
        scaled = truncated.float() * 0.5 + as_int32.double().float()
        return scaled + counts.to(x.dtype) + ids.float()


@pytest.mark.parametrize("mesh", list(MESHES))
def test_conversions_match_pytorch(mesh):
    axes = MESHES[mesh]
    # Ties, halves and negative values: where nearest rounding and truncation differ.
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.9, -0.9],
                      [0.1, -0.1, 2.0, -2.0, 3.3, -3.3, 7.0, -7.7]]).repeat(2, 1)
    ids = torch.tensor([[0, 3, 0, 1, 2, 0, 0, 5]] * 4)
    layouts = {"x": ["dp" if axes and "dp" in axes else None, "tp"], "ids": [None, "tp"]} if axes else {}
    cap = commir.torch.capture(Conversions().eval(), (x, ids), mesh=axes, layouts=layouts)
    assert "i64[4, 8]" in cap.text and "i32[4, 8]" in cap.text and "i1[4, 8]" in cap.text
    got = cap.run(x, ids, module=cap.partition() if axes else None)
    torch.testing.assert_close(torch.from_numpy(got), Conversions()(x, ids))


def test_truncation_toward_zero_against_a_closed_form():
    # Independent of PyTorch: trunc(v) = sign(v) * floor(|v|), over many values and
    # every float type CommIR has.
    values = torch.linspace(-40, 40, 1601)  # steps of 0.05: halves, ties, integers
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        v = values.to(dtype)
        cap = commir.torch.capture(lambda t: t.long(), (v,))
        expected = (torch.sign(v.double()) * torch.floor(v.double().abs())).long()
        assert cap.run(v).tolist() == expected.tolist(), dtype
