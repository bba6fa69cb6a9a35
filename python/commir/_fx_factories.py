"""Tensor factories called with traced sizes: `torch.arange(x.shape[1])`.

torch.fx cannot trace them: their argument parsers want Python numbers and do not
dispatch on a Proxy (torch 1.13: "arange(): argument 'end' must be Number, not Proxy").
A size read off a traced tensor is a known number in a capture (its shapes are static,
see _fx_example_values.shape_only), so while tracing, these factories get the numbers
instead and return an ordinary tensor, which fx keeps as a constant of the traced module
(the positions of Hugging Face Llama's rotary embedding, a causal mask built with
torch.full). Only deterministic factories are patched: a random tensor made once at
capture would be a fixed constant in every run, which is not what the model means.
"""

import contextlib

import torch

from commir import _fx_example_values as example_values

_FACTORIES = ("arange", "ones", "zeros", "full", "eye", "linspace")


def _concrete(value):
    """A shape-only traced value as its number; anything else as it is."""
    if isinstance(value, torch.fx.Proxy) and value.node.meta.get(example_values.SHAPE_ONLY_KEY):
        number = example_values.value_of(value)
        if isinstance(number, (int, float, bool, torch.Size)):
            return number
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        return type(value)(_concrete(v) for v in value)
    return value


def _wrap(factory):
    def call(*args, **kwargs):
        return factory(*[_concrete(a) for a in args], **{k: _concrete(v) for k, v in kwargs.items()})

    call.__wrapped__ = factory
    return call


@contextlib.contextmanager
def static_sizes():
    """While tracing: torch.arange, ones, zeros, full, eye and linspace take traced sizes."""
    saved = {name: getattr(torch, name) for name in _FACTORIES}
    try:
        for name, factory in saved.items():
            setattr(torch, name, _wrap(factory))
        yield
    finally:
        for name, factory in saved.items():
            setattr(torch, name, factory)
