"""The ``T`` namespace of TVMScript: ``from kernels.script import tir as T``.

``@T.prim_func`` parses a function's Python source into a :class:`~kernels.tir.function.PrimFunc`.
Inside such a function the names below are syntax (``T.grid``, ``T.block``, ``T.axis.remap``,
``T.init`` ...) that the parser interprets; they are not executed. Outside a prim_func the
expression helpers (``T.float32(0)``, ``T.max(a, b)``, ``T.exp(x)``, ``T.Buffer((n,), "float32")``)
work as ordinary functions that build IR, and the purely syntactic ones raise an error saying so.
"""

from __future__ import annotations

import builtins as _builtins
from typing import Any, Callable

from .. import tir as _tir
from ..errors import TVMError
from ..te import intrin as _intrin
from ..tir import dtype as _dt
from ..tir.expr import Buffer as _Buffer
from ..tir.expr import Call as _Call
from ..tir.expr import Max as _Max
from ..tir.expr import Min as _Min
from ..tir.expr import Op as _Op
from ..tir.expr import Select as _Select
from ..tir.expr import Var as _Var
from ..tir.expr import _unify
from ..tir.expr import cast as _cast
from ..tir.expr import const as _const
from ..tir.expr import convert as _convert
from .intrinsics import INTRINSICS
from .intrinsics import if_then_else as _if_then_else


def _wrap(name: str, f: Callable) -> Callable:
    """A TVMScript-marked wrapper of a function defined elsewhere (the original stays untouched)."""

    def fn(*args, **kwargs):
        return f(*args, **kwargs)

    fn.__doc__ = f.__doc__
    return _mark(name, fn)


def _mark(name: str, fn: Callable) -> Callable:
    fn.__tvmscript__ = name
    fn.__name__ = name
    fn.__qualname__ = f"T.{name}"
    return fn


def _syntax(name: str, doc: str) -> Callable:
    def fn(*args, **kwargs):
        raise TVMError(f"T.{name} is TVMScript syntax: use it inside a function decorated with "
                       "@T.prim_func")

    fn.__doc__ = doc
    return _mark(name, fn)


# -- functions and modules ----------------------------------------------------------------------------


def prim_func(func=None, **kwargs):
    """Parse a Python function written in TVMScript into a :class:`~kernels.tir.function.PrimFunc`.

    Names the script uses resolve to its own variables, then to the local variables of the code that
    defines it (a factory function's sizes, a class body), then to the function's globals.
    """
    from .parser import caller_locals, parse_function

    if func is None:
        outer = caller_locals(1)
        return lambda f: parse_function(f, outer)
    return parse_function(func, caller_locals(1))


prim_func.__tvmscript__ = "prim_func"


class _BufferMeta(type):
    def __getitem__(cls, item):
        if not isinstance(item, tuple):
            item = (item,)
        return Buffer(*item)


class Buffer(metaclass=_BufferMeta):
    """``T.Buffer[(1024, 1024), "float32"]`` / ``T.Buffer((n,), "float32")``: a buffer parameter type.

    Called outside a prim_func it makes a row-major :class:`kernels.tir.Buffer`.
    """

    __tvmscript__ = "Buffer"

    def __new__(cls, shape, dtype: str = "float32", name: str = "buffer", scope: str = "global", *args,
                **kwargs):
        from ..tir.region import row_major_strides

        if isinstance(shape, (int, _tir.PrimExpr)):
            shape = (shape,)
        shp = tuple(_convert(s) for s in shape)
        return _Buffer(name, _dt.normalize_vector(dtype), shp, scope, row_major_strides(shp))


def match_buffer(*args, **kwargs):
    raise TVMError("T.match_buffer is TVMScript syntax: use it inside a function decorated with @T.prim_func")


match_buffer = _mark("match_buffer", match_buffer)


def handle(*args, **kwargs):
    """The type of a handle parameter (matched to a buffer by ``T.match_buffer``)."""
    raise TVMError("T.handle is a parameter annotation of TVMScript functions")


handle = _mark("handle", handle)


# -- typed constants: T.float32(0), T.int64(5); T.int32() is a new variable --------------------------


def _typed(dtype: str) -> Callable:
    def fn(value=None, *args, **kwargs):
        if value is None:
            return _Var(kwargs.get("name", "v"), dtype)
        if isinstance(value, str):
            return _const(float(value), dtype)
        if isinstance(value, _tir.PrimExpr):
            return _cast(value, dtype)
        return _const(value, dtype)

    fn.__doc__ = f"A {dtype} constant (``T.{dtype}(0)``), a cast of an expression, or with no " \
                 f"argument a new {dtype} variable."
    return _mark(dtype, fn)


float16 = _typed("float16")
float32 = _typed("float32")
float64 = _typed("float64")
int8 = _typed("int8")
int16 = _typed("int16")
int32 = _typed("int32")
int64 = _typed("int64")
uint8 = _typed("uint8")
uint16 = _typed("uint16")
uint32 = _typed("uint32")
uint64 = _typed("uint64")
boolean = _mark("bool", lambda value=None, *a, **k: _Var("v", "bool") if value is None
                else _const(_builtins.bool(value) if not isinstance(value, _tir.PrimExpr) else value, "bool"))
globals()["bool"] = boolean


def var(dtype: str = "int32", name: str = "v"):
    """A new scalar variable (``n = T.var("int32")`` declares a symbolic size)."""
    return _Var(name, _dt.normalize(dtype))


var = _mark("var", var)


# -- expression helpers --------------------------------------------------------------------------------


def max(a, b):  # noqa: A001 - TVMScript's name
    """``T.max(a, b)``: the larger of two values."""
    a, b = _unify(a, b)
    return _Max(a, b)


def min(a, b):  # noqa: A001
    """``T.min(a, b)``: the smaller of two values."""
    a, b = _unify(a, b)
    return _Min(a, b)


max = _mark("max", max)
min = _mark("min", min)


def Select(condition, true_value, false_value):  # noqa: N802 - TVMScript's name
    """``T.Select(c, a, b)``: ``a`` where ``c`` holds, else ``b`` (both sides evaluated)."""
    t, f = _unify(true_value, false_value)
    return _Select(_convert(condition), t, f)


Select = _mark("Select", Select)


if_then_else = _mark("if_then_else", _if_then_else)


def Cast(dtype: str, value):  # noqa: N802
    """``T.Cast("float32", x)``."""
    return _cast(value, dtype)


Cast = _mark("Cast", Cast)
cast = _mark("cast", lambda value, dtype: _cast(value, dtype))


def floordiv(a, b):
    a, b = _unify(a, b)
    return _tir.FloorDiv(a, b)


def floormod(a, b):
    a, b = _unify(a, b)
    return _tir.FloorMod(a, b)


def truncdiv(a, b):
    a, b = _unify(a, b)
    return _tir.Div(a, b)


def truncmod(a, b):
    a, b = _unify(a, b)
    return _tir.Mod(a, b)


def ceildiv(a, b):
    a, b = _unify(a, b)
    return _tir.FloorDiv(a + b - 1, b)


floordiv = _mark("floordiv", floordiv)
floormod = _mark("floormod", floormod)
truncdiv = _mark("truncdiv", truncdiv)
truncmod = _mark("truncmod", truncmod)
ceildiv = _mark("ceildiv", ceildiv)
likely = _wrap("likely", _tir.likely)
call_extern = _wrap("call_extern", _tir.call_extern)
call_pure_extern = _wrap("call_pure_extern", _tir.call_pure_extern)
max_value = _wrap("max_value", _tir.max_value)
min_value = _wrap("min_value", _tir.min_value)

for _name in ("exp", "exp2", "exp10", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "floor",
              "ceil", "round", "trunc", "sin", "cos", "erf", "abs", "pow", "power"):
    globals()[_name] = _wrap(_name, getattr(_intrin, _name))
del _name


# -- vectors and TVM's intrinsics (T.ramp, T.broadcast, T.tvm_fill_fragment(..., dtype="handle")) ---------


def ramp(base, stride, lanes: int):
    """``T.ramp(base, stride, lanes)``: the integer vector ``base + k * stride``, ``k < lanes``."""
    base, stride = _unify(base, stride)
    return _tir.Ramp(base, stride, int(lanes))


def broadcast(value, lanes: int):
    """``T.broadcast(value, lanes)``: ``value`` in every lane (``T.broadcast(T.float32(0), 4)``)."""
    return _tir.Broadcast(_convert(value), int(lanes))


ramp = _mark("ramp", ramp)
broadcast = _mark("broadcast", broadcast)


def type_annotation(dtype: str = "handle"):
    """``T.type_annotation(dtype="float16")``: a value that only carries a type (TVM's argument of
    ``tvm_access_ptr``)."""
    return _Call(_dt.normalize(dtype), _Op.get("tir.type_annotation"), ())


type_annotation = _mark("type_annotation", type_annotation)

def _intrinsic(name: str) -> Callable:
    def fn(*args, dtype: str = "handle"):
        conv = tuple(_tir.StringImm(a) if isinstance(a, str) else _convert(a) for a in args)
        return _Call(_dt.normalize_vector(dtype), _Op.get(f"tir.{name}"), conv)

    fn.__doc__ = f"``T.{name}(..., dtype=...)``: TVM's intrinsic ``tir.{name}``."
    return _mark(name, fn)


for _name in INTRINSICS:
    globals()[_name] = _intrinsic(_name)
del _name


def evaluate(value):
    raise TVMError("T.evaluate is TVMScript syntax: use it inside a function decorated with @T.prim_func")


evaluate = _mark("evaluate", evaluate)


# -- syntax: loops, blocks, axes -----------------------------------------------------------------------

grid = _syntax("grid", "``for i, j in T.grid(m, n)``: nested serial loops.")
serial = _syntax("serial", "``for i in T.serial(n)`` or ``T.serial(start, stop)``: a serial loop.")
parallel = _syntax("parallel", "``for i in T.parallel(n)``: a loop run by CPU threads.")
vectorized = _syntax("vectorized", "``for i in T.vectorized(n)``: a vectorized loop.")
unroll = _syntax("unroll", "``for i in T.unroll(n)``: an unrolled loop.")
thread_binding = _syntax("thread_binding", '``for i in T.thread_binding(n, thread="threadIdx.x")``.')
block = _syntax("block", '``with T.block("name"):`` a block.')
init = _syntax("init", "``with T.init():`` the initialisation of a reduction block.")
where = _syntax("where", "``T.where(cond)``: the predicate of a block.")
reads = _syntax("reads", "``T.reads(A[vi, 0:16], ...)``: the regions a block reads.")
writes = _syntax("writes", "``T.writes(C[vi, vj])``: the regions a block writes.")
block_attr = _syntax("block_attr", "``T.block_attr({...})``: annotations of a block.")
alloc_buffer = _syntax("alloc_buffer", '``X = T.alloc_buffer((n,), "float32", scope="shared")``.')
func_attr = _syntax("func_attr", '``T.func_attr({"global_symbol": "main"})``: function attributes.')


load = _syntax("load", '``T.load("float32", A.data, i)``: element ``i`` of the memory at a data pointer '
                       "(TVM's flat Load).")
store = _syntax("store", "``T.store(A.data, i, value)``: store into the memory at a data pointer "
                         "(TVM's flat Store).")


comm_reducer = _syntax("comm_reducer", "``T.comm_reducer(lambda x, y: x + y, [T.float32(0)])``: a "
                                       "commutative reducer.")
attr = _syntax("attr", '``T.attr(node, "key", value)``: an attribute of the statements after it (or '
                       "``with T.attr(...):``).")
launch_thread = _syntax("launch_thread", "``T.launch_thread(tx, 32)``: run what follows on a thread "
                                         "index declared by ``tx = T.env_thread(\"threadIdx.x\")``.")
env_thread = _syntax("env_thread", '``tx = T.env_thread("threadIdx.x")``: a thread index variable.')
realize = _syntax("realize", '``T.realize(A[0:16, 0:16], "global")``: the region of a buffer the '
                             "statements after it use.")
allocate = _syntax("allocate", '``buf = T.allocate([n], "float32", "local")``: memory for the statements '
                               "after it; ``buf`` is its data pointer.")
buffer_decl = _syntax("buffer_decl", "``X = T.buffer_decl(shape, dtype, ...)``: declare a buffer.")
buffer_var = _syntax("buffer_var", '``p = T.buffer_var("float32", "global")``: a data pointer variable.')
Assert = _syntax("Assert", '``with T.Assert(cond, "message"):`` an assert over the statements in it.')
let = _syntax("let", "``with T.let(v, value):`` bind a declared variable.")


class _Axis:
    """``T.axis``: block variables (``spatial``, ``reduce``, ``scan``, ``opaque``, ``remap``)."""

    spatial = _syntax("axis.spatial", "``vi = T.axis.spatial(extent, binding)``: a spatial block var.")
    reduce = _syntax("axis.reduce", "``vk = T.axis.reduce(extent, binding)``: a reduction block var.")
    scan = _syntax("axis.scan", "``T.axis.scan(extent, binding)``: an ordered block var.")
    opaque = _syntax("axis.opaque", "``T.axis.opaque(extent, binding)``: an opaque block var.")
    remap = _syntax("axis.remap", '``vi, vk = T.axis.remap("SR", [i, k])``: block vars bound to loops.')
    S = _syntax("axis.S", "alias of ``T.axis.spatial``")
    R = _syntax("axis.R", "alias of ``T.axis.reduce``")


axis = _Axis()

__all__ = [n for n in dir() if not n.startswith("_")]


def __getattr__(name: str) -> Any:
    raise AttributeError(f"TVMScript has no T.{name} in kernels.script.tir")
