"""torch.fx tracing for commir.torch.capture.

Two things the stock tracer does not do:
  * record, for every node, the model source line it came from (the first stack frame
    outside torch and this package), so that a refusal can name it;
  * trace modules whose forward cannot be traced symbolically. nn.TransformerEncoderLayer
    checks its inputs for a fused fast path and nn.MultiheadAttention calls
    F.multi_head_attention_forward, whose shape checks are control flow on traced values.
    Both are traced through the plain reimplementations below (the eval-mode math of
    torch 1.13's code, with dropout as identity), so their Linear and LayerNorm
    submodules and parameters appear in the graph under their usual names.
"""

import math
import os
import sys

import torch
import torch.fx
import torch.nn.functional as F

_TORCH_DIR = os.path.dirname(torch.__file__)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@torch.fx.wrap
def commir_attention(q, k, v, causal, scale):
    """softmax(scale * q k^T, causal mask) v on [B, H, S, D]: what CommIR's `attention`
    computes. Appears in traced graphs as one call, emitted as one `attention` op."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if causal:
        sq, sk = scores.shape[-2], scores.shape[-1]
        allowed = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _multihead_attention(m, query, key, value, key_padding_mask=None, need_weights=True,
                         attn_mask=None, average_attn_weights=True):
    # Unmasked attention as transformer layers use it; masks are refused, not dropped.
    if key_padding_mask is not None or attn_mask is not None:
        raise_capture_error("nn.MultiheadAttention with a key_padding_mask or attn_mask "
                            "(only unmasked attention is captured)")
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise_capture_error("nn.MultiheadAttention with kdim/vdim, bias_k/bias_v or add_zero_attn")
    if not m.batch_first:  # [S, B, E] -> [B, S, E]
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    e, h = m.embed_dim, m.num_heads
    d = e // h
    w, b = m.in_proj_weight, m.in_proj_bias

    def project(x, i):
        bias = b[i * e:(i + 1) * e] if b is not None else None
        y = F.linear(x, w[i * e:(i + 1) * e], bias)
        return y.reshape(x.shape[0], x.shape[1], h, d).transpose(1, 2)  # [B, H, S, D]

    q, k, v = project(query, 0), project(key, 1), project(value, 2)
    o = commir_attention(q, k, v, False, 1.0 / math.sqrt(d))
    o = o.transpose(1, 2).reshape(query.shape[0], query.shape[1], e)
    o = m.out_proj(o)
    if not m.batch_first:
        o = o.transpose(0, 1)
    return o, None


def _encoder_layer(m, src, src_mask=None, src_key_padding_mask=None, is_causal=None):
    if src_mask is not None or src_key_padding_mask is not None:
        raise_capture_error("nn.TransformerEncoderLayer with a mask")
    activation = m.activation  # F.relu, F.gelu or a module: traced like any other call

    def sa(x):
        return m.dropout1(m.self_attn(x, x, x, need_weights=False)[0])

    def ff(x):
        return m.dropout2(m.linear2(m.dropout(activation(m.linear1(x)))))

    x = src
    if m.norm_first:
        x = x + sa(m.norm1(x))
        x = x + ff(m.norm2(x))
    else:
        x = m.norm1(x + sa(x))
        x = m.norm2(x + ff(x))
    return x


_REIMPLEMENTED = {
    torch.nn.TransformerEncoderLayer: _encoder_layer,
    torch.nn.MultiheadAttention: _multihead_attention,
}


def raise_capture_error(what):
    from commir.errors import CaptureError
    raise CaptureError("cannot capture %s%s" % (what, _caller_line()))


def _caller_line():
    frame = _model_frame(sys._getframe(1))
    return " (%s)" % _describe(frame) if frame is not None else ""


def _model_frame(frame):
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_TORCH_DIR) and not path.startswith(_PACKAGE_DIR):
            return frame
        frame = frame.f_back
    return None


def _describe(frame):
    import linecache
    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return "%s:%d: %s" % (frame.f_code.co_filename, frame.f_lineno, code)


class CaptureTracer(torch.fx.Tracer):
    def __init__(self):
        super().__init__()
        # Buffers as graph values (get_attr), so that model code may slice them with
        # traced sizes (GPT-2's `self.bias[:, :, :T, :T]` causal mask).
        self.proxy_buffer_attributes = True

    def is_leaf_module(self, m, qualname):
        if type(m) in _REIMPLEMENTED:
            return False
        return super().is_leaf_module(m, qualname)

    def call_module(self, m, forward, args, kwargs):
        impl = _REIMPLEMENTED.get(type(m))
        if impl is not None:
            return impl(m, *args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, *rest, **kw):
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, *rest, **kw)
        frame = _model_frame(sys._getframe(1))
        if frame is not None:
            proxy.node.meta["commir_source"] = _describe(frame)
        return proxy


# Holds a module whose own forward is reimplemented (the tracer starts from the root's
# forward, not through call_module). Its parameters are named "inner.<state_dict name>";
# ROOT_PREFIX is stripped again when they become arguments.
ROOT_PREFIX = "inner."


class _EncoderLayerRoot(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, src):
        return self.inner(src)


class _AttentionRoot(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, query, key, value):
        return self.inner(query, key, value)


_ROOTS = {
    torch.nn.TransformerEncoderLayer: _EncoderLayerRoot,
    torch.nn.MultiheadAttention: _AttentionRoot,
}


def trace(root):
    """A GraphModule of `root` (an nn.Module or a function of tensors), and the prefix
    its parameter names carry beyond their state_dict names."""
    tracer = CaptureTracer()
    prefix = ""
    if type(root) in _ROOTS:
        root = _ROOTS[type(root)](root)
        prefix = ROOT_PREFIX
    graph = tracer.trace(root)
    name = type(root).__name__ if isinstance(root, torch.nn.Module) else getattr(root, "__name__", "function")
    return torch.fx.GraphModule(tracer.root, graph, name), prefix
