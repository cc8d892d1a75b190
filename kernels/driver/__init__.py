"""``tvm.driver``: the build entry points under TVM's module name."""

from __future__ import annotations

from . import build_module
from .build_module import build, lower, schedule_to_module

__all__ = ["build", "lower", "schedule_to_module", "build_module"]
