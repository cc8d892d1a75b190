"""The loop-nest IR: expressions, statements, simplifier and printer (``kernels.tir``)."""

from __future__ import annotations

from ..errors import ScheduleError
from ..errors import TVMError as _TVMError
from . import dtype as _dt
from . import ir_builder
from . import printer  # the nodes print through it: it registers itself in print_hook when loaded
from .analysis import evaluate
from .buffer import READ, WRITE, Buffer, address_of, bind_buffers, decl_buffer, type_annotation

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
    Broadcast,
    BufferLoad,
    BufferView,
    Call,
    CallEffectKind,
    CommReducer,
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
    Ramp,
    Reduce,
    Select,
    StringImm,
    Sub,
    Var,
    cast,
    const,
    convert,
)
from . import stmt_functor
from .functor import rewrite, substitute
from .op import (
    abs,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    call_llvm_intrin,
    call_llvm_pure_intrin,
    call_packed,
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
from .function import IRModule, PrimFunc
# BlockRV, ExprRV, LoopRV, Schedule, ScheduleState, StmtSRef, Trace: the scheduler
# (kernels.tir.schedule, a floor above the IR) puts
# them here when it is loaded; kernels/__init__ loads it
from .simplify import can_prove, simplify, structural_equal
from .stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    BufferRealize,
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
    While,
)
from .structural import assert_structural_equal
from .structural import structural_equal as structural_equal_ir

#: TVM's names of the flat load and store nodes
Load = BufferLoad
Store = BufferStore


def _arg(a):
    """A call argument: strings become ``StringImm`` (as TVM converts them), the rest expressions."""
    return StringImm(a) if isinstance(a, str) else convert(a)


def call_pure_extern(dtype: str, func_name: str, *args) -> Call:
    """Call an external pure function by name (printed as ``func_name(args)``)."""
    return Call(_dt.normalize(dtype), Op.get("tir.call_pure_extern"),
                (StringImm(func_name),) + tuple(_arg(a) for a in args))


def call_extern(dtype: str, func_name: str, *args) -> Call:
    """Call an external function by name (it may have side effects)."""
    return Call(_dt.normalize(dtype), Op.get("tir.call_extern"),
                (StringImm(func_name),) + tuple(_arg(a) for a in args))


def call_intrin(dtype: str, op_name: str, *args) -> Call:
    """Call an intrinsic (``tir.exp``, ``tir.tvm_storage_sync``...); lowering rules turn it into
    target code."""
    name = op_name if isinstance(op_name, str) else op_name.name
    return Call(_dt.normalize(dtype), Op.get(name), tuple(_arg(a) for a in args))


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


#: the finite extremes TVM gives for float types (min_value/max_value are never infinite)
_FLOAT_MAX = {"float16": 65504.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def min_value(dtype: str, span=None):
    """The smallest finite value of ``dtype`` (``-3.4028235e38`` for float32, as in TVM)."""
    import numpy as np

    dtype = _dt.normalize(dtype)
    if _dt.is_float(dtype):
        return const(-_FLOAT_MAX[dtype], dtype)
    if dtype == "bool":
        return const(False)
    return const(int(np.iinfo(dtype).min), dtype)


def max_value(dtype: str, span=None):
    """The largest finite value of ``dtype`` (``3.4028235e38`` for float32, as in TVM)."""
    import numpy as np

    dtype = _dt.normalize(dtype)
    if _dt.is_float(dtype):
        return const(_FLOAT_MAX[dtype], dtype)
    if dtype == "bool":
        return const(True)
    return const(int(np.iinfo(dtype).max), dtype)


def _int_division(cls, name: str, a, b):
    from .expr import _unify

    a, b = _unify(a, b)
    if cls is Mod and not _dt.is_integer(a.dtype):
        raise _TVMError(f"{name}: arguments {a} and {b} have type {a.dtype}; {name} needs integers (use fmod "
                       "for floats)")
    out = cls(a, b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        if b.value == 0:
            raise _TVMError(f"{name}: division by zero ({a} by {b})")
        return simplify(out)
    return out


def truncdiv(a, b, span=None):
    """``a / b`` rounded toward zero (C division) for integers."""
    return _int_division(Div, "truncdiv", a, b)


def truncmod(a, b, span=None):
    """The remainder of :func:`truncdiv` (C ``%``: the sign of ``a``)."""
    return _int_division(Mod, "truncmod", a, b)


def floordiv(a, b, span=None):
    """``a / b`` rounded toward negative infinity."""
    return _int_division(FloorDiv, "floordiv", a, b)


def floormod(a, b, span=None):
    """The remainder of :func:`floordiv` (the sign of ``b``)."""
    return _int_division(FloorMod, "floormod", a, b)


def indexdiv(a, b, span=None):
    """Division of non-negative indices (a floor division)."""
    return floordiv(a, b)


def indexmod(a, b, span=None):
    """Remainder of non-negative indices (a floor modulus)."""
    return floormod(a, b)


def div(a, b, span=None):
    """``a / b``: true division for floats, truncating for integers (C semantics)."""
    from .expr import _div

    return _div(a, b)
