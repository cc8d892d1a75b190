"""TVM's ModularSet on the loop IR's integer operations: ``modular_set(e)`` is ``(coeff, base)`` with
``e == coeff * k + base`` for some integer ``k`` whatever the variables' values.

The simplifier uses it, and so do the queries of :mod:`kernels.tir.modular` (``is_multiple``, which
simplifies with the simplifier): it sits below both, and :mod:`kernels.tir.modular` re-exports it.
"""

from __future__ import annotations

import math
from typing import Tuple

from . import dtype as dt
from .expr import Add, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Select, Sub

Modular = Tuple[int, int]  # (coeff, base): the value is coeff * k + base
UNKNOWN: Modular = (1, 0)


def _norm(coeff: int, base: int) -> Modular:
    coeff = abs(coeff)
    return (coeff, base % coeff) if coeff else (0, base)


def _union(a: Modular, b: Modular) -> Modular:
    """A value that is one of two sets: congruent modulo what both share."""
    c = math.gcd(math.gcd(a[0], b[0]), abs(a[1] - b[1]))
    return _norm(c, a[1])


def modular_set(e: PrimExpr) -> Modular:
    """``(coeff, base)`` with ``e == coeff * k + base`` for some integer ``k`` (see the module doc)."""
    if isinstance(e, IntImm):
        return (0, int(e.value))
    if not dt.is_integer(e.dtype) or dt.lanes(e.dtype) != 1:
        return UNKNOWN
    if isinstance(e, (Add, Sub)):
        a, b = modular_set(e.a), modular_set(e.b)
        base = a[1] + b[1] if isinstance(e, Add) else a[1] - b[1]
        return _norm(math.gcd(a[0], b[0]), base)
    if isinstance(e, Mul):
        a, b = modular_set(e.a), modular_set(e.b)
        # (ca x + ra)(cb y + rb) = ca cb xy + ca rb x + cb ra y + ra rb
        c = math.gcd(a[0] * b[0], math.gcd(a[0] * b[1], b[0] * a[1]))
        return _norm(c, a[1] * b[1])
    if isinstance(e, FloorMod) and isinstance(e.b, IntImm) and e.b.value > 0:
        a, m = modular_set(e.a), e.b.value
        if a[0] == 0:
            return (0, a[1] % m)
        # a - m * q: congruent to a's base modulo what a's step and m share
        return _norm(math.gcd(a[0], m), a[1])
    if isinstance(e, FloorDiv) and isinstance(e.b, IntImm) and e.b.value > 0:
        a, m = modular_set(e.a), e.b.value
        if a[0] == 0:
            return (0, a[1] // m)
        if a[0] % m == 0:  # (c k + r) // m == (c / m) k + r // m exactly
            return _norm(a[0] // m, a[1] // m)
        return UNKNOWN
    if isinstance(e, (Min, Max)):
        return _union(modular_set(e.a), modular_set(e.b))
    if isinstance(e, Select):
        return _union(modular_set(e.true_value), modular_set(e.false_value))
    if isinstance(e, Cast) and dt.is_integer(e.value.dtype):
        return modular_set(e.value)
    return UNKNOWN
