"""Mixture-of-experts capture: commir.nn's routing against an independent loop, a
Mixtral-style block captured and checked against PyTorch's forward and autograd on one
device and on ep = 2 and 4 (the same choices dropped), torch.topk as top_k, and the
token-loop form (Hugging Face's) refused with the form that captures."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

import commir
import commir.nn
import commir.torch
from moe_models import CapacityMoE, CapacityMoELoss, LoopMoE

TOL = dict(rtol=2e-5, atol=2e-6)  # f32 on both sides, the same operations in the same order


def loop_dispatch(x, experts_of, experts, capacity, groups):
    """GShard's routing written as the plain loop the docs describe: in each group, every
    token's first choice in token order, then every second choice, ...; a choice takes
    the next free position of its expert, or is dropped past `capacity`. Returns the
    buffer (differentiable in x) and the set of kept (token, choice)."""
    tokens, k = experts_of.shape
    per = tokens // groups
    rows = x if x.dim() == 3 else x[:, None, :].expand(tokens, k, x.shape[-1])
    buf = torch.zeros(experts, groups * capacity, x.shape[-1], dtype=x.dtype)
    kept = set()
    for g in range(groups):
        used = [0] * experts
        for j in range(k):
            for t in range(g * per, (g + 1) * per):
                e = int(experts_of[t, j])
                if used[e] < capacity:
                    buf[e, g * capacity + used[e]] = rows[t, j]
                    kept.add((t, j))
                used[e] += 1
    return buf, kept


@pytest.mark.parametrize("tokens, k, experts, groups, factor, per_choice", [
    (12, 2, 4, 1, 1.0, False),
    (12, 2, 4, 2, 1.0, False),
    (16, 2, 3, 4, 0.5, True),
    (8, 1, 4, 1, 4.0, False),  # factor = experts: nothing dropped
])
def test_eager_routing_is_the_loop_gshard_describes(tokens, k, experts, groups, factor, per_choice):
    g = torch.Generator().manual_seed(tokens + k + experts + groups)
    # A skewed router, so that some experts overflow.
    experts_of = torch.multinomial(torch.tensor([4.0] + [1.0] * (experts - 1)), tokens * k, replacement=True,
                                   generator=g).reshape(tokens, k)
    shape = (tokens, k, 6) if per_choice else (tokens, 6)
    x = torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)
    capacity = math.ceil(tokens // groups * k * factor / experts)
    assert commir.nn.moe_capacity(tokens // groups, k, experts, factor) == capacity
    buf = commir.nn.moe_dispatch(x, experts_of, experts=experts, capacity_factor=factor, groups=groups)
    ref, kept = loop_dispatch(x, experts_of, experts, capacity, groups)
    assert torch.equal(buf, ref)
    if factor < experts:
        assert len(kept) < tokens * k  # the test covers drops
    else:
        assert len(kept) == tokens * k
    # The same buffer by capacity instead of factor.
    assert torch.equal(commir.nn.moe_dispatch(x, experts_of, experts=experts, capacity=capacity, groups=groups), ref)
    # Collect: each kept choice reads its slot back, a dropped one zeros.
    back = commir.nn.moe_collect(buf * 2, experts_of, groups=groups)
    rows = x if per_choice else x[:, None, :].expand(tokens, k, 6)
    for t in range(tokens):
        for j in range(k):
            expected = rows[t, j] * 2 if (t, j) in kept else torch.zeros(6, dtype=x.dtype)
            assert torch.equal(back[t, j], expected)
    # Gradients: autograd through the helpers and through the loop agree.
    w = torch.randn(buf.shape, generator=g, dtype=torch.float64)
    (dx,) = torch.autograd.grad((buf * w).sum(), x)
    (dx_ref,) = torch.autograd.grad((ref * w).sum(), x)
    assert torch.equal(dx, dx_ref)


def test_eager_routing_errors_are_clear():
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"experts_of\[2, 1\] = 7 is not an expert index in \[0, 4\)"):
        commir.nn.moe_dispatch(x, torch.tensor([[0, 1], [1, 2], [3, 7], [0, 0]]), experts=4, capacity=2)
    with pytest.raises(ValueError, match="exactly one of capacity and capacity_factor"):
        commir.nn.moe_dispatch(x, torch.zeros(4, 2, dtype=torch.long), experts=4)
    with pytest.raises(ValueError, match=r"capacity_factor must be a finite number in \(0, experts = 4\]"):
        commir.nn.moe_dispatch(x, torch.zeros(4, 2, dtype=torch.long), experts=4, capacity_factor=5.0)
    with pytest.raises(ValueError, match="groups = 3 must divide"):
        commir.nn.moe_collect(torch.zeros(4, 3, 3), torch.zeros(4, 2, dtype=torch.long), groups=3)
    with pytest.raises(ValueError, match="int32 or int64"):
        commir.nn.moe_dispatch(x, torch.zeros(4, 2), experts=4, capacity=2)


EXPERT_PARALLEL = {"x": ["ep", None, None], "target": ["ep", None, None],
                   "block.w1": ["ep", None, None], "block.w3": ["ep", None, None], "block.w2": ["ep", None, None]}


def captured_block(ep, seed=0):
    torch.manual_seed(seed)
    model = CapacityMoELoss(CapacityMoE(hidden=16, ffn=24, experts=4, k=2, capacity_factor=1.0, groups=ep or 1))
    g = torch.Generator().manual_seed(seed + 1)
    x, target = torch.randn(4, 8, 16, generator=g), torch.randn(4, 8, 16, generator=g)
    mesh = {"ep": ep} if ep else None
    cap = commir.torch.capture(model, (x, target), mesh=mesh, layouts=EXPERT_PARALLEL if ep else None,
                               result_layouts=[[], ["ep", None, None], ["ep", None, None]] if ep else None)
    return model, cap, x, target


@pytest.mark.parametrize("ep", [None, 2, 4])
def test_captured_block_matches_pytorch_forward_and_gradients(ep):
    model, cap, x, target = captured_block(ep)
    assert "top_k(" in cap.text and "moe_dispatch(" in cap.text and "moe_collect(" in cap.text
    loss, y, back = model(x, target)
    # Router probabilities tie with probability zero; were they to tie, top_k's index order
    # could differ from torch's (python/README.md), and so could the drops.
    probs = torch.softmax(model.block.router(x.reshape(-1, 16)), -1)
    assert probs.topk(3).values.diff(dim=-1).abs().min() > 0
    dropped = (back == 0).all(-1)
    assert 0 < int(dropped.sum()) < dropped.numel()  # capacity factor 1 drops some choices
    module = cap.partition() if ep else cap.module
    if ep:
        # The experts are split: the dispatch and the combine are the two all_to_alls over ep.
        report = module.comm_report()
        assert "all_to_all       count 2" in report and "all_gather" not in report, report
    got_loss, got_y, got_back = cap.run(x, target, module=module)
    torch.testing.assert_close(torch.tensor(got_loss), loss.detach(), **TOL)
    torch.testing.assert_close(torch.from_numpy(got_y), y.detach(), **TOL)
    torch.testing.assert_close(torch.from_numpy(got_back), back.detach(), **TOL)
    # The same choices dropped: exactly zero rows where PyTorch's are.
    assert torch.equal(torch.from_numpy((got_back == 0).all(-1)), dropped)

    grad = commir.opt(cap.module, "autodiff{func=@%s}" % cap.function)
    if ep:
        grad = commir.opt(grad, commir.DEFAULT_SPMD_PIPELINE)
    arrays = cap.argument_arrays(x, target)
    out = commir.run_with(grad, arrays, cap.function + "_grad")
    names = [n for n, t in cap.module.signature(cap.function) if t.startswith("f32")]
    grads = dict(zip(names, out[-len(names):]))
    model.zero_grad()
    xg = x.clone().requires_grad_()
    model(xg, target)[0].backward()
    torch.testing.assert_close(torch.from_numpy(grads["x"]), xg.grad, **TOL)
    for arg, key in cap.params:
        torch.testing.assert_close(torch.from_numpy(grads[arg]), model.get_parameter(key).grad, **TOL)


class TopK(nn.Module):
    def __init__(self, dim, largest):
        super().__init__()
        self.dim, self.largest = dim, largest

    def forward(self, x):
        values, indices = x.topk(3, dim=self.dim, largest=self.largest)
        return values * 2, indices


@pytest.mark.parametrize("dim, largest", [(-1, True), (0, True), (1, False)])
def test_topk_is_captured_as_top_k(dim, largest):
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(2))
    model = TopK(dim, largest)
    cap = commir.torch.capture(model, (x,))
    assert "top_k(" in cap.text
    values, indices = cap.run(x)
    expected = model(x)
    np.testing.assert_array_equal(values, expected[0].numpy())
    np.testing.assert_array_equal(indices, expected[1].numpy())


def test_topk_ties_keep_the_values_and_take_the_lower_index():
    # torch 1.13's CPU topk picks among ties in no specified order ([2, 3] of four equal
    # values); top_k takes the lower index. The values agree either way.
    x = torch.ones(1, 4)
    cap = commir.torch.capture(TopK(-1, True), (x,))
    values, indices = cap.run(x)
    assert values.tolist() == [[2.0, 2.0, 2.0]] and indices.tolist() == [[0, 1, 2]]


def test_topk_of_integers_and_unsorted_topk_are_refused():
    def ints(x):
        return torch.topk(x, 2)[0] + 1  # marker: integer topk

    with pytest.raises(commir.CaptureError, match="function torch.topk of a torch.int64 tensor: integers tie"):
        commir.torch.capture(ints, (torch.tensor([[3, 1, 3]]),))

    def unsorted(x):
        return torch.topk(x, 2, sorted=False)[0] + 1

    with pytest.raises(commir.CaptureError, match="sorted=False: torch returns the k entries in an order"):
        commir.torch.capture(unsorted, (torch.randn(2, 5),))


def _line_of(path, marker):
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line)


def test_token_loop_form_is_refused_with_the_capacity_form():
    import moe_models
    with pytest.raises(commir.CaptureError) as info:
        commir.torch.capture(LoopMoE(experts=4).eval(), (torch.randn(2, 4, 16),))
    where, index_add = info.value.refusals
    assert where.what.startswith("function torch.where with one argument (the indices where the condition "
                                 "holds): its result's length depends on the data")
    assert (where.source.file, where.source.line) == (moe_models.__file__, _line_of(moe_models.__file__,
                                                                                   "# marker: token lists"))
    assert where.count == 4  # once per expert
    assert index_add.what.startswith("tensor method .index_add_(): in place on a tensor read afterwards")
    message = str(info.value)
    assert "choice, token = torch.where(assignment[e])" in message
    # The snippet of what captures, after the model's line.
    assert message.index("commir.nn.moe_dispatch(x, experts_of, experts=E, capacity_factor=1.0)") > message.index(
        "torch.where(assignment[e])")
    assert "commir.nn.moe_collect(out, experts_of)" in message
    assert (info.value.file, info.value.line) == (where.source.file, where.source.line)


def test_in_place_update_of_a_tensor_read_afterwards_is_refused():
    # fx records y.add_(1) as a new value the model never reads: capturing the rest would
    # return y unmodified.
    def f(x):
        y = x * 2
        y.add_(1)  # marker: add_
        return y

    with pytest.raises(commir.CaptureError, match=r"tensor method .add_\(\): in place on a tensor read afterwards"):
        commir.torch.capture(f, (torch.randn(3),))


def test_one_hot_is_captured():
    def f(i):
        return torch.nn.functional.one_hot(i, num_classes=5).sum(0)

    i = torch.tensor([[0, 4], [2, 2], [1, 3]])
    cap = commir.torch.capture(f, (i,))
    np.testing.assert_array_equal(cap.run(i), f(i).numpy())


class LaidOutDispatch(nn.Module):
    def __init__(self, layout):
        super().__init__()
        self.layout = layout
        self.w = nn.Parameter(torch.randn(4, 8, 8) * 0.3)

    def forward(self, x, experts_of):
        buf = commir.nn.moe_dispatch(x, experts_of, experts=4, capacity=4, groups=4, layout=self.layout)
        return commir.nn.moe_collect(torch.matmul(buf, self.w), experts_of, groups=4)


def test_dispatch_layout_is_written_on_a_mesh_and_ignored_without_one():
    g = torch.Generator().manual_seed(5)
    x, experts_of = torch.randn(16, 8, generator=g), torch.randint(0, 4, (16, 2), generator=g)
    model = LaidOutDispatch(("ep", "dp", None))
    mesh = {"dp": 2, "ep": 2}
    cap = commir.torch.capture(model, (x, experts_of), mesh=mesh,
                               layouts={"x": [("dp", "ep"), None], "experts_of": [("dp", "ep"), None],
                                        "w": ["ep", None, None]})
    assert "f32[4@ep, 16@dp, 8]" in cap.text
    expected = model(x, experts_of).detach()
    torch.testing.assert_close(torch.from_numpy(cap.run(x, experts_of, module=cap.partition())), expected, **TOL)
    one = commir.torch.capture(model, (x, experts_of))
    assert "@" not in one.text.split("moe_dispatch(")[1].split("\n")[0]
    torch.testing.assert_close(torch.from_numpy(one.run(x, experts_of)), expected, **TOL)
    with pytest.raises(commir.CaptureError, match="moe_dispatch.*layout"):
        commir.torch.capture(LaidOutDispatch(("tp", None, None)), (x, experts_of), mesh=mesh)
    with pytest.raises(ValueError, match="layout must be None or three entries"):
        LaidOutDispatch(("ep",))(x, experts_of)
