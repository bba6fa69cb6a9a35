"""Comparisons, `where`, `masked_fill` and boolean logic as CommIR `compare` and `select`.

    x > 0, torch.gt(x, y), x.le(y), x == y, ...   ->  compare(x, y) {cmp = gt|le|eq|...}
    torch.where(c, a, b), a.where(c, b)           ->  select(c, a, b)
    x.masked_fill(m, v)                           ->  select(m, v, x)
    ~c, c & d, c | d (on bool tensors)            ->  select with i1 constants

Operands are brought to the element type PyTorch computes in (torch.result_type of the
recorded values), as `compare` and `select` take one element type; a number operand of
`select` becomes a rank-0 `full` (select takes no literals), which broadcasts.
"""

import operator

import torch

from commir import _fx_moe
from commir.builder import TensorType, Value

_CMP = {}
for _cmp, _fns in {
    "gt": (operator.gt, torch.gt, torch.greater, "gt", "greater", "__gt__"),
    "ge": (operator.ge, torch.ge, torch.greater_equal, "ge", "greater_equal", "__ge__"),
    "lt": (operator.lt, torch.lt, torch.less, "lt", "less", "__lt__"),
    "le": (operator.le, torch.le, torch.less_equal, "le", "less_equal", "__le__"),
    "eq": (operator.eq, torch.eq, "eq", "__eq__"),
    "ne": (operator.ne, torch.ne, torch.not_equal, "ne", "not_equal", "__ne__"),
}.items():
    for _fn in _fns:
        _CMP[_fn] = _cmp

WHERE = (torch.where, "where")
MASKED_FILL = (torch.masked_fill, "masked_fill")
_NOT = (operator.invert, torch.logical_not, torch.bitwise_not, "logical_not", "bitwise_not", "__invert__")
_AND = (operator.and_, torch.logical_and, torch.bitwise_and, "logical_and", "bitwise_and", "__and__")
_OR = (operator.or_, torch.logical_or, torch.bitwise_or, "logical_or", "bitwise_or", "__or__")


def handles(node):
    t = node.target
    try:
        return t in _CMP or t in WHERE or t in MASKED_FILL or t in _NOT or t in _AND or t in _OR
    except TypeError:  # an unhashable target
        return False


def emit(conv, node):
    """The CommIR value of a comparison, where, masked_fill or boolean node."""
    t, args, kwargs = node.target, node.args, node.kwargs
    name = conv._name(node)
    if t in _CMP:
        if len(args) != 2 or kwargs:
            conv.refuse(node, "%s with out= or other extra arguments" % _describe(node))
        a, b = _common(conv, node, args[0], args[1])
        return conv.fb.op("compare", [a, b], [("cmp", _CMP[t])], name=name)
    if t in WHERE:
        if len(args) != 3:
            # The token lists of a mixture-of-experts loop (Hugging Face's Mixtral):
            # say what captures instead.
            conv.refuse(node, "%s with one argument (the indices where the condition holds): its "
                        "result's length depends on the data, and a captured program's shapes are "
                        "static" % _describe(node), hint=_fx_moe.CAPACITY_HINT)
        # x.where(c, y) is torch.where(c, x, y).
        c, a, b = (args[1], args[0], args[2]) if node.op == "call_method" else args
        cond = _predicate(conv, node, c)
        a, b = _choices(conv, node, a, b)
        return conv.fb.op("select", [cond, a, b], name=name)
    if t in MASKED_FILL:
        value = kwargs.get("value", args[2] if len(args) > 2 else None)
        mask = _predicate(conv, node, kwargs.get("mask", args[1] if len(args) > 1 else None))
        fill, x = _choices(conv, node, value, args[0])
        return conv.fb.op("select", [mask, fill, x], name=name)
    a = _predicate(conv, node, args[0])
    if t in _NOT:
        return conv.fb.op("select", [a, _bool(conv, False), _bool(conv, True)], name=name)
    b = _predicate(conv, node, args[1])
    if t in _AND:
        return conv.fb.op("select", [a, b, _bool(conv, False)], name=name)
    return conv.fb.op("select", [a, _bool(conv, True), b], name=name)


def _describe(node):
    from commir._fx_refusals import describe
    return describe(node)


def _recorded(conv, x):
    return conv.values[x] if isinstance(x, torch.fx.Node) else x


def _operand(conv, node, x):
    """A Value, or a number when x is one (or a constant 0-d tensor)."""
    v = conv.value_of(x, node)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return conv.tensor(x, node)
    return v


def _convert(conv, v, dtype):
    if isinstance(v, Value) and v.type.dtype != dtype:
        return conv.fb.convert(v, dtype)
    return v


def _common(conv, node, a, b):
    """a and b in the element type PyTorch compares them in."""
    from commir._fx_convert import DTYPES
    dtype = DTYPES.get(torch.result_type(_recorded(conv, a), _recorded(conv, b)))
    if dtype is None:
        conv.refuse(node, "%s on operands CommIR has no common element type for" % _describe(node))
    va, vb = _operand(conv, node, a), _operand(conv, node, b)
    return _convert(conv, va, dtype), _convert(conv, vb, dtype)


def _choices(conv, node, a, b):
    """The two choices of select in the result's element type; numbers as rank-0 fulls."""
    dtype, _ = conv._out_type(node)
    out = []
    for x in (a, b):
        v = _operand(conv, node, x)
        out.append(_convert(conv, v, dtype) if isinstance(v, Value) else conv.fb.full(v, TensorType(dtype, ())))
    return out


def _predicate(conv, node, x):
    v = conv.tensor(x, node)
    if v.type.dtype != "i1":
        conv.refuse(node, "%s with a %s condition (a bool tensor is needed)" % (_describe(node), v.type.dtype))
    return v


def _bool(conv, value):
    return conv.fb.full(1 if value else 0, TensorType("i1", ()))
