"""``tvm.error``: the error classes under TVM's module name (they are defined in kernels.errors)."""

from __future__ import annotations

from .errors import ArgumentError, BuildError, DeviceError, LoweringError, ScheduleError, TVMError

__all__ = ["TVMError", "ScheduleError", "LoweringError", "BuildError", "ArgumentError", "DeviceError"]
