"""Evaluation of integer expressions at run time (launch sizes, derived shapes)."""

from __future__ import annotations

import math
from typing import Mapping

from ..errors import TVMError
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Call,
    Cast,
    Div,
    EqualOp,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    NotEqualOp,
    Or,
    PrimExpr,
    Select,
    Sub,
    Var,
)


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_BIN = {
    Add: lambda a, b: a + b,
    Sub: lambda a, b: a - b,
    Mul: lambda a, b: a * b,
    FloorDiv: lambda a, b: a // b,
    FloorMod: lambda a, b: a % b,
    Div: lambda a, b: _tdiv(a, b) if isinstance(a, int) and isinstance(b, int) else a / b,
    Mod: lambda a, b: a - _tdiv(a, b) * b if isinstance(a, int) and isinstance(b, int) else math.fmod(a, b),
    Min: min,
    Max: max,
    EQ: lambda a, b: a == b,
    NE: lambda a, b: a != b,
    LT: lambda a, b: a < b,
    LE: lambda a, b: a <= b,
    GT: lambda a, b: a > b,
    GE: lambda a, b: a >= b,
    And: lambda a, b: bool(a) and bool(b),
    Or: lambda a, b: bool(a) or bool(b),
}
_BIN[EqualOp], _BIN[NotEqualOp] = _BIN[EQ], _BIN[NE]


def evaluate(e: PrimExpr, env: Mapping[str, int]):
    """Evaluate ``e`` with variables looked up by name in ``env``."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, FloatImm):
        return e.value
    if isinstance(e, Var):
        try:
            return env[e.name]
        except KeyError:
            raise TVMError(f"variable {e.name} has no value (known: {', '.join(sorted(env))})") from None
    f = _BIN.get(type(e))
    if f is not None:
        return f(evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, Not):
        return not evaluate(e.a, env)
    if isinstance(e, Select):
        return evaluate(e.true_value if evaluate(e.condition, env) else e.false_value, env)
    if isinstance(e, Cast):
        v = evaluate(e.value, env)
        return float(v) if e.dtype.startswith("float") else int(v)
    if isinstance(e, Call) and e.op.name == "tir.likely":
        return evaluate(e.args[0], env)
    raise TVMError(f"cannot evaluate {e} on the host")
