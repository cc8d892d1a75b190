"""Loop partitioning: a loop whose whole body is guarded by ``likely(a * v + r < 0)`` (a > 0, r free
of ``v``) is split into a main loop over ``[0, ceildiv(-r, a))`` without the guard and a tail loop
that keeps it. The bound checks that ``split`` adds for non-divisible extents then cost nothing in
the main loop, which the native compiler can unroll and pipeline. Loops of constant extent are
left alone (they are short; a second loop would cost more than the guard).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from ..tir.expr import LT, BufferLoad, Call, IntImm, Max, Min, PrimExpr, ProducerLoad, Var, const
from ..tir.functor import collect, conjuncts, rewrite
from ..tir.simplify import simplify, to_linear
from ..tir.stmt import For, ForKind, IfThenElse, Stmt, seq


def _bound(c: PrimExpr, v: Var) -> Optional[PrimExpr]:
    """For ``likely(lhs < rhs)`` linear in ``v`` with a positive coefficient: the first failing v."""
    if not (isinstance(c, Call) and c.op.name == "tir.likely" and isinstance(c.args[0], LT)):
        return None
    lt = c.args[0]
    if not lt.a.dtype.startswith("int"):
        return None
    lin = to_linear(simplify(lt.a - lt.b))
    coef = 0
    rest = lin.scaled(1)
    for key, (k, t) in list(lin.terms.items()):
        if t is v:
            coef = k
            del rest.terms[key]
        elif any(x is v for x in collect(t, lambda n: isinstance(n, Var))):
            return None  # v inside a non-linear term
    if coef <= 0:
        return None
    r = rest.to_expr()
    if collect(r, lambda n: isinstance(n, (BufferLoad, ProducerLoad, Call))):
        return None
    # a*v + r < 0  <=>  v < ceildiv(-r, a)
    return simplify((const(0, r.dtype) - r + (coef - 1)) // coef)


def _partition(f: For) -> Optional[Stmt]:
    if f.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not isinstance(f.body, IfThenElse):
        return None
    if isinstance(simplify(f.extent), IntImm):
        return None  # short constant loops: the tail would cost more than the guard
    if f.body.else_case is not None or not (isinstance(f.min, IntImm) and f.min.value == 0):
        return None
    conds = conjuncts(f.body.condition)
    v = f.loop_var
    bounds, keep = [], []
    for c in conds:
        if any(x is v for x in collect(c, lambda n: isinstance(n, Var))):
            b = _bound(c, v)
            if b is None:
                return None
            bounds.append(b)
        else:
            keep.append(c)
    if not bounds:
        return None
    split: PrimExpr = bounds[0]
    for b in bounds[1:]:
        split = Min(split, b)
    split = simplify(Max(const(0, split.dtype), Min(f.extent, split)))
    body = f.body.then_case
    for c in reversed(keep):
        body = IfThenElse(c, body)
    main = dataclasses.replace(f, extent=split, body=body)
    tail = dataclasses.replace(f, min=split, extent=simplify(f.extent - split))
    return seq(main, tail)


def partition_loops(stmt: Stmt) -> Stmt:
    return rewrite(stmt, lambda n: _partition(n) if isinstance(n, For) else None)
