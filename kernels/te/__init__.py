"""Tensor expressions and schedules (``from kernels import te``)."""

from __future__ import annotations

from ..tir import max_value, min_value
from ..tir.expr import Var
from .intrin import (
    abs,
    ceil,
    cos,
    erf,
    exp,
    exp2,
    exp10,
    floor,
    if_then_else,
    log,
    log2,
    log10,
    pow,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
)
from .prim_func import create_prim_func
from .schedule import Schedule, Stage, create_schedule
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

__all__ = [
    "Var", "abs", "ceil", "cos", "erf", "exp", "exp2", "exp10", "floor", "if_then_else", "log", "log2",
    "log10", "pow", "power", "round", "rsqrt", "sigmoid", "sin", "sqrt", "tanh", "trunc", "Schedule",
    "Stage", "create_schedule", "CommReducer", "ComputeOp", "IterVar", "Operation", "PlaceholderOp",
    "Range", "Tensor", "comm_reducer", "compute", "max", "min", "placeholder", "reduce_axis", "size_var",
    "sum", "thread_axis", "var", "max_value", "min_value", "create_prim_func",
]
