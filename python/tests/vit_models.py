"""torchvision's Vision Transformer encoder block (torchvision 0.14, the release for torch
1.13: torchvision/models/vision_transformer.py, EncoderBlock and MLPBlock), copied
as written because torchvision is not installed next to Debian's torch. Used when the
real one cannot be imported."""

from functools import partial

import torch
import torch.nn as nn


class MLPBlock(nn.Sequential):
    # torchvision.ops.MLP(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU,
    # dropout=dropout): Linear, GELU, Dropout, Linear, Dropout.
    def __init__(self, in_dim, mlp_dim, dropout):
        super().__init__(nn.Linear(in_dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(mlp_dim, in_dim), nn.Dropout(dropout))


class EncoderBlock(nn.Module):
    def __init__(self, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=attention_dropout,
                                                    batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input):
        torch._assert(input.dim() == 3, f"Expected (batch_size, seq_length, hidden_dim) got {input.shape}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x)
        x = x + input
        y = self.ln_2(x)
        y = self.mlp(y)
        return x + y


def encoder_block(num_heads, hidden_dim, mlp_dim):
    """torchvision's EncoderBlock when torchvision is importable, else the copy above."""
    try:
        from torchvision.models.vision_transformer import EncoderBlock as real
    except ImportError:
        real = EncoderBlock
    return real(num_heads, hidden_dim, mlp_dim, 0.0, 0.0)
