"""A mixture-of-experts router and its routing as CommIR ops.

    torch.topk(x, k, dim, largest=True)         ->  top_k (dim moved last and back, neg for smallest)
    F.one_hot(i, num_classes=E)                 ->  compare(eq) of i with 0..E-1, convert to i64
    commir.nn.moe_dispatch / moe_collect        ->  moe_dispatch / moe_collect

torch.topk's tied values: CommIR's top_k puts the lower index first; torch 1.13's CPU
kernel (a quickselect) follows no rule: it gives indices [2, 3] for the top 2 of [1, 1, 1, 1]
and [6, 5] for the top 2 of eight zeros. The values agree whatever the ties; only which of
two equal entries is picked may differ. Router probabilities (a softmax of a linear layer)
tie with probability zero, integers tie all the time: topk of an integer or bool tensor is
refused, topk of a floating-point tensor is captured and the tie rule documented
(python/README.md). `sorted=False` is refused: torch returns the k entries in an order it
does not specify, top_k sorts them.
"""

import torch
import torch.nn.functional as F

from commir import nn as commir_nn
from commir._fx_refusals import describe
from commir.builder import TensorType

_TOPK = (torch.topk, "topk")
_ROUTING = (commir_nn.moe_dispatch, commir_nn.moe_collect)
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# What a model that gathers each expert's tokens with torch.where(mask) / nonzero can
# write instead: the routing into static buffers, which captures (shown in the refusal).
CAPACITY_HINT = """a mixture of experts captures when it routes into buffers of fixed capacity (commir.nn, docs/moe-demo.md):
        buf = commir.nn.moe_dispatch(x, experts_of, experts=E, capacity_factor=1.0)  # [E, C, H]
        out = torch.matmul(F.silu(buf @ w1) * (buf @ w3), w2)   # every expert at once: w1 [E, H, F]
        y = (commir.nn.moe_collect(out, experts_of) * gates[..., None]).sum(1)       # [T, H]"""


def handles(node):
    if node.op not in ("call_function", "call_method"):
        return False
    t = node.target
    if node.op == "call_method":
        return t == "topk"
    return t is torch.topk or t is F.one_hot or t in _ROUTING


def emit(conv, node):
    t = node.target
    if t in _TOPK:
        return _top_k(conv, node)
    if t is F.one_hot:
        return _one_hot(conv, node)
    return _routing(conv, node)


def _arg(node, i, key, default=None):
    if key in node.kwargs:
        return node.kwargs[key]
    return node.args[i] if len(node.args) > i else default


def _top_k(conv, node):
    source = node.args[0] if node.args else node.kwargs["input"]
    dtype = conv.values[source].dtype if isinstance(conv.values.get(source), torch.Tensor) else None
    if dtype not in _FLOATS:
        conv.refuse(node, "%s of a %s tensor: integers tie, and torch 1.13's topk picks among tied "
                    "entries in no specified order where CommIR's top_k takes the lower index"
                    % (describe(node), dtype))
    k = conv.static_number(_arg(node, 1, "k"))
    dim = conv.static_number(_arg(node, 2, "dim", -1))
    largest = _arg(node, 3, "largest", True)
    ordered = _arg(node, 4, "sorted", True)
    if not isinstance(k, int) or not isinstance(dim, int) or not isinstance(largest, bool):
        conv.refuse(node, "%s with k, dim or largest computed from tensor values" % describe(node))
    if ordered is not True:
        conv.refuse(node, "%s with sorted=False: torch returns the k entries in an order it does not "
                    "specify, CommIR's top_k sorts them" % describe(node))
    x = conv.tensor(source, node)
    name = conv._name(node)
    rank = x.type.rank
    dim %= rank
    perm = list(range(rank))
    perm[dim], perm[-1] = perm[-1], perm[dim]
    if dim != rank - 1:
        x = conv.fb.transpose(x, perm, name=name + ".in")
    if not largest:  # the k smallest are the k largest of -x, negated back exactly
        x = conv.fb.unary("neg", x, name=name + ".neg")
    values, indices = conv.fb.op_results("top_k", [x], 2, [("k", k)], names=[name + ".values", name + ".indices"])
    if not largest:
        values = conv.fb.unary("neg", values, name=name + ".smallest")
    if dim != rank - 1:
        values = conv.fb.transpose(values, perm, name=name + ".values_t")
        indices = conv.fb.transpose(indices, perm, name=name + ".indices_t")
    return [values, indices]


def _iota(fb, n, name):
    """0, 1, ..., n-1 as an i64[n], from `full` and `concat` (the IR has no iota): iota(2m)
    is iota(m) followed by iota(m) + m, so about 2 log2(n) ops."""
    if n == 1:
        return fb.full(0, TensorType("i64", (1,)), name=name + ".0")
    half = _iota(fb, n // 2, name)
    upper = fb.binary("add", half, n // 2, name="%s.upper%d" % (name, n))
    parts = [half, upper]
    if n % 2:
        parts.append(fb.full(n - 1, TensorType("i64", (1,)), name="%s.last%d" % (name, n)))
    return fb.concat(parts, 0, name="%s.iota%d" % (name, n))


def _one_hot(conv, node):
    classes = conv.static_number(_arg(node, 1, "num_classes", -1))
    if not isinstance(classes, int) or classes < 1:
        conv.refuse(node, "%s without num_classes: the class count would be the data's maximum + 1, "
                    "which the captured program's static shapes cannot follow" % describe(node))
    x = conv.tensor(node.args[0] if node.args else node.kwargs["tensor"], node)
    if x.type.dtype not in ("i64", "i32"):
        conv.refuse(node, "%s of a %s tensor (an integer tensor is needed)" % (describe(node), x.type.dtype))
    name = conv._name(node)
    if x.type.dtype != "i64":
        x = conv.fb.convert(x, "i64", name=name + ".i64")
    shape = tuple(x.type.shape) + (classes,)
    column = conv.fb.reshape(x, tuple(x.type.shape) + (1,), name=name + ".col")
    column = conv.fb.broadcast(column, shape, name=name + ".cols")
    classes_of = conv.fb.broadcast(_iota(conv.fb, classes, name), shape, name=name + ".classes")
    hit = conv.fb.op("compare", [column, classes_of], [("cmp", "eq")], name=name + ".eq")
    return conv.fb.convert(hit, "i64", name=name)


def _routing(conv, node):
    name = conv._name(node)
    kwargs = node.kwargs
    if node.target is commir_nn.moe_dispatch:
        x, experts_of = (conv.tensor(a, node) for a in node.args[:2])
        factor = kwargs.get("capacity_factor")
        attrs = [("experts", kwargs["experts"]), ("capacity", kwargs.get("capacity")),
                 ("capacity_factor", float(factor) if factor is not None else None),
                 ("groups", kwargs.get("groups", 1))]
        layout = kwargs.get("layout")
        written = None
        if layout is not None and conv.mesh_sizes:  # one device: the layout means nothing
            dtype, shape = conv._out_type(node)
            try:
                written = TensorType(dtype, shape, [tuple(a) if isinstance(a, list) else a for a in layout])
            except ValueError as error:
                conv.refuse(node, "%s: layout %r: %s" % (describe(node), layout, error))
        return conv.fb.op("moe_dispatch", [x, experts_of], attrs, type=written, name=name)
    buffer, experts_of = (conv.tensor(a, node) for a in node.args[:2])
    return conv.fb.op("moe_collect", [buffer, experts_of], [("groups", kwargs.get("groups", 1))], name=name)
