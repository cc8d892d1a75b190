"""Modular-set analysis of integer expressions: what every value of ``e`` is congruent to.

``modular_set(e)`` returns ``(coeff, base)`` such that ``e == coeff * k + base`` for some integer k
whatever the variables' values (``coeff == 0``: ``e`` is the constant ``base``; ``coeff == 1``:
nothing is known). It is TVM's ModularSet on the operations the loop IR has. The vectorizer and the
printers use it to prove that a vector access starts at a multiple of its lane count (an aligned
``float4`` load) and that a ``floordiv``/``floormod`` of a ramp stays within one block.

Facts widen what can be proven: inside ``if (floormod(E, M) == 0)`` the printer knows ``E`` is a
multiple of ``M``; :func:`is_multiple` uses such facts for expressions that differ from ``E`` by a
multiple.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Tuple

from . import dtype as dt
from .expr import (
    Add,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Select,
    Sub,
)

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


def _divides(m: Modular, n: int) -> bool:
    return m[0] % n == 0 and m[1] % n == 0


def is_multiple(e: PrimExpr, n: int, facts: Iterable[Tuple[PrimExpr, int]] = ()) -> bool:
    """Whether ``e`` is provably a multiple of ``n``; ``facts`` are known ``(E, M)``: M divides E."""
    if n <= 1 or _divides(modular_set(e), n):
        return True
    # simplify imports this module (vector floordiv rules): imported here to avoid the cycle
    from .simplify import simplify

    for fe, fm in facts:
        if fm % n == 0 and _divides(modular_set(simplify(e - fe)), n):
            return True
    return False


def can_be_multiple(e: PrimExpr, n: int) -> bool:
    """Whether some value of ``e`` may be a multiple of ``n`` (False when provably never)."""
    c, r = modular_set(e)
    if c == 0:
        return r % n == 0
    return r % math.gcd(c, n) == 0


def fact_of(cond: PrimExpr) -> Optional[Tuple[PrimExpr, int]]:
    """``(E, M)`` when ``cond`` is ``floormod(E, M) == 0`` (the alignment guards the vectorizer
    writes), else None."""
    from .expr import EQ, node_kind  # noqa: I001 - kept beside its only use

    if node_kind(cond) is EQ and isinstance(cond.b, IntImm) and cond.b.value == 0 \
            and isinstance(cond.a, FloorMod) and isinstance(cond.a.b, IntImm) and cond.a.b.value > 0:
        return (cond.a.a, cond.a.b.value)
    return None
