"""Exceptions of the commir package.

Errors in program text (parse, verify, a pass, a failing op at run time) carry where
they happened: ``file``, ``line``, ``column`` (1-based; 0 when unknown) and ``message``;
``str(error)`` is the full rendered diagnostic (``FILE:LINE:COL: error: MESSAGE`` with
the source line and a caret), as commir-opt prints it.
"""


class CommirError(Exception):
    """Base class of every error the package raises on purpose."""

    def __init__(self, message, file=None, line=0, column=0, rendered=None):
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        super().__init__(rendered.rstrip("\n") if rendered else message)


class _LocatedError(CommirError):
    # The C++ extension constructs these as cls(file, line, column, message, rendered);
    # a plain cls(message) is an error without a location.
    def __init__(self, *args):
        if len(args) == 5:
            file, line, column, message, rendered = args
            super().__init__(message, file, line, column, rendered)
        else:
            super().__init__(*args)


class ParseError(_LocatedError):
    """The text is not a CommIR module (lexical or syntax error)."""


class VerifyError(_LocatedError):
    """The module parses but breaks a rule of the spec (types, SSA, layouts)."""


class PassError(_LocatedError):
    """A pass of the pipeline failed on the module."""


class PipelineError(CommirError):
    """The pipeline text is malformed or names an unknown pass or option."""


class RunError(_LocatedError):
    """A function could not run: wrong arguments or shapes, or an op failed."""


class OpError(CommirError, ValueError):
    """An op built with commir.builder is invalid (shapes, element types, attributes): the
    message is the C++ op definition's, as the verifier would report it."""


class CaptureError(CommirError):
    """commir.torch.capture met something it cannot express in CommIR."""
