"""Transformer blocks written as ordinary PyTorch modules, the way model code writes
them (GPT-2 and Llama), for the capture tests and the example."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class NewGELU(nn.Module):
    """GPT-2's tanh-form GELU, written out."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, d_model, n_head, max_seq):
        super().__init__()
        self.n_head = n_head
        self.d_model = d_model
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.register_buffer("bias", torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq))

    def forward(self, x):
        b, s, d = x.shape[0], x.shape[1], self.d_model
        hd = d // self.n_head
        qkv = self.c_attn(x)
        q = qkv[:, :, 0:d].view(b, s, self.n_head, hd).transpose(1, 2)
        k = qkv[:, :, d:2 * d].view(b, s, self.n_head, hd).transpose(1, 2)
        v = qkv[:, :, 2 * d:3 * d].view(b, s, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.bias[:, :, :s, :s] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(b, s, d)
        return self.c_proj(y)


class GPT2MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.act = NewGELU()
        self.c_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, d_model=32, n_head=4, max_seq=16):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = GPT2Attention(d_model, n_head, max_seq)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = GPT2MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


def repeat_kv(x, n_rep):
    """[B, S, Hkv, D] -> [B, S, Hkv * n_rep, D], each kv head repeated n_rep times."""
    b, s, h, d = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
    return x[:, :, :, None, :].expand(b, s, h, n_rep, d).reshape(b, s, h * n_rep, d)


class LlamaAttention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, max_seq):
        super().__init__()
        # As llama2.c's model.py: the causal mask is a buffer of -inf above the diagonal.
        mask = torch.full((1, 1, max_seq, max_seq), float("-inf"))
        self.register_buffer("mask", torch.triu(mask, diagonal=1))
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x):
        bsz, seqlen = x.shape[0], x.shape[1]
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        keys = repeat_kv(xk, self.n_heads // self.n_kv_heads)
        values = repeat_kv(xv, self.n_heads // self.n_kv_heads)
        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores + self.mask[:, :, :seqlen, :seqlen]
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class LlamaFeedForward(nn.Module):
    """SwiGLU."""

    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, dim=32, n_heads=4, n_kv_heads=2, hidden_dim=64, max_seq=16):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = LlamaAttention(dim, n_heads, n_kv_heads, max_seq)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = LlamaFeedForward(dim, hidden_dim)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class NanoGPTAttention(nn.Module):
    """nanoGPT's CausalSelfAttention (model.py, slow path): one c_attn projection split
    into q, k and v with `.split(n_embd, dim=2)`."""

    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class NeoXParallelBlock(nn.Module):
    """A GPT-NeoX-style block: fused qkv laid out per head and split with
    `.split(head_dim, dim=-1)`, attention and MLP in parallel on the same input
    (x + attn(ln1(x)) + mlp(ln2(x)))."""

    def __init__(self, d_model, n_head, max_seq):
        super().__init__()
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.input_layernorm = nn.LayerNorm(d_model)
        self.post_attention_layernorm = nn.LayerNorm(d_model)
        self.query_key_value = nn.Linear(d_model, 3 * d_model)
        self.dense = nn.Linear(d_model, d_model)
        self.dense_h_to_4h = nn.Linear(d_model, 4 * d_model)
        self.dense_4h_to_h = nn.Linear(4 * d_model, d_model)
        self.register_buffer("bias", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

    def attention(self, x):
        b, s = x.shape[0], x.shape[1]
        qkv = self.query_key_value(x).view(b, s, self.n_head, 3 * self.head_dim)
        q, k, v = qkv.split(self.head_dim, dim=-1)
        q, k, v = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        mask = self.bias[:s, :s]
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        return self.dense(out.permute(0, 2, 1, 3).reshape(b, s, -1))

    def forward(self, x):
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x))))
        return x + self.attention(self.input_layernorm(x)) + mlp
