"""PyTorch's dtype conversions (`.long()`, `.to(torch.int32)`, `.float()`, `.bool()`)
as CommIR `convert`.

`convert` rounds to nearest, ties to even (docs/language.md), which is PyTorch's
rounding into a narrower float type and its conversion from integers and bool; to bool
both give nonzero -> true. From a float type to an integer type PyTorch truncates
toward zero instead (2.7 -> 2, -2.7 -> -2; C's conversion). That is the nearest integer
moved one step toward zero where rounding went away from it: r = convert(x), and r - 1
where x >= 0 and r > x, r + 1 where x < 0 and r < x. The comparison converts r back to
x's type, exactly: an x with a fractional part is below 2^p in magnitude (p the type's
significand bits), so r is at most 2^p, which the type holds; an integral x rounds to
itself. NaN and out-of-range values are undefined in PyTorch; CommIR's convert gives 0
and saturates.
"""

from commir.builder import TensorType

_FLOATS = ("f16", "bf16", "f32", "f64")
_INTEGERS = ("i32", "i64")


def convert(fb, x, dtype, name):
    """x converted to `dtype` as PyTorch converts it."""
    if x.type.dtype == dtype:
        return x
    if x.type.dtype not in _FLOATS or dtype not in _INTEGERS:
        return fb.convert(x, dtype, name=name)
    source = x.type.dtype
    nearest = fb.convert(x, dtype, name=name + ".nearest")
    back = fb.convert(nearest, source, name=name + ".back")

    def scalar(value, element_type):
        return fb.full(value, TensorType(element_type, ()))

    def compare(a, b, cmp, suffix):
        return fb.op("compare", [a, b], [("cmp", cmp)], name=name + suffix)

    non_negative = compare(x, scalar(0, source), "ge", ".nonneg")
    rounded_up = compare(back, x, "gt", ".up")
    rounded_down = compare(back, x, "lt", ".down")
    zero = scalar(0, dtype)
    down = fb.op("select", [rounded_up, scalar(-1, dtype), zero], name=name + ".fix_pos")
    up = fb.op("select", [rounded_down, scalar(1, dtype), zero], name=name + ".fix_neg")
    step = fb.op("select", [non_negative, down, up], name=name + ".step")
    return fb.add(nearest, step, name=name)
