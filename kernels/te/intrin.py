"""Math intrinsics of ``te`` (``te.exp``, ``te.fmod``, ``te.popcount``...): those of :mod:`kernels.tir.op`.

Each builds a call that lowering turns into the target's function; see :mod:`kernels.tir.op` for
the semantics and :mod:`kernels.lower.intrin` for the per-target rules.
"""

from __future__ import annotations

from ..tir.op import (  # noqa: F401  (re-exported)
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


def if_then_else(cond, t, f):
    """``cond ? t : f`` (both branches may be evaluated)."""
    from ..tir import if_then_else as _ite

    return _ite(cond, t, f)
