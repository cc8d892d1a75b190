"""Integer intervals of index expressions and the buffer regions blocks access.

:func:`bound` gives the symbolic inclusive interval an integer expression covers while some of its
variables range over theirs (the others stay symbolic). It works on the linear form of the
expression, so ``i_0 * 128 + i_1`` with ``i_1`` in ``[0, 127]`` is ``[i_0 * 128, i_0 * 128 + 127]``
exactly, and ``floordiv``/``floormod`` by constants split off the part that is a multiple of the
divisor before relaxing the rest (``(f * 256 + t * 4 + v) // 8`` is ``f * 32 + [0, 31]``).

:func:`infer_regions` computes what ``T.reads``/``T.writes`` are when a block does not state them,
as TVM does: every load and store of the block body, relaxed over the loops inside the block, one
rectangle per buffer; a reduction block (one with ``T.init()``) does not list the buffers it
writes among its reads.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .block import Block, BlockRealize, BufferRegion, Range, children_stmts, exprs_of
from .expr import (
    Buffer,
    BufferLoad,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    PrimExpr,
    Var,
    const,
)
from .functor import collect, substitute
from .simplify import Linear, simplify, to_linear
from .stmt import BufferStore, For, LetStmt, Stmt

Interval = Tuple[Optional[PrimExpr], Optional[PrimExpr]]  # inclusive; None = unbounded
Dom = Dict[Var, Interval]


def _div_split(lin: Linear, c: int) -> Tuple[Linear, Linear]:
    """``lin = c * q + r`` where ``q`` gets the terms whose coefficients ``c`` divides."""
    q, r = Linear(lin.dtype), Linear(lin.dtype)
    for coef, t in lin.terms.values():
        if coef % c == 0:
            q.add_term(t, coef // c)
        else:
            r.add_term(t, coef)
    q.const, r.const = lin.const // c, lin.const % c
    return q, r


def _lin_expr(lin: Linear) -> PrimExpr:
    return simplify(lin.to_expr())


def _uses(e: PrimExpr, dom: Dom) -> bool:
    if not dom:
        return False
    return any(isinstance(n, Var) and n in dom for n in collect(e, lambda n: isinstance(n, Var)))


def bound(e: PrimExpr, dom: Dom) -> Interval:
    """Inclusive symbolic bounds of integer ``e`` when each variable in ``dom`` ranges over its
    interval; variables outside ``dom`` stay symbolic. ``(None, None)`` when unknown."""
    e = simplify(e)
    if not _uses(e, dom):
        return (e, e)
    lin = to_linear(e)
    lo, hi = Linear(e.dtype), Linear(e.dtype)
    lo.const = hi.const = lin.const
    for coef, term in list(lin.terms.values()):
        tl, th = _term_bound(term, dom)
        if tl is None or th is None:
            return (None, None)
        a, b = (tl, th) if coef > 0 else (th, tl)
        _linear_add(lo, a, coef)
        _linear_add(hi, b, coef)
    return _lin_expr(lo), _lin_expr(hi)


def _linear_add(acc: Linear, e: PrimExpr, coef: int) -> None:
    acc.add(to_linear(simplify(e)), coef)


def _term_bound(t: PrimExpr, dom: Dom) -> Interval:
    if isinstance(t, Var):
        return dom.get(t, (t, t))
    if not _uses(t, dom):
        return (t, t)
    if isinstance(t, (FloorDiv, FloorMod)) and isinstance(t.b, IntImm) and t.b.value > 0:
        c = t.b.value
        q, r = _div_split(to_linear(simplify(t.a)), c)
        rlo, rhi = bound(_lin_expr(r), dom)
        if rlo is None or rhi is None:
            return (None, None)
        if isinstance(t, FloorDiv):
            qlo, qhi = bound(_lin_expr(q), dom)
            if qlo is None or qhi is None:
                return (None, None)
            return (simplify(qlo + FloorDiv(rlo, t.b)), simplify(qhi + FloorDiv(rhi, t.b)))
        if isinstance(rlo, IntImm) and isinstance(rhi, IntImm) and rlo.value // c == rhi.value // c:
            return (const(rlo.value % c, t.dtype), const(rhi.value % c, t.dtype))
        d = simplify(rhi - rlo)
        if isinstance(d, IntImm) and d.value == 0:
            m = simplify(FloorMod(rlo, t.b))
            return (m, m)
        return (const(0, t.dtype), const(c - 1, t.dtype))
    if isinstance(t, (Min, Max)):
        a, b = bound(t.a, dom), bound(t.b, dom)
        if None in a or None in b:
            return (None, None)
        f = min_expr if isinstance(t, Min) else max_expr
        return (f(a[0], b[0]), f(a[1], b[1]))
    return (None, None)


def min_expr(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``min(a, b)``, decided statically when ``a - b`` is a constant."""
    d = simplify(a - b)
    if isinstance(d, IntImm):
        return a if d.value <= 0 else b
    return Min(a, b)


def max_expr(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    d = simplify(a - b)
    if isinstance(d, IntImm):
        return a if d.value >= 0 else b
    return Max(a, b)


def relax_range(r: Range, dom: Dom) -> Optional[Interval]:
    """The inclusive interval a range covers with ``dom`` relaxed, or None when unknown."""
    lo = bound(r.min, dom)[0]
    hi = bound(simplify(r.min + r.extent - 1), dom)[1]
    if lo is None or hi is None:
        return None
    return (lo, hi)


def union_intervals(items: Sequence[Optional[Interval]]) -> Optional[Interval]:
    """The smallest interval covering all of ``items`` (None if any is unknown)."""
    lo = hi = None
    for it in items:
        if it is None:
            return None
        lo = it[0] if lo is None else min_expr(lo, it[0])
        hi = it[1] if hi is None else max_expr(hi, it[1])
    return None if lo is None else (lo, hi)


def interval_range(it: Interval) -> Range:
    return Range(it[0], simplify(it[1] - it[0] + 1))


def loop_dom(loop: For) -> Interval:
    return (loop.min, simplify(loop.min + loop.extent - 1))


def row_major_strides(shape: Sequence[PrimExpr], align: Optional[Dict[int, Tuple[int, int]]] = None
                      ) -> Tuple[PrimExpr, ...]:
    """Row-major strides; ``align[d] = (factor, offset)`` pads the stride of dimension ``d`` so that
    ``stride % factor == offset`` (``storage_align``)."""
    align = align or {}
    strides: List[PrimExpr] = [const(1)] * len(shape)
    acc: PrimExpr = const(1)
    for d in range(len(shape) - 1, -1, -1):
        if d in align and d != len(shape) - 1:
            factor, offset = align[d]
            a = simplify(acc)
            if isinstance(a, IntImm):
                v = a.value
                acc = const(v + ((offset - v) % factor))
        strides[d] = simplify(acc)
        acc = simplify(acc * shape[d])
    return tuple(strides)


# -- access regions of a block ------------------------------------------------------------------------


class _Collector:
    def __init__(self, skip: Sequence[Buffer]):
        self.skip = {id(b) for b in skip}
        self.order: List[Buffer] = []
        self.reads: Dict[int, List[List[Optional[Interval]]]] = {}
        self.writes: Dict[int, List[List[Optional[Interval]]]] = {}
        self.dom: Dom = {}

    def note(self, table, buf: Buffer, dims: List[Optional[Interval]]) -> None:
        if id(buf) in self.skip:
            return
        if id(buf) not in self.reads and id(buf) not in self.writes:
            self.order.append(buf)
        table.setdefault(id(buf), []).append(dims)

    def point(self, indices) -> List[Optional[Interval]]:
        out = []
        for i in indices:
            lo, hi = bound(i, self.dom)
            out.append(None if lo is None or hi is None else (lo, hi))
        return out

    def expr(self, e: PrimExpr) -> None:
        for ld in collect(e, lambda n: isinstance(n, BufferLoad)):
            self.note(self.reads, ld.buffer, self.point(ld.indices))

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, BlockRealize):
            for e in exprs_of(s):
                self.expr(e)
            vmap = {iv.var: v for iv, v in zip(s.block.iter_vars, s.iter_values)}
            for table, regions in ((self.reads, s.block.reads), (self.writes, s.block.writes)):
                for r in regions:
                    dims = [relax_range(Range(substitute(x.min, vmap), substitute(x.extent, vmap)), self.dom)
                            for x in r.region]
                    self.note(table, r.buffer, dims)
            return
        if isinstance(s, BufferStore):
            self.note(self.writes, s.buffer, self.point(s.indices))
        for e in exprs_of(s):
            self.expr(e)
        if isinstance(s, For):
            self.dom[s.loop_var] = loop_dom(s)
        if isinstance(s, LetStmt):
            self.dom[s.var] = (None, None)
        for c in children_stmts(s):
            self.stmt(c)
        if isinstance(s, For):
            del self.dom[s.loop_var]
        if isinstance(s, LetStmt):
            del self.dom[s.var]

    def regions(self, table) -> List[BufferRegion]:
        out = []
        for buf in self.order:
            acc = table.get(id(buf))
            if not acc:
                continue
            dims = []
            for d in range(len(buf.shape)):
                it = union_intervals([a[d] for a in acc])
                dims.append(Range(const(0), buf.shape[d]) if it is None else interval_range(it))
            out.append(BufferRegion(buf, tuple(dims)))
        return out


def infer_regions(block: Block) -> Tuple[Tuple[BufferRegion, ...], Tuple[BufferRegion, ...]]:
    """``(reads, writes)`` of ``block`` inferred from its body (and init)."""
    c = _Collector(block.alloc_buffers)
    if block.init is not None:
        c.stmt(block.init)
    c.stmt(block.body)
    writes = c.regions(c.writes)
    reads = c.regions(c.reads)
    if block.init is not None:
        written = {id(w.buffer) for w in writes}
        reads = [r for r in reads if id(r.buffer) not in written]
    return tuple(reads), tuple(writes)


def with_inferred_regions(block: Block, reads: bool = True, writes: bool = True) -> Block:
    """``block`` with its reads and/or writes recomputed from its body."""
    import dataclasses

    r, w = infer_regions(block)
    return dataclasses.replace(block, reads=r if reads else block.reads, writes=w if writes else block.writes)
