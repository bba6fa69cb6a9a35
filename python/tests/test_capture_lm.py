"""commir.torch.capture of embedding lookups, cross-entropy, dropout and tied weights,
checked against PyTorch's forward and autograd on one device, tp=4 and a 2x2 mesh."""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import commir
import commir.torch

MESHES = {
    "1": (None, {}),
    "tp4": ({"tp": 4}, {"tp": "tp"}),
    "2x2": ({"dp": 2, "tp": 2}, {"tp": "tp", "dp": "dp"}),
}
DTYPES = {"f32": torch.float32, "f64": torch.float64}
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-6), torch.float64: dict(rtol=1e-10, atol=1e-12)}
PIPELINE = commir.DEFAULT_SPMD_PIPELINE


def run_on(cap, mesh, arrays, func=None, module=None):
    """Runs the captured function (or `module`'s `func`) on its mesh, partitioned
    first when there is one."""
    module = module or cap.module
    if mesh is not None:
        module = commir.opt(module, PIPELINE)
    return commir.run_with(module, arrays, func or cap.function)


def gradients(cap, mesh, arrays):
    """The loss and the gradient of every float argument, from autodiff's @f_grad."""
    grad = commir.opt(cap.module, "autodiff{func=@%s}" % cap.function)
    out = run_on(cap, mesh, arrays, func=cap.function + "_grad", module=grad)
    names = [n for n, t in cap.module.signature(cap.function) if t.startswith(("f32", "f64"))]
    return out[0], dict(zip(names, out[1:]))


class TinyLM(nn.Module):
    """Token and learned position embeddings, a norm, a head tied to the token table,
    cross-entropy: the pieces of a GPT a capture must get right."""

    def __init__(self, vocab=32, dim=16, block=8, functional=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.ln = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one parameter, used twice
        self.functional = functional

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = torch.arange(0, t, dtype=torch.long)
        if self.functional:
            x = F.embedding(idx, self.wte.weight) + F.embedding(pos, self.wpe.weight)
        else:
            x = self.wte(idx) + self.wpe(pos)
        logits = self.lm_head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def tiny_lm(dtype, functional=False):
    torch.manual_seed(0)
    model = TinyLM(functional=functional).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def lm_layouts(axes):
    layouts = {}
    if "tp" in axes:  # vocabulary-parallel token table (and so head)
        layouts["wte.weight"] = ["tp", None]
    if "dp" in axes:
        layouts["idx"] = ["dp", None]
        layouts["targets"] = ["dp", None]
    return layouts


@pytest.mark.parametrize("functional", [False, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mesh", list(MESHES))
def test_tied_lm_loss_and_gradients_match_autograd(mesh, dtype, functional):
    mesh_axes, axes = MESHES[mesh]
    dtype = DTYPES[dtype]
    model = tiny_lm(dtype, functional)
    idx = torch.randint(0, 32, (4, 8))
    targets = torch.randint(0, 32, (4, 8))
    targets[1, 3] = -1  # ignored
    cap = commir.torch.capture(model, (idx, targets), mesh=mesh_axes, layouts=lm_layouts(axes))
    text = cap.text
    # One argument for the tied table, gathered once and read again by the head.
    assert "%wte.weight: " in text and "%lm_head.weight" not in text
    assert "matmul(%ln, %wte.weight) {transpose_b}" in text
    assert "gather(%wte.weight, %idx) {axis = 0}" in text
    assert "cross_entropy(" in text and "ignore_index = -1" in text
    # Positions 0..7 are all of wpe's rows: the table itself, no gather.
    assert "gather(%wpe.weight" not in text
    assert [p for _, p in cap.params] == ["wte.weight", "wpe.weight", "ln.weight", "ln.bias"]

    loss = model(idx, targets)
    loss.backward()
    arrays = cap.argument_arrays(idx, targets)
    torch.testing.assert_close(torch.as_tensor(run_on(cap, mesh_axes, arrays)), loss.detach(), **TOL[dtype])
    got_loss, grads = gradients(cap, mesh_axes, arrays)
    torch.testing.assert_close(torch.as_tensor(got_loss), loss.detach(), **TOL[dtype])
    # The tied table's gradient sums the lookup's and the head's, as autograd's does.
    for arg, key in cap.params:
        torch.testing.assert_close(torch.from_numpy(grads[arg]), model.get_parameter(key).grad, **TOL[dtype])


def test_position_slice_and_parameter_slice():
    class Positions(nn.Module):
        def __init__(self):
            super().__init__()
            self.wpe = nn.Embedding(16, 4)
            self.pos = nn.Parameter(torch.randn(1, 16, 4))

        def forward(self, x):
            t = x.shape[1]
            return x + self.wpe(torch.arange(2, 2 + t)).unsqueeze(0) + self.pos[:, :t]

    model = Positions().eval()
    x = torch.randn(2, 5, 4)
    cap = commir.torch.capture(model, (x,))
    assert "slice(%wpe.weight) {start = [2, 0], size = [5, 4]}" in cap.text
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(x)), model(x))


def test_constant_ids_that_are_not_a_range_are_refused():
    class Shuffled(nn.Module):
        def __init__(self):
            super().__init__()
            self.wpe = nn.Embedding(8, 4)

        def forward(self, x):
            return x + self.wpe(torch.tensor([3, 1, 2]))

    with pytest.raises(commir.CaptureError, match="constant ids that are not consecutive rows"):
        commir.torch.capture(Shuffled().eval(), (torch.randn(3, 4),))


class Call(nn.Module):
    """f(x, w, y) (a loss module or a function) as a module, its result summed or not."""

    def __init__(self, f, summed=False):
        super().__init__()
        self.f, self.summed = f, summed

    def forward(self, x, w, y):
        loss = self.f(x @ w, y) if isinstance(self.f, nn.CrossEntropyLoss) else self.f(x, w, y)
        return loss.sum() if self.summed else loss


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", ["mean", "sum", "none", "smooth_ignore", "classes_dim1", "module"])
def test_cross_entropy_matches_torch(case, dtype):
    dtype = DTYPES[dtype]
    torch.manual_seed(1)
    shapes = {"classes_dim1": ((3, 10, 4), (3, 4))}
    logit_shape, label_shape = shapes.get(case, ((12, 10), (12,)))
    kwargs = {"mean": {}, "sum": {"reduction": "sum"}, "none": {"reduction": "none"},
              "smooth_ignore": {"ignore_index": 2, "label_smoothing": 0.2},
              "classes_dim1": {"reduction": "none", "label_smoothing": 0.1}, "module": {}}[case]
    if case == "module":
        f = nn.CrossEntropyLoss(label_smoothing=0.05, ignore_index=0)
    elif len(logit_shape) == 3:
        def f(x, w, y):  # logits [B, C, S], classes in dim 1 as PyTorch takes them
            return F.cross_entropy((x.transpose(1, 2) @ w).transpose(1, 2), y, **kwargs)
    else:
        def f(x, w, y):
            return F.cross_entropy(x @ w, y, **kwargs)
    x = torch.randn(*logit_shape, dtype=dtype)
    w = torch.randn(10, 10, dtype=dtype, requires_grad=True)
    y = torch.randint(0, 10, label_shape)
    if case == "smooth_ignore":
        y[0] = 2  # an ignored token: left out of the mean and of the smoothing
    cap = commir.torch.capture(Call(f).eval(), (x, w, y))
    assert "cross_entropy(" in cap.text
    expected = Call(f)(x, w, y)
    got = cap.run(x, w.detach(), y)
    torch.testing.assert_close(torch.as_tensor(got), expected.detach(), **TOL[dtype])
    # The gradient of the (summed) loss with respect to w, through autodiff.
    summed = Call(f, summed=True).eval()
    cap_s = commir.torch.capture(summed, (x, w, y))
    (dw,) = torch.autograd.grad(summed(x, w, y), w)
    _, grads = gradients(cap_s, None, cap_s.argument_arrays(x, w.detach(), y))
    torch.testing.assert_close(torch.from_numpy(grads["w"]), dw, **TOL[dtype])


def test_cross_entropy_with_probabilities_or_weights_is_refused():
    x, p = torch.randn(4, 5), torch.softmax(torch.randn(4, 5), -1)
    with pytest.raises(commir.CaptureError, match="class probabilities as the target"):
        commir.torch.capture(lambda x, p: F.cross_entropy(x, p), (x, p))
    with pytest.raises(commir.CaptureError, match="with class weights"):
        commir.torch.capture(nn.CrossEntropyLoss(weight=torch.ones(5)), (x, torch.tensor([0, 1, 2, 3])))


class TwoDropouts(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        return F.dropout(self.drop(self.lin(x)), p=0.5, training=self.training)


@pytest.mark.parametrize("mesh", list(MESHES))
def test_dropout_follows_training_flag_and_draws_one_mask_on_every_mesh(mesh):
    mesh_axes, axes = MESHES[mesh]
    torch.manual_seed(2)
    model = TwoDropouts()
    x = torch.randn(32, 16)
    layouts = {}
    if "tp" in axes:
        layouts = {"lin.weight": ["tp", None], "lin.bias": ["tp"]}
    if "dp" in axes:
        layouts["x"] = ["dp", None]
    cap = commir.torch.capture(model, (x,), mesh=mesh_axes, layouts=layouts, dropout_seed=7)
    assert "dropout(%lin) {rate = 0.25, seed = 7}" in cap.text
    assert "{rate = 0.5, seed = 8}" in cap.text  # another seed: another mask
    h = model.lin(x).detach().numpy()
    y = run_on(cap, mesh_axes, cap.argument_arrays(x))
    kept = y != 0
    # Every element is dropped or scaled by 1 / ((1 - 0.25) (1 - 0.5)).
    np.testing.assert_allclose(y[kept], h[kept] / 0.375, rtol=2e-5, atol=1e-6)
    assert abs(kept.mean() - 0.375) < 0.06, kept.mean()  # 512 draws
    single = commir.run_with(cap.module, cap.argument_arrays(x), cap.function)
    assert np.array_equal(y, single)  # the mask is the element's, not the device's
    # Eval mode, or training=False: no dropout at all.
    model.eval()
    assert "dropout" not in commir.torch.capture(model, (x,)).text


def test_dropout_gradient_is_the_same_mask():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    x = torch.randn(16, 8)

    def loss(model, x):
        return (model(x) ** 2).sum()

    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            return loss(self.model, x)

    cap = commir.torch.capture(Loss(), (x,), mesh={"tp": 2}, layouts={"model.0.weight": ["tp", None]})
    arrays = cap.argument_arrays(x)
    value, grads = gradients(cap, {"tp": 2}, arrays)
    # With the mask m CommIR drew (read off the forward), the loss is sum((m h / 0.5)^2)
    # and dW = (2 m h / 0.25)^T-contracted with x: what autograd gives for that mask.
    probe = commir.torch.capture(nn.Sequential(model[0], model[1]), (x,))
    mask = torch.from_numpy(probe.run(x)) != 0
    w = model[0].weight.detach().clone().requires_grad_()
    h = x @ w.t() + model[0].bias.detach()
    expected = ((h * mask / 0.5) ** 2).sum()
    expected.backward()
    torch.testing.assert_close(torch.as_tensor(value), expected.detach(), rtol=2e-5, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(grads["model.0.weight"]), w.grad, rtol=2e-5, atol=1e-5)


def test_training_step_draws_a_new_dropout_mask_each_step_on_every_mesh():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(16, 16, bias=False)
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(self.lin(x)).sum()

    torch.manual_seed(4)
    x = torch.randn(8, 16)
    results = {}
    for mesh, layouts in ((None, None), ({"tp": 4}, {"lin.weight": ["tp", None]})):
        cap = commir.torch.capture(Net().train(), (x,), mesh=mesh, layouts=layouts, dropout_seed=3)
        # loss = sum(mask * (x W^T) / 0.5): dW[o, i] = sum_b mask[b, o] x[b, i] / 0.5.
        step = commir.opt(cap.module, 'training-step{func=@Net,params="lin.weight",lr=1}')
        assert "%dropout_step = convert(%step) : i64[]" in step.text()
        run_module = commir.opt(step, PIPELINE) if mesh else step
        values = cap.argument_arrays(x)
        w0 = values["lin.weight"].copy()
        values["step"] = commir.run_with(step, {"lin.weight": w0}, "Net_step_init")
        assert float(values["step"]) == 0
        moves = []
        for _ in range(2):
            loss, w, values["step"] = commir.run_with(run_module, values, "Net_step")
            moves.append(values["lin.weight"] - w)
            values["lin.weight"] = w
        results[str(mesh)] = moves
        assert float(values["step"]) == 2
        # Each step's gradient is x contracted with that step's mask: the masks differ.
        assert not np.allclose(moves[0], moves[1])
    # The mesh draws what one device draws, step by step.
    for a, b in zip(results["None"], results[str({"tp": 4})]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_attention_dropout_in_training_mode_is_refused():
    # The captured attention is the eval-mode math: dropping attention weights is refused,
    # not left out.
    mha = nn.MultiheadAttention(16, 4, dropout=0.1, batch_first=True)
    x = torch.randn(2, 5, 16)
    with pytest.raises(commir.CaptureError, match="nn.MultiheadAttention with dropout=0.1 in training mode"):
        commir.torch.capture(mha.train(), (x, x, x))
    assert "dropout" not in commir.torch.capture(mha.eval(), (x, x, x)).text
