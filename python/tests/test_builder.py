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


def _verifier_message(text):
    """The message the C++ parser/verifier gives for `text`, which must be invalid."""
    with pytest.raises((commir.VerifyError, commir.ParseError)) as error:
        commir.parse(text)
    return error.value.message


def test_shape_errors_carry_the_verifier_message():
    # Each bad op raises commir.OpError (a ValueError) carrying exactly the message the
    # verifier reports for the same op written as text.
    cases = [
        ("matmul", lambda f, a, b: f.matmul(a, b),
         "func @bad(%a: f32[4, 8], %b: f32[4, 8]) -> f32[4, 8] {\n  %t = matmul(%a, %b)\n  return %t\n}\n"),
        ("add", lambda f, a, b: f.add(a, f.arg("c", tensor("f32", [3]))),
         "func @bad(%a: f32[4, 8], %c: f32[3]) -> f32[4, 8] {\n  %t = add(%a, %c)\n  return %t\n}\n"),
        ("reshape", lambda f, a, b: f.reshape(a, [5, 7]),
         "func @bad(%a: f32[4, 8]) -> f32[5, 7] {\n  %t = reshape(%a) : f32[5, 7]\n  return %t\n}\n"),
        ("transpose", lambda f, a, b: f.transpose(a, [0, 0]),
         "func @bad(%a: f32[4, 8]) -> f32[4, 4] {\n  %t = transpose(%a) {perm = [0, 0]}\n  return %t\n}\n"),
        ("reduce_sum", lambda f, a, b: f.reduce_sum(a, [2]),
         "func @bad(%a: f32[4, 8]) -> f32[4] {\n  %t = reduce_sum(%a) {dims = [2]}\n  return %t\n}\n"),
    ]
    for opname, build, text in cases:
        f = ModuleBuilder().func("bad")
        a = f.arg("a", tensor("f32", [4, 8]))
        b = f.arg("b", tensor("f32", [4, 8]))
        expected = _verifier_message(text)
        with pytest.raises(ValueError) as error:
            build(f, a, b)
        assert isinstance(error.value, commir.OpError)
        assert error.value.message == "%s: %s" % (opname, expected), (error.value.message, expected)
    with pytest.raises(ValueError, match="unknown element type"):
        tensor("f8", [1])


def test_any_op_through_op_with_the_cpp_schema():
    # An op without a method: attributes are read against its C++ schema (a str is an
    # enum identifier), and a bad value raises the verifier's message.
    mb = ModuleBuilder()
    f = mb.func("f")
    a = f.arg("a", tensor("f32", [4]))
    b = f.arg("b", tensor("f32", [2, 4]))
    c = f.op("compare", [a, b], [("cmp", "lt")])
    assert c.type == tensor("i1", [2, 4])
    f.ret(c)
    text = mb.text()
    assert commir.parse(text).text() == text
    expected = _verifier_message(
        "func @bad(%a: f32[4], %b: f32[2, 4]) -> i1[2, 4] {\n  %t = compare(%a, %b) {cmp = zz}\n  return %t\n}\n")
    with pytest.raises(commir.OpError) as error:
        f.op("compare", [a, b], [("cmp", "zz")])
    assert error.value.message == expected


def test_collective_shape_error_carries_the_verifier_message():
    mb = ModuleBuilder()
    mb.mesh("m", tp=4)
    f = mb.func("bad", spmd=True)
    x = f.arg("x", tensor("f32", [6, 8]))
    expected = _verifier_message(
        "mesh @m(tp=4)\nspmd func @bad(%x: f32[6, 8]) -> f32[6, 8] on @m {\n"
        "  %t = reduce_scatter(%x) {axis = tp, dim = 0}\n  return %x\n}\n")
    with pytest.raises(commir.OpError) as error:
        f.reduce_scatter(x, "tp", 0)
    assert error.value.message == "reduce_scatter: " + expected
    assert "not divisible by the group size 4" in expected
    with pytest.raises(commir.OpError, match="only valid in spmd functions"):
        mb.func("global").all_gather(mb._functions[-1].arg("y", tensor("f32", [4])), "tp", 0)


def _random_shape(rng, rank):
    return [rng.randint(1, 5) for _ in range(rank)]


def test_result_types_match_numpy_and_the_verifier():
    # Shapes from NumPy (an independent implementation of matmul, broadcasting,
    # reductions and transposes); the module the builder writes must then parse and
    # verify, and print exactly as written (the verifier accepts every annotation).
    rng = random.Random(7)
    for trial in range(40):
        mb = ModuleBuilder()
        f = mb.func("f%d" % trial)
        batch = _random_shape(rng, rng.randint(0, 2))
        m, k, n = (rng.randint(1, 6) for _ in range(3))
        ta, tb = rng.random() < 0.5, rng.random() < 0.5
        a_shape = batch + ([k, m] if ta else [m, k])
        b_shape = ([1] * len(batch) if batch and rng.random() < 0.5 else batch) + ([n, k] if tb else [k, n])
        a = f.arg("a", tensor("bf16", a_shape))
        b = f.arg("b", tensor("bf16", b_shape))
        mm = f.matmul(a, b, transpose_a=ta, transpose_b=tb)
        za, zb = np.zeros(a_shape), np.zeros(b_shape)
        want = np.matmul(np.swapaxes(za, -1, -2) if ta else za, np.swapaxes(zb, -1, -2) if tb else zb).shape
        assert mm.type == tensor("bf16", want), (mm.type, want)

        rank = len(want)
        c_shape = [d if rng.random() < 0.6 else 1 for d in want[rng.randint(0, rank - 1):]]
        c = f.arg("c", tensor("bf16", c_shape))
        s = f.add(mm, c)
        assert s.type == tensor("bf16", np.broadcast_shapes(want, tuple(c_shape)))
        e = f.mul(f.exp(s), 0.5)
        assert e.type == s.type

        dims = sorted(rng.sample(range(rank), rng.randint(1, rank)))
        keep = rng.random() < 0.5
        r = f.reduce_sum(e, dims, keepdim=keep)
        assert r.type == tensor("bf16", np.sum(np.zeros(s.type.shape), axis=tuple(dims), keepdims=keep).shape)

        perm = list(range(rank))
        rng.shuffle(perm)
        t = f.transpose(e, perm)
        assert t.type == tensor("bf16", np.transpose(np.zeros(s.type.shape), perm).shape)
        f.ret(r, t)
        text = mb.text()
        assert commir.parse(text).text() == text


def test_collective_result_types():
    # Per-device shapes on a 2x4 mesh, written out: all_gather multiplies the gathered
    # dimension by the group size, reduce_scatter divides it, all_to_all divides
    # split_dim and multiplies concat_dim, all_reduce and shift keep the shape.
    mb = ModuleBuilder()
    mb.mesh("m", dp=2, tp=4)
    f = mb.func("collectives", spmd=True)
    x = f.arg("x", tensor("bf16", [16, 32], layout=["tp", None]))
    assert x.type == tensor("bf16", [4, 32])  # the body sees the local part
    g = f.all_gather(x, "tp", 0)
    assert g.type == tensor("bf16", [16, 32])
    g2 = f.all_gather(x, ("dp", "tp"), -1)
    assert g2.type == tensor("bf16", [4, 256])
    rs = f.reduce_scatter(g, "tp", 1, reduce="max")
    assert rs.type == tensor("bf16", [16, 8])
    a2a = f.all_to_all(g, "tp", 0, 1)
    assert a2a.type == tensor("bf16", [4, 128])
    ar = f.all_reduce(rs, ("dp", "tp"))
    assert ar.type == tensor("bf16", [16, 8])
    sh = f.shift(x, "tp", offset=3)
    assert sh.type == x.type
    assert f.reduce_scatter(ar, "dp", 0).type == tensor("bf16", [8, 8])
    assert f.all_gather(sh, "dp", 0).type == tensor("bf16", [8, 32])
    f.ret(a2a, types=[tensor("bf16", [16, 128], layout=["tp", None])])
    text = mb.text()
    assert commir.parse(text).text() == text


def test_written_type_is_checked_and_kept():
    mb = ModuleBuilder()
    mb.mesh("m", tp=4)
    f = mb.func("f")
    a = f.arg("a", tensor("f32", [4, 8]))
    b = f.arg("b", tensor("f32", [8, 6]))
    # A written layout is a constraint and stays; matmul may choose its element type.
    y = f.matmul(a, b, type=tensor("bf16", [4, 6], layout=["tp", None]))
    assert str(y.type) == "bf16[4@tp, 6]"
    with pytest.raises(commir.OpError, match=r"result type f32\[4, 5\] does not match the inferred type f32\[4, 6\]"):
        f.matmul(a, b, type=tensor("f32", [4, 5]))
    with pytest.raises(commir.OpError, match="not divisible"):
        f.matmul(a, b, type=tensor("f32", [4, 6], layout=[None, "tp"]))


def test_format_float_matches_printer():
    rng = random.Random(1)
    values = [1e-5, 100.0, 1e5, 1e16, 1e22, 0.1, 2.0 ** 60, 5e-324, -0.0, math.inf, -math.inf] + [
        rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(500)]
    lines = ["  %%v%d = full() {value = %r} : f32[]" % (i, v) for i, v in enumerate(values)]
    text = "func @f() -> f32[] {\n" + "\n".join(lines) + "\n  return %v0\n}\n"
    printed = commir.parse(text).text().splitlines()[1:-2]
    for v, line in zip(values, printed):
        assert line.split("value = ")[1].split("}")[0] == format_float(v)


def test_gather_and_scatter_add_take_their_shapes_from_the_op_table():
    mb = ModuleBuilder()
    f = mb.func("embed")
    emb = f.arg("emb", tensor("f32", [512, 64]))
    ids = f.arg("ids", tensor("i32", [2, 8]))
    y = f.gather(emb, ids)
    assert list(y.type.shape) == [2, 8, 64]
    cols = f.gather(emb, f.arg("cols", tensor("i64", [3])), axis=-1)
    assert list(cols.type.shape) == [512, 3]
    zeros = f.full(0, tensor("f32", [512, 64]))
    d = f.scatter_add(zeros, ids, y)
    assert list(d.type.shape) == [512, 64]
    f.ret(y, cols, d)
    text = mb.text()
    assert "gather(%emb, %ids) {axis = 0}" in text
    assert "scatter_add(" in text
    assert commir.parse(text).text() == text
