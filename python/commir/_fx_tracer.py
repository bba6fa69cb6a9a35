"""torch.fx tracing for commir.torch.capture.

What the stock tracer does not do:
  * record, for every node, the model source line it came from (the first stack frame
    outside torch and this package), so that a refusal can name it;
  * carry example values (_fx_example_values): every traced value is also computed on
    the example inputs, so that `q, k, v = x.split(d, dim=2)`, `x.chunk(3)`,
    `x.unbind(0)` and `w, i = torch.topk(x, k)` unpack into as many parts as they have;
  * keep the root's parameters that no example input is given for at their defaults
    (`tgt_mask=None` stays None instead of becoming a traced value taken for a mask);
  * trace modules whose forward cannot be traced symbolically. nn.TransformerEncoderLayer
    checks its inputs for a fused fast path and nn.MultiheadAttention calls
    F.multi_head_attention_forward, whose shape checks are control flow on traced values.
    Both are traced through the plain reimplementations below (the eval-mode math of
    torch 1.13's code, with dropout as identity), so their Linear and LayerNorm
    submodules and parameters appear in the graph under their usual names.
    nn.TransformerEncoder is traced as its plain loop over the layers.
    nn.TransformerDecoderLayer's, nn.TransformerDecoder's and nn.Transformer's own
    forwards trace (it is only torch.nn's default of leaving torch.nn modules opaque
    that stopped them; nn.Transformer's checks are on sizes, see to_bool).
"""

import contextlib
import inspect
import math
import sys

import torch
import torch.fx
import torch.nn.functional as F

from commir import _fx_example_values as example_values
from commir import _fx_factories, _fx_refusals
from commir._fx_refusals import Source, describe as describe_target, model_frame as _model_frame


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


@torch.fx.wrap
def commir_packed_heads(w, parts, heads):
    """nn.MultiheadAttention's packed in-projection [parts * E, ...] (q, k and v stacked)
    seen as [parts, heads, head_dim, ...]. Appears in traced graphs as one call: the
    conversion makes the parameter an argument of this shape, so that a layout on the
    heads dimension gives each device its head group's rows of q, k and v alike (a
    split of the packed first dimension would cut across the three thirds)."""
    rows = w.shape[0] // parts
    return w.reshape((parts, heads, rows // heads) + tuple(w.shape[1:]))


def _masked_attention(q, k, v, scale, attn_mask, key_padding_mask):
    """Attention written out with its masks, as F.multi_head_attention_forward applies
    them (a bool mask: True is masked out; a float mask is added to the scores). The
    conversion folds a constant causal or empty mask into one `attention` op and
    refuses any other constant mask; a mask that is an input of the model stays a
    masked softmax of its own."""
    b, h, sq, sk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    for mask in (attn_mask, key_padding_mask):
        if mask is None:
            continue
        value = example_values.value_of(mask)
        if mask is key_padding_mask:  # [B, Sk]
            mask = mask.reshape(b, 1, 1, sk)
        elif getattr(value, "dim", lambda: 2)() == 3:  # [B * H, Sq, Sk]
            mask = mask.reshape(b, h, sq, sk)
        if getattr(value, "dtype", None) == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _multihead_attention(m, query, key, value, key_padding_mask=None, need_weights=True,
                         attn_mask=None, average_attn_weights=True):
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise_capture_error("nn.MultiheadAttention with kdim/vdim, bias_k/bias_v or add_zero_attn: "
                            "only one packed in-projection is captured")
    if m.training and m.dropout > 0:
        # The attention below is the eval-mode math: it has no dropout of the weights.
        raise_capture_error("nn.MultiheadAttention with dropout=%g in training mode: the captured attention "
                            "drops no attention weights (call .eval(), or dropout=0)" % m.dropout)
    if not m.batch_first:  # [S, B, E] -> [B, S, E]
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    e, h = m.embed_dim, m.num_heads
    d = e // h
    # [3, H, D, E] and [3, H, D]: the q, k and v rows of each head (see commir_packed_heads).
    w = commir_packed_heads(m.in_proj_weight, 3, h)
    b = commir_packed_heads(m.in_proj_bias, 3, h) if m.in_proj_bias is not None else None

    def project(x, i):
        bias = b[i].reshape(e) if b is not None else None
        y = F.linear(x, w[i].reshape(e, e), bias)
        return y.reshape(x.shape[0], x.shape[1], h, d).transpose(1, 2)  # [B, H, S, D]

    q, k, v = project(query, 0), project(key, 1), project(value, 2)
    if attn_mask is None and key_padding_mask is None:
        o = commir_attention(q, k, v, False, 1.0 / math.sqrt(d))
    else:
        o = _masked_attention(q, k, v, 1.0 / math.sqrt(d), attn_mask, key_padding_mask)
    o = o.transpose(1, 2).reshape(query.shape[0], query.shape[1], e)
    o = m.out_proj(o)
    if not m.batch_first:
        o = o.transpose(0, 1)
    return o, None


def _encoder_layer(m, src, src_mask=None, src_key_padding_mask=None, is_causal=None):
    activation = m.activation  # F.relu, F.gelu or a module: traced like any other call

    def sa(x):
        return m.dropout1(m.self_attn(x, x, x, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                                      need_weights=False)[0])

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


def _encoder(m, src, mask=None, src_key_padding_mask=None):
    # The stack without its nested-tensor fast path (an inference-time repacking of
    # padded batches, the same values).
    x = src
    for layer in m.layers:
        x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
    return m.norm(x) if m.norm is not None else x


_REIMPLEMENTED = {
    torch.nn.TransformerEncoderLayer: _encoder_layer,
    torch.nn.TransformerEncoder: _encoder,
    torch.nn.MultiheadAttention: _multihead_attention,
}
# torch.nn modules whose own forward fx traces once they are not leaves.
_TRACED_THROUGH = (torch.nn.TransformerDecoderLayer, torch.nn.TransformerDecoder, torch.nn.Transformer)


def raise_capture_error(what):
    from commir.errors import CaptureError
    frame = _model_frame(sys._getframe(1))
    if frame is None:
        raise CaptureError("cannot capture %s" % what)
    source = Source.of(frame)
    raise CaptureError("%s: cannot capture %s\n    %s" % (source.location, what, source.code),
                       file=source.file, line=source.line)


class CaptureProxy(torch.fx.Proxy):
    """A Proxy that unpacks into as many parts as its example value has (split, chunk,
    unbind, topk, a shape), without reading the caller's bytecode."""

    def __iter__(self):
        return iter([self[i] for i in range(self.tracer.parts(self))])

    def __len__(self):
        return self.tracer.parts(self)

    def __index__(self):
        # range(x.size(0)), a slice bound: a size is a number of these shapes.
        if self.node.meta.get(example_values.SHAPE_ONLY_KEY):
            value = example_values.value_of(self)
            if isinstance(value, int):
                return value
        what = ("%s: a tensor value used as a Python number (the capture computes on tensors, it "
                "cannot read their elements)" % describe_target(self.node))
        raise _fx_refusals.error([_fx_refusals.Refusal(what, self.node.meta.get("commir_source"), 0)], "")

    def __getattr__(self, k):
        # A tensor's dtype, device and rank are fixed by the example inputs, as its sizes
        # are: model code may compute with them (torch.finfo(x.dtype).min as a mask fill).
        if k in _STATIC_ATTRIBUTES:
            value = example_values.value_of(self)
            if isinstance(value, torch.Tensor):
                return getattr(value, k)
        return CaptureAttribute(self, k)


class CaptureAttribute(torch.fx.proxy.Attribute, CaptureProxy):
    """`x.shape` and other attributes, unpackable as CaptureProxy values are."""


_STATIC_ATTRIBUTES = ("dtype", "device", "ndim")


class CaptureTracer(torch.fx.Tracer):
    def __init__(self, example_inputs=()):
        super().__init__()
        # Buffers as graph values (get_attr), so that model code may slice them with
        # traced sizes (GPT-2's `self.bias[:, :, :T, :T]` causal mask).
        self.proxy_buffer_attributes = True
        # Example inputs of the root's parameters, in order; those the caller does not
        # give keep their defaults as constants (see create_args_for_root).
        self._examples = [x.clone() if isinstance(x, torch.Tensor) else x for x in example_inputs]
        self._example_by_name = {}
        self._evaluating = 0
        self.defaulted = []  # root parameters traced as their default values

    @contextlib.contextmanager
    def evaluating(self):
        """Runs real computations (an example value) without recording them."""
        self._evaluating += 1
        try:
            yield
        finally:
            self._evaluating -= 1

    def proxy(self, node):
        return CaptureProxy(node, self)

    def parts(self, proxy):
        n = example_values.length(proxy)
        if n is None:
            value = example_values.value_of(proxy)
            if not isinstance(value, example_values.Unknown):
                why = "it is not a sequence"
            else:
                why = "its value on the example inputs could not be computed%s" % (
                    ": %s" % value.error if value.error is not None else "")
            what = "%s: cannot unpack or take len() of its result: %s" % (describe_target(proxy.node), why)
            raise _fx_refusals.error([_fx_refusals.Refusal(what, proxy.node.meta.get("commir_source"), 0)], "")
        return n

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self._evaluating:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def is_leaf_module(self, m, qualname):
        if type(m) in _REIMPLEMENTED or type(m) in _TRACED_THROUGH:
            return False
        return super().is_leaf_module(m, qualname)

    def call_module(self, m, forward, args, kwargs):
        if self._evaluating:
            return forward(*args, **kwargs)
        impl = _REIMPLEMENTED.get(type(m))
        if impl is not None:
            return impl(m, *args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        # fx makes every parameter of the root a placeholder, also `tgt_mask=None` that
        # the caller never passes: the model then sees a traced value where it tests
        # `mask is not None`. Parameters beyond the example inputs keep their defaults,
        # and those given as None are None.
        if concrete_args is None:
            signature = inspect.signature(inspect.unwrap(root_fn))
            names = [p for p in signature.parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if is_module:
                names = names[1:]  # self
            concrete_args = {}
            for i, p in enumerate(names):
                if i < len(self._examples) and isinstance(self._examples[i], torch.Tensor):
                    self._example_by_name[p.name] = self._examples[i]
                elif i < len(self._examples) or p.default is not p.empty:
                    # None or another non-tensor given (need_weights=False), or nothing:
                    # the parameter is that value / its default.
                    concrete_args[p.name] = self._examples[i] if i < len(self._examples) else p.default
                    self.defaulted.append(p.name)
        return super().create_args_for_root(root_fn, is_module, concrete_args or None)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, *rest, **kw):
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, *rest, **kw)
        frame = _model_frame(sys._getframe(1))
        if frame is not None:
            proxy.node.meta["commir_source"] = Source.of(frame)
        example = None
        if kind == "placeholder":
            example = self._example_by_name.get(target, example_values.Unknown(None))
        value = example_values.compute(self, kind, target, args, kwargs, example)
        proxy.node.meta[example_values.META_KEY] = value
        proxy.node.meta[example_values.SHAPE_ONLY_KEY] = example_values.shape_only(kind, target, args, kwargs, value)
        return proxy

    def to_bool(self, proxy):
        # `if x.dim() == 4:` or `if s > max_len:` on sizes: the branch these shapes take
        # (the captured program has static shapes). On tensor elements: refused.
        if proxy.node.meta.get(example_values.SHAPE_ONLY_KEY):
            return bool(example_values.value_of(proxy))
        what = ("%s: control flow on tensor values (it takes a branch only the data decides; "
                "torch.where computes both)" % describe_target(proxy.node))
        raise _fx_refusals.error([_fx_refusals.Refusal(what, proxy.node.meta.get("commir_source"), 0)], "")

    def remove_defaulted_placeholders(self, graph):
        # create_args_for_root's constants leave a placeholder per defaulted parameter,
        # read only by fx's checks that the value passed is the default: the traced
        # function takes only the inputs given.
        names = {"%s_1" % name for name in self.defaulted}
        doomed = {n for n in graph.nodes if n.op == "placeholder" and n.target in names
                  and n.target not in self._example_by_name}
        for node in graph.nodes:  # topological order: users after what they read
            if any(i in doomed for i in node.all_input_nodes):
                doomed.add(node)
        for node in reversed(list(graph.nodes)):
            if node in doomed:
                graph.erase_node(node)


# Holds a module whose own forward is reimplemented (the tracer starts from the root's
# forward, not through call_module). Its parameters are named "inner.<state_dict name>";
# ROOT_PREFIX is stripped again when they become arguments.
ROOT_PREFIX = "inner."


class _EncoderLayerRoot(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        return self.inner(src, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)


class _EncoderRoot(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, src, mask=None, src_key_padding_mask=None):
        return self.inner(src, mask=mask, src_key_padding_mask=src_key_padding_mask)


class _AttentionRoot(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None):
        return self.inner(query, key, value, key_padding_mask=key_padding_mask, need_weights=need_weights,
                          attn_mask=attn_mask)


_ROOTS = {
    torch.nn.TransformerEncoderLayer: _EncoderLayerRoot,
    torch.nn.TransformerEncoder: _EncoderRoot,
    torch.nn.MultiheadAttention: _AttentionRoot,
}


def trace(root, example_inputs=()):
    """A GraphModule of `root` (an nn.Module or a function of tensors) traced with
    `example_inputs` for its first parameters (the others keep their defaults), each
    node's value on them in its meta (example_values.META_KEY), and the prefix its
    parameter names carry beyond their state_dict names."""
    tracer = CaptureTracer(example_inputs)
    prefix = ""
    if type(root) in _ROOTS:
        root = _ROOTS[type(root)](root)
        prefix = ROOT_PREFIX
    with _fx_factories.static_sizes():
        graph = tracer.trace(root)
    tracer.remove_defaulted_placeholders(graph)
    name = type(root).__name__ if isinstance(root, torch.nn.Module) else getattr(root, "__name__", "function")
    return torch.fx.GraphModule(tracer.root, graph, name), prefix
