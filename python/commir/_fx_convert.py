"""torch.fx graph -> one global CommIR function (through commir.builder).

Every node's value on the example inputs is known (the tracer computed it): shapes
and dtypes come from there, sizes computed from `x.shape` are known numbers, and
constant tensors the model builds (masks) can be inspected. A node is *dynamic* when it
depends on an input or a parameter; only dynamic nodes become ops, and only those the
outputs need (emission is on demand from the outputs, so pieces that a recognised
pattern absorbs are never written). Every emitted value's shape and dtype is checked
against the recorded one.

A node CommIR cannot express is refused (Refusal), and emission goes on: the values the
refused node reads are still emitted, to find what else is refused, and whatever needs
the refused value is skipped without a refusal of its own. All refusals come back in one
CaptureError, in the order the model runs them.
"""

import operator

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from commir import _fx_attention as attn
from commir import _fx_example_values as example_values
from commir import _fx_compare, _fx_dtypes, _fx_lm, _fx_moe, _fx_refusals, _fx_scatter
from commir._fx_constants import CONSTANT_PREFIX, constant_name, random_ancestor
from commir._fx_refusals import describe
from commir._fx_tracer import commir_attention, commir_packed_heads
from commir.builder import ModuleBuilder, TensorType, Value, _sanitize
from commir.errors import CaptureError, OpError

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.bool: "i1",
}

_IDENTITY_METHODS = ("contiguous", "clone", "detach")
_CONVERT_METHODS = ("to", "float", "half", "bfloat16", "double", "type_as", "type")
# Conversions to integers and bool: captured, but not looked through by pattern matching.
_INTEGER_CONVERT_METHODS = ("long", "int", "bool")
_UNARY = {
    torch.neg: "neg", operator.neg: "neg", "neg": "neg",
    torch.abs: "abs", "abs": "abs", torch.exp: "exp", "exp": "exp", torch.log: "log", "log": "log",
    torch.sqrt: "sqrt", "sqrt": "sqrt", torch.rsqrt: "rsqrt", "rsqrt": "rsqrt",
    torch.tanh: "tanh", "tanh": "tanh", F.tanh: "tanh", torch.sigmoid: "sigmoid", "sigmoid": "sigmoid",
    F.sigmoid: "sigmoid", torch.relu: "relu", F.relu: "relu", "relu": "relu", F.silu: "silu",
}
_BINARY = {
    operator.add: "add", torch.add: "add", "add": "add",
    operator.sub: "sub", torch.sub: "sub", "sub": "sub",
    operator.mul: "mul", torch.mul: "mul", "mul": "mul",
    operator.truediv: "div", torch.div: "div", "div": "div",
    operator.pow: "pow", torch.pow: "pow", "pow": "pow",
    torch.maximum: "max", "maximum": "max", torch.minimum: "min", "minimum": "min",
}
_REDUCE = {torch.mean: "reduce_mean", "mean": "reduce_mean", torch.sum: "reduce_sum",
           "sum": "reduce_sum", torch.amax: "reduce_max", "amax": "reduce_max"}
# Ops whose value depends only on their input's shape (a mask made with full_like).
_SHAPE_ONLY = (torch.full_like, torch.ones_like, torch.zeros_like, "new_full", "new_ones", "new_zeros")
_MULS = (operator.mul, torch.mul, "mul")
_MAX_MIN = (torch.max, "max", torch.min, "min")
# Ops whose result is a tuple of slices of their first operand.
_SPLITS = ("split", torch.split, "chunk", torch.chunk, "unbind", torch.unbind)
_UNARY_MODULES = {nn.ReLU: "relu", nn.SiLU: "silu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid"}
# Ops whose result shares its operand's storage: an in-place op on one modifies the operand.
_VIEWS = ("view", "reshape", "transpose", "permute", "t", "narrow", "select", "expand", "squeeze", "unsqueeze",
          "flatten", "view_as", "as_strided", "diagonal", operator.getitem, torch.reshape, torch.transpose,
          torch.permute, torch.narrow, torch.select, torch.squeeze, torch.unsqueeze, torch.flatten, torch.t)


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        out = super().run_node(n)
        self.values[n] = out
        return out


class _Refused(Exception):
    """Raised by Converter.refuse: `node` cannot be captured, for the reason `what`;
    `inputs` are the nodes still worth emitting to find more refusals (default: the
    node's own inputs)."""

    def __init__(self, node, what, inputs=None, hint=None):
        super().__init__(what)
        self.node, self.what, self.inputs, self.hint = node, what, inputs, hint


class _Skipped(Exception):
    """A value needed here was refused; the refusal is already recorded."""


_REFUSED = object()  # the emitted "value" of a refused node

_ROWS_ONLY = "CommIR's gather takes whole rows at a 1-D index (_fx_scatter.py); this index form has no op"
_DATA_SHAPE = ("its result's length depends on the data (which elements are nonzero), and a captured "
               "program's shapes are static")

# Why ops with no CommIR counterpart are refused, beyond "no op for it".
_NO_OP = {
    torch.nonzero: _DATA_SHAPE, "nonzero": _DATA_SHAPE,
    torch.sort: "CommIR has no sort op", "sort": "CommIR has no sort op",
    torch.argmax: "CommIR has no argmax op", "argmax": "CommIR has no argmax op",
    torch.cumsum: "CommIR has no scan (cumulative) op", "cumsum": "CommIR has no scan (cumulative) op",
    torch.gather: _ROWS_ONLY, "gather": _ROWS_ONLY,
    torch.index_select: _ROWS_ONLY, "index_select": _ROWS_ONLY,
}
# Rotary embeddings' cos/sin of the positions: constant positions are folded (see
# Converter._buffer_ops_or_constant), positions that are inputs are not.
_NO_TRIG = ("CommIR has no trigonometric op: pass cos and sin in as inputs (Hugging Face's "
            "position_embeddings) or compute them from positions the model builds (torch.arange), "
            "which the capture folds into constants")
_NO_OP.update({f: _NO_TRIG for f in (torch.cos, "cos", torch.sin, "sin")})


class Converter:
    def __init__(self, gm, prefix, example_inputs, mesh, layouts, func_name, state_keys=(),
                 result_layouts=None, dropout_seed=0, training=False):
        self.result_layouts = result_layouts
        # Dropout: the first active one's seed (the others count up from it, _fx_lm), and
        # whether the root module is in training mode.
        self.dropout_seed = dropout_seed
        self.training = training
        self._active_dropouts = None
        self.func_name = func_name
        self.gm = gm
        # The traced module's state_dict order (the GraphModule's own is first-use order).
        self.state_order = {key: i for i, key in enumerate(state_keys)}
        self.prefix = prefix
        self.layouts = dict(layouts or {})
        self.used_layouts = set()
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(example_inputs):
            raise CaptureError("the traced function takes %d inputs (%s) but %d example inputs were given"
                               % (len(placeholders), ", ".join(n.target for n in placeholders), len(example_inputs)))
        self.values = _traced_values(gm)
        if self.values is None:  # some value could not be computed while tracing
            recorder = _Recorder(gm)
            try:
                with torch.no_grad():
                    recorder.run(*example_inputs)
            except Exception as error:  # the model's own error on these inputs
                raise CaptureError("running the traced model on the example inputs failed: %s: %s"
                                   % (type(error).__name__, error)) from error
            self.values = recorder.values
        self.params = dict(gm.named_parameters())
        # A parameter used under two names (tied weights: lm_head.weight is wte.weight) is
        # one argument, under the first name named_parameters gives it; autodiff then
        # sums its two uses' gradients, as autograd does.
        self._canonical = {id(p): name for name, p in self.params.items()}
        self._state_args = {}  # state_dict key -> its argument Value
        self.buffers = dict(gm.named_buffers())
        self.dynamic = {}
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                self.dynamic[n] = True
            elif n.op == "get_attr":
                self.dynamic[n] = n.target in self.params
            elif n.op == "output":
                self.dynamic[n] = True
            else:
                # Sizes, devices and dtypes read off an input are known numbers, not
                # values of the program: only tensors computed from inputs are dynamic.
                # A module call with parameters of its own (nn.Embedding over constant ids)
                # is computed from them, though no node of the graph reads them.
                self.dynamic[n] = _holds_tensor(self.values.get(n)) and n.target not in _SHAPE_ONLY and (
                    any(self.dynamic[i] for i in n.all_input_nodes)
                    or n.op == "call_module" and any(True for _ in gm.get_submodule(n.target).parameters()))
        self.mb = ModuleBuilder()
        self.mesh_sizes = dict(mesh) if isinstance(mesh, dict) else {}
        mesh_name = None
        if mesh is not None and (not isinstance(mesh, dict) or not all(
                isinstance(a, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 1
                for a, n in mesh.items())):
            raise CaptureError("mesh must be a dict of axis name -> size >= 1, e.g. {'dp': 2, 'tp': 4}; got %r" % (mesh,))
        if mesh:
            mesh_name = self.mb.mesh("m", **mesh)
        self.fb = self.mb.func(func_name, mesh=mesh_name)
        self.emitted = {}
        self.refusals = []  # _fx_refusals.Refusal
        self._parts = {}  # (split/chunk/unbind node, j) -> Value of part j
        self._order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self._attr_nodes = {}  # qualified name -> get_attr node made for a leaf module's parameter
        self.arguments = []  # (argument name, source): source is ("input", i) or ("state", key)
        # argument name -> the shape it takes its state tensor in (a packed in-projection
        # seen per head, see _packed_heads); others take theirs as they are.
        self.argument_shapes = {}
        self._packed = {}  # get_attr node -> its per-head argument
        # state key -> value of a constant the model computes that became an argument
        # (see _buffer_ops_or_constant)
        self.constants = {}

    # ---- helpers for the attention matcher and handlers ---------------------------
    def refuse(self, node, what=None, inputs=None, hint=None):
        """Refuses `node`: `what` names the op and the reason (default: the op and that
        CommIR has no op for it). `inputs`: the nodes to go on emitting to find further
        refusals, when not the node's own inputs (a pattern's operands). `hint`: what the
        model can write instead, shown after its line."""
        if what is None:
            reason = "CommIR has no op for it"
            if node is not None and node.op in ("call_function", "call_method"):
                reason = _NO_OP.get(node.target, reason)
                if reason is _DATA_SHAPE:
                    hint = hint or _fx_moe.CAPACITY_HINT
            what = "%s: %s" % (describe(node), reason)
        raise _Refused(node, what, inputs, hint)

    def shape(self, node):
        return tuple(self.values[node].shape)

    def is_dynamic(self, x):
        return isinstance(x, torch.fx.Node) and self.dynamic[x]

    def static_number(self, x):
        if isinstance(x, torch.fx.Node):
            if self.dynamic[x]:
                return None
            x = self.values[x]
        if isinstance(x, torch.Tensor) and x.dim() == 0:
            return x.item()
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return x
        return None

    def constant_tensor(self, x):
        if isinstance(x, torch.fx.Node) and not self.dynamic[x]:
            value = self.values[x]
            return value if isinstance(value, torch.Tensor) else None
        return None

    def skip_identity(self, node):
        """Looks through nodes that do not change the value's meaning for pattern
        matching: eval dropout, contiguous, dtype conversions."""
        while isinstance(node, torch.fx.Node):
            if node.op == "call_module" and isinstance(self.gm.get_submodule(node.target), nn.Identity):
                node = node.args[0]
            elif _fx_lm.is_inactive_dropout(self, node):
                node = node.args[0] if node.args else node.kwargs["input"]
            elif node.op == "call_method" and node.target in _IDENTITY_METHODS + _CONVERT_METHODS:
                node = node.args[0]
            else:
                break
        return node

    # ---- emission ----------------------------------------------------------------
    def convert(self, example_inputs):
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        for i, n in enumerate(placeholders):
            if not isinstance(self.values[n], torch.Tensor):
                raise CaptureError("example input %d (%s) is not a tensor" % (i, n.target))
            self._argument(n, n.target, ("input", i))
        output = next(n for n in self.gm.graph.nodes if n.op == "output")
        results, constant_output = [], None
        # None outputs (MultiheadAttention's absent attention weights) hold no value.
        for r in (r for r in _flatten(output.args[0]) if r is not None):
            try:
                v = self.value_of(r, output)
            except _Skipped:
                continue
            if not isinstance(v, Value):
                constant_output = constant_output or r
            results.append(v)
        self._lost_mutations()
        if self.refusals:
            raise _fx_refusals.error(self.refusals, self.func_name)
        if constant_output is not None:
            raise CaptureError("output %r is not computed from the inputs or parameters" % (constant_output,))
        unused = set(self.layouts) - self.used_layouts
        if unused:
            known = [a for a, _ in self.arguments]
            raise CaptureError("layouts name %s, which %s not an argument of the captured function "
                               "(its arguments: %s)" % (", ".join(sorted(unused)),
                                                        "is" if len(unused) == 1 else "are", ", ".join(known)))
        # Inputs first, then parameters in state_dict order.
        self.fb._args.sort(key=lambda a: self._arg_rank(a.name))
        self.arguments.sort(key=lambda a: self._arg_rank(a[0]))
        types = None
        if self.result_layouts is not None:
            if len(self.result_layouts) != len(results):
                raise CaptureError("result_layouts has %d entries for %d results"
                                   % (len(self.result_layouts), len(results)))
            try:
                types = [v.type.with_layout(l) for v, l in zip(results, self.result_layouts)]
            except ValueError as error:
                raise CaptureError("result_layouts: %s" % error) from None
        self.fb.ret(*results, types=types)
        return self.mb

    def _lost_mutations(self):
        """Refuses the in-place ops (`y.index_add_(...)`, `y[i] = v`) whose effect the
        outputs would miss: fx records one as a new value, but the model goes on reading
        the tensor it modified, whose node is the unmodified value. An in-place op whose
        own result the model reads, and whose tensor it does not read again, is captured
        as its out-of-place form where it is emitted (_fx_scatter)."""
        for n in self.gm.graph.nodes:
            if n in self.emitted or n.users:
                continue
            if n.op == "call_function" and n.target is operator.setitem:
                what = "assignment into a tensor (x[...] = v): the capture is functional, no op writes in place"
            elif (n.op == "call_method" and isinstance(n.target, str) and n.target.endswith("_")
                  and not n.target.startswith("_") and n.args and isinstance(n.args[0], torch.fx.Node)):
                base = n.args[0]
                later = [u for u in base.users if u is not n and self._order.get(u, -1) > self._order[n]]
                # A buffer or a constant the model built (torch.zeros, folded by the tracer
                # into a get_attr per use) is read through other nodes: never safe.
                if not later and base.target not in _VIEWS and base.op != "get_attr":
                    continue  # nothing reads the modified tensor
                what = ("%s: in place on a tensor read afterwards (the capture is functional: the later reads "
                        "would see the tensor unmodified; use the out-of-place form)" % describe(n))
            else:
                continue
            self._record(_Refused(n, what))
            self.emitted[n] = _REFUSED
            self._search(n.all_input_nodes)

    def _arg_rank(self, name):
        for arg_name, source in self.arguments:
            if arg_name == name:
                if source[0] == "input":
                    return (0, source[1])
                return (1, self.state_order.get(source[1], len(self.state_order)))
        return (2, 0)

    def _argument(self, node, name, source, packed_rank=None):
        """A new argument for the value of `node` (a tied parameter's second use: the
        argument of its first). `packed_rank`: the argument is a parameter of that rank
        seen per head ([parts, heads, head_dim, ...] for [parts * heads * head_dim, ...]);
        a layout written for the parameter's own rank puts its first entry on the heads
        dimension."""
        if source[0] == "state" and source[1] in self._state_args:
            self.emitted[node] = self._state_args[source[1]]
            return self.emitted[node]
        value = self.values[node]
        if value.dtype not in DTYPES:
            raise CaptureError("argument %s has dtype %s, which CommIR has no type for" % (name, value.dtype))
        arg_name = _sanitize(name)
        layout = self.layouts.get(arg_name, self.layouts.get(name))
        if layout is not None and not isinstance(layout, (list, tuple)):
            raise CaptureError("layout of %s must be a list with one entry per dimension (None, an "
                               "axis or a tuple of axes), not %r" % (name, layout))
        if layout is not None and packed_rank is not None and len(layout) not in (packed_rank, packed_rank + 2):
            raise CaptureError("layout of %s has %d entries: it takes %d (the parameter's own shape %s, the "
                               "first entry splitting the heads) or %d (per head, %s)"
                               % (name, len(layout), packed_rank, list(self.shape(node.args[0])),
                                  packed_rank + 2, list(value.shape)))
        if layout is not None and packed_rank is not None and len(layout) == packed_rank:
            # The packed dimension split over devices means each device holds a group of
            # heads, with their q, k and v rows (head-parallel attention).
            layout = [None, layout[0], None] + list(layout[1:])
        if layout is not None and packed_rank is not None and len(layout) == packed_rank + 2 and layout[1] is not None:
            axes = layout[1] if isinstance(layout[1], (list, tuple)) else (layout[1],)
            devices = 1
            for axis in axes:
                devices *= self.mesh_sizes.get(axis, 1)
            heads = value.shape[1]
            if heads % devices:
                raise CaptureError("layout of %s: %d heads cannot be split over %d devices (%s); "
                                   "head-parallel attention needs a whole number of heads per device"
                                   % (name, heads, devices, ", ".join(map(str, axes))))
        if layout is not None:
            self.used_layouts.add(arg_name if arg_name in self.layouts else name)
        try:
            type = TensorType(DTYPES[value.dtype], value.shape, layout)
        except ValueError as error:
            raise CaptureError("layout of %s: %s" % (name, error)) from None
        v = self.fb.arg(arg_name, type)
        self.arguments.append((v.name, source))
        if source[0] == "state":
            self._state_args[source[1]] = v
        self.emitted[node] = v
        return v

    def value_of(self, x, user):
        """The CommIR value, number or Python object `x` (an fx argument) stands for.
        Raises _Skipped when it (or something it needs) was refused."""
        if isinstance(x, torch.fx.Node):
            if x in self.emitted:
                if self.emitted[x] is _REFUSED:
                    raise _Skipped()
                return self.emitted[x]
            if not self.dynamic[x]:
                if x.op == "get_attr" and isinstance(self.values[x], torch.Tensor) and self.values[x].dim() > 0:
                    return x  # a buffer: an argument once an op needs it as a tensor
                value = self.values[x]
                if isinstance(value, torch.Tensor) and value.dim() == 0:
                    return value.item()
                return value
            try:
                result = self._emit(x)
            except _Refused as refused:
                self._record(refused)
                self.emitted[x] = _REFUSED
                self._search(refused.inputs if refused.inputs is not None else x.all_input_nodes)
                raise _Skipped() from None
            except _Skipped:
                self.emitted[x] = _REFUSED
                self._search(x.all_input_nodes)
                raise
            self.emitted[x] = result
            return result
        if isinstance(x, (list, tuple)):
            return type(x)(self.value_of(i, user) for i in x)
        return x

    def _record(self, refused):
        node = refused.node
        source = node.meta.get("commir_source") if node is not None else None
        order = self._order.get(node, len(self._order)) if node is not None else len(self._order)
        self.refusals.append(_fx_refusals.Refusal(refused.what, source, order, refused.hint))

    def _search(self, nodes):
        """Emits the dynamic `nodes` not emitted yet, only to record their refusals."""
        for n in nodes:
            if isinstance(n, torch.fx.Node) and self.dynamic.get(n) and n not in self.emitted:
                try:
                    self.value_of(n, None)
                except _Skipped:
                    pass

    def tensor(self, x, user):
        """`x` as a CommIR Value (buffers become arguments)."""
        v = self.value_of(x, user)
        if isinstance(v, torch.fx.Node):  # a buffer
            key = v.target[len(self.prefix):] if v.target.startswith(self.prefix) else v.target
            v = self._argument(v, key, ("state", key))
            self.emitted[x] = v
        if not isinstance(v, Value) and isinstance(x, torch.fx.Node) and self._from_buffers(x):
            # A tensor computed from buffers alone (a slice of a mask buffer, a comparison
            # of it): the same ops on the buffer arguments, or its value as a constant
            # argument where some op has no CommIR counterpart.
            v = self._buffer_ops_or_constant(x)
            self.emitted[x] = v
        if (not isinstance(v, Value) and isinstance(x, torch.fx.Node) and not self.dynamic[x]
                and isinstance(self.values.get(x), torch.Tensor) and self.values[x].dim() > 0
                and self.values[x].dtype in DTYPES and random_ancestor(x) is None):
            # A constant made from sizes alone (torch.zeros_like(x) as a scatter_add base).
            v = self._constant(x)
            self.emitted[x] = v
        if not isinstance(v, Value):
            if isinstance(x, torch.fx.Node) and isinstance(self.values.get(x), torch.Tensor):
                self.refuse(user, "%s on a constant tensor the model computes (%s); only masks "
                            "of written-out attention, tensors computed from buffers and numbers "
                            "are captured" % (describe(user), describe(x)))
            self.refuse(user, "%s with a non-tensor operand %r" % (describe(user), v))
        return v

    def _buffer_ops_or_constant(self, node):
        """The constant tensor `node` (computed from buffers and constants alone) as the
        same ops on the buffer arguments; when one of those ops has no CommIR
        counterpart (Hugging Face Llama's cos/sin of positions times inv_freq), its value
        on the example inputs as an argument: it depends on no input or parameter, and
        the shapes it was computed for are the program's. Random ops are never folded."""
        saved = (self.fb.checkpoint(), list(self.arguments), dict(self.emitted), dict(self._parts),
                 dict(self.argument_shapes), set(self.used_layouts), len(self.refusals))
        try:
            return self._emit(node)
        except _Refused:
            random = random_ancestor(node)
            if random is not None:
                raise
            checkpoint, arguments, emitted, parts, shapes, used, refusals = saved
            self.fb.rollback(checkpoint)
            self.arguments, self.emitted, self._parts = arguments, emitted, parts
            self.argument_shapes, self.used_layouts = shapes, used
            del self.refusals[refusals:]
        return self._constant(node)

    def _constant(self, node):
        """The constant tensor `node` (its value on the example inputs, which depends on no
        input or parameter): a `full` when all its elements are one finite number, else an
        argument that Captured.run feeds with the value."""
        value = self.values[node].detach()
        first = value.reshape(-1)[0] if value.numel() > 0 else None
        if first is not None and bool(torch.isfinite(first.double())) and bool((value == first).all()):
            dtype, shape = self._out_type(node)
            return self.fb.full(first.item(), TensorType(dtype, shape), name=self._name(node))
        v = self._argument(node, constant_name(node), ("constant", None))
        self.arguments[-1] = (v.name, ("state", CONSTANT_PREFIX + v.name))
        self.constants[CONSTANT_PREFIX + v.name] = value.clone()
        return v

    def _from_buffers(self, node):
        """Whether the constant tensor `node` is computed from buffers (and numbers) only."""
        if node.op == "get_attr":
            return isinstance(self.values[node], torch.Tensor)
        if node.op not in ("call_function", "call_method", "call_module") or node.target in _SHAPE_ONLY:
            return False
        # Sizes read off inputs (expand(x.shape[0], -1, 1)) are numbers, not tensors.
        inputs = [i for i in node.all_input_nodes if self.dynamic[i] or _holds_tensor(self.values.get(i))]
        return (isinstance(self.values.get(node), torch.Tensor) and bool(inputs)
                and all(self._from_buffers(i) for i in inputs))

    def _emit(self, node):
        if node.op == "get_attr":
            key = node.target[len(self.prefix):] if node.target.startswith(self.prefix) else node.target
            return self._argument(node, key, ("state", key))
        try:
            if node.op == "call_module":
                result = self._module(node, self.gm.get_submodule(node.target))
            elif node.op in ("call_function", "call_method"):
                result = self._call(node)
            else:
                self.refuse(node)
        except OpError as error:
            # The op the node maps to rejects these operands (an element type or shape
            # CommIR's definition does not take): a refusal at the model's line.
            self.refuse(node, "%s: CommIR's op rejects it: %s" % (describe(node), error.message))
        self._check(node, result)
        return result

    def _check(self, node, result):
        expected = self.values[node]
        if isinstance(result, Value) and isinstance(expected, torch.Tensor):
            want = TensorType(DTYPES.get(expected.dtype, "f32"), expected.shape)
            if result.type.unsharded() != want:
                self.refuse(node, "%s: it computes %s where PyTorch computed %s (internal error "
                            "of the capture)" % (describe(node), result.type.unsharded(), want))

    def _out_type(self, node):
        v = self.values[node]
        return DTYPES[v.dtype], tuple(v.shape)

    def _name(self, node):
        name = node.name
        root = self.prefix.rstrip(".") + "_"
        if self.prefix and name.startswith(root):
            name = name[len(root):]
        return _sanitize(name)

    # ---- modules ---------------------------------------------------------------------
    def _module(self, node, m):
        name = self._name(node)
        args = node.args
        if _fx_lm.handles_module(m):
            return _fx_lm.emit_module(self, node, m)
        if isinstance(m, nn.Identity):
            return self.tensor(args[0], node)
        if isinstance(m, nn.Linear):
            return self._linear(node, args[0], node.target + ".weight",
                                node.target + ".bias" if m.bias is not None else None)
        if isinstance(m, nn.LayerNorm):
            if len(m.normalized_shape) != 1 or not m.elementwise_affine:
                self.refuse(node, "nn.LayerNorm %s over more than the last dimension or without affine weights: "
                            "CommIR's layernorm normalises the last dimension with both" % node.target)
            return self.fb.layernorm(self.tensor(args[0], node), self._param(node.target + ".weight"),
                                     self._param(node.target + ".bias"), eps=m.eps, name=name)
        if isinstance(m, nn.GELU):
            return self.fb.gelu(self.tensor(args[0], node), approximate=m.approximate, name=name)
        if type(m) in _UNARY_MODULES:
            return self.fb.unary(_UNARY_MODULES[type(m)], self.tensor(args[0], node), name=name)
        if isinstance(m, nn.Softmax):
            return self._softmax(node, args[0], m.dim if m.dim is not None else -1)
        self.refuse(node, "nn.%s %s: CommIR has no lowering for this module" % (type(m).__name__, node.target))

    def _packed_heads(self, node):
        """A packed in-projection per head (commir_packed_heads): when the parameter is
        read only that way, an argument of the per-head shape itself, so that its layout
        can split the heads; otherwise a reshape of the parameter's argument."""
        w = node.args[0]
        _, shape = self._out_type(node)
        if (isinstance(w, torch.fx.Node) and w.op == "get_attr" and w not in self.emitted
                and all(u.target is commir_packed_heads for u in w.users)):
            if w not in self._packed:
                key = w.target[len(self.prefix):] if w.target.startswith(self.prefix) else w.target
                v = self._argument(node, key, ("state", key), packed_rank=len(self.shape(w)))
                self.argument_shapes[v.name] = shape
                self._packed[w] = v
            return self._packed[w]
        return self.fb.reshape(self.tensor(w, node), shape, name=self._name(node))

    def _param(self, qualified):
        node = self._get_attr_node(qualified)
        return self.tensor(node, None)

    def _get_attr_node(self, qualified):
        # A parameter of a leaf module: a get_attr node of our own for it, shared.
        cache = self._attr_nodes
        try:
            qualified = self._canonical.get(id(self.gm.get_parameter(qualified)), qualified)
        except AttributeError:  # a buffer
            pass
        if qualified not in cache:
            graph = self.gm.graph
            node = torch.fx.Node(graph, qualified.replace(".", "_"), "get_attr", qualified, (), {})
            self.values[node] = self.gm.get_parameter(qualified) if qualified in self.params else self.gm.get_buffer(qualified)
            self.dynamic[node] = qualified in self.params
            cache[qualified] = node
        return cache[qualified]

    def _linear(self, node, x, weight, bias):
        x = self.tensor(x, node)
        w = self._param(weight) if isinstance(weight, str) else self.tensor(weight, node)
        name = self._name(node)
        if bias is None:
            return self.fb.matmul(x, w, transpose_b=True, name=name)
        y = self.fb.matmul(x, w, transpose_b=True, name=name + ".mm")
        b = self._param(bias) if isinstance(bias, str) else self.tensor(bias, node)
        return self.fb.add(y, b, name=name)

    def _softmax(self, node, x, dim):
        return self.fb.softmax(self.tensor(x, node), dim=dim, name=self._name(node))

    # ---- functions and methods -----------------------------------------------------------
    def _call(self, node):
        t = node.target
        name = self._name(node)
        args, kwargs = node.args, node.kwargs
        if t is commir_packed_heads:
            return self._packed_heads(node)
        if t is commir_attention:
            q, k, v = (self.tensor(a, node) for a in args[:3])
            return self.fb.attention(q, k, v, causal=bool(args[3]), scale=float(args[4]), name=name)
        if attn.is_call(node, attn.MATMULS):
            m = attn.match(node, self)
            if m is not None:
                return self._attention(node, m)
            a, b = self.tensor(args[0], node), self.tensor(args[1], node)
            return self.fb.matmul(a, b, name=name)
        if t in (torch.addmm, "addmm") and not node.kwargs:
            # addmm(bias, a, b) = a @ b + bias (HF GPT-2's Conv1D)
            product = self.fb.matmul(self.tensor(args[1], node), self.tensor(args[2], node), name=name + ".mm")
            return self.fb.add(self.tensor(args[0], node), product, name=name)
        if t is F.linear:
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            return self._linear(node, args[0], args[1], bias)
        if t in _UNARY and (node.op == "call_method") == isinstance(t, str):
            return self.fb.unary(_UNARY[t], self.tensor(args[0], node), name=name)
        if t is F.gelu or t == "gelu":
            return self.fb.gelu(self.tensor(args[0], node), approximate=kwargs.get("approximate", "none"), name=name)
        if t in _BINARY and (node.op == "call_method") == isinstance(t, str):
            if kwargs.get("alpha", 1) != 1 or kwargs.get("rounding_mode") is not None:
                self.refuse(node, "%s with alpha or rounding_mode: CommIR's arithmetic has neither" % describe(node))
            return self._binary(node, _BINARY[t], args[0], args[1])
        if t in _REDUCE and (node.op == "call_method") == isinstance(t, str):
            return self._reduce(node, _REDUCE[t])
        if t in attn.SOFTMAXES and (node.op == "call_method") == isinstance(t, str):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if dim is None:
                self.refuse(node, "%s without dim: the implicit dim is deprecated and ambiguous" % describe(node))
            x = self.tensor(args[0], node)
            dtype = kwargs.get("dtype", args[2] if len(args) > 2 else None)
            if dtype is not None and DTYPES.get(dtype) != x.type.dtype:  # softmax(x, dtype=torch.float32) on f32
                x = self.fb.convert(x, DTYPES[dtype], name=name + ".in")
            return self.fb.softmax(x, dim=dim, name=name)
        if t is F.layer_norm:
            shape = args[1]
            w = args[2] if len(args) > 2 else kwargs.get("weight")
            b = args[3] if len(args) > 3 else kwargs.get("bias")
            eps = args[4] if len(args) > 4 else kwargs.get("eps", 1e-5)
            if len(shape) != 1 or w is None or b is None:
                self.refuse(node, "%s over more than the last dimension or without weight and bias: CommIR's "
                            "layernorm normalises the last dimension with both" % describe(node))
            return self.fb.layernorm(self.tensor(args[0], node), self.tensor(w, node), self.tensor(b, node),
                                     eps=eps, name=name)
        if _fx_lm.handles_call(node):
            return _fx_lm.emit_call(self, node)
        if t in _IDENTITY_METHODS:
            return self.tensor(args[0], node)
        if t in _CONVERT_METHODS or t in _INTEGER_CONVERT_METHODS:
            x = self.tensor(args[0], node)
            dtype, _ = self._out_type(node)
            return _fx_dtypes.convert(self.fb, x, dtype, name)
        if t in ("view", "reshape", torch.reshape, "flatten", torch.flatten, "unsqueeze", torch.unsqueeze,
                 "squeeze", torch.squeeze, "view_as", "reshape_as"):
            x = self.tensor(args[0], node)
            _, shape = self._out_type(node)
            return x if x.type.shape == shape else self.fb.reshape(x, shape, name=name)
        if t in ("expand", "expand_as", torch.broadcast_to, "broadcast_to"):
            x = self.tensor(args[0], node)
            _, shape = self._out_type(node)
            return x if x.type.shape == shape else self.fb.broadcast(x, shape, name=name)
        if t in ("permute", torch.permute):
            perm = args[1:] if not isinstance(args[1], (list, tuple)) else args[1]
            perm = self.value_of(list(perm), node)
            x = self.tensor(args[0], node)
            return self.fb.transpose(x, [p % x.type.rank for p in perm], name=name)
        if t in ("transpose", torch.transpose, "t", torch.t):
            x = self.tensor(args[0], node)
            rank = x.type.rank
            a, b = (0, 1) if t in ("t", torch.t) else (args[1] % rank, args[2] % rank)
            perm = list(range(rank))
            perm[a], perm[b] = perm[b], perm[a]
            return x if a == b else self.fb.transpose(x, perm, name=name)
        if t is operator.getitem:
            return self._getitem(node)
        if t is torch.stack:
            # A new dimension of size 1 on each, then concatenated along it.
            dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
            _, shape = self._out_type(node)
            dim %= len(shape)
            values = []
            for j, v in enumerate(args[0]):
                v = self.tensor(v, node)
                values.append(self.fb.reshape(v, v.type.shape[:dim] + (1,) + v.type.shape[dim:],
                                              name="%s.%d" % (name, j)))
            return self.fb.concat(values, dim, name=name)
        if t in (torch.cat, torch.concat):
            values = [self.tensor(v, node) for v in args[0]]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
            return self.fb.concat(values, dim, name=name)
        if t in _SPLITS:
            return [self._part(node, j) for j in range(len(self.values[node]))]
        if t is getattr and isinstance(args[0], torch.fx.Node) and isinstance(self.values[args[0]], tuple):
            # A field of a tuple-valued result (torch.topk(...).values): the same as
            # indexing it with the field's position.
            return self._element(node, args[0], _position(self.values[args[0]], self.values[node]))
        if t in _MAX_MIN:
            if isinstance(self.values[node], tuple):  # (values, indices): see _element
                return [self._element(node, node, 0), self._element(node, node, 1)]
            return self._max_min(node)
        if _fx_moe.handles(node):
            return _fx_moe.emit(self, node)
        if _fx_scatter.handles(node):
            return _fx_scatter.emit(self, node)
        if _fx_compare.handles(node):
            return _fx_compare.emit(self, node)
        self.refuse(node)

    def _rmsnorm(self, node):
        """x * rsqrt(mean(x^2, -1, keepdim) + eps) * w as model code writes RMS norm
        (through .float() / .type_as) -> (x node, w node, eps), else None."""
        if len(node.args) != 2 or not all(isinstance(a, torch.fx.Node) for a in node.args):
            return None
        for w, n in (node.args, node.args[::-1]):
            if not self.dynamic[w] or tuple(self.values[w].shape) != self.shape(node)[-1:]:
                continue
            n = self.skip_identity(n)
            if not attn.is_call(n, _MULS) or len(n.args) != 2:
                continue
            for x1, r in (n.args, n.args[::-1]):
                if not isinstance(r, torch.fx.Node) or not isinstance(x1, torch.fx.Node):
                    continue
                r = self.skip_identity(r)
                if not attn.is_call(r, (torch.rsqrt, "rsqrt")):
                    continue
                a = self.skip_identity(r.args[0])
                if not attn.is_call(a, (operator.add, torch.add, "add")):
                    continue
                m, eps = a.args
                if self.static_number(eps) is None:
                    m, eps = eps, m
                eps = self.static_number(eps)
                m = self.skip_identity(m) if isinstance(m, torch.fx.Node) else None
                if eps is None or not attn.is_call(m, (torch.mean, "mean")):
                    continue
                dim = m.kwargs.get("dim", m.args[1] if len(m.args) > 1 else None)
                keepdim = m.kwargs.get("keepdim", m.args[2] if len(m.args) > 2 else False)
                rank = len(self.shape(m))
                dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
                if not keepdim or dim is None or [d % rank for d in dims] != [rank - 1]:
                    continue
                sq = self.skip_identity(m.args[0])
                x = self.skip_identity(x1)
                if attn.is_call(sq, (operator.pow, torch.pow, "pow")) and self.static_number(sq.args[1]) == 2:
                    squared = self.skip_identity(sq.args[0])
                elif attn.is_call(sq, _MULS) and self.skip_identity(sq.args[0]) is self.skip_identity(sq.args[1]):
                    squared = self.skip_identity(sq.args[0])
                else:
                    continue
                if squared is not x or self.values[x].dtype != self.values[node].dtype:
                    continue
                return x, w, eps
        return None

    def _binary(self, node, opname, a, b):
        if opname == "mul":
            norm = self._rmsnorm(node)
            if norm is not None:
                x, w, eps = norm
                return self.fb.rmsnorm(self.tensor(x, node), self.tensor(w, node), eps=eps,
                                       name=self._name(node))
        va, vb = self.value_of(a, node), self.value_of(b, node)
        va = self.tensor(a, node) if not _is_number(va) else va
        vb = self.tensor(b, node) if not _is_number(vb) else vb
        dtype, shape = self._out_type(node)
        if isinstance(va, Value) and va.type.dtype != dtype:
            va = self.fb.convert(va, dtype)
        if isinstance(vb, Value) and vb.type.dtype != dtype:
            vb = self.fb.convert(vb, dtype)
        if opname == "pow" and _is_number(vb) and vb == 2:
            return self.fb.mul(va, va, name=self._name(node))
        return self.fb.binary(opname, va, vb, name=self._name(node))

    def _reduce(self, node, opname):
        args, kwargs = node.args, node.kwargs
        x = self.tensor(args[0], node)
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
        if kwargs.get("dtype") is not None:
            self.refuse(node, "%s with dtype: convert the input first (.float())" % describe(node))
        if dim is None:
            dims = list(range(x.type.rank))
        else:
            dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
        return self.fb.reduce(opname, x, [d % x.type.rank for d in dims], keepdim=bool(keepdim),
                              name=self._name(node))

    def _getitem(self, node):
        base, index = node.args
        if isinstance(self.values[base], (list, tuple)):
            return self._element(node, base, index)
        x = self.tensor(base, node)
        index = index if isinstance(index, tuple) else (index,)
        # Bounds computed from sizes (x[..., : x.shape[-1] // 2]) are the numbers they
        # are for these shapes.
        index = tuple(slice(self._static_bound(i.start), self._static_bound(i.stop), self._static_bound(i.step))
                      if isinstance(i, slice) else self._static_bound(i) for i in index)
        if any(isinstance(b, torch.fx.Node) for i in index if isinstance(i, slice) for b in (i.start, i.stop, i.step)):
            self.refuse(node, "indexing (%s) with a slice bound computed from tensor values: CommIR's "
                        "slice bounds are static" % describe(node))
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            explicit = sum(1 for i in index if i is not None and i is not Ellipsis)
            index = index[:at] + (slice(None),) * (x.type.rank - explicit) + index[at + 1:]
        start, size = [], []
        dim = 0
        for i in index:
            if i is None:
                continue
            if dim >= x.type.rank:
                self.refuse(node, "indexing (%s) with more indices than dimensions" % describe(node))
            extent = x.type.shape[dim]
            if isinstance(i, slice):
                # Bounds read off sizes (`self.pos[:, :t]`, t from x.shape) are numbers.
                bounds = [self.static_number(b) if isinstance(b, torch.fx.Node) else b
                          for b in (i.start, i.stop, i.step)]
                if any(isinstance(b, torch.fx.Node) and n is None for b, n in zip((i.start, i.stop, i.step), bounds)):
                    self.refuse(node, "indexing (%s) with a slice bound computed from tensor values" % describe(node))
                s, e, step = slice(*bounds).indices(extent)
                if step != 1:
                    self.refuse(node, "indexing (%s) with a strided slice (step %d): CommIR's slice is contiguous"
                                % (describe(node), step))
                start.append(s)
                size.append(max(e - s, 0))
            elif isinstance(i, int):
                start.append(i % extent)
                size.append(1)
            else:
                if self.is_dynamic(i):
                    self.value_of(i, node)  # an index that was refused: this needs it, no refusal of its own
                self.refuse(node, "indexing (%s) with a tensor or %s: that is a gather, only slices, ints and None "
                            "are captured" % (describe(node), type(i).__name__))
            dim += 1
        for d in range(dim, x.type.rank):
            start.append(0)
            size.append(x.type.shape[d])
        name = self._name(node)
        y = x
        if list(size) != list(x.type.shape):
            y = self.fb.slice(x, start, size, name=name + ".slice")
        _, shape = self._out_type(node)
        return y if y.type.shape == shape else self.fb.reshape(y, shape, name=name)

    def _static_bound(self, i):
        """An index or slice bound: the number a size-derived node stands for."""
        if isinstance(i, torch.fx.Node) and not self.dynamic[i]:
            value = self.values[i]
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return i

    def _part(self, node, j):
        """Part j of a split, chunk or unbind node: one slice (reshaped without the
        dimension for unbind). Parts are emitted one by one, as the model uses them."""
        key = (node, j)
        if key in self._parts:
            return self._parts[key]
        args, kwargs = node.args, node.kwargs
        x = self.tensor(args[0], node)
        unbind = node.target in ("unbind", torch.unbind)
        dim = kwargs.get("dim", args[1 if unbind else 2] if len(args) > (1 if unbind else 2) else 0) % x.type.rank
        parts = self.values[node]
        start = [0] * x.type.rank
        start[dim] = sum(p.shape[dim] if not unbind else 1 for p in parts[:j])
        size = list(x.type.shape)
        size[dim] = parts[j].shape[dim] if not unbind else 1
        name = "%s.%d" % (self._name(node), j)
        part = x if size == list(x.type.shape) else self.fb.slice(x, start, size, name=name)
        if unbind:
            part = self.fb.reshape(part, tuple(parts[j].shape), name=name + ".squeeze")
        self._parts[key] = part
        return part

    def _element(self, node, base, index):
        """Element `index` of the tuple-valued node `base`."""
        if self.is_dynamic(base) and base.target in _SPLITS and isinstance(index, int):
            return self._part(base, index % len(self.values[base]))
        if self.is_dynamic(base) and base.target in _MAX_MIN and isinstance(index, int):
            if index % 2 == 1:
                self.refuse(node, "the indices of %s along a dimension: CommIR has no argmax op" % describe(base),
                            inputs=[base.args[0]])
            return self._max_min(base, along=True)
        value = self.value_of(base, node)
        if isinstance(value, (list, tuple)):
            return value[index]
        return None

    def _max_min(self, node, along=False):
        """torch.max/min (or the methods): of the whole tensor, elementwise of two
        tensors, or (`along`) the values along one dimension; min is -max(-x)."""
        args, kwargs = node.args, node.kwargs
        x = self.tensor(args[0], node)
        is_min = node.target in (torch.min, "min")
        name = self._name(node) + (".values" if along else "")
        other = kwargs.get("other", args[1] if len(args) > 1 else None)
        if not along and isinstance(other, torch.fx.Node) and isinstance(self.values[other], torch.Tensor):
            return self._binary(node, "min" if is_min else "max", args[0], other)
        if along:
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            dims = [dim % x.type.rank]
            keepdim = bool(kwargs.get("keepdim", args[2] if len(args) > 2 else False))
        else:
            dims, keepdim = list(range(x.type.rank)), False
        if is_min:
            x = self.fb.unary("neg", x, name=name + ".neg")
        y = self.fb.reduce("reduce_max", x, dims, keepdim=keepdim, name=name + (".max" if is_min else ""))
        return self.fb.unary("neg", y, name=name) if is_min else y

    def _kv_heads(self, node):
        """k or v of attention: when it is repeat_kv's output transposed to [B, H, S, D]
        (x[:, :, :, None, :].expand(B, S, Hkv, n, D).reshape(B, S, Hkv * n, D), then
        .transpose(1, 2)), the un-repeated [B, Hkv, S, D]: `attention` takes fewer kv
        heads directly (head h reads kv head h // n, as repeat_kv orders them)."""
        t = self.skip_identity(node)
        hf = self._hf_repeat_kv(t)
        if hf is not None:
            return self.tensor(hf, node)
        if not attn.is_call(t, ("transpose", torch.transpose)) or sorted(a % 4 for a in t.args[1:3]) != [1, 2]:
            return self.tensor(node, node)
        r = self.skip_identity(t.args[0])
        e = self.skip_identity(r.args[0]) if attn.is_call(r, ("reshape", "view", torch.reshape)) else None
        u = self.skip_identity(e.args[0]) if e is not None and attn.is_call(e, ("expand",)) else None
        if u is None or not attn.is_call(u, (operator.getitem,)):
            return self.tensor(node, node)
        index = u.args[1]
        if not (isinstance(index, tuple) and len(index) == 5 and index[3] is None and all(
                isinstance(i, slice) and i == slice(None) for j, i in enumerate(index) if j != 3)):
            return self.tensor(node, node)
        base = u.args[0]
        b, s, hkv, d = self.values[base].shape
        if tuple(self.values[r].shape) != (b, s, self.values[r].shape[2], d) or self.values[r].shape[2] % hkv:
            return self.tensor(node, node)
        kv = self.tensor(base, node)
        return self.fb.transpose(kv, [0, 2, 1, 3], name=self._name(t) + ".kv")

    def _hf_repeat_kv(self, node):
        """Hugging Face's repeat_kv on [B, Hkv, S, D]:
        x[:, :, None, :, :].expand(B, Hkv, n, S, D).reshape(B, Hkv * n, S, D) -> x (head
        h reads kv head h // n, the order `attention` reads fewer kv heads in), else None."""
        if not attn.is_call(node, ("reshape", "view", torch.reshape)):
            return None
        e = self.skip_identity(node.args[0])
        u = self.skip_identity(e.args[0]) if attn.is_call(e, ("expand",)) else None
        if u is None or not attn.is_call(u, (operator.getitem,)):
            return None
        index = u.args[1]
        if not (isinstance(index, tuple) and len(index) == 5 and index[2] is None and all(
                isinstance(i, slice) and i == slice(None) for j, i in enumerate(index) if j != 2)):
            return None
        base = u.args[0]
        if len(self.shape(base)) != 4:
            return None
        b, hkv, s, d = self.shape(base)
        heads = self.shape(node)[1] if len(self.shape(node)) == 4 else 0
        if self.shape(node) != (b, heads, s, d) or heads % hkv:
            return None
        return base

    def _attention(self, node, m):
        q = self.tensor(m.q, node)
        k, v = self._kv_heads(m.k), self._kv_heads(m.v)
        if q.type.rank == 4 and (k.type.rank != 4 or v.type.shape != k.type.shape):
            k, v = self.tensor(m.k, node), self.tensor(m.v, node)
        if q.type.rank == 3:  # bmm form over [B*H, S, D]: one batch of B*H heads
            q, k, v = (self.fb.reshape(t, (1,) + t.type.shape) for t in (q, k, v))
        if q.type.rank != 4:
            self.refuse(node, "%s: attention over rank-%d tensors (q, k, v must be [B, H, S, D])" % (describe(node), q.type.rank),
                        inputs=[m.q, m.k, m.v])
        causal = attn.causal_or_none(m.allowed, q.type.shape[2], k.type.shape[2])
        if causal is None:
            self.refuse(node, "%s: an attention mask that is neither causal nor empty (CommIR's attention "
                        "takes only those)" % describe(node), inputs=[m.q, m.k, m.v])
        out = self.fb.attention(q, k, v, causal=causal, scale=m.scale, name=self._name(node))
        _, shape = self._out_type(node)
        return out if out.type.shape == shape else self.fb.reshape(out, shape)


def _traced_values(gm):
    """{node: value on the example inputs} as the tracer computed them (each node's
    meta, removed here), or None when some node's value is unknown: then the graph is
    run again, to report the model's own error."""
    values, complete = {}, True
    for n in gm.graph.nodes:
        value = n.meta.pop(example_values.META_KEY, example_values.Unknown(None))
        if n.op == "output":
            continue
        complete = complete and not isinstance(value, example_values.Unknown)
        values[n] = value
    if not complete:
        return None
    output = next(n for n in gm.graph.nodes if n.op == "output")
    values[output] = torch.fx.node.map_arg(output.args[0], lambda n: values[n])
    return values


def _holds_tensor(value):
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    return False


def _position(sequence, element):
    return next(i for i, e in enumerate(sequence) if e is element)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _flatten(x):
    if isinstance(x, (list, tuple)):
        out = []
        for i in x:
            out.extend(_flatten(i))
        return out
    return [x]
