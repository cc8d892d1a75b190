"""``from kernels.script import tirx as T``: TVM 0.2x's TVMScript namespace.

Everything of :mod:`kernels.script.tir` under its own name (the same objects, so the parser reads
them alike), plus TVM 0.2x's names: ``T.sblock`` (``T.block``), ``T.sblock_attr``
(``T.block_attr``), ``T.sblock_alloc_buffer`` (``T.alloc_buffer``) and ``@T.prim_func(s_tir=True)``.
"""

from __future__ import annotations

import builtins as _builtins
import sys as _sys
from typing import Any

from . import tir as _T
from .parser import DEFAULT_NAMES as _DEFAULT_NAMES
from .tir import *  # noqa: F401,F403  (the same objects: the parser knows them by their marks)

sblock = _T.block
sblock_attr = _T.block_attr
sblock_alloc_buffer = _T.alloc_buffer


def prim_func(func=None, is_private: bool = False, s_tir: bool = False, persistent: bool = False, *,
              private: Any = None, check_well_formed: bool = True):
    """``@T.prim_func`` or ``@T.prim_func(s_tir=True)``: parse the function into a PrimFunc.

    kbench's TensorIR always has blocks (TVM 0.2x's S-TIR), so ``s_tir`` makes no difference; the
    other flags are accepted as TVM 0.2x accepts them. ``persistent=True`` kernels are not supported.
    """
    from .parser import caller_locals, parse_function

    if persistent:
        from ..errors import TVMError

        raise TVMError("@T.prim_func(persistent=True): persistent kernels are not supported")
    if func is None or isinstance(func, bool):  # @T.prim_func(...) (TVM's first positional is is_private)
        outer = caller_locals(1)
        return lambda f: parse_function(f, outer)
    return parse_function(func, caller_locals(1))


prim_func.__tvmscript__ = "prim_func"


def __getattr__(name: str) -> Any:
    try:
        return getattr(_T, name)
    except AttributeError:
        raise AttributeError(f"module 'kernels.script.tirx' has no attribute {name!r}") from None


def __dir__() -> list:
    return sorted(set(globals()) | set(_builtins.dir(_T)))


_DEFAULT_NAMES["T"] = _sys.modules[__name__]  # the T every script sees (the parser imports no namespace)
