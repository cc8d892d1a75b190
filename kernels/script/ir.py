"""The ``I`` namespace of TVMScript (``from kernels.script import ir as I``): ``@I.ir_module``."""

from __future__ import annotations

from .parser import ir_module

__all__ = ["ir_module"]
