"""Rows at integer indices: index_select, index_add, and torch.gather/scatter_add in the
forms that are whole-slice operations, as CommIR `gather` and `scatter_add`.

CommIR's gather/scatter_add take or add whole slices: `gather(t, i) {axis = d}` is
`t.index_select(d, i)` and `scatter_add(b, i, u) {axis = d}` is `b.index_add(d, i, u)`
for a 1-D i (docs/language.md). torch.gather and torch.scatter_add are elementwise
instead (`out[j][k] = x[index[j][k]][k]` for dim 0): the same only where the index is
one 1-D index repeated along the other dimensions (`i[:, None].expand(-1, D)`, the
message-passing form) or the tensors are 1-D. Other indices pick a different row per
element, which CommIR cannot express; they are refused with that reason. `scatter`
(overwriting) has no counterpart: PyTorch leaves repeated indices' result unspecified
and CommIR has no op that writes rows.

In-place forms (`index_add_`, `scatter_add_`) are captured when nothing else reads the
tensor they modify: fx records them as a new value, and a later read of the old node
would see the unmodified tensor where PyTorch sees the modified one.
"""

import torch

from commir import _fx_attention as attn
from commir._fx_refusals import describe

_INDEX_SELECT = (torch.index_select, "index_select")
_INDEX_ADD = (torch.index_add, "index_add", "index_add_")
_GATHER = (torch.gather, "gather")
_SCATTER_ADD = (torch.scatter_add, "scatter_add", "scatter_add_")
_SCATTER = (torch.scatter, "scatter", "scatter_", torch.scatter_reduce, "scatter_reduce", "scatter_reduce_",
            "index_reduce", "index_reduce_", "index_copy", "index_copy_", torch.index_copy)
_IN_PLACE = ("index_add_", "scatter_add_")


def handles(node):
    if node.op not in ("call_function", "call_method"):
        return False
    t = node.target
    try:
        return t in _INDEX_SELECT or t in _INDEX_ADD or t in _GATHER or t in _SCATTER_ADD or t in _SCATTER
    except TypeError:  # an unhashable target
        return False


def _arg(node, i, key):
    return node.kwargs[key] if key in node.kwargs else node.args[i] if len(node.args) > i else None


def emit(conv, node):
    t = node.target
    name = conv._name(node)
    if t in _SCATTER:
        conv.refuse(node, "%s: CommIR has no op that overwrites rows (scatter_add and index_add are captured)"
                    % describe(node))
    if t in _IN_PLACE:
        base = node.args[0]
        later = [u for u in getattr(base, "users", ()) if conv._order.get(u, -1) > conv._order[node]]
        if later:
            conv.refuse(node, "%s: in place on a tensor also read elsewhere (the capture is functional: "
                        "use the out-of-place form)" % describe(node))
    x = conv.tensor(node.args[0], node)
    dim = _arg(node, 1, "dim")
    dim = dim % x.type.rank if isinstance(dim, int) and x.type.rank else dim
    index_node = _arg(node, 2, "index")
    if t in _INDEX_SELECT or t in _INDEX_ADD:
        index = _index(conv, node, index_node)
        if index.type.rank != 1:
            conv.refuse(node, "%s with a %d-D index (PyTorch takes a 1-D one)" % (describe(node), index.type.rank))
        if t in _INDEX_SELECT:
            return conv.fb.gather(x, index, axis=dim, name=name)
        source = conv.tensor(_arg(node, 3, "source"), node)
        alpha = conv.static_number(node.kwargs.get("alpha", 1))
        if alpha is None:
            conv.refuse(node, "%s with a tensor alpha" % describe(node))
        if alpha != 1:
            source = conv.fb.mul(source, alpha, name=name + ".alpha")
        return conv.fb.scatter_add(x, index, source, axis=dim, name=name)
    # torch.gather / torch.scatter_add: elementwise over an index of the operand's rank.
    if node.kwargs.get("sparse_grad"):
        conv.refuse(node, "%s with sparse_grad" % describe(node))
    rows = _rows(conv, node, index_node, dim)
    if t in _GATHER:
        return conv.fb.gather(x, rows, axis=dim, name=name)
    src_node = _arg(node, 3, "src")
    src = conv.tensor(src_node, node)
    index_shape = conv.shape(index_node)
    if tuple(src.type.shape) != index_shape:
        # Only src's leading index.shape part is read: the slice that is.
        src = conv.fb.slice(src, [0] * src.type.rank, list(index_shape), name=name + ".src")
    return conv.fb.scatter_add(x, rows, src, axis=dim, name=name)


def _index(conv, node, index_node):
    index = conv.tensor(index_node, node)
    if index.type.dtype not in ("i64", "i32"):
        conv.refuse(node, "%s with a %s index (an integer tensor is needed)" % (describe(node), index.type.dtype))
    return index


def _rows(conv, node, index_node, dim):
    """The 1-D index of rows that torch.gather/scatter_add's `index` (of the operand's
    rank) repeats along every dimension but `dim`, as CommIR's whole-slice ops read it;
    refused when the index differs along another dimension or covers part of a slice."""
    x_shape = conv.shape(node.args[0])
    index_shape = conv.shape(index_node)
    rank = len(x_shape)
    if rank == 1:
        return _index(conv, node, index_node)
    why = ("%s: an index that may pick a different row for each element (CommIR's gather and "
           "scatter_add take whole slices; an index repeated along the other dimensions, "
           "i[:, None].expand(-1, D), is captured)" % describe(node))
    other = [d for d in range(rank) if d != dim]
    if any(index_shape[d] != x_shape[d] for d in other):
        conv.refuse(node, "%s: an index that covers part of each slice (shape %s for %s)"
                    % (describe(node), list(index_shape), list(x_shape)))
    base = conv.skip_identity(index_node)
    if not attn.is_call(base, ("expand", "expand_as", torch.broadcast_to, "broadcast_to")):
        conv.refuse(node, why)
    source = base.args[0]
    source_shape = conv.shape(source)
    # Left-padded with ones as expand does.
    padded = (1,) * (rank - len(source_shape)) + tuple(source_shape)
    if any(padded[d] != 1 for d in other) or padded[dim] != index_shape[dim]:
        conv.refuse(node, why)
    rows = _index(conv, node, source)
    if rows.type.shape != (index_shape[dim],):
        rows = conv.fb.reshape(rows, (index_shape[dim],), name=conv._name(node) + ".rows")
    return rows
