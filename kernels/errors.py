"""Error types of the compiler core. Every message names the thing at fault.

:class:`TVMError` derives from :class:`RuntimeError`, as TVM's does, so code written for TVM
(``pytest.raises(RuntimeError)``, ``except RuntimeError``) catches the core's errors too.
"""

from __future__ import annotations


class TVMError(RuntimeError):
    """Base class of every error raised by the compiler core."""


class ScheduleError(TVMError):
    """An illegal schedule primitive use; the message names the stage, the axis and the rule."""


class LoweringError(TVMError):
    """The schedule cannot be lowered (e.g. unbound loops for a GPU target)."""


class BuildError(TVMError):
    """Code generation or the native compiler failed; the message carries the compiler output."""


class ArgumentError(TVMError, ValueError):
    """A call argument does not match the built function (ndim, shape, dtype, device)."""


class DeviceError(TVMError):
    """The requested device or backend is not available."""


class DeviceLimitError(DeviceError):
    """A kernel refused before it runs (or whose launch failed) because it exceeds a limit of the
    device: threads a block, grid size, shared memory a block, local memory a thread or the memory its
    local frames need. A clear refusal of the schedule, not a fault of the compiler; the message names
    the kernel, the limit and what to change."""


class PackedFuncError(TVMError, ValueError):
    """A packed function is missing (TVM raises ValueError there), registered twice, or raised while
    a module called it."""


#: where the supported and unsupported parts of TVM's API are listed
COMPAT_PAGE = "docs/TVM_COMPAT.md"


def out_of_scope(what: str, instead: str = "") -> str:
    """The message for a TVM feature that is deliberately not part of the compiler core."""
    tail = f" {instead}" if instead else ""
    return (f"{what} is outside the scope of kernels, kbench's TVM-compatible TE compiler, which covers "
            f"TVM's tensor-expression layer (te, tir, runtime, target, testing) only.{tail} See "
            f"{COMPAT_PAGE} for what is supported.")
