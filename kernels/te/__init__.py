"""Tensor expressions and schedules (``from kernels import te``)."""

from __future__ import annotations

from ..tir import (
    all,
    any,
    floordiv,
    floormod,
    indexdiv,
    indexmod,
    max_value,
    min_value,
    truncdiv,
    truncmod,
)
from ..tir import const as _tir_const
from ..tir.expr import Var
from .extern import ExternOp, extern
from .intrin import (
    abs,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    ceil,
    clz,
    copysign,
    cos,
    cosh,
    erf,
    exp,
    exp2,
    exp10,
    floor,
    fmod,
    hypot,
    if_then_else,
    isfinite,
    isinf,
    isnan,
    ldexp,
    log,
    log1p,
    log2,
    log10,
    nearbyint,
    nextafter,
    popcount,
    pow,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
)
from .scan import ScanOp, scan
from .prim_func import create_prim_func
from .schedule.compat import create_schedule
from .schedule.schedule import Schedule, Stage
from .tensor import (
    CommReducer,
    ComputeOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Range,
    Tensor,
    comm_reducer,
    compute,
    max,
    min,
    placeholder,
    reduce_axis,
    size_var,
    sum,
    thread_axis,
    var,
)


def const(value, dtype: str = "int32", span=None):
    """A constant of ``dtype`` (``int32`` unless given, as ``te.const`` is in TVM)."""
    return _tir_const(value, dtype)


def div(a, b, span=None):
    """``a / b``: true division for floats, truncating for integers (C semantics)."""
    from ..tir.expr import _div

    return _div(a, b)


__all__ = [
    "Var", "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "clz", "copysign",
    "cos", "cosh", "erf", "exp", "exp2", "exp10", "floor", "fmod", "hypot", "if_then_else", "isfinite",
    "isinf", "isnan", "ldexp", "log", "log1p", "log2", "log10", "nearbyint", "nextafter", "popcount", "pow",
    "power", "round", "rsqrt", "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "Schedule", "Stage",
    "create_schedule", "CommReducer", "ComputeOp", "ExternOp", "IterVar", "Operation", "PlaceholderOp",
    "Range", "Tensor", "comm_reducer", "compute", "extern", "max", "min", "placeholder", "reduce_axis",
    "size_var", "sum", "thread_axis", "var", "max_value", "min_value", "all", "any", "const", "div",
    "floordiv", "floormod", "indexdiv", "indexmod", "truncdiv", "truncmod",
    "scan", "ScanOp",
    "create_prim_func",
]


def __getattr__(name: str):
    """``te.hybrid`` (hybrid script) raises an error naming the scope rule."""
    from ..scope import message

    msg = message(f"te.{name}")
    if msg is not None:
        raise AttributeError(msg)
    raise AttributeError(f"module 'kernels.te' has no attribute {name!r}")
