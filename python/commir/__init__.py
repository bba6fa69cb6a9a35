"""CommIR from Python: parse, print, verify, transform and run CommIR programs.

    import commir
    m = commir.parse(text)                      # or commir.parse_file(path)
    spmd = commir.opt(m, "propagate-sharding,lower-to-spmd")
    y = commir.run(spmd, x=x, w=w)              # NumPy arrays in and out, cpu backend
    print(spmd)                                 # the canonical text
    print(spmd.comm_report())

Programs can be written with ``commir.builder`` and captured from PyTorch with
``commir.torch.capture`` (imported on demand: ``import commir.torch``).
"""

import numpy as _np

from commir import _commir_loader
from commir.errors import (CaptureError, CommirError, OpError, ParseError, PassError,
                           PipelineError, RunError, VerifyError)

_commir = _commir_loader.load()

__all__ = [
    "Module", "parse", "parse_file", "verify", "opt", "run", "run_with", "predict", "Prediction", "pass_names",
    "DEFAULT_SPMD_PIPELINE", "PARTITION_PIPELINE", "CommirError", "OpError", "ParseError", "VerifyError", "PassError",
    "PipelineError", "RunError", "CaptureError",
]

# Partitioning alone, one collective per reshard (transforms/sharding/lower.h,
# kPartitionPipeline): for reading the partitioner's individual collectives.
PARTITION_PIPELINE = "propagate-sharding,lower-to-spmd,canonicalize,cse,dce"

# What commir-run applies to a global function before a multi-device run
# (transforms/sharding/lower.h, kDefaultSpmdPipeline): partitioning, then the
# independent all_reduces (a backward pass's gradients) combined into DDP's 25 MiB
# buckets, as propagate-sharding prices them.
DEFAULT_SPMD_PIPELINE = PARTITION_PIPELINE + ",combine-all-reduces"


class Module:
    """A parsed and verified CommIR module. Immutable: passes return a new Module."""

    def __init__(self, handle):
        self._handle = handle

    @property
    def file(self):
        return self._handle.file

    def text(self):
        """The canonical text (what commir-opt prints)."""
        return self._handle.text()

    def __str__(self):
        return self.text()

    def __repr__(self):
        return "<commir.Module %s: %s>" % (self.file, ", ".join(
            "@" + f for f in self.function_names()))

    def function_names(self):
        return list(self._handle.function_names())

    def signature(self, func=None):
        """[(argument name, global type text)] of ``func`` (default: the only one)."""
        return [tuple(a) for a in self._handle.signature(_func_name(func))]

    def comm_report(self):
        """The comm-report pass's text: collectives and bytes per device per function."""
        return self._handle.comm_report()


def _func_name(func):
    if func is None:
        return ""
    return func[1:] if func.startswith("@") else func


def parse(text, file="<string>"):
    """Parses and verifies ``text``; raises ParseError or VerifyError."""
    if not isinstance(text, str):
        raise TypeError("commir.parse takes program text (str), got %s" % type(text).__name__)
    return Module(_commir.parse(text, file))


def parse_file(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse(text, str(path))


def verify(module):
    """Runs the verifier again (raises VerifyError); parse already verifies."""
    _commir.verify(module._handle)


def opt(module, pipeline):
    """Runs a pass pipeline (commir-opt's --pass-pipeline text) on a copy of ``module``."""
    return Module(_commir.opt(module._handle, pipeline))


def pass_names():
    return list(_commir.pass_names())


def _to_numpy(value):
    # torch tensors (bf16 included) go through float32; anything else through NumPy.
    if type(value).__module__.startswith("torch"):
        import torch
        value = value.detach().cpu()
        if value.is_floating_point() and value.dtype != torch.float64:
            value = value.to(torch.float32)
        return value.numpy()
    return _np.asarray(value)


def run(module, func=None, **arrays):
    """Runs ``func`` (default: the only function) on the cpu backend.

    Each argument is given by name as a NumPy array (or torch tensor) of its GLOBAL shape;
    a spmd function's inputs are split across its mesh by their layouts and its results
    assembled. Returns the results as NumPy arrays (f32, f16 and bf16 as float32): one
    array for a function with one result, else a tuple.
    """
    return run_with(module, arrays, func)


def run_with(module, arrays, func=None):
    """run with the arguments in a dict, for argument names that are not Python
    identifiers or that clash with run's own parameters (%module, %func)."""
    inputs = {name: _to_numpy(value) for name, value in arrays.items()}
    results = _commir.run(module._handle, _func_name(func), inputs)
    return results[0] if len(results) == 1 else tuple(results)


class Prediction:
    """The sim backend's prediction of one run (commir-run --backend=sim): time_s (the
    slowest device), overlap_fraction, total_flops, achieved_tflops_per_gpu,
    fraction_of_peak, devices (one dict per device: time_s, compute_s, communication_s,
    exposed_communication_s, peak_memory_bytes) and report (the text commir-run prints)."""

    def __init__(self, fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return "<commir.Prediction %s: %.6g s on %d devices>" % (self.hardware, self.time_s, len(self.devices))


def predict(module, func=None, hardware="h100-sxm", gpus_per_node=8):
    """Predicts one run of ``func`` on ``hardware`` (a built-in name such as h100-sxm,
    h200, a100-sxm-80g, or a hardware JSON file) without computing anything. Like run,
    it takes the function as given: partition a global function first (commir.opt)
    to predict it on its mesh."""
    return Prediction(_commir.predict(module._handle, _func_name(func), hardware, int(gpus_per_node)))
