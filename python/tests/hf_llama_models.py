"""Test fixture: a Llama decoder block that uses the tensor forms of Hugging Face
transformers' Llama code, so that capture is tested on model code as people actually
write it and not only on code written to suit the capture.

The forms follow the eager-attention path of modeling_llama.py
(https://github.com/huggingface/transformers/blob/v4.45.0/src/transformers/models/llama/modeling_llama.py).
This file is not a copy of it. It was written for these tests with its own names and
structure, and it leaves out what capture does not see here: the KV cache, rope scaling
variants, the autocast guard and the config object (its fields are constructor
arguments). transformers is not installed on this machine.

Each piece says which construct of modeling_llama.py it stands for and what capture has
to do with it. What is kept on purpose:
  - the submodule and parameter names (self_attn.q_proj, mlp.gate_proj,
    input_layernorm.weight, ...), because they are the state-dict keys of Llama
    checkpoints, and tensor-parallel layouts for a real checkpoint name the same tensors
    as the tests' layouts do;
  - the layer's argument names (hidden_states, attention_mask) and the cos/sin pair, which
    become the argument names of the captured function.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class _RMSNormInF32(nn.Module):
    """Stands for LlamaRMSNorm. The statistics are computed in f32 whatever the input
    dtype is, with the square written as pow(2).mean(-1, keepdim=True) and rsqrt, and the
    result is cast back before the gain. Capture must see through both casts and fold the
    chain into a single `rmsnorm`."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        dtype_in = x.dtype
        wide = x.to(torch.float32)
        mean_square = wide.pow(2).mean(-1, keepdim=True)
        wide = wide * torch.rsqrt(mean_square + self.eps)
        # Gain on the left, after the cast back: the order Llama code multiplies in.
        return self.weight * wide.to(dtype_in)


def _rotate_halves(t):
    """Stands for rotate_half. It splits the last dim at its midpoint (a bound computed
    from the size, not a literal) and returns (-second, first). Capture turns this into
    slice, neg and concat."""
    mid = t.shape[-1] // 2
    first, second = t[..., :mid], t[..., mid:]
    return torch.cat((-second, first), dim=-1)


def _apply_rope(t, cos, sin):
    """Stands for one half of apply_rotary_pos_emb on [B, H, S, D]. cos and sin are
    [B, 1, S, D] here: the caller has unsqueezed them over the head dim, so they
    broadcast over heads."""
    return t * cos + _rotate_halves(t) * sin


def _share_kv_heads(t, groups):
    """Stands for repeat_kv on [B, Hkv, S, D]. A size-1 axis is inserted after the kv
    heads, expanded to `groups` and merged back, so that query head h reads kv head
    h // groups. Capture must undo this and give `attention` the Hkv heads
    (native GQA) instead of materialising the copies."""
    if groups == 1:
        return t
    b, kv_heads, seq, head_dim = t.shape
    t = t[:, :, None, :, :].expand(b, kv_heads, groups, seq, head_dim)
    return t.reshape(b, kv_heads * groups, seq, head_dim)


class _RotaryTable(nn.Module):
    """Stands for LlamaRotaryEmbedding (default rope type). inv_freq = base^(-i/d) for
    even i from arange(0, d, 2) is kept as a non-persistent buffer. The angles are
    inv_freq @ positions, a batched [B, d/2, 1] @ [B, 1, S] matmul transposed to
    [B, S, d/2], then doubled along the last dim so that they line up with
    _rotate_halves. When the positions are built from sizes the whole table is a
    constant of the traced program, and capture folds it into arguments. When the
    positions are an input, cos/sin have no CommIR op, and capture must refuse at these
    lines."""

    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        even = torch.arange(0, head_dim, 2, dtype=torch.int64).float()
        self.register_buffer("inv_freq", 1.0 / (base ** (even / head_dim)), persistent=False)

    # As in HF, the table carries no gradient. Tracing has to pass through the decorator's wrapper.
    @torch.no_grad()
    def forward(self, like, positions):
        batch = positions.shape[0]
        freq = self.inv_freq[None, :, None].float().expand(batch, -1, 1)
        pos = positions[:, None, :].float()
        half_angles = (freq @ pos).transpose(1, 2)
        angles = torch.cat((half_angles, half_angles), dim=-1)
        cos = angles.cos()
        sin = angles.sin()
        return cos.to(dtype=like.dtype), sin.to(dtype=like.dtype)


class _SwiGLU(nn.Module):
    """Stands for LlamaMLP: down(silu(gate(x)) * up(x)), with the activation held as a
    module as HF's ACT2FN lookup gives it."""

    def __init__(self, width, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(width, hidden, bias=False)
        self.up_proj = nn.Linear(width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, width, bias=False)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class _EagerGQA(nn.Module):
    """Stands for LlamaAttention with eager attention. Capture has to recognise the
    attention it writes out as one `attention` op: heads split by view + transpose(1, 2),
    scores from matmul with k.transpose(2, 3) divided by sqrt(d), an additive mask
    sliced to the key length, a softmax taken in f32 and cast back to q's dtype, dropout
    with p=0 following self.training, and heads merged by transpose, contiguous and
    reshape."""

    def __init__(self, width, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.head_dim = width // heads
        self.groups = heads // kv_heads
        self.dropout_p = 0.0
        self.q_proj = nn.Linear(width, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, width, bias=False)

    def _split(self, t, b, s, n):
        return t.view(b, s, n, self.head_dim).transpose(1, 2)

    def forward(self, x, mask, cos, sin):
        b, s, _ = x.size()
        q = self._split(self.q_proj(x), b, s, self.heads)
        k = self._split(self.k_proj(x), b, s, self.kv_heads)
        v = self._split(self.v_proj(x), b, s, self.kv_heads)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        k, v = _share_kv_heads(k, self.groups), _share_kv_heads(v, self.groups)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            # HF masks are built for the cache's full length; only the first k.shape[-2] columns apply.
            scores = scores + mask[:, :, :, : k.shape[-2]]
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        probs = F.dropout(probs, p=self.dropout_p, training=self.training)
        merged = torch.matmul(probs, v).transpose(1, 2).contiguous()
        return self.o_proj(merged.reshape(b, s, -1))


class LlamaDecoderLayer(nn.Module):
    """One pre-norm Llama layer, forward(hidden_states, attention_mask, cos, sin). The
    (cos, sin) pair, which HF passes in as position_embeddings, arrives as two tensors, and
    the mask is the additive 4-D float mask. Here all of them are data."""

    def __init__(self, hidden_size=64, num_heads=8, num_key_value_heads=4, intermediate_size=128):
        super().__init__()
        self.input_layernorm = _RMSNormInF32(hidden_size)
        self.self_attn = _EagerGQA(hidden_size, num_heads, num_key_value_heads)
        self.post_attention_layernorm = _RMSNormInF32(hidden_size)
        self.mlp = _SwiGLU(hidden_size, intermediate_size)

    def forward(self, hidden_states, attention_mask=None, cos=None, sin=None):
        attended = self.self_attn(self.input_layernorm(hidden_states), attention_mask, cos, sin)
        h = hidden_states + attended
        return h + self.mlp(self.post_attention_layernorm(h))


def _causal_additive_mask(batch, seq, dtype):
    """Stands for the 4-D causal mask that HF builds when there is no padding: the
    dtype's most negative finite value above the diagonal and 0 elsewhere, from
    full(...).triu(1). Capture must fold this constant into `attention {causal}`."""
    lowest = torch.finfo(dtype).min
    return torch.full((seq, seq), lowest).triu(1)[None, None].expand(batch, 1, seq, seq)


class LlamaCausalBlock(nn.Module):
    """The layer driven the way LlamaModel drives it for unpadded sequences: positions
    arange(S) for every batch entry, cos/sin from the rotary table, and the causal mask.
    forward(hidden_states) alone, so everything except the input and the weights is a
    constant of the traced program."""

    def __init__(self, hidden_size=64, num_heads=8, num_key_value_heads=4, intermediate_size=128):
        super().__init__()
        self.layer = LlamaDecoderLayer(hidden_size, num_heads, num_key_value_heads, intermediate_size)
        self.rotary = _RotaryTable(hidden_size // num_heads)

    def forward(self, hidden_states):
        batch, seq = hidden_states.shape[0], hidden_states.shape[1]
        positions = torch.arange(seq).unsqueeze(0).expand(batch, seq)
        cos, sin = self.rotary(hidden_states, positions)
        mask = _causal_additive_mask(batch, seq, hidden_states.dtype)
        return self.layer(hidden_states, mask, cos, sin)
