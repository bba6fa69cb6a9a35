"""commir.builder: programs from Python with sizes as variables, in canonical text."""

import math
import random

import numpy as np
import pytest

import commir
from commir.builder import ModuleBuilder, format_float, tensor


def llama_layer(dim, n_heads, n_kv_heads, hidden, seq, tp, x_layout=None):
    """A Llama layer (RMS norm, GQA attention, SwiGLU) of any size on a tp mesh."""
    hd = dim // n_heads
    mb = ModuleBuilder()
    mb.mesh("m", tp=tp)
    f = mb.func("llama_layer")
    x = f.arg("x", tensor("f32", [seq, dim], layout=x_layout))
    g1 = f.arg("attention_norm", tensor("f32", [dim]))
    wq = f.arg("wq", tensor("f32", [dim, n_heads * hd], layout=[None, "tp"]))
    wk = f.arg("wk", tensor("f32", [dim, n_kv_heads * hd], layout=[None, "tp"]))
    wv = f.arg("wv", tensor("f32", [dim, n_kv_heads * hd], layout=[None, "tp"]))
    wo = f.arg("wo", tensor("f32", [n_heads * hd, dim], layout=["tp", None]))
    g2 = f.arg("ffn_norm", tensor("f32", [dim]))
    w1 = f.arg("w1", tensor("f32", [dim, hidden], layout=[None, "tp"]))
    w3 = f.arg("w3", tensor("f32", [dim, hidden], layout=[None, "tp"]))
    w2 = f.arg("w2", tensor("f32", [hidden, dim], layout=["tp", None]))

    def heads(t, n):
        t = f.reshape(t, [seq, n, hd])
        t = f.transpose(t, [1, 0, 2])
        return f.reshape(t, [1, n, seq, hd])

    h = f.rmsnorm(x, g1, eps=1e-5, name="h")
    q = heads(f.matmul(h, wq, name="q"), n_heads)
    k = heads(f.matmul(h, wk, name="k"), n_kv_heads)
    v = heads(f.matmul(h, wv, name="v"), n_kv_heads)
    o = f.attention(q, k, v, causal=True, name="o")
    o = f.reshape(f.transpose(f.reshape(o, [n_heads, seq, hd]), [1, 0, 2]), [seq, n_heads * hd])
    r = f.add(x, f.matmul(o, wo), name="r")
    h2 = f.rmsnorm(r, g2, eps=1e-5)
    gate = f.silu(f.matmul(h2, w1, name="gate"))
    up = f.matmul(h2, w3, name="up")
    y = f.add(r, f.matmul(f.mul(gate, up), w2), name="y")
    f.ret(y)
    return mb


@pytest.mark.parametrize("sizes", [(32, 4, 2, 64, 8, 2), (64, 8, 4, 96, 16, 4), (48, 6, 2, 128, 4, 2)])
def test_llama_layer_of_any_size_is_canonical(sizes):
    mb = llama_layer(*sizes)
    text = mb.text()
    module = mb.module()
    assert module.text() == text


def test_llama_layer_runs_and_partitions():
    dim, heads, kv, hidden, seq, tp = 32, 4, 2, 64, 8, 2
    m = llama_layer(dim, heads, kv, hidden, seq, tp).module()
    rng = np.random.default_rng(0)
    inputs = {name: rng.standard_normal([int(d.split("@")[0]) for d in t[4:-1].split(", ")], dtype=np.float32) * 0.3
              for name, t in m.signature()}
    ref = commir.run(m, **inputs)
    spmd = commir.opt(m, commir.DEFAULT_SPMD_PIPELINE)
    np.testing.assert_allclose(commir.run(spmd, **inputs), ref, rtol=1e-5, atol=1e-5)


def test_every_builder_op_prints_as_the_printer_does():
    mb = ModuleBuilder()
    mb.mesh("m", dp=2, tp=2)
    f = mb.func("ops", mesh="m")
    x = f.arg("x", tensor("f32", [4, 8], layout=[("dp", "tp"), None]))
    p = f.arg("p", tensor("bf16", [4, 8], partial=("dp",)))
    g = f.arg("g", tensor("f32", [8]))
    y = f.neg(f.exp(f.gelu(x, approximate="tanh")))
    y = f.sub(1.0, f.div(y, 3))
    y = f.pow(f.max(y, f.min(x, 0.5)), 2.0)
    y = f.layernorm(y, g, g, eps=1e-3)
    s = f.softmax(f.reduce_sum(y, [0], keepdim=True), dim=0)
    c = f.concat([y, f.broadcast(s, [4, 8])], dim=0)
    c = f.slice(c, [1, 0], [4, 4])
    t = f.transpose(f.matmul(c, c, transpose_a=True), [1, 0])
    full = f.full(0.1, tensor("f32", [4, 4]))
    q = f.convert(f.add(p, p), "f32")
    f.ret(f.add(t, full), f.reduce_max(q, [1]))
    text = mb.text()
    assert commir.parse(text).text() == text


def test_shape_errors_are_raised_by_the_builder():
    f = ModuleBuilder().func("bad")
    a = f.arg("a", tensor("f32", [4, 8]))
    b = f.arg("b", tensor("f32", [4, 8]))
    with pytest.raises(ValueError, match="contracting sizes differ"):
        f.matmul(a, b)
    with pytest.raises(ValueError, match="do not broadcast"):
        f.add(a, f.arg("c", tensor("f32", [3])))
    with pytest.raises(ValueError, match="has 32 elements"):
        f.reshape(a, [5, 7])
    with pytest.raises(ValueError, match="unknown element type"):
        tensor("f8", [1])


def test_format_float_matches_printer():
    rng = random.Random(1)
    values = [1e-5, 100.0, 1e5, 1e16, 1e22, 0.1, 2.0 ** 60, 5e-324, -0.0, math.inf, -math.inf] + [
        rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(500)]
    lines = ["  %%v%d = full() {value = %r} : f32[]" % (i, v) for i, v in enumerate(values)]
    text = "func @f() -> f32[] {\n" + "\n".join(lines) + "\n  return %v0\n}\n"
    printed = commir.parse(text).text().splitlines()[1:-2]
    for v, line in zip(values, printed):
        assert line.split("value = ")[1].split("}")[0] == format_float(v)
