"""TVMScript: TensorIR written as Python (``from kernels.script import tir as T``; TVM 0.2x's
``from kernels.script import tirx as T`` is the same namespace with its new names).

``@tvm.script.ir_module`` turns a class of ``@T.prim_func`` methods into an
:class:`~kernels.tir.function.IRModule`; ``from_source(text)`` parses printed TVMScript back.
"""

from __future__ import annotations

from . import ir, tir, tirx
from .parser import TVMScriptError, from_source, ir_module
from .printer import expr_script, stmt_script

__all__ = ["ir", "tir", "tirx", "ir_module", "from_source", "TVMScriptError", "expr_script", "stmt_script"]
