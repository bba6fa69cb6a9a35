"""From PyTorch to CommIR: commir.torch.capture.

    import commir, commir.torch
    cap = commir.torch.capture(block.eval(), (x,), mesh={"tp": 4},
                               layouts={"mlp.up.weight": ["tp", None]})
    print(cap.module)                           # the global CommIR function
    spmd = cap.partition()                      # propagate-sharding, lower-to-spmd, ...
    y = cap.run(x, module=spmd)                 # runs on the cpu mesh, NumPy out

The module is traced with torch.fx (nn.TransformerEncoderLayer and nn.MultiheadAttention
through plain reimplementations of their eval-mode math), every traced value also
computed on the example inputs (so that split/chunk/unbind/topk results unpack);
parameters and buffers the program uses become arguments named by their state_dict
names, inputs by the forward's parameter names. `layouts` maps argument names to one entry per dimension: None
(replicated), an axis name, or a tuple of axes. Whatever is not given is left to
propagation. Anything the capture cannot express raises commir.CaptureError naming the
op, the reason and the model source line, all of a model's refusals in one error;
nothing is dropped.
"""

import linecache
import sys

import torch

import commir
from commir import _fx_convert, _fx_refusals, _fx_tracer


class Captured:
    """A captured program: the module, its function and where each argument comes from."""

    def __init__(self, module, function, arguments, state, num_inputs, argument_shapes=None,
                 parameters=()):
        self.module = module
        self.function = function
        # [(argument name, ("input", i) | ("state", state_dict key))] in signature order
        self.arguments = arguments
        # {argument name: shape} for parameters taken in another shape than their own
        # (nn.MultiheadAttention's in_proj_weight as [3, heads, head_dim, E])
        self.argument_shapes = dict(argument_shapes or {})
        self._state = state
        self._num_inputs = num_inputs
        self._parameters = set(parameters)

    @property
    def params(self):
        """[(argument name, parameter name)] of the arguments that are the module's
        trainable parameters, in signature order (a tied weight once, under the name
        named_parameters gives it first)."""
        return [(name, key) for name, (kind, key) in self.arguments
                if kind == "state" and key in self._parameters]

    @property
    def text(self):
        return self.module.text()

    def argument_arrays(self, *inputs):
        """{argument name: NumPy array}: the given inputs and the module's weights."""
        if len(inputs) != self._num_inputs:
            raise commir.RunError("@%s takes %d inputs, got %d" % (self.function, self._num_inputs, len(inputs)))
        arrays = {}
        for name, (kind, key) in self.arguments:
            value = inputs[key] if kind == "input" else self._state[key]
            arrays[name] = commir._to_numpy(value)
            if name in self.argument_shapes:
                arrays[name] = arrays[name].reshape(self.argument_shapes[name])
        return arrays

    def partition(self, pipeline=commir.DEFAULT_SPMD_PIPELINE):
        """The module after `pipeline` (default: commir-run's partitioning pipeline)."""
        return commir.opt(self.module, pipeline)

    def run(self, *inputs, module=None):
        """Runs the captured function (or its partitioned form in `module`) on the cpu
        backend with the module's weights; returns its results as NumPy arrays."""
        return commir.run_with(module or self.module, self.argument_arrays(*inputs), self.function)


def capture(module_or_fn, example_inputs, mesh=None, layouts=None, name=None,
            result_layouts=None, dropout_seed=0):
    """Traces `module_or_fn` on `example_inputs` (a tensor or a tuple of tensors) into a
    global CommIR function on `mesh` ({axis: size}, None: no mesh) with argument
    `layouts` and, optionally, the layouts requested for the results (one per result,
    default replicated). Parameters of the forward after the example inputs keep their
    defaults, and a None (or other non-tensor: need_weights=False) example input fixes its
    parameter at that value: neither is an input of the captured function (Captured.run
    takes the tensors only). Each dropout follows its own training flag (a module's
    .training, F.dropout's training=): an active one becomes CommIR's `dropout`, the k-th
    (in graph order) with seed `dropout_seed + k`. Returns a Captured."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    training = isinstance(module_or_fn, torch.nn.Module) and module_or_fn.training
    if isinstance(dropout_seed, bool) or not isinstance(dropout_seed, int) or not 0 <= dropout_seed < 2 ** 63:
        raise commir.CaptureError("dropout_seed must be an integer in [0, 2^63), got %r" % (dropout_seed,))
    func_name = name or _default_name(module_or_fn)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))  # emission recurses along the graph
    try:
        try:
            gm, prefix = _fx_tracer.trace(module_or_fn, example_inputs)
        except commir.CaptureError:
            raise
        except Exception as error:  # torch.fx's TraceError and friends
            raise _trace_error(func_name, error) from error
        # A None (or other non-tensor) example input is a parameter fixed at that value,
        # not an input.
        example_inputs = tuple(x for x in example_inputs if isinstance(x, torch.Tensor))
        state_keys = list(module_or_fn.state_dict().keys()) if isinstance(module_or_fn, torch.nn.Module) else []
        converter = _fx_convert.Converter(gm, prefix, example_inputs, mesh, layouts, func_name, state_keys,
                                          result_layouts, dropout_seed=dropout_seed, training=training)
        builder = converter.convert(example_inputs)
    finally:
        sys.setrecursionlimit(old_limit)
    state = {}
    if isinstance(module_or_fn, torch.nn.Module):
        state = {k: v.detach() for k, v in module_or_fn.state_dict(keep_vars=True).items()}
    state.update(converter.constants)
    for _, (kind, key) in converter.arguments:
        if kind == "state" and key not in state:
            # A tensor the model builds from constants (torch.tensor([...])), which fx
            # keeps on the traced module as _tensor_constantN: an argument like a buffer.
            state[key] = _attribute(gm, prefix + key if _has_attribute(gm, prefix + key) else key).detach()
    module = builder.module(file="<capture of %s>" % func_name)
    parameters = set()
    if isinstance(module_or_fn, torch.nn.Module):
        parameters = {name for name, _ in module_or_fn.named_parameters()}
    return Captured(module, func_name, converter.arguments, state, len(example_inputs),
                    converter.argument_shapes, parameters)


def _attribute(root, path):
    for atom in path.split("."):
        root = getattr(root, atom)
    return root


def _has_attribute(root, path):
    try:
        _attribute(root, path)
        return True
    except AttributeError:
        return False


def _trace_error(func_name, error):
    """A CaptureError for an exception raised while tracing, at the innermost line of
    the model's own code in its traceback (data-dependent control flow, ...)."""
    source = None
    tb = error.__traceback__
    while tb is not None:
        if _fx_refusals.model_frame(tb.tb_frame) is tb.tb_frame:
            source = _fx_refusals.Source(tb.tb_frame.f_code.co_filename, tb.tb_lineno,
                                         linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip())
        tb = tb.tb_next
    if source is None:
        return commir.CaptureError("torch.fx cannot trace %s: %s" % (func_name, error))
    return commir.CaptureError("%s: torch.fx cannot trace %s: %s\n    %s" % (source.location, func_name, error, source.code),
                               file=source.file, line=source.line)


def _default_name(module_or_fn):
    raw = type(module_or_fn).__name__ if isinstance(module_or_fn, torch.nn.Module) else getattr(module_or_fn, "__name__", "forward")
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in raw)
    return out if out and (out[0].isalpha() or out[0] == "_") else "f_" + out
