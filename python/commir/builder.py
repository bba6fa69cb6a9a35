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

Every op's result type comes from the C++ op definitions (docs/language.md, "Operations"),
the inference the parser and the verifier run, so the text carries the `: type`
annotation the printer would print; `type=` states a result type for ops that need one
(reshape, convert, broadcast, full) or a sharding constraint. An invalid op raises
commir.OpError (a ValueError) with the C++ message, naming the op. `mb.func(name,
spmd=True)` writes a spmd function: arguments have their per-device types in the body,
and the collectives (all_gather, reduce_scatter, all_reduce, all_to_all, shift) are ops.
"""

import math
import re

_IDENTIFIER = re.compile(r"^(?!(true|false)$)[A-Za-z_][A-Za-z0-9_.]*$")

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

    def _ext(self):
        # The extension's form: (element type, dims, axes per dimension, partial axes).
        return (self.dtype, list(self.shape), [list(axes or ()) for axes in self.layout], list(self.partial))

    @classmethod
    def _from_ext(cls, value):
        if value == "index":
            raise ValueError("the builder writes tensor values only, not index values")
        dtype, shape, layout, partial = value
        return cls(dtype, shape, [tuple(axes) or None for axes in layout], tuple(partial))

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


def _format_attr(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, Ident):
        return value.name
    if isinstance(value, Axes):
        return value.names[0] if len(value.names) == 1 else "(%s)" % ", ".join(value.names)
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_format_attr(v) for v in value)
    if isinstance(value, str):
        # No op takes a string: a str is an identifier (an enum value, an axis), as the
        # extension reads it for the op's schema; text that is none stays quoted, and the
        # op definition rejects it.
        if _IDENTIFIER.match(value):
            return value
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    raise TypeError("cannot write attribute value %r" % (value,))


class Ident:
    """A bare identifier attribute value (`approximate = tanh`)."""

    def __init__(self, name):
        self.name = name


_UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu")
_BINARY = ("add", "sub", "mul", "div", "max", "min", "pow")


class Axes:
    """A collective's `axis` attribute: one mesh axis `tp` or an axis group `(dp, tp)`."""

    def __init__(self, axes):
        self.names = (axes,) if isinstance(axes, str) else tuple(axes)


def _ext_attr(value):
    # Attribute values as the extension reads them against the op's schema: identifiers
    # and axis groups as strings and lists of strings.
    if isinstance(value, Ident):
        return value.name
    if isinstance(value, Axes):
        return value.names[0] if len(value.names) == 1 else list(value.names)
    if isinstance(value, (list, tuple)):
        return [_ext_attr(v) for v in value]
    return value


class FunctionBuilder:
    """One function (global, or spmd with spmd=True). Ops are methods; each returns the
    result Value, whose type the C++ op definitions infer."""

    def __init__(self, module, name, mesh, spmd=False):
        self._module = module
        self.name = name
        self.mesh = mesh
        self.spmd = spmd
        self._args = []
        self._declared = {}
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

    def _mesh_axes(self):
        return self._module._mesh_axes(self.mesh)

    def arg(self, name, type):
        """A new argument (it may be declared after ops: the signature lists them all).
        In a spmd function `type` is the global type the signature declares, and the
        returned value has the per-device type the body sees."""
        body_type = type
        if self.spmd:
            body_type = TensorType._from_ext(_extension().local_type(type._ext(), self._mesh_axes()))
        value = Value(self._fresh(_sanitize(name)), body_type)
        self._declared[value.name] = type
        self._args.append(value)
        return value

    def result_type(self, opname, operands, attrs=(), type=None):
        """The type of `opname(operands) {attrs}` from the C++ op definition (the
        inference the parser and verifier run); `type` is a written result type, checked
        against it. Without one the result carries no layout: in a global function only a
        written layout constrains the partitioner. Raises commir.OpError with the C++
        message when the op is invalid."""
        ext_operands = [o.type._ext() if isinstance(o, Value) else None for o in operands]
        ext_attrs = [(key, _ext_attr(value)) for key, value in attrs if value is not None]
        written = [type._ext()] if type is not None else []
        (inferred,) = _extension().infer_result_types(
            opname, ext_operands, ext_attrs, written, self._mesh_axes(), self.spmd)
        result = TensorType._from_ext(inferred)
        return result if type is not None else result.unsharded()

    def op_results(self, opname, operands, num_results, attrs=(), names=()):
        """Emits an op with several results, `%a, %b = opname(operands) {attrs} : (A, B)`
        (cross_entropy's loss and lse); returns their Values, typed by the C++ op
        definition. `names` gives the results' names (default: fresh ones)."""
        for o in operands:
            if not isinstance(o, Value):
                raise ValueError("%s: operand %r is not a value" % (opname, o))
        ext_operands = [o.type._ext() for o in operands]
        ext_attrs = [(key, _ext_attr(value)) for key, value in attrs if value is not None]
        inferred = _extension().infer_result_types(opname, ext_operands, ext_attrs, [], self._mesh_axes(),
                                                   self.spmd, num_results)
        names = list(names) + [None] * (len(inferred) - len(names))
        results = [Value(self._fresh(n), TensorType._from_ext(t).unsharded()) for n, t in zip(names, inferred)]
        parts = [key if value is True else "%s = %s" % (key, _format_attr(value))
                 for key, value in attrs if value is not None]
        line = "  %s = %s(%s)" % (", ".join("%" + r.name for r in results), opname,
                                  ", ".join("%" + o.name for o in operands))
        if parts:
            line += " {%s}" % ", ".join(parts)
        types = [str(r.type) for r in results]
        line += " : %s" % (types[0] if len(types) == 1 else "(%s)" % ", ".join(types))
        self._lines.append(line)
        return results

    def op(self, opname, operands, attrs=(), type=None, name=None):
        """Emits `%name = opname(operands) {attrs} : type`; attrs is a list of (key,
        value) in the op's schema order, None values left out. `type` is needed only by
        ops that require a written result type, or to constrain the layout."""
        for o in operands:
            if not isinstance(o, Value) and (isinstance(o, bool) or not isinstance(o, (int, float))):
                raise ValueError("%s: operand %r is neither a value nor a number" % (opname, o))
        result_type = self.result_type(opname, operands, attrs, type)
        parts = []
        for key, value in attrs:
            if value is None:
                continue
            parts.append(key if value is True else "%s = %s" % (key, _format_attr(value)))
        # A number literal takes the element type of the first value operand.
        partner = next((o.type for o in operands if isinstance(o, Value)), None)
        operand_text = ", ".join(
            "%" + o.name if isinstance(o, Value) else _literal(o, partner) for o in operands)
        result = Value(self._fresh(name), result_type)
        line = "  %%%s = %s(%s)" % (result.name, opname, operand_text)
        if parts:
            line += " {%s}" % ", ".join(parts)
        line += " : %s" % result_type
        self._lines.append(line)
        return result

    # ---- elementwise ----------------------------------------------------------
    def unary(self, opname, x, name=None, type=None):
        return self.op(opname, [x], type=type, name=name)

    def gelu(self, x, approximate="none", name=None):
        return self.op("gelu", [x], [("approximate", None if approximate == "none" else Ident(approximate))],
                       name=name)

    def binary(self, opname, a, b, name=None, type=None):
        return self.op(opname, [a, b], type=type, name=name)

    def convert(self, x, dtype, name=None):
        return self.op("convert", [x], type=TensorType(dtype, x.type.shape), name=name)

    def full(self, value, type, name=None):
        return self.op("full", [], [("value", float(value) if type.dtype in _FLOAT_TYPES else int(value))],
                       type=type, name=name)

    # ---- linear algebra -------------------------------------------------------
    def matmul(self, a, b, transpose_a=False, transpose_b=False, name=None, type=None):
        attrs = [("transpose_a", True if transpose_a else None), ("transpose_b", True if transpose_b else None)]
        return self.op("matmul", [a, b], attrs, type=type, name=name)

    def attention(self, q, k, v, causal=False, scale=None, name=None):
        attrs = [("causal", True if causal else None), ("scale", None if scale is None else float(scale))]
        return self.op("attention", [q, k, v], attrs, name=name)

    # ---- reductions and normalisation -----------------------------------------
    def reduce(self, opname, x, dims, keepdim=False, name=None):
        return self.op(opname, [x], [("dims", [int(d) for d in dims]), ("keepdim", True if keepdim else None)],
                       name=name)

    def softmax(self, x, dim=-1, name=None):
        return self.op("softmax", [x], [("dim", None if dim == -1 else dim)], name=name)

    def layernorm(self, x, weight, bias, eps=1e-5, name=None):
        return self.op("layernorm", [x, weight, bias], [("eps", None if eps == 1e-5 else float(eps))], name=name)

    def rmsnorm(self, x, weight, eps=1e-6, name=None):
        return self.op("rmsnorm", [x, weight], [("eps", None if eps == 1e-6 else float(eps))], name=name)

    # ---- layout -----------------------------------------------------------------
    def reshape(self, x, shape, name=None, type=None):
        return self.op("reshape", [x], type=type or TensorType(x.type.dtype, shape), name=name)

    def transpose(self, x, perm, name=None):
        return self.op("transpose", [x], [("perm", [int(p) for p in perm])], name=name)

    def slice(self, x, start, size, name=None):
        return self.op("slice", [x], [("start", list(start)), ("size", list(size))], name=name)

    def concat(self, values, dim, name=None):
        return self.op("concat", list(values), [("dim", dim)], name=name)

    # ---- rows at integer indices (an embedding lookup and its gradient) ------------
    def gather(self, table, indices, axis=0, name=None):
        return self.op("gather", [table, indices], [("axis", int(axis))], name=name)

    def scatter_add(self, base, indices, updates, axis=0, name=None):
        return self.op("scatter_add", [base, indices, updates], [("axis", int(axis))], name=name)

    # ---- losses and randomness ----------------------------------------------------
    def cross_entropy(self, logits, labels, reduction="mean", ignore_index=-100, label_smoothing=0.0,
                      z_loss=0.0, name=None):
        """cross_entropy's two results: the loss and each token's log-sum-exp."""
        attrs = [("reduction", None if reduction == "mean" else Ident(reduction)),
                 ("ignore_index", None if ignore_index == -100 else int(ignore_index)),
                 ("label_smoothing", None if label_smoothing == 0 else float(label_smoothing)),
                 ("z_loss", None if z_loss == 0 else float(z_loss))]
        return self.op_results("cross_entropy", [logits, labels], 2, attrs,
                               names=(name, None if name is None else name + ".lse"))

    def dropout(self, x, rate, seed, name=None):
        return self.op("dropout", [x], [("rate", float(rate)), ("seed", int(seed))], name=name)

    def broadcast(self, x, shape, name=None):
        return self.op("broadcast", [x], type=TensorType(x.type.dtype, shape), name=name)

    # ---- collectives (spmd functions) --------------------------------------------
    def all_gather(self, x, axis, dim, name=None):
        return self.op("all_gather", [x], [("axis", Axes(axis)), ("dim", dim)], name=name)

    def reduce_scatter(self, x, axis, dim, reduce="sum", name=None):
        attrs = [("axis", Axes(axis)), ("dim", dim), ("reduce", None if reduce == "sum" else Ident(reduce))]
        return self.op("reduce_scatter", [x], attrs, name=name)

    def all_reduce(self, x, axis, reduce="sum", name=None):
        return self.op("all_reduce", [x], [("axis", Axes(axis)), ("reduce", None if reduce == "sum" else Ident(reduce))],
                       name=name)

    def all_to_all(self, x, axis, split_dim, concat_dim, name=None):
        return self.op("all_to_all", [x], [("axis", Axes(axis)), ("split_dim", split_dim), ("concat_dim", concat_dim)],
                       name=name)

    def shift(self, x, axis, offset=1, name=None):
        return self.op("shift", [x], [("axis", Axes(axis)), ("offset", None if offset == 1 else offset)], name=name)

    def checkpoint(self):
        """The function so far, for rollback: a caller that tries one way of emitting a
        value and takes another when it fails leaves no ops or arguments behind."""
        return (list(self._args), dict(self._declared), len(self._lines), set(self._names), self._counter)

    def rollback(self, checkpoint):
        args, declared, lines, names, counter = checkpoint
        self._args, self._declared, self._names, self._counter = list(args), dict(declared), set(names), counter
        del self._lines[lines:]

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
        args = ", ".join("%%%s: %s" % (a.name, self._declared[a.name]) for a in self._args)
        types = [str(t) for t in self._result_types]
        results = types[0] if len(types) == 1 else "(%s)" % ", ".join(types)
        head = "%sfunc @%s(%s) -> %s" % ("spmd " if self.spmd else "", self.name, args, results)
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


def _extension():
    import commir
    return commir._commir


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

    def func(self, name, mesh=None, spmd=False):
        """A global function, or a spmd one (its body per device, with collectives)."""
        f = FunctionBuilder(self, name, mesh if mesh is not None or len(self._meshes) != 1 else self._meshes[0][0],
                            spmd)
        self._functions.append(f)
        return f

    def _mesh_axes(self, name):
        # [(axis, size)] of mesh @name for the op definitions; None without one (an
        # unknown name is reported when the module is parsed).
        return next((axes for n, axes in self._meshes if n == name), None)

    def text(self):
        parts = ["mesh @%s(%s)\n" % (n, ", ".join("%s=%d" % a for a in axes)) for n, axes in self._meshes]
        parts += [f.text() for f in self._functions]
        return "\n".join(parts)

    def module(self, file="<builder>"):
        import commir
        return commir.parse(self.text(), file)
