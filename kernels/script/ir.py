"""The ``I`` namespace of TVMScript (``from kernels.script import ir as I``): ``@I.ir_module``."""

from __future__ import annotations

import sys as _sys

from .parser import DEFAULT_NAMES as _DEFAULT_NAMES
from .parser import ir_module

__all__ = ["ir_module"]

_DEFAULT_NAMES["I"] = _sys.modules[__name__]  # the I every script sees (the parser imports no namespace)
