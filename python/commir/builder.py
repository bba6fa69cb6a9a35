"""Writing CommIR programs from Python, with sizes as ordinary variables.

    from commir.builder import ModuleBuilder, tensor

    mb = ModuleBuilder()
    mb.mesh("m", tp=4)
    f = mb.func("mlp", mesh="m")
    x = f.arg("x", tensor("f32", [seq, d], layout=["tp", None]))
    w1 = f.arg("w1", tensor("f32", [d, ff], layout=[None, "tp"]))
    h = f.gelu(f.matmul(x, w1, name="h"))
    f.ret(h)
    text = mb.text()            # canonical text: equal to print(parse(text))
    module = mb.module()        # parsed and verified commir.Module

Every op infers its result type (docs/language.md, "Operations") the way the C++ ops do, so the text
carries the `: type` annotation the printer would print; `type=` states a result type
for ops that need one (reshape, convert, broadcast, full) or a sharding constraint.
Shape errors are raised here as ValueError, naming the op.
"""

import math

ELEMENT_TYPES = ("f64", "f32", "f16", "bf16", "i64", "i32", "i1")
_FLOAT_TYPES = ("f64", "f32", "f16", "bf16")


def format_float(value):
    """A float as the printer writes it: the shortest text that reads back exactly,
    in fixed or scientific notation, whichever is shorter (C++ std::to_chars), with
    '.0' added when it would read as an integer."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    digits, exponent = _shortest_digits(abs(value))
    # value = 0.d1d2...dn * 10^exponent
    n = len(digits)
    if exponent >= n:
        # to_chars writes an integral value's exact digits, not zero padding.
        fixed = str(int(abs(value)))
    elif exponent > 0:
        fixed = digits[:exponent] + "." + digits[exponent:]
    else:
        fixed = "0." + "0" * (-exponent) + digits
    sci_exp = exponent - 1
    mantissa = digits[0] + ("." + digits[1:] if n > 1 else "")
    sci = "%se%s%02d" % (mantissa, "-" if sci_exp < 0 else "+", abs(sci_exp))
    text = fixed if len(fixed) <= len(sci) else sci
    if "." not in text and "e" not in text:
        text += ".0"
    return sign + text


def _shortest_digits(value):
    # repr gives the shortest round-tripping decimal; normalise it to digits and the
    # exponent of 0.DIGITS.
    if value == 0:
        return "0", 1
    text = repr(value)
    mantissa, _, exp = text.partition("e")
    exp = int(exp) if exp else 0
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    point = len(whole) + exp  # position of the decimal point within whole+frac
    leading_zeros = len(whole + frac) - len((whole + frac).lstrip("0"))
    digits = digits.rstrip("0") or "0"
    return digits, point - leading_zeros


class TensorType:
    """ET[d0, d1, ...] with an optional layout (one entry per dimension: None, an
    axis name or a tuple of axis names) and partial axes."""

    def __init__(self, dtype, shape, layout=None, partial=()):
        if dtype not in ELEMENT_TYPES:
            raise ValueError("unknown element type %r (one of %s)" % (dtype, ", ".join(ELEMENT_TYPES)))
        self.dtype = dtype
        self.shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in self.shape):
            raise ValueError("negative dimension in %s" % (self.shape,))
        layout = list(layout) if layout is not None else [None] * len(self.shape)
        if len(layout) != len(self.shape):
            raise ValueError("layout %r has %d entries for a rank-%d tensor" % (layout, len(layout), len(self.shape)))
        self.layout = tuple(_axes(entry) for entry in layout)
        self.partial = _axes(partial) or ()

    @property
    def rank(self):
        return len(self.shape)

    def unsharded(self):
        return TensorType(self.dtype, self.shape)

    def with_layout(self, layout=None, partial=()):
        return TensorType(self.dtype, self.shape, layout, partial)

    def __eq__(self, other):
        return isinstance(other, TensorType) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def __str__(self):
        dims = []
        for size, axes in zip(self.shape, self.layout):
            if not axes:
                dims.append(str(size))
            elif len(axes) == 1:
                dims.append("%d@%s" % (size, axes[0]))
            else:
                dims.append("%d@(%s)" % (size, ", ".join(axes)))
        text = "%s[%s]" % (self.dtype, ", ".join(dims))
        if self.partial:
            text += " partial(%s)" % ", ".join(self.partial)
        return text

    __repr__ = __str__


def _axes(entry):
    if entry is None or entry == ():
        return None
    if isinstance(entry, str):
        return (entry,)
    return tuple(entry)


def tensor(dtype, shape, layout=None, partial=()):
    return TensorType(dtype, shape, layout, partial)


class Value:
    def __init__(self, name, type):
        self.name = name
        self.type = type

    def __repr__(self):
        return "%%%s: %s" % (self.name, self.type)


def _broadcast_shapes(a, b, op):
    out = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else 1
        db = b[len(b) - 1 - i] if i < len(b) else 1
        if da != db and da != 1 and db != 1:
            raise ValueError("%s: shapes %s and %s do not broadcast" % (op, list(a), list(b)))
        out.append(max(da, db) if da != 0 and db != 0 else 0)
    return tuple(reversed(out))


def _norm_dim(dim, rank, op):
    if not -rank <= dim < max(rank, 1):
        raise ValueError("%s: dim %d out of range for rank %d" % (op, dim, rank))
    return dim % rank if rank else 0


def _format_attr(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, Ident):
        return value.name
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_format_attr(v) for v in value)
    if isinstance(value, str):
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    raise TypeError("cannot write attribute value %r" % (value,))


class Ident:
    """A bare identifier attribute value (`approximate = tanh`)."""

    def __init__(self, name):
        self.name = name


_UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu")
_BINARY = ("add", "sub", "mul", "div", "max", "min", "pow")


class FunctionBuilder:
    """One global function. Ops are methods; each returns the result Value."""

    def __init__(self, module, name, mesh):
        self._module = module
        self.name = name
        self.mesh = mesh
        self._args = []
        self._lines = []
        self._names = set()
        self._results = None
        self._counter = 0

    def _fresh(self, name):
        if name is None:
            name = "t%d" % self._counter
            self._counter += 1
        base, suffix = name, 1
        while name in self._names:
            name = "%s.%d" % (base, suffix)
            suffix += 1
        self._names.add(name)
        return name

    def arg(self, name, type):
        """A new argument (it may be declared after ops: the signature lists them all)."""
        value = Value(self._fresh(_sanitize(name)), type)
        self._args.append(value)
        return value

    def op(self, opname, operands, attrs=(), type=None, name=None):
        """Emits `%name = opname(operands) {attrs} : type`; attrs is a list of (key,
        value) in the op's schema order, None values left out."""
        parts = []
        for key, value in attrs:
            if value is None:
                continue
            parts.append(key if value is True else "%s = %s" % (key, _format_attr(value)))
        operand_text = ", ".join(
            "%" + o.name if isinstance(o, Value) else _literal(o, type) for o in operands)
        result = Value(self._fresh(name), type)
        line = "  %%%s = %s(%s)" % (result.name, opname, operand_text)
        if parts:
            line += " {%s}" % ", ".join(parts)
        line += " : %s" % type
        self._lines.append(line)
        return result

    # ---- elementwise ----------------------------------------------------------
    def unary(self, opname, x, name=None, type=None):
        return self.op(opname, [x], type=type or x.type.unsharded(), name=name)

    def gelu(self, x, approximate="none", name=None):
        attrs = [("approximate", Ident("tanh"))] if approximate == "tanh" else []
        if approximate not in ("none", "tanh"):
            raise ValueError("gelu: approximate must be 'none' or 'tanh', not %r" % approximate)
        return self.op("gelu", [x], attrs, type=x.type.unsharded(), name=name)

    def binary(self, opname, a, b, name=None, type=None):
        if not isinstance(a, Value) and not isinstance(b, Value):
            raise ValueError("%s: at least one operand must be a value" % opname)
        if isinstance(a, Value) and isinstance(b, Value):
            if a.type.dtype != b.type.dtype:
                raise ValueError("%s: element types differ (%s and %s)" % (opname, a.type, b.type))
            shape = _broadcast_shapes(a.type.shape, b.type.shape, opname)
            dtype = a.type.dtype
        else:
            v = a if isinstance(a, Value) else b
            shape, dtype = v.type.shape, v.type.dtype
        return self.op(opname, [a, b], type=type or TensorType(dtype, shape), name=name)

    def convert(self, x, dtype, name=None):
        return self.op("convert", [x], type=TensorType(dtype, x.type.shape), name=name)

    def full(self, value, type, name=None):
        return self.op("full", [], [("value", float(value) if type.dtype in _FLOAT_TYPES else int(value))],
                       type=type, name=name)

    # ---- linear algebra -------------------------------------------------------
    def matmul(self, a, b, transpose_a=False, transpose_b=False, name=None, type=None):
        sa, sb = a.type.shape, b.type.shape
        if len(sa) < 2 or len(sb) < 2:
            raise ValueError("matmul: operands need rank >= 2, got %s and %s" % (a.type, b.type))
        m, ka = (sa[-1], sa[-2]) if transpose_a else (sa[-2], sa[-1])
        kb, n = (sb[-1], sb[-2]) if transpose_b else (sb[-2], sb[-1])
        if ka != kb:
            raise ValueError("matmul: contracting sizes differ: %s and %s" % (a.type, b.type))
        batch = _broadcast_shapes(sa[:-2], sb[:-2], "matmul")
        attrs = [("transpose_a", True if transpose_a else None), ("transpose_b", True if transpose_b else None)]
        return self.op("matmul", [a, b], attrs, type=type or TensorType(a.type.dtype, batch + (m, n)), name=name)

    def attention(self, q, k, v, causal=False, scale=None, name=None):
        for t, what in ((q, "q"), (k, "k"), (v, "v")):
            if t.type.rank != 4:
                raise ValueError("attention: %s must have rank 4 [B, H, S, D], got %s" % (what, t.type))
        b, h, sq, d = q.type.shape
        if k.type.shape != v.type.shape or k.type.shape[0] != b or k.type.shape[3] != d:
            raise ValueError("attention: k and v must be [B, Hkv, Skv, D] like q: %s, %s, %s" % (q.type, k.type, v.type))
        if h % k.type.shape[1]:
            raise ValueError("attention: %d query heads are not a multiple of %d kv heads" % (h, k.type.shape[1]))
        attrs = [("causal", True if causal else None), ("scale", None if scale is None else float(scale))]
        return self.op("attention", [q, k, v], attrs, type=q.type.unsharded(), name=name)

    # ---- reductions and normalisation -----------------------------------------
    def reduce(self, opname, x, dims, keepdim=False, name=None):
        dims = sorted(_norm_dim(d, x.type.rank, opname) for d in dims)
        shape = [1 if i in dims else s for i, s in enumerate(x.type.shape)] if keepdim else [
            s for i, s in enumerate(x.type.shape) if i not in dims]
        return self.op(opname, [x], [("dims", dims), ("keepdim", True if keepdim else None)],
                       type=TensorType(x.type.dtype, shape), name=name)

    def softmax(self, x, dim=-1, name=None):
        _norm_dim(dim, x.type.rank, "softmax")
        return self.op("softmax", [x], [("dim", None if dim == -1 else dim)], type=x.type.unsharded(), name=name)

    def layernorm(self, x, weight, bias, eps=1e-5, name=None):
        self._check_norm("layernorm", x, weight, bias)
        return self.op("layernorm", [x, weight, bias], [("eps", None if eps == 1e-5 else float(eps))],
                       type=x.type.unsharded(), name=name)

    def rmsnorm(self, x, weight, eps=1e-6, name=None):
        self._check_norm("rmsnorm", x, weight)
        return self.op("rmsnorm", [x, weight], [("eps", None if eps == 1e-6 else float(eps))],
                       type=x.type.unsharded(), name=name)

    @staticmethod
    def _check_norm(opname, x, *params):
        for p in params:
            if p.type.shape != (x.type.shape[-1],):
                raise ValueError("%s: %s must be [%d] (the last dimension of %s)" % (opname, p.type, x.type.shape[-1], x.type))

    # ---- layout -----------------------------------------------------------------
    def reshape(self, x, shape, name=None, type=None):
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) != math.prod(x.type.shape):
            raise ValueError("reshape: %s has %d elements, [%s] has %d" % (
                x.type, math.prod(x.type.shape), ", ".join(map(str, shape)), math.prod(shape)))
        return self.op("reshape", [x], type=type or TensorType(x.type.dtype, shape), name=name)

    def transpose(self, x, perm, name=None):
        perm = [int(p) for p in perm]
        if sorted(perm) != list(range(x.type.rank)):
            raise ValueError("transpose: perm %s is not a permutation of %d dims" % (perm, x.type.rank))
        return self.op("transpose", [x], [("perm", perm)],
                       type=TensorType(x.type.dtype, [x.type.shape[p] for p in perm]), name=name)

    def slice(self, x, start, size, name=None):
        if len(start) != x.type.rank or len(size) != x.type.rank or any(
                s < 0 or n < 0 or s + n > d for s, n, d in zip(start, size, x.type.shape)):
            raise ValueError("slice: start %s size %s out of bounds of %s" % (list(start), list(size), x.type))
        return self.op("slice", [x], [("start", list(start)), ("size", list(size))],
                       type=TensorType(x.type.dtype, size), name=name)

    def concat(self, values, dim, name=None):
        first = values[0].type
        d = _norm_dim(dim, first.rank, "concat")
        shape = list(first.shape)
        shape[d] = sum(v.type.shape[d] for v in values)
        return self.op("concat", list(values), [("dim", dim)], type=TensorType(first.dtype, shape), name=name)

    def broadcast(self, x, shape, name=None):
        _broadcast_shapes(x.type.shape, tuple(shape), "broadcast")
        return self.op("broadcast", [x], type=TensorType(x.type.dtype, shape), name=name)

    def ret(self, *values, types=None):
        """The function's results; `types` may give the declared result types (a
        sharding there requests the output layout), by default the values' types."""
        if self._results is not None:
            raise ValueError("@%s already returns" % self.name)
        self._results = list(values)
        self._result_types = list(types) if types is not None else [v.type for v in values]
        if len(self._result_types) != len(values):
            raise ValueError("@%s: %d result types for %d results" % (self.name, len(self._result_types), len(values)))

    def text(self):
        if self._results is None:
            raise ValueError("@%s has no return (call ret)" % self.name)
        args = ", ".join("%%%s: %s" % (a.name, a.type) for a in self._args)
        types = [str(t) for t in self._result_types]
        results = types[0] if len(types) == 1 else "(%s)" % ", ".join(types)
        head = "func @%s(%s) -> %s" % (self.name, args, results)
        if self.mesh is not None:
            head += " on @%s" % self.mesh
        body = self._lines + ["  return %s" % ", ".join("%" + v.name for v in self._results)]
        return head + " {\n" + "\n".join(body) + "\n}\n"


for _name in _UNARY:
    setattr(FunctionBuilder, _name, lambda self, x, name=None, _op=_name: self.unary(_op, x, name=name))
for _name in _BINARY:
    setattr(FunctionBuilder, _name, lambda self, a, b, name=None, _op=_name: self.binary(_op, a, b, name=name))
for _name in ("reduce_sum", "reduce_max", "reduce_mean"):
    setattr(FunctionBuilder, _name,
            lambda self, x, dims, keepdim=False, name=None, _op=_name: self.reduce(_op, x, dims, keepdim, name))


def _literal(number, type):
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise ValueError("operand %r is neither a value nor a number" % (number,))
    if type is not None and type.dtype not in _FLOAT_TYPES:
        return str(int(number))
    return format_float(number)


def _sanitize(name):
    """A valid CommIR value name from any string ('layers.0.weight' stays, other
    characters become '_')."""
    out = "".join(c if c.isascii() and (c.isalnum() or c in "_.$-") else "_" for c in name)
    return out or "_"


class ModuleBuilder:
    def __init__(self):
        self._meshes = []
        self._functions = []

    def mesh(self, name, **axes):
        """mesh @name(axis=size, ...) in keyword order."""
        if not axes:
            raise ValueError("mesh @%s needs at least one axis" % name)
        self._meshes.append((name, [(a, int(s)) for a, s in axes.items()]))
        return name

    def func(self, name, mesh=None):
        f = FunctionBuilder(self, name, mesh if mesh is not None or len(self._meshes) != 1 else self._meshes[0][0])
        self._functions.append(f)
        return f

    def text(self):
        parts = ["mesh @%s(%s)\n" % (n, ", ".join("%s=%d" % a for a in axes)) for n, axes in self._meshes]
        parts += [f.text() for f in self._functions]
        return "\n".join(parts)

    def module(self, file="<builder>"):
        import commir
        return commir.parse(self.text(), file)
