"""RoPE as Llama code writes it, and top_k, against PyTorch (torch 1.13).

RoPE needs no op of its own: Hugging Face Llama's apply_rotary_pos_emb is
x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x2, x1) over the halves of
the head dimension, and slice, neg, concat, mul and add are all CommIR ops, each with
its kernels, cost, sharding rule and derivative. The program below is that function
written with them; it is checked against PyTorch's, on one device and partitioned.
"""

import numpy as np
import pytest
import torch

import commir

B, H, S, D = 2, 8, 16, 32
THETA = 10000.0


def hf_rotate_half(x):
    # transformers/models/llama/modeling_llama.py, rotate_half.
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, k, cos, sin):
    # modeling_llama.py, apply_rotary_pos_emb with cos/sin already [seq, dim] and
    # unsqueezed over batch and heads.
    cos = cos[None, None]
    sin = sin[None, None]
    return q * cos + hf_rotate_half(q) * sin, k * cos + hf_rotate_half(k) * sin


def hf_cos_sin(seq, dim):
    # LlamaRotaryEmbedding: inv_freq = 1 / theta^(2i/dim), freqs = t x inv_freq, and the
    # embedding repeats the frequencies over both halves.
    inv_freq = 1.0 / (THETA ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().float(), emb.sin().float()


def rope_program(mesh, x_type, cos_type):
    half = D // 2
    return f"""{mesh}
func @rope(%q: {x_type}, %k: {x_type}, %cos: {cos_type}, %sin: {cos_type}) -> ({x_type}, {x_type}) {{
  %q1 = slice(%q) {{start = [0, 0, 0, 0], size = [{B}, {H}, {S}, {half}]}}
  %q2 = slice(%q) {{start = [0, 0, 0, {half}], size = [{B}, {H}, {S}, {half}]}}
  %nq2 = neg(%q2)
  %qr = concat(%nq2, %q1) {{dim = 3}}
  %qc = mul(%q, %cos)
  %qs = mul(%qr, %sin)
  %q_embed = add(%qc, %qs) : {x_type}
  %k1 = slice(%k) {{start = [0, 0, 0, 0], size = [{B}, {H}, {S}, {half}]}}
  %k2 = slice(%k) {{start = [0, 0, 0, {half}], size = [{B}, {H}, {S}, {half}]}}
  %nk2 = neg(%k2)
  %kr = concat(%nk2, %k1) {{dim = 3}}
  %kc = mul(%k, %cos)
  %ks = mul(%kr, %sin)
  %k_embed = add(%kc, %ks) : {x_type}
  return %q_embed, %k_embed
}}
"""


def rope_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, S, D, generator=g)
    k = torch.randn(B, H, S, D, generator=g)
    cos, sin = hf_cos_sin(S, D)
    return q, k, cos, sin


# (mesh, q/k layout, cos/sin layout): one device; heads split (cos/sin whole); the
# sequence split (cos/sin sliced alike); heads and sequence on a 2x4 mesh.
LAYOUTS = [
    ("", f"f32[{B}, {H}, {S}, {D}]", f"f32[{S}, {D}]"),
    ("mesh @m(tp=2)", f"f32[{B}, {H}@tp, {S}, {D}]", f"f32[{S}, {D}]"),
    ("mesh @m(sp=4)", f"f32[{B}, {H}, {S}@sp, {D}]", f"f32[{S}@sp, {D}]"),
    ("mesh @m(sp=2, tp=4)", f"f32[{B}, {H}@tp, {S}@sp, {D}]", f"f32[{S}@sp, {D}]"),
]


@pytest.mark.parametrize("mesh, x_type, cos_type", LAYOUTS)
def test_rope_pieces_match_hugging_face(mesh, x_type, cos_type):
    q, k, cos, sin = rope_inputs(seed=3)
    expected_q, expected_k = hf_apply_rotary_pos_emb(q, k, cos, sin)
    m = commir.parse(rope_program(mesh, x_type, cos_type))
    if mesh:
        m = commir.opt(m, commir.DEFAULT_SPMD_PIPELINE)
        # Position-wise: with q, k, cos and sin laid out alike, nothing moves.
        for collective in ("all_gather", "all_reduce", "reduce_scatter", "all_to_all", "shift"):
            assert collective + "(" not in m.text(), m.text()
    got_q, got_k = commir.run(m, func="@rope", q=q, k=k, cos=cos, sin=sin)
    # f32 on both sides, the same two products and one sum per element.
    np.testing.assert_allclose(got_q, expected_q.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got_k, expected_k.numpy(), rtol=1e-6, atol=1e-6)


def test_rope_keeps_norms_and_relative_positions():
    # A rotation of each pair (i, i + D/2) by position x frequency: norms are kept, and
    # <rope(q)_m, rope(k)_n> depends only on m - n (why Llama uses it). Independent of
    # PyTorch: checks the program's meaning, not just agreement with another program.
    q, k, cos, sin = rope_inputs(seed=5)
    m = commir.parse(rope_program(*LAYOUTS[0]))
    same = q[:, :, :1, :].expand(B, H, S, D).contiguous()
    rq, rk = commir.run(m, q=same, k=same, cos=cos, sin=sin)
    np.testing.assert_allclose(np.linalg.norm(rq, axis=-1),
                               np.linalg.norm(same.numpy(), axis=-1), rtol=1e-5)
    dots = np.einsum("bhmd,bhnd->bhmn", rq.astype(np.float64), rk.astype(np.float64))
    for shift in range(1, 4):
        diagonal = np.stack([dots[:, :, i, i + shift] for i in range(S - shift)])
        np.testing.assert_allclose(diagonal, np.broadcast_to(diagonal[0], diagonal.shape),
                                   rtol=1e-4, atol=1e-4)


TOP_K = """{mesh}
func @f(%x: {x_type}) -> (f32[8, 5], i64[8, 5]) {{
  %v, %i = top_k(%x) {{k = 5}}
  return %v, %i
}}
"""


@pytest.mark.parametrize("mesh, x_type", [
    ("", "f32[8, 40]"),
    ("mesh @m(tp=2)", "f32[8@tp, 40]"),
    ("mesh @m(tp=4)", "f32[8, 40@tp]"),
    ("mesh @m(dp=2, tp=4)", "f32[8@dp, 40@tp]"),
])
def test_top_k_matches_torch(mesh, x_type):
    x = torch.randn(8, 40, generator=torch.Generator().manual_seed(11))
    m = commir.parse(TOP_K.format(mesh=mesh, x_type=x_type))
    if mesh:
        m = commir.opt(m, commir.DEFAULT_SPMD_PIPELINE)
    values, indices = commir.run(m, func="@f", x=x)
    expected = torch.topk(x, 5)
    np.testing.assert_array_equal(values, expected.values.numpy())
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, expected.indices.numpy())


def test_top_k_ties_take_the_lower_index():
    # torch.topk leaves the order of ties unspecified; top_k's is the lower index first.
    x = np.array([[1, 3, 3, 2, 3, np.nan, 0, -0.0]], dtype=np.float32)
    m = commir.parse("func @f(%x: f32[1, 8]) -> (f32[1, 5], i64[1, 5]) {\n"
                     "  %v, %i = top_k(%x) {k = 5}\n  return %v, %i\n}\n")
    values, indices = commir.run(m, x=x)
    assert indices.tolist() == [[5, 1, 2, 4, 3]]
    assert np.isnan(values[0, 0]) and values[0, 1:].tolist() == [3, 3, 3, 2]
