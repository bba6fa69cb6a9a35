"""What commir.torch.capture cannot express, gathered into one error.

Each refusal names the op, the reason, and the line of the user's model that made it
(the first stack frame outside torch and this package when fx recorded the op). A model
with several things CommIR cannot express reports all of them at once, in the order the
model runs them (its source order), instead of one per attempt.
"""

import linecache
import os

import torch

from commir.errors import CaptureError

_TORCH_DIR = os.path.dirname(torch.__file__)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class Source:
    """A line of model code: file, line number and the line's text."""

    def __init__(self, file, line, code):
        self.file, self.line, self.code = file, line, code

    @classmethod
    def of(cls, frame):
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        return cls(frame.f_code.co_filename, frame.f_lineno, code)

    @property
    def location(self):
        return "%s:%d" % (self.file, self.line)

    def __str__(self):
        return "%s: %s" % (self.location, self.code)


def model_frame(frame):
    """The innermost frame at or above `frame` that is the user's code."""
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_TORCH_DIR) and not path.startswith(_PACKAGE_DIR):
            return frame
        frame = frame.f_back
    return None


def describe(node):
    """How model code spells the op of an fx node: `function torch.topk`, `tensor method
    .split()`, `module layers.0`."""
    if node.op == "call_function":
        module = getattr(node.target, "__module__", None) or ""
        name = getattr(node.target, "__qualname__", getattr(node.target, "__name__", str(node.target)))
        module = module.replace("torch._C._nn", "torch.nn.functional").replace("_operator", "operator")
        if name.startswith("_VariableFunctionsClass."):  # torch's C functions: torch.topk
            module, name = "torch", name.split(".", 1)[1]
        return "function %s.%s" % (module, name) if module else "function %s" % name
    if node.op == "call_method":
        return "tensor method .%s()" % node.target
    if node.op == "call_module":
        return "module %s" % node.target
    return "%s %s" % (node.op, node.target)


class Refusal:
    """One thing the capture cannot express: `what` names the op and says why; `order`
    places it in the model's execution order; `source` is the model line (or None);
    `hint` what the model can write instead (or None); `count` how many times the line
    was refused (a loop over experts or layers runs it again)."""

    def __init__(self, what, source, order, hint=None):
        self.what, self.source, self.order, self.hint = what, source, order, hint
        self.count = 1

    def __str__(self):
        what = self.what if self.count == 1 else "%s (%d times: the line runs more than once)" % (self.what, self.count)
        if self.source is None:
            text = "cannot capture %s" % what
        else:
            text = "%s: cannot capture %s\n    %s" % (self.source.location, what, self.source.code)
        return text if self.hint is None else "%s\n    Instead, %s" % (text, self.hint)


def _merged(refusals):
    """The refusals in order, one per (line, reason): a loop refuses its line each time."""
    out, seen = [], {}
    for r in sorted(refusals, key=lambda r: r.order):
        key = (r.what, r.source.location if r.source is not None else None)
        if key in seen:
            seen[key].count += 1
            continue
        seen[key] = r
        out.append(r)
    return out


def error(refusals, func_name):
    """One CaptureError listing every refusal in order; `.refusals` holds them and
    `.file`/`.line` point at the first."""
    refusals = _merged(refusals)
    if len(refusals) == 1:
        text = str(refusals[0])
    else:
        text = "%d parts of %s cannot be captured:\n%s" % (
            len(refusals), func_name, "\n".join(str(r) for r in refusals))
    first = refusals[0].source
    err = CaptureError(text, file=first.file if first else None, line=first.line if first else 0)
    err.refusals = refusals
    return err
