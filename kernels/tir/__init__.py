"""The loop-nest IR: expressions, statements, simplifier and printer (``kernels.tir``)."""

from __future__ import annotations

from . import dtype as _dt
from .analysis import evaluate

# TensorIR: blocks, functions and modules of the script level, and their schedule
from .block import Block, BlockRealize, BufferRegion, IterVar, Range
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Buffer,
    BufferLoad,
    Call,
    CallEffectKind,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Op,
    Or,
    PrimExpr,
    ProducerLoad,
    Reduce,
    Select,
    StringImm,
    Sub,
    Var,
    cast,
    const,
    convert,
)
from .function import IRModule, PrimFunc
from .functor import rewrite, substitute
from .schedule import BlockRV, LoopRV, Schedule, ScheduleError, Trace
from .simplify import can_prove, simplify, structural_equal
from .stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    NoOp,
    SeqStmt,
    Stmt,
    ThreadIndex,
)
from .structural import assert_structural_equal
from .structural import structural_equal as structural_equal_ir


def call_pure_extern(dtype: str, func_name: str, *args) -> Call:
    """Call an external pure function by name (printed as ``func_name(args)``)."""
    return Call(_dt.normalize(dtype), Op.get("tir.call_pure_extern"),
                (StringImm(func_name),) + tuple(convert(a) for a in args))


def call_extern(dtype: str, func_name: str, *args) -> Call:
    return Call(_dt.normalize(dtype), Op.get("tir.call_extern"),
                (StringImm(func_name),) + tuple(convert(a) for a in args))


def call_intrin(dtype: str, op_name: str, *args) -> Call:
    """Call an intrinsic (``tir.exp``...); lowering rules turn it into target code."""
    name = op_name if isinstance(op_name, str) else op_name.name
    return Call(_dt.normalize(dtype), Op.get(name), tuple(convert(a) for a in args))


def likely(cond) -> Call:
    return Call("bool", Op.get("tir.likely"), (convert(cond),))


def all(*conds):
    out = None
    for c in conds:
        c = convert(c)
        out = c if out is None else And(out, c)
    return const(True) if out is None else out


def any(*conds):
    out = None
    for c in conds:
        c = convert(c)
        out = c if out is None else Or(out, c)
    return const(False) if out is None else out


def if_then_else(cond, t, f):
    t, f = convert(t), convert(f, getattr(t, "dtype", None))
    return Select(convert(cond), t, f)


def min_value(dtype: str):
    import numpy as np

    dtype = _dt.normalize(dtype)
    if _dt.is_float(dtype):
        return const(-np.inf if dtype != "float16" else -65504.0, dtype)
    return const(np.iinfo(dtype).min, dtype)


def max_value(dtype: str):
    import numpy as np

    dtype = _dt.normalize(dtype)
    if _dt.is_float(dtype):
        return const(np.inf if dtype != "float16" else 65504.0, dtype)
    return const(np.iinfo(dtype).max, dtype)


truncdiv = Div
truncmod = Mod
floordiv = FloorDiv
floormod = FloorMod


def indexdiv(a, b):
    return convert(a) // b


def indexmod(a, b):
    return convert(a) % b
