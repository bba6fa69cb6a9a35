"""Constant tensors a captured model computes: which may be folded into the program, and
their names.

A tensor that depends on no input or parameter (Llama's rotary cos/sin of arange
positions, torch.zeros_like(x)) has one value for the captured shapes, so the capture
may take it as a constant (Converter._constant): a `full`, or an argument fed with the
value. A tensor computed with random numbers is not constant in PyTorch (every call
draws again) and is never folded.
"""

import operator

import torch
import torch.fx

# State keys of folded constants: no state_dict key has this form.
CONSTANT_PREFIX = "<constant>."
# Where a layout-only chain of a folded constant ends: it is named after that node.
_LAYOUT_METHODS = ("unsqueeze", "to", "float", "type_as", "view", "reshape", "expand", "contiguous")
_RANDOM = (torch.rand, torch.randn, torch.randint, torch.randperm, torch.rand_like, torch.randn_like,
           torch.randint_like, torch.bernoulli, torch.normal, torch.multinomial, torch.poisson,
           "uniform_", "normal_", "bernoulli_", "bernoulli", "random_", "exponential_", "geometric_",
           "cauchy_", "log_normal_")


def random_ancestor(node):
    """A node `node` is computed from that draws random numbers, else None."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op in ("call_function", "call_method"):
            try:
                if n.target in _RANDOM:
                    return n
            except TypeError:  # an unhashable target
                pass
        todo.extend(n.all_input_nodes)
    return None


def constant_name(node):
    """cos for cos.to(dtype).unsqueeze(1): the op that computed the constant."""
    while (node.op == "call_method" and node.target in _LAYOUT_METHODS or node.op == "call_function"
           and node.target is operator.getitem) and node.args and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node.name
