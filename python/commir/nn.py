"""Mixture-of-experts routing for PyTorch models that commir.torch.capture captures.

    import commir.nn
    probs = F.softmax(self.router(x), dim=-1)                      # [T, E]
    gates, experts_of = torch.topk(probs, 2)                       # [T, 2]
    gates = gates / gates.sum(-1, keepdim=True)
    buf = commir.nn.moe_dispatch(x, experts_of, experts=E, capacity_factor=1.0)  # [E, C, H]
    out = torch.matmul(F.silu(buf @ self.w1) * (buf @ self.w3), self.w2)         # per expert
    y = (commir.nn.moe_collect(out, experts_of) * gates[..., None]).sum(1)       # [T, H]

`moe_dispatch` and `moe_collect` are CommIR's ops of the same names (docs/language.md,
"Mixture of experts") written as PyTorch functions: run eagerly they compute exactly the
ops' semantics (GShard's and Switch's slot order, choices past the capacity dropped,
tokens routed in `groups`), with autograd; captured, each is one op. Why functions, not
a pattern of the model's own ops: a token loop (`torch.where(mask)` per expert) has
data-dependent shapes no static program can hold, and GShard's one-hot einsum form costs
tokens x experts x capacity x hidden multiply-adds and a cumulative sum to say what the
two copies say. A model written with these functions trains in PyTorch as it does in
CommIR, with the same tokens dropped.
"""

import math

import torch
import torch.fx
import torch.nn.functional as F

_MAX_ELEMENTS = 1 << 40  # a bound on the buffer a call may ask for, before it is allocated


def moe_capacity(tokens, k, experts, capacity_factor):
    """Slots per expert, `ceil(tokens * k * capacity_factor / experts)` computed in double in
    that order, as GShard, Switch, XLA and CommIR's `moe_dispatch` size them."""
    _check_positive("tokens", tokens)
    _check_positive("k", k)
    _check_positive("experts", experts)
    if isinstance(capacity_factor, bool) or not isinstance(capacity_factor, (int, float)) or not (
            math.isfinite(capacity_factor) and 0 < capacity_factor <= experts):
        raise ValueError("capacity_factor must be a finite number in (0, experts = %d], got %r"
                         % (experts, capacity_factor))
    return int(math.ceil(float(tokens) * k * capacity_factor / experts))


def moe_dispatch(x, experts_of, *, experts, capacity=None, capacity_factor=None, groups=1, layout=None):
    """The per-expert buffers `[experts, groups * C, H]` of a mixture-of-experts layer.

    `x` is `[T, H]` (choice j of token t copies row t) or `[T, k, H]` (a row per choice);
    `experts_of` the router's choices, an integer `[T, k]`. The T tokens are `groups`
    contiguous groups, each routed alone with C slots per expert, C = `capacity` or
    `moe_capacity(T / groups, k, experts, capacity_factor)` (exactly one of the two). A
    choice's position in its expert counts the group's earlier choices of that expert in
    GShard's order (every token's first choice in token order, then every second choice,
    ...); slot `(e, g * C + position)` holds its row, a choice at position >= C is dropped,
    empty slots are zeros. Differentiable in `x`.

    `layout`: where the buffer lives when captured on a mesh, one entry per dimension as
    in capture's `layouts` (`["ep", "dp", None]`: the experts over ep, each expert's
    columns over dp); ignored eagerly and by a capture without a mesh. Propagation does
    not yet find on its own that the expert matmuls keep the columns split over dp once
    ep has moved to the experts (docs/language.md, "Expert parallelism"); written, the
    dispatch and the combine are one all_to_all over ep each."""
    _check_layout(layout)
    traced = _traced(moe_dispatch, (x, experts_of), dict(experts=experts, capacity=capacity,
                                                        capacity_factor=capacity_factor, groups=groups,
                                                        layout=layout))
    if traced is not None:
        return traced
    tokens, k = _check_routing(experts_of, groups)
    _check_positive("experts", experts)
    if x.dim() == 2 and x.shape[0] == tokens:
        rows = x[:, None, :].expand(tokens, k, x.shape[1])
    elif x.dim() == 3 and tuple(x.shape[:2]) == (tokens, k):
        rows = x
    else:
        raise ValueError("moe_dispatch: x must be [T, H] or [T, k, H] with [T, k] = %s the shape of "
                         "experts_of, got %s" % (list(experts_of.shape), list(x.shape)))
    per_group = tokens // groups
    capacity = _capacity(per_group, k, experts, capacity, capacity_factor)
    hidden = rows.shape[2]
    if experts * groups * capacity * max(hidden, 1) > _MAX_ELEMENTS:
        raise ValueError("moe_dispatch: a buffer of %d x %d x %d elements is too large"
                         % (experts, groups * capacity, hidden))
    slots = _slots(experts_of, experts, capacity, groups)
    kept = torch.nonzero(slots >= 0).squeeze(1)
    buffer = rows.new_zeros(experts * groups * capacity, hidden)
    buffer = buffer.index_copy(0, slots[kept], rows.reshape(tokens * k, hidden)[kept])
    return buffer.reshape(experts, groups * capacity, hidden)


def moe_collect(buffer, experts_of, *, groups=1):
    """Each routing choice's row of the per-expert `buffer` `[E, groups * C, H]`, as `[T, k,
    H]`: the slot `moe_dispatch` placed the choice in (same rule, C the buffer's second
    dimension over `groups`), zeros for a dropped choice. Differentiable in `buffer`."""
    traced = _traced(moe_collect, (buffer, experts_of), dict(groups=groups))
    if traced is not None:
        return traced
    tokens, k = _check_routing(experts_of, groups)
    if buffer.dim() != 3 or buffer.shape[1] % groups or buffer.shape[1] == 0:
        raise ValueError("moe_collect: the buffer must be [E, groups * C, H] with groups = %d dividing its "
                         "second dimension, got %s" % (groups, list(buffer.shape)))
    experts, columns, hidden = buffer.shape
    slots = _slots(experts_of, experts, columns // groups, groups)
    flat = buffer.reshape(experts * columns, hidden)
    picked = flat.index_select(0, slots.clamp(min=0))
    out = torch.where((slots >= 0)[:, None], picked, picked.new_zeros(()))
    return out.reshape(tokens, k, hidden)


def _traced(fn, args, kwargs):
    """Under commir.torch.capture (an fx Proxy among the operands): the call recorded as one
    graph node, after its static arguments are checked; else None (run eagerly)."""
    proxy = next((a for a in args if isinstance(a, torch.fx.Proxy)), None)
    if proxy is None:
        return None
    _check_positive("groups", kwargs["groups"])
    if fn is moe_dispatch:
        _check_positive("experts", kwargs["experts"])
        if (kwargs["capacity"] is None) == (kwargs["capacity_factor"] is None):
            raise ValueError("moe_dispatch takes exactly one of capacity and capacity_factor")
    return proxy.tracer.create_proxy("call_function", fn, args, kwargs)


def _check_layout(layout):
    def axis(a):
        return a is None or isinstance(a, str) or (isinstance(a, (tuple, list)) and a and all(
            isinstance(b, str) for b in a))

    if layout is not None and not (isinstance(layout, (tuple, list)) and len(layout) == 3 and all(
            axis(a) for a in layout)):
        raise ValueError("layout must be None or three entries (experts, slots, hidden), each None, an axis "
                         "name or a tuple of axis names, got %r" % (layout,))


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("%s must be a positive integer, got %r" % (name, value))


def _check_routing(experts_of, groups):
    _check_positive("groups", groups)
    if not isinstance(experts_of, torch.Tensor) or experts_of.dim() != 2 or experts_of.dtype not in (
            torch.int32, torch.int64):
        raise ValueError("experts_of must be an int32 or int64 tensor [T, k] (top-k's indices), got %s"
                         % (experts_of.dtype if isinstance(experts_of, torch.Tensor) else type(experts_of).__name__))
    tokens, k = experts_of.shape
    if tokens == 0 or k == 0 or tokens % groups:
        raise ValueError("experts_of is %s: groups = %d must divide a positive token count, with k >= 1"
                         % (list(experts_of.shape), groups))
    return tokens, k


def _capacity(per_group, k, experts, capacity, capacity_factor):
    if (capacity is None) == (capacity_factor is None):
        raise ValueError("moe_dispatch takes exactly one of capacity and capacity_factor")
    if capacity is None:
        return moe_capacity(per_group, k, experts, capacity_factor)
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 1 <= capacity <= per_group * k:
        raise ValueError("capacity must be an integer in [1, tokens per group x k = %d], got %r"
                         % (per_group * k, capacity))
    return capacity


def _slots(experts_of, experts, capacity, groups):
    """The flattened slot of every choice, [T * k] in (token, choice) order, -1 if dropped."""
    tokens, k = experts_of.shape
    index = experts_of.long()
    bad = (index < 0) | (index >= experts)
    if bool(bad.any()):
        t, j = (int(i) for i in torch.nonzero(bad)[0])
        raise ValueError("experts_of[%d, %d] = %d is not an expert index in [0, %d)"
                         % (t, j, int(index[t, j]), experts))
    per_group = tokens // groups
    # Choices in GShard's order within each group: [G, k, T/G], first choices first.
    ordered = index.reshape(groups, per_group, k).transpose(1, 2).reshape(groups, k * per_group)
    hits = F.one_hot(ordered, experts)  # [G, k T/G, E]
    position = ((hits.cumsum(1) - 1) * hits).sum(2)  # earlier choices of the same expert
    position = position.reshape(groups, k, per_group).transpose(1, 2).reshape(tokens, k)
    group = torch.arange(tokens).div(per_group, rounding_mode="floor")[:, None]
    slot = index * (groups * capacity) + group * capacity + position
    return torch.where(position < capacity, slot, torch.full_like(slot, -1)).reshape(-1)
