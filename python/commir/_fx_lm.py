"""Language-model pieces of a captured program: embedding lookups, cross-entropy and
dropout (nn.Embedding / F.embedding, nn.CrossEntropyLoss / F.cross_entropy, nn.Dropout /
F.dropout).

- An embedding lookup is `gather(table, ids) {axis = 0}`. Ids that are an input (or
  computed from one) stay ids; ids the model computes from constants (learned positions,
  `wpe(torch.arange(T))`) are consecutive rows, so they are a `slice` of the table,
  whose derivative pads the cotangent back to the table's shape. Any other constant ids
  are refused.
- Cross-entropy is `cross_entropy(logits, labels)` with the integer labels as an
  argument; PyTorch's class dimension (dim 1 of a batched input) is moved last first,
  where CommIR's op takes it.
- Dropout follows each call's own training flag (nn.Dropout's `.training`, F.dropout's
  `training=`): an active one is `dropout {rate, seed}`, an inactive one is the identity.
  Dropout k of the model (graph order) gets the seed `dropout_seed + k`, so that two
  dropouts over same-shaped tensors draw different masks. Its mask is CommIR's (Philox of
  the seed and the element's index, commir/philox.h), not torch's generator's.
"""

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from commir._fx_refusals import describe

_EMBEDDINGS = (F.embedding,)
_LOSSES = (F.cross_entropy,)
_DROPOUTS = (F.dropout,)


def handles_module(module):
    return isinstance(module, (nn.Embedding, nn.CrossEntropyLoss, nn.Dropout))


def handles_call(node):
    return node.op == "call_function" and node.target in _EMBEDDINGS + _LOSSES + _DROPOUTS


def emit_module(cv, node, module):
    if isinstance(module, nn.Embedding):
        return _embedding(cv, node, node.args[0] if node.args else node.kwargs["input"],
                          lambda: cv._param(node.target + ".weight"), module.padding_idx, module.max_norm,
                          module.scale_grad_by_freq, "nn.Embedding %s" % node.target)
    if isinstance(module, nn.CrossEntropyLoss):
        input, target = _bind(node, ("input", "target"))
        if module.weight is not None:
            cv.refuse(node, "nn.CrossEntropyLoss %s with class weights: CommIR's cross_entropy weighs "
                      "every class alike" % node.target)
        return _cross_entropy(cv, node, input, target, module.ignore_index, module.reduction,
                              module.label_smoothing)
    return _dropout(cv, node, node.args[0] if node.args else node.kwargs["input"], module.p,
                    module.training, "nn.Dropout %s" % node.target)


def emit_call(cv, node):
    t = node.target
    if t is F.embedding:
        ids, weight, padding_idx, max_norm, _, scale_grad_by_freq, _ = _bind(
            node, ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"),
            (None, 2.0, False, False))
        return _embedding(cv, node, ids, lambda: cv.tensor(weight, node), padding_idx, max_norm,
                          scale_grad_by_freq, describe(node))
    if t is F.cross_entropy:
        input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing = _bind(
            node, ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                   "label_smoothing"), (None, None, -100, None, "mean", 0.0))
        if weight is not None:
            cv.refuse(node, "%s with class weights: CommIR's cross_entropy weighs every class alike"
                      % describe(node))
        if size_average is not None or reduce is not None:
            cv.refuse(node, "%s with the deprecated size_average/reduce: give reduction= instead" % describe(node))
        return _cross_entropy(cv, node, input, target, ignore_index, reduction, label_smoothing)
    x, p, training, _ = _bind(node, ("input", "p", "training", "inplace"), (0.5, True, False))
    return _dropout(cv, node, x, p, training, describe(node))


def is_inactive_dropout(cv, node):
    """Whether `node` is a dropout that keeps everything (eval mode or p = 0): the
    identity, which pattern matching (attention) looks through."""
    if node.op == "call_module":
        m = cv.gm.get_submodule(node.target)
        return isinstance(m, nn.Dropout) and not (m.training and m.p > 0)
    if node.op == "call_function" and node.target is F.dropout:
        _, p, training, _ = _bind(node, ("input", "p", "training", "inplace"), (0.5, True, False))
        return not (training and p > 0)
    return False


def _bind(node, names, defaults=()):
    """The node's arguments by parameter name: positional, then keyword, then the
    defaults of the trailing parameters."""
    args, kwargs = node.args, node.kwargs
    first_default = len(names) - len(defaults)
    out = []
    for i, n in enumerate(names):
        if i < len(args):
            out.append(args[i])
        elif n in kwargs:
            out.append(kwargs[n])
        else:
            out.append(defaults[i - first_default] if i >= first_default else None)
    return out


# ---- embedding --------------------------------------------------------------------
def _embedding(cv, node, ids, weight, padding_idx, max_norm, scale_grad_by_freq, what):
    if max_norm is not None:
        cv.refuse(node, "%s with max_norm: it renormalises the table's rows in place while looking them "
                  "up, which a CommIR program cannot do" % what)
    if scale_grad_by_freq:
        cv.refuse(node, "%s with scale_grad_by_freq: gather's derivative sums the rows' cotangents "
                  "unscaled" % what)
    if padding_idx is not None and cv.training:
        # The lookup is the same, but PyTorch gives the padding row no gradient; a
        # captured training step would update it.
        cv.refuse(node, "%s with padding_idx in training mode: PyTorch keeps the padding row's gradient "
                  "zero, gather's derivative does not (capture in eval mode for inference)" % what)
    name = cv._name(node)
    if cv.is_dynamic(ids):
        table, index = weight(), cv.tensor(ids, node)
        if index.type.dtype not in ("i32", "i64"):
            cv.refuse(node, "%s with %s ids: embedding ids are i32 or i64" % (what, index.type.dtype))
        return cv.fb.gather(table, index, axis=0, name=name)
    constant = cv.constant_tensor(ids)
    if constant is None or constant.is_floating_point() or constant.dtype == torch.bool:
        cv.refuse(node, "%s with ids that are neither an input nor an integer tensor" % what)
    table = weight()
    flat = constant.reshape(-1).to(torch.int64)
    rows = table.type.shape[0]
    first = int(flat[0]) if flat.numel() else 0
    if flat.numel() == 0 or not torch.equal(flat, torch.arange(first, first + flat.numel())) or \
            first < 0 or first + flat.numel() > rows:
        cv.refuse(node, "%s with constant ids that are not consecutive rows of the table (positions "
                  "torch.arange(a, b) are captured as a slice); pass other ids as an input" % what)
    width = list(table.type.shape[1:])
    y = table
    if flat.numel() != rows:
        y = cv.fb.slice(table, [first] + [0] * len(width), [flat.numel()] + width, name=name + ".rows")
    shape = tuple(constant.shape) + tuple(width)
    return y if y.type.shape == shape else cv.fb.reshape(y, shape, name=name)


# ---- cross-entropy ------------------------------------------------------------------
def _cross_entropy(cv, node, input, target, ignore_index, reduction, label_smoothing):
    if reduction not in ("mean", "sum", "none"):
        cv.refuse(node, "%s with reduction=%r: mean, sum or none" % (describe(node), reduction))
    x = cv.tensor(input, node)
    target_value = cv.values.get(target) if isinstance(target, torch.fx.Node) else None
    if not isinstance(target_value, torch.Tensor) or target_value.is_floating_point():
        cv.refuse(node, "%s with class probabilities as the target: CommIR's cross_entropy takes class "
                  "indices (an integer tensor)" % describe(node))
    labels = cv.tensor(target, node)
    name = cv._name(node)
    if x.type.rank > 2:  # [N, C, d...] -> [N, d..., C]
        perm = [0] + list(range(2, x.type.rank)) + [1]
        x = cv.fb.transpose(x, perm, name=name + ".classes_last")
    loss, _ = cv.fb.cross_entropy(x, labels, reduction=reduction, ignore_index=int(ignore_index),
                                  label_smoothing=float(label_smoothing), name=name)
    return loss


# ---- dropout ----------------------------------------------------------------------
def _dropout(cv, node, x, p, training, what):
    if not (training and p > 0):
        return cv.tensor(x, node)
    if p >= 1:
        cv.refuse(node, "%s with p=%g: it zeroes everything; CommIR's dropout rate is below 1" % (what, p))
    return cv.fb.dropout(cv.tensor(x, node), rate=p, seed=cv.dropout_seed + _dropout_index(cv, node),
                         name=cv._name(node))


def _dropout_index(cv, node):
    """The position of `node` among the model's active dropouts, in graph order."""
    if cv._active_dropouts is None:
        cv._active_dropouts = {}
        for n in cv.gm.graph.nodes:
            if (n.op == "call_module" and isinstance(cv.gm.get_submodule(n.target), nn.Dropout)) or \
                    (n.op == "call_function" and n.target is F.dropout):
                if not is_inactive_dropout(cv, n):
                    cv._active_dropouts[n] = len(cv._active_dropouts)
    return cv._active_dropouts[node]
