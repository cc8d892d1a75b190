"""Error types of the compiler core. Every message names the thing at fault."""

from __future__ import annotations


class TVMError(Exception):
    """Base class of every error raised by the compiler core."""


class ScheduleError(TVMError):
    """An illegal schedule primitive use; the message names the stage, the axis and the rule."""


class LoweringError(TVMError):
    """The schedule cannot be lowered (e.g. unbound loops for a GPU target)."""


class BuildError(TVMError):
    """Code generation or the native compiler failed; the message carries the compiler output."""


class ArgumentError(TVMError, ValueError):
    """A call argument does not match the built function (ndim, shape, dtype, device)."""


class DeviceError(TVMError, RuntimeError):
    """The requested device or backend is not available."""
