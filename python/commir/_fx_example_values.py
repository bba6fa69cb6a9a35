"""Example values carried through torch.fx tracing.

torch.fx traces symbolically: a Proxy has no shape, so model code that unpacks the
result of `x.split(d, dim=2)`, `x.chunk(3, -1)`, `x.unbind(0)` or `torch.topk(x, k)`
cannot be traced (how many parts there are depends on x's size). The capture traces with
the example inputs at hand, so every traced value is also computed once on them, and the
number of parts is read off the computed value. That is the same specialisation the
conversion already makes for sizes (`x.shape[0]` becomes a number): a captured program
has static shapes.

torch 1.13's own answer, reading the UNPACK_SEQUENCE instruction of the calling frame,
indexes the bytecode by `f_lasti // 2`, which Python 3.11's inline caches break (it
reads an unrelated instruction); the capture never relies on it.
"""

import torch
import torch.fx
from torch.fx.node import map_aggregate

META_KEY = "commir_example_value"


class Unknown:
    """The example value of a node that could not be computed while tracing (the
    error is kept so that a refusal can quote it)."""

    def __init__(self, error):
        self.error = error


def value_of(proxy_or_value):
    """The example value behind a Proxy (or the value itself): Unknown when absent."""
    if isinstance(proxy_or_value, torch.fx.Proxy):
        return proxy_or_value.node.meta.get(META_KEY, Unknown(None))
    return proxy_or_value


class _NotComputed(Exception):
    def __init__(self, unknown):
        self.unknown = unknown


def _concrete(args):
    def one(a):
        if isinstance(a, torch.fx.Proxy):
            a = value_of(a)
        if isinstance(a, Unknown):
            raise _NotComputed(a)
        return a

    return map_aggregate(args, one)


def compute(tracer, kind, target, args, kwargs, placeholder_value):
    """The value node (kind, target, args, kwargs) has on the example inputs; Unknown
    when an operand is unknown or the call itself fails on them. `placeholder_value` is
    the example input of a placeholder. Modules and functions run with the tracer in
    evaluation mode, so that its patches of nn.Module.__call__/__getattr__ do not record
    their insides as graph nodes."""
    try:
        if kind == "placeholder":
            return placeholder_value
        args, kwargs = _concrete(args), _concrete(kwargs)
        with tracer.evaluating(), torch.no_grad():
            if kind == "get_attr":
                value = tracer.root
                for atom in target.split("."):
                    value = getattr(value, atom)
                return value
            if kind == "call_function":
                return target(*args, **kwargs)
            if kind == "call_method":
                return getattr(args[0], target)(*args[1:], **kwargs)
            if kind == "call_module":
                return tracer.root.get_submodule(target)(*args, **kwargs)
    except _NotComputed as missing:
        return missing.unknown
    except Exception as error:  # the model's own error on these inputs
        return Unknown(error)
    return Unknown(None)


def length(proxy):
    """How many parts unpacking `proxy` gives, from its example value; None when the
    value is not known or is not a sequence (a tensor unpacks along its first
    dimension, as in eager PyTorch)."""
    value = value_of(proxy)
    if isinstance(value, torch.Tensor):
        return value.shape[0] if value.dim() > 0 else None
    if isinstance(value, (tuple, list, torch.Size)):
        return len(value)
    return None


SHAPE_ONLY_KEY = "commir_shape_only"
# What reads a tensor's metadata, never its elements.
_SHAPE_QUERIES = ("size", "dim", "ndimension", "numel", "nelement", "is_floating_point", "is_complex",
                  "element_size", torch.numel, torch.is_floating_point, torch.is_complex)
_SHAPE_ATTRIBUTES = ("shape", "ndim", "dtype", "device")


def shape_only(kind, target, args, kwargs, value):
    """Whether a node's value depends on tensor sizes (and constants) only, never on
    tensor elements: `x.size(1) > 4` is, `x.sum() > 0` and `x.max().item()` are not.
    Control flow on such a value takes one branch for every input of these shapes."""
    if isinstance(value, (Unknown, torch.Tensor)) or kind in ("placeholder", "get_attr", "call_module"):
        return False
    operands = []
    map_aggregate((args, kwargs), lambda a: operands.append(a) if isinstance(a, torch.fx.Proxy) else None)
    if kind in ("call_method", "call_function") and target in _SHAPE_QUERIES:
        return all(o.node.meta.get(SHAPE_ONLY_KEY, False) for o in operands[1:])
    if kind == "call_function" and target is getattr and args[1] in _SHAPE_ATTRIBUTES:
        return True
    if kind == "call_function" and not isinstance(value, (bool, int, float, torch.Size, torch.dtype, tuple)):
        return False
    return kind == "call_function" and all(o.node.meta.get(SHAPE_ONLY_KEY, False) for o in operands)
