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

from .expr import FloorMod, IntImm, PrimExpr
from .modular_set import UNKNOWN, Modular, modular_set  # noqa: F401  (moved there; importable here)
from .simplify import simplify


def _divides(m: Modular, n: int) -> bool:
    return m[0] % n == 0 and m[1] % n == 0


def is_multiple(e: PrimExpr, n: int, facts: Iterable[Tuple[PrimExpr, int]] = ()) -> bool:
    """Whether ``e`` is provably a multiple of ``n``; ``facts`` are known ``(E, M)``: M divides E."""
    if n <= 1 or _divides(modular_set(e), n):
        return True
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
