"""The math and bit functions of ``tvm.tir`` (re-exported by ``te``) and ``tir.call_packed``.

Each function builds a call of an intrinsic (``tir.exp``, ``tir.popcount``...) that lowering turns
into the target's function (:mod:`kernels.lower.intrin`: C99 ``<math.h>`` / GCC builtins on ``c``,
the CUDA math API, OpenCL built-ins). Floating-point functions require a float argument and give
its type; ``float16`` is computed in ``float32``. As in TVM:

* ``isnan``/``isinf``/``isfinite`` give ``bool`` (constant for integers: False, False, True);
* ``popcount(x)`` has ``x``'s integer type; ``clz(x)`` gives ``int32`` and ``clz(0)`` is the bit
  width;
* ``round`` rounds halves away from zero (C ``round``), ``nearbyint`` to even;
* ``fmod`` is C's ``fmod`` (the sign of the dividend); ``truncmod``/``floormod`` are the integer
  forms.
"""

from __future__ import annotations

from typing import Callable

from ..errors import TVMError
from . import dtype as dt
from .expr import (
    And,
    Call,
    Cast,
    Not,
    Op,
    PrimExpr,
    Select,
    StringImm,
    Var,
    _unify,
    const,
    convert,
)


def _float_arg(name: str, x) -> PrimExpr:
    x = convert(x)
    if not dt.is_float(x.dtype):
        raise TVMError(f"te.{name}: argument {x} has type {x.dtype}; {name} needs a float "
                       "(use .astype('float32'))")
    return x


def _unary(name: str, op_name: str = "") -> Callable:
    op_name = op_name or name

    def f(x, span=None) -> PrimExpr:
        x = _float_arg(name, x)
        return Call(x.dtype, Op.get(f"tir.{op_name}"), (x,))

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = (f"Elementwise ``{name}`` of a float expression (the intrinsic ``tir.{op_name}``, "
                 "lowered per target).")
    return f


def _binary(name: str) -> Callable:
    def f(x, y, span=None) -> PrimExpr:
        x, y = _unify(x, y)
        if not dt.is_float(x.dtype):
            raise TVMError(f"{name}: arguments {x} and {y} have type {x.dtype}; {name} needs floats "
                           "(use .astype('float32'))")
        return Call(x.dtype, Op.get(f"tir.{name}"), (x, y))

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Elementwise ``{name}(x, y)`` of floats (the intrinsic ``tir.{name}``)."
    return f


exp = _unary("exp")
exp2 = _unary("exp2")
exp10 = _unary("exp10")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
trunc = _unary("trunc")
nearbyint = _unary("nearbyint")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
sinh = _unary("sinh")
cosh = _unary("cosh")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
erf = _unary("erf")

fmod = _binary("fmod")
atan2 = _binary("atan2")
hypot = _binary("hypot")
copysign = _binary("copysign")
nextafter = _binary("nextafter")


def power(x, y, span=None) -> PrimExpr:
    """``x ** y`` for floats (``y`` converted to ``x``'s type)."""
    x = _float_arg("power", x)
    y = convert(y, x.dtype)
    if y.dtype != x.dtype:
        y = Cast(x.dtype, y)
    return Call(x.dtype, Op.get("tir.pow"), (x, y))


pow = power


def ldexp(x, y, span=None) -> PrimExpr:
    """``x * 2**y`` (``x`` a float, ``y`` an integer)."""
    x = _float_arg("ldexp", x)
    y = convert(y)
    if not dt.is_integer(y.dtype):
        raise TVMError(f"ldexp: exponent {y} has type {y.dtype}; it must be an integer")
    if y.dtype != "int32":
        y = Cast("int32", y)
    return Call(x.dtype, Op.get("tir.ldexp"), (x, y))


def abs(x, span=None) -> PrimExpr:
    """Absolute value: ``fabs`` for floats, ``x < 0 ? -x : x`` for signed integers."""
    x = convert(x)
    if dt.is_float(x.dtype):
        return Call(x.dtype, Op.get("tir.fabs"), (x,))
    if dt.is_uint(x.dtype) or x.dtype == "bool":
        return x
    return Select(x < const(0, x.dtype), const(0, x.dtype) - x, x)


def _int_arg(name: str, x) -> PrimExpr:
    x = convert(x)
    if not dt.is_integer(x.dtype) or x.dtype in dt.STORAGE_ONLY:
        raise TVMError(f"{name}: argument {x} has type {x.dtype}; {name} needs an integer of 8 to 64 bits")
    return x


def popcount(x, span=None) -> PrimExpr:
    """The number of set bits of integer ``x`` (of ``x``'s type)."""
    x = _int_arg("popcount", x)
    return Call(x.dtype, Op.get("tir.popcount"), (x,))


def clz(x, span=None) -> PrimExpr:
    """The number of leading zero bits of integer ``x`` (``int32``; ``clz(0)`` is the bit width)."""
    x = _int_arg("clz", x)
    return Call("int32", Op.get("tir.clz"), (x,))


def isnan(x, span=None) -> PrimExpr:
    """Whether ``x`` is NaN (``bool``; always False for integers)."""
    x = convert(x)
    if not dt.is_float(x.dtype):
        return const(False)
    return Call("bool", Op.get("tir.isnan"), (x,))


def isinf(x, span=None) -> PrimExpr:
    """Whether ``x`` is +-infinity (``bool``; always False for integers)."""
    x = convert(x)
    if not dt.is_float(x.dtype):
        return const(False)
    return Call("bool", Op.get("tir.isinf"), (x,))


def isfinite(x, span=None) -> PrimExpr:
    """Whether ``x`` is neither infinite nor NaN (``bool``; always True for integers)."""
    x = convert(x)
    if not dt.is_float(x.dtype):
        return const(True)
    return And(Not(isinf(x)), Not(isnan(x)))


def call_packed(*args, span=None) -> Call:
    """Call the registered packed function ``args[0]`` with ``args[1:]`` (TVM's ``tir.call_packed``).

    Buffers (``te.extern``'s ins/outs, ``decl_buffer``) reach the function as NDArrays viewing the
    buffer's memory; integer and float expressions of the shape variables as Python numbers;
    strings as str. The function is looked up by name when the built module is called
    (``tvm.register_func``), so it may be registered after building.
    """
    if not args or not isinstance(args[0], (str, StringImm)):
        raise TVMError("call_packed: the first argument must be the registered function's name (a str), "
                       f"got {args[0] if args else 'nothing'!r}")
    name = args[0] if isinstance(args[0], StringImm) else StringImm(args[0])
    out = [name]
    for k, a in enumerate(args[1:], start=1):
        out.append(_packed_arg(a, k, name.value))
    return Call("int32", Op.get("tir.tvm_call_packed"), tuple(out))


def _packed_arg(a, k: int, fname: str) -> PrimExpr:
    from .expr import Buffer

    if isinstance(a, Buffer):
        return stack_make_array(a)
    if hasattr(a, "buffer") and isinstance(getattr(a, "buffer"), Buffer) and hasattr(a, "asobject"):
        return stack_make_array(a.buffer)  # an ir_builder pointer
    if isinstance(a, str):
        return StringImm(a)
    if hasattr(a, "op") and hasattr(a, "value_index") and not isinstance(a, PrimExpr):
        raise TVMError(f"call_packed({fname!r}): argument {k} is the tensor {getattr(a, 'name', a)}; pass "
                       "a buffer (the ins/outs te.extern gives fcompute), not a tensor")
    try:
        return convert(a)
    except TVMError:
        raise TVMError(f"call_packed({fname!r}): argument {k} ({a!r}) is neither a buffer, an expression, "
                       "a number nor a string") from None


def stack_make_array(buf) -> Call:
    """The DLTensor-like view of ``buf`` a packed call receives (``tir.tvm_stack_make_array``).

    Arguments: data, dtype (a string), elem_offset, ndim, has_strides, shape..., strides....
    """
    strides = tuple(buf.strides)
    elem_offset = getattr(buf, "elem_offset", const(0))
    head = (buf.data, StringImm(buf.dtype), elem_offset, const(len(buf.shape)), const(1 if strides else 0))
    return Call("handle", Op.get("tir.tvm_stack_make_array"), head + tuple(buf.shape) + strides)


def call_llvm_intrin(*args, **kwargs):
    """Not supported: kernels generates C, CUDA C and OpenCL C, never LLVM IR."""
    raise TVMError("tir.call_llvm_intrin / call_llvm_pure_intrin are not supported: kernels emits C-family "
                   "source, not LLVM IR; use tir.call_pure_extern with a C function name "
                   "(see docs/TVM_COMPAT.md)")


call_llvm_pure_intrin = call_llvm_intrin

__all__ = [
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "floor",
    "ceil", "round", "trunc", "nearbyint", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan",
    "asinh", "acosh", "atanh", "erf", "fmod", "atan2", "hypot", "copysign", "nextafter", "power", "pow",
    "ldexp", "abs", "popcount", "clz", "isnan", "isinf", "isfinite", "call_packed", "stack_make_array",
    "call_llvm_intrin", "call_llvm_pure_intrin", "Var",
]
