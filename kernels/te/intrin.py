"""Math intrinsics (``te.exp`` ...): calls that lowering rules turn into target functions."""

from __future__ import annotations

from ..errors import TVMError
from ..tir import dtype as dt
from ..tir.expr import Call, Op, PrimExpr, Select, const, convert


def _unary(name: str):
    def f(x) -> PrimExpr:
        x = convert(x)
        if not dt.is_float(x.dtype):
            raise TVMError(f"te.{name}: argument {x} has type {x.dtype}; {name} needs a float "
                           "(use .astype('float32'))")
        return Call(x.dtype, Op.get(f"tir.{name}"), (x,))

    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (lowered per target, e.g. CUDA float32 -> fast-math builtins)."
    return f


exp = _unary("exp")
exp2 = _unary("exp2")
exp10 = _unary("exp10")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
trunc = _unary("trunc")
sin = _unary("sin")
cos = _unary("cos")
erf = _unary("erf")


def power(x, y) -> PrimExpr:
    x = convert(x)
    y = convert(y, x.dtype)
    if not dt.is_float(x.dtype):
        raise TVMError(f"te.power: base {x} has type {x.dtype}; power needs floats")
    return Call(x.dtype, Op.get("tir.pow"), (x, y))


pow = power


def abs(x) -> PrimExpr:
    x = convert(x)
    if dt.is_float(x.dtype):
        return Call(x.dtype, Op.get("tir.fabs"), (x,))
    if dt.is_uint(x.dtype) or x.dtype == "bool":
        return x
    return Select(x < const(0, x.dtype), const(0, x.dtype) - x, x)


def if_then_else(cond, t, f) -> PrimExpr:
    from ..tir import if_then_else as _ite

    return _ite(cond, t, f)
