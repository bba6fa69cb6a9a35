"""Recognising attention written out in model code, on a torch.fx graph:

    scores = q @ k.transpose(-2, -1)          (or k.transpose(2, 3), k.permute(0, 1, 3, 2))
    scores = scores * scale | / sqrt(d)        (any number of times, or q pre-scaled)
    scores = scores.masked_fill(mask, -inf) | torch.where(mask, scores, -inf) | scores + mask
    p = softmax(scores, dim=-1)               (through dtype conversions and eval dropout)
    out = p @ v

becomes one `attention(q, k, v) {causal, scale}`. The mask must be a constant the model
computes (a tril buffer, torch.triu of -inf, ...): its recorded value is compared with
the causal pattern (or no mask at all); any other mask is refused, not dropped.
"""

import operator

import torch
import torch.nn.functional as F

from commir._fx_refusals import describe

# A score at or below this is a masked-out position (GPT-2 code uses -1e4 or finfo.min).
_MASKED_SCORE = -1e4

MATMULS = (operator.matmul, torch.matmul, torch.bmm, "matmul", "bmm")
SOFTMAXES = (torch.softmax, F.softmax, "softmax")


def is_call(node, targets):
    return getattr(node, "op", None) in ("call_function", "call_method") and node.target in targets


class AttentionMatch:
    def __init__(self, q, k, scale, allowed, v):
        self.q, self.k, self.v = q, k, v
        self.scale = scale      # multiplier of q k^T
        self.allowed = allowed  # None: no mask, else bool tensor [Sq, Sk] of visible keys


def match(node, converter):
    """An AttentionMatch when `node` is `softmax(...) @ v` of the written-out form,
    else None. `converter` knows identity-like nodes and recorded constant values."""
    if not is_call(node, MATMULS) or len(node.args) != 2:
        return None
    p, v = node.args
    p = converter.skip_identity(p)
    if not is_call(p, SOFTMAXES):
        return None
    dim = p.kwargs.get("dim", p.args[1] if len(p.args) > 1 else None)
    rank = converter.shape(p)
    if dim is None or dim not in (-1, len(rank) - 1):
        return None
    scores = converter.skip_identity(p.args[0])
    scale = 1.0
    masks = []
    while True:
        if is_call(scores, (operator.mul, torch.mul, "mul", operator.truediv, torch.div, "div")):
            a, b = scores.args[0], scores.args[1]
            ca, cb = converter.static_number(a), converter.static_number(b)
            divide = scores.target in (operator.truediv, torch.div, "div")
            if cb is not None:
                scale = scale / cb if divide else scale * cb
                scores = converter.skip_identity(a)
                continue
            if ca is not None and not divide:
                scale *= ca
                scores = converter.skip_identity(b)
                continue
            return None
        if is_call(scores, (torch.masked_fill, "masked_fill")):
            fill = converter.static_number(scores.args[2])
            mask = converter.constant_tensor(scores.args[1])
            if fill is None or fill > _MASKED_SCORE or mask is None:
                return None
            masks.append(~mask.bool())
            scores = converter.skip_identity(scores.args[0])
            continue
        if is_call(scores, (torch.where,)) and len(scores.args) == 3:
            fill = converter.static_number(scores.args[2])
            cond = converter.constant_tensor(scores.args[0])
            if fill is None or fill > _MASKED_SCORE or cond is None:
                return None
            masks.append(cond.bool())
            scores = converter.skip_identity(scores.args[1])
            continue
        if is_call(scores, (operator.add, torch.add, "add")):
            a, b = scores.args[0], scores.args[1]
            ma, mb = converter.constant_tensor(a), converter.constant_tensor(b)
            if mb is not None and converter.is_dynamic(a):
                if _additive_mask(mb) is None:
                    return None
                masks.append(_additive_mask(mb))
                scores = converter.skip_identity(a)
                continue
            if ma is not None and converter.is_dynamic(b):
                if _additive_mask(ma) is None:
                    return None
                masks.append(_additive_mask(ma))
                scores = converter.skip_identity(b)
                continue
            return None
        break
    if not is_call(scores, MATMULS):
        return None
    q, kt = scores.args
    k = _untransposed(converter.skip_identity(kt), converter)
    if k is None:
        return None
    q = converter.skip_identity(q)
    # q pre-scaled by a number: (q * c) @ k^T.
    while is_call(q, (operator.mul, torch.mul, "mul", operator.truediv, torch.div, "div")):
        c = converter.static_number(q.args[1])
        if c is None:
            break
        scale = scale / c if q.target in (operator.truediv, torch.div, "div") else scale * c
        q = converter.skip_identity(q.args[0])
    sq, sk = converter.shape(q)[-2], converter.shape(k)[-2]
    allowed = None
    for m in masks:
        if m.dim() < 2:
            return None
        m = torch.broadcast_to(m, tuple(converter.shape(p)))
        flat = m.reshape(-1, sq, sk)
        if not bool((flat == flat[0]).all()):
            converter.refuse(node, "%s: an attention mask that differs between batch entries or heads "
                             "(CommIR's attention takes one causal or empty mask)" % describe(node),
                             inputs=[q, k, v])
        allowed = flat[0] if allowed is None else allowed & flat[0]
    return AttentionMatch(q, k, scale, allowed, v)


def _additive_mask(values):
    values = values.float()
    if not bool(((values == 0) | (values <= _MASKED_SCORE)).all()):
        return None  # an additive bias, not a mask: the caller refuses through shape checks
    return values == 0


def _untransposed(node, converter):
    """k when node is k with its last two dimensions swapped."""
    rank = len(converter.shape(node))
    if is_call(node, (torch.transpose, "transpose")):
        dims = sorted(d % rank for d in node.args[1:3])
        return node.args[0] if dims == [rank - 2, rank - 1] else None
    if is_call(node, ("permute",)):
        perm = node.args[1:] if not isinstance(node.args[1], (list, tuple)) else node.args[1]
        expected = list(range(rank - 2)) + [rank - 1, rank - 2]
        return node.args[0] if [p % rank for p in perm] == expected else None
    return None


def causal_or_none(allowed, sq, sk):
    """True: the causal pattern (key j visible to query i iff j <= i + sk - sq); False:
    everything visible; None: some other mask."""
    if allowed is None or bool(allowed.all()):
        return False
    causal = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq)
    return True if bool((allowed == causal).all()) else None
