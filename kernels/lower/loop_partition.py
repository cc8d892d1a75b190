"""Loop partitioning: a serial loop is split where its bound checks start to fail, so that the
iterations before that point run without them (TVM's LoopPartition).

A split whose factor does not divide the extent leaves checks inside the loops that walk the tiles:
a ragged matrix product of reduction length 1500 in tiles of 16 tests ``r_outer * 16 + j < 1500`` in
each of the 16 unrolled steps of its reduction loop, and the vectorized fetches of its shared tiles
test their last lane (with a scalar fallback), in all 94 iterations, although only the last one can
fail. Two rules split such loops:

* **Guarded loops** (the original rule): a loop of symbolic extent whose *whole body* is one guard
  ``likely(a * v + r < 0)`` (``a > 0``, ``r`` free of ``v``) becomes a main loop over
  ``[0, ceildiv(-r, a))`` without the guard and a tail loop that keeps it; ``r`` may name the thread
  index (nothing can synchronize under a guard that differs between threads).
* **Checks inside the body**: for a serial (or left-unrolled) loop ``v`` over ``[0, E)``, every clause
  of every ``if`` in its body (through ``likely``, clause by clause, the conditions of the vectorized
  fetches' ``if``/``else`` pairs included) that is an integer comparison ``small < big`` (``<=``,
  ``>``, ``>=`` alike) is written ``D < 0`` and brought to the linear form ``c * v + S + T``, where
  ``T`` holds the terms over the variables whose range is known inside the loop (thread indices and
  inner loops of constant bounds) and ``S`` the terms over what stays fixed while the loop runs
  (sizes, block indices, enclosing loops). ``T`` is replaced by its largest value over those ranges
  (enumerated exactly when the box is small, else bounded by interval arithmetic), so the clause
  holds for every thread and inner iteration when ``c * v + S + max(T) < 0``. The enumeration skips
  the points where a sibling clause over those variables alone fails (a fetch's thread guard in
  ``tx < 64 && r * 8 + tx / 8 < k``: the second clause matters only where the first holds); such
  sibling clauses are themselves bounded assuming nothing, so no two clauses prove each other. With
  ``c > 0`` the bound is ``v < v0 = ceildiv(-(S + max(T)), c)``. A clause without ``v`` is proven
  outright when ``S + max(T) < 0`` simplifies to true or follows from a condition of an enclosing
  ``if`` (the interior copy of :mod:`kernels.lower.block_partition` knows ``blockIdx.y * 128 + 127 <
  3000``, which is what the row test of a vectorized fetch needs). The loop is emitted twice:
  ``[0, v0)`` with the proven clauses replaced by true (``if (true) A else B`` becomes ``A``), then
  ``[v0, E)`` as it was, rewritten to start at 0 (the simplifier takes a loop's range as
  ``[0, extent)``); a tail of one iteration is that iteration, with ``v`` replaced by its value,
  whose checks then fold (the tail is simplified and its emptied loops dropped). The loops inside
  either part are split in turn; a part itself is not split again.

What it does not do: a clause that is not proven stays in both copies; a clause is given up when it
reads memory, calls a function, is not linear in ``v``, or mixes a ranged variable with an
unranged one in one term; ``v`` starts at 0; clauses true for small ``v`` only (``c > 0``) are used.
It only splits where it pays: the main part must run at least 2 iterations, and a loop of constant
extent needs a constant ``v0`` with ``2 <= v0 < E`` (a split point that depends on an enclosing
loop would copy the body for a few iterations at most); a clause that never fails in the loop goes
from the main part only when some other clause makes the split. Parallel, vectorized and
thread-bound loops are left alone, as are loops allocating anything but local and shared arrays
(global scratch, tensor-core fragments) and bodies larger than :data:`MAX_BODY_STATEMENTS`. Shared
arrays a split loop allocates are allocated once, around both parts (a copy each would double the
block's shared memory).

The split point names nothing but constants, sizes, block indices and enclosing loop variables:
never a thread index or a ``let`` (clauses that would need one are left in place), so it is the same
for all threads of a block and barriers inside the loop stay uniform. On CUDA a kernel with
pipelined fetches (double buffers, ``cp.async``) is left whole, for the ptxas fault described in
:mod:`kernels.lower.block_partition`. The pass runs after block partitioning, vectorization and
barrier insertion (``TARGET_PASSES``), on every target and for both front ends, so it sees the
interior copy of a kernel, the fetches' final conditions and the barriers.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..tir import attr
from ..tir import dtype as dt
from ..tir.expr import (
    GE,
    GT,
    LE,
    LT,
    Add,
    BufferLoad,
    Call,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    ProducerLoad,
    Sub,
    Var,
    const,
)
from ..tir.functor import bound_vars, collect, conjuncts, rewrite, rewrite_stmts, substitute
from ..tir.simplify import const_int_bound, simplify, to_linear
from ..tir.stmt import NOP, Allocate, AttrStmt, For, ForKind, IfThenElse, LetStmt, NoOp, SeqStmt, Stmt, seq
from .block_partition import _hoist_shared, _pipelined
from .simplify import simplify_stmt
from .unroll import unroll_loop

__all__ = ["partition_loops"]

#: loops whose body holds more statements than this are not copied
MAX_BODY_STATEMENTS = 4096
#: a box of ranged variables up to this many points is enumerated to bound a clause exactly
_ENUMERATE_LIMIT = 1 << 16

_COMPARISONS = (LT, LE, GT, GE)
_SPLIT_KINDS = (ForKind.SERIAL, ForKind.UNROLLED)

Ranges = Dict[Var, Tuple[int, int]]  # inclusive


# -- the original rule: a loop whose whole body is one guard ---------------------------------------


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


def _partition_guarded(f: For) -> Optional[Stmt]:
    """The original rule (see the module docstring): a symbolic loop whose body is one guard."""
    if f.kind not in _SPLIT_KINDS or not isinstance(f.body, IfThenElse):
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


# -- bounding a clause over the ranged variables ---------------------------------------------------


def _np_eval(e: PrimExpr, env: Dict[Var, np.ndarray]):
    """``e`` evaluated on integer arrays (floor division and modulo, as the IR means them); None for
    an operation this evaluator does not know."""
    if isinstance(e, IntImm):
        return int(e.value)
    if isinstance(e, Var):
        return env.get(e)
    if isinstance(e, Cast):
        return _np_eval(e.value, env) if dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype) else None
    ops = {Add: np.add, Sub: np.subtract, Mul: np.multiply, Min: np.minimum, Max: np.maximum}
    if type(e) in ops or isinstance(e, (FloorDiv, FloorMod)):
        a, b = _np_eval(e.a, env), _np_eval(e.b, env)
        if a is None or b is None:
            return None
        if isinstance(e, (FloorDiv, FloorMod)):
            if not isinstance(b, int) or b <= 0:
                return None
            return np.floor_divide(a, b) if isinstance(e, FloorDiv) else np.mod(a, b)
        return ops[type(e)](a, b)
    return None


def _np_test(c: PrimExpr, env: Dict[Var, np.ndarray]):
    """An integer comparison evaluated on arrays (see :func:`_np_eval`); None where unknown."""
    ops = {LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal}
    if type(c) not in ops:
        return None
    a, b = _np_eval(c.a, env), _np_eval(c.b, env)
    return None if a is None or b is None else ops[type(c)](a, b)


def _max_over(e: PrimExpr, ranges: Ranges, assume: Sequence[PrimExpr] = ()) -> Optional[int]:
    """The largest value of ``e`` while its variables (all in ``ranges``) run over their ranges,
    where the conditions ``assume`` (over ranged variables too) hold: exact by enumeration when the
    box is small, else an upper bound by interval arithmetic (without ``assume``); None when unknown
    or when no point satisfies ``assume``."""
    vs = collect(e, lambda n: isinstance(n, Var))
    assume = [a for a in assume if set(collect(a, lambda n: isinstance(n, Var))) & set(vs)]
    every = list(dict.fromkeys(vs + [x for a in assume for x in collect(a, lambda n: isinstance(n, Var))]))
    size = 1
    for v in every:
        size *= ranges[v][1] - ranges[v][0] + 1
    if size <= _ENUMERATE_LIMIT:
        env = {}
        for k, v in enumerate(every):
            shape = [1] * len(every)
            shape[k] = -1
            env[v] = np.arange(ranges[v][0], ranges[v][1] + 1, dtype=np.int64).reshape(shape)
        got = _np_eval(e, env)
        if got is not None:
            masks = [m for m in (_np_test(a, env) for a in assume) if m is not None]
            got = np.broadcast_arrays(got, *env.values(), *masks)
            vals = got[0][np.logical_and.reduce(got[len(env) + 1:])] if masks else got[0]
            return int(np.max(vals)) if vals.size else None
    return const_int_bound(e, ranges)[1]


def _thread_index(n) -> bool:
    """Whether ``n`` declares a thread index (not a block index)."""
    return isinstance(n, AttrStmt) and n.attr_key == attr.THREAD_EXTENT and \
        not n.node.thread_tag.startswith("blockIdx")


def _is_signed_scalar(e: PrimExpr) -> bool:
    return dt.is_int(e.dtype) and dt.lanes(e.dtype) == 1


def _as_negative(c: PrimExpr) -> Optional[PrimExpr]:
    """``D`` with ``c`` <=> ``D < 0`` for an integer comparison ``c`` that reads no memory and calls
    nothing; else None."""
    if not isinstance(c, _COMPARISONS) or not _is_signed_scalar(c.a):
        return None
    if collect(c, lambda n: isinstance(n, (BufferLoad, ProducerLoad, Call))):
        return None
    small, big = (c.a, c.b) if isinstance(c, (LT, LE)) else (c.b, c.a)
    d = small - big
    if isinstance(c, (LE, GE)):
        d = d - const(1, d.dtype)  # x <= 0  <=>  x - 1 < 0
    return simplify(d)


@dataclasses.dataclass
class _Context:
    """What holds where a loop starts: the conditions of the enclosing ``if``s (each ``D``, meaning
    ``D < 0``), the constant ranges of the thread indices, the enclosing loops."""

    known: Tuple[PrimExpr, ...] = ()
    threads: Tuple[Tuple[Var, int, int], ...] = ()
    loops: Tuple[Var, ...] = ()
    kernel: bool = False  # inside a kernel's launch (a thread_extent attribute)

    def add(self, **kw) -> "_Context":
        return dataclasses.replace(self, **{k: getattr(self, k) + tuple(v) for k, v in kw.items()})


class _Clauses:
    """For one loop: which clauses of the ``if``s in its body hold up to which iteration."""

    def __init__(self, f: For, ctx: _Context, fixed_ok: Set[Var]):
        self.v = f.loop_var
        self.ctx = ctx
        self.ranges: Ranges = {}
        for var, lo, hi in ctx.threads:
            self._note(var, lo, hi)
        inner = collect(f.body, lambda n: isinstance(n, (For, LetStmt, Allocate, AttrStmt)))
        for n in inner:
            if isinstance(n, For):
                lo, ext = simplify(n.min), simplify(n.extent)
            elif _thread_index(n):
                # a stage's own variable for the thread index (each stage binds one), declared again
                lo, ext = const(0, "int32"), simplify(n.value)
            else:
                continue
            if isinstance(lo, IntImm) and isinstance(ext, IntImm) and ext.value > 0:
                self._note(n.loop_var if isinstance(n, For) else n.node.var, lo.value, lo.value + ext.value - 1)
        # what the split point may name: sizes and block indices (fixed_ok), the enclosing loops;
        # nothing bound inside the loop, and nothing bound both inside and around it (which of the
        # two a use means is not known here)
        inside = bound_vars(inner) | {n.buffer.data for n in inner if isinstance(n, Allocate)}
        self.fixed_ok = (fixed_ok | set(ctx.loops)) - inside
        for shadowed in inside & (set(ctx.loops) | {self.v}):
            self.ranges.pop(shadowed, None)
        self.usable = self.v not in inside

    def _note(self, v: Var, lo: int, hi: int) -> None:
        if v in self.ranges:
            lo, hi = min(lo, self.ranges[v][0]), max(hi, self.ranges[v][1])
        self.ranges[v] = (lo, hi)

    def pure(self, c: PrimExpr) -> bool:
        """Whether ``c`` is a comparison of ranged variables alone (thread indices, inner loops)."""
        vs = set(collect(c, lambda n: isinstance(n, Var)))
        return _as_negative(c) is not None and bool(vs) and vs <= set(self.ranges)

    def bound(self, c: PrimExpr, assume: Sequence[PrimExpr] = ()) -> Optional[Tuple[int, PrimExpr]]:
        """``(coef, R)`` with ``c`` true wherever ``coef * v + R < 0`` and the clauses ``assume``
        (over ranged variables alone) hold, ``R`` free of ranged and inner variables; None when
        ``c`` is not such a clause."""
        d = _as_negative(c) if self.usable else None
        if d is None:
            return None
        lin = to_linear(d)
        coef = 0
        ranged = to_linear(const(0, d.dtype))
        fixed = to_linear(const(lin.const, d.dtype))
        for k, t in lin.terms.values():
            vs = set(collect(t, lambda n: isinstance(n, Var)))
            if t is self.v:
                coef = k
            elif self.v in vs:
                return None  # v inside a non-linear term
            elif vs and vs <= set(self.ranges):
                ranged.add_term(t, k)
            elif vs & set(self.ranges) or not vs <= self.fixed_ok:
                return None  # a term mixing ranged and fixed variables, or an inner/thread/let one
            else:
                fixed.add_term(t, k)
        top = 0
        if not ranged.is_const():
            top = _max_over(simplify(ranged.to_expr()), self.ranges, assume)
            if top is None:
                return None
        return coef, simplify(fixed.to_expr() + const(top, d.dtype))

    def holds(self, r: PrimExpr) -> bool:
        """Whether ``r < 0`` is proven: a constant, or implied by an enclosing condition ``D < 0``
        that differs from ``r`` by a constant ``<= 0`` (``r <= D < 0``)."""
        if isinstance(r, IntImm):
            return r.value < 0
        for k in self.ctx.known:
            diff = simplify(r - k)
            if isinstance(diff, IntImm) and diff.value <= 0:
                return True
        return False


def _ifs(body: Stmt) -> List[IfThenElse]:
    return collect(body, lambda n: isinstance(n, IfThenElse))


def _split_point(f: For, ctx: _Context, fixed_ok: Set[Var]):
    """``(v0, clauses)``: where to split ``f`` and the ids of the clauses true before ``v0``; None
    when the split does not pay (see the module docstring)."""
    clauses = _Clauses(f, ctx, fixed_ok)
    ext = simplify(f.extent)
    always: Set[int] = set()
    until: List[Tuple[PrimExpr, int]] = []  # (v0 of the clause, its id)
    for node in _ifs(f.body):
        # a clause is only evaluated where its sibling clauses hold (``a && c``: c's value matters
        # only where a is true), so it is bounded assuming those of them over ranged variables
        # alone; these are bounded assuming nothing (no clause is proven by one that assumed it)
        siblings = conjuncts(node.condition, through_likely=True)
        pure = [c for c in siblings if clauses.pure(c)]
        for c in siblings:
            got = clauses.bound(c, () if any(c is p for p in pure) else pure)
            if got is None:
                continue
            coef, r = got
            if coef == 0:
                if clauses.holds(r):
                    always.add(id(c))
            elif coef > 0:
                # coef * v + r < 0  <=>  v < ceildiv(-r, coef)
                v0 = simplify((const(0, r.dtype) - r + (coef - 1)) // coef)
                if isinstance(ext, IntImm) and not isinstance(v0, IntImm):
                    continue  # a constant loop split at a point that varies: not worth a copy
                if isinstance(v0, IntImm) and isinstance(ext, IntImm) and v0.value >= ext.value:
                    always.add(id(c))  # never fails in this loop
                elif not (isinstance(v0, IntImm) and v0.value < 2):  # else the main part is too short
                    until.append((v0, id(c)))
    if not until:
        return None
    consts = [(v0.value, cid) for v0, cid in until if isinstance(v0, IntImm)]
    if consts:
        # a constant point: the clauses of a symbolic one may fail before it and stay
        split: PrimExpr = const(min(x for x, _ in consts), f.loop_var.dtype)
        return split, always | {cid for _, cid in consts}
    split = until[0][0]
    for v0, _ in until[1:]:
        split = Min(split, v0)
    return split, always | {cid for _, cid in until}


def _without(body: Stmt, proven: Set[int]) -> Stmt:
    """``body`` with the clauses ``proven`` (by id) replaced by true, and the ``if``s they decide
    reduced to their branch."""
    def fn(n):
        if not isinstance(n, IfThenElse):
            return None
        clauses = conjuncts(n.condition, through_likely=True)
        if not any(id(c) in proven for c in clauses):
            return None
        cond = simplify(rewrite(n.condition, lambda x: None,
                                lambda x: const(True) if id(x) in proven else None))
        if isinstance(cond, IntImm):
            return n.then_case if cond.value else (n.else_case or seq())
        return IfThenElse(cond, n.then_case, n.else_case)

    return rewrite_stmts(body, fn)


def _size(s: Stmt) -> int:
    return len(collect(s, lambda n: isinstance(n, Stmt) and not isinstance(n, SeqStmt)))


def _splittable(f: For) -> bool:
    if f.kind not in _SPLIT_KINDS or not (isinstance(f.min, IntImm) and f.min.value == 0):
        return False
    if collect(f.body, lambda n: isinstance(n, Allocate) and n.buffer.scope not in _COPIED_SCOPES):
        return False  # global (or warp) memory allocated in the loop: left alone
    return _size(f.body) <= MAX_BODY_STATEMENTS


#: the scopes of the arrays a loop's body may allocate for it to be split: local arrays are declared
#: in each copy, shared ones once, around both (see :func:`_split`)
_COPIED_SCOPES = (attr.LOCAL, attr.SHARED, attr.SHARED_DYN)


def _split(f: For, ctx: _Context, fixed_ok: Set[Var]) -> Optional[Tuple[For, Stmt, List[Allocate]]]:
    """``f`` as (the main loop without the proven clauses, the tail as it was, the shared arrays
    its body allocates); None where it does not pay. The shared arrays are to be allocated once,
    around both parts (a copy each would double the block's shared memory; their contents are
    undefined at the start of every iteration either way)."""
    if not _splittable(f) or not _ifs(f.body):
        return None
    body, shared = _hoist_shared(f.body)
    if shared is None:
        return None  # one shared buffer allocated with two sizes
    f = dataclasses.replace(f, body=body)
    got = _split_point(f, ctx, fixed_ok)
    if got is None:
        return None
    v0, proven = got
    v, ext = f.loop_var, simplify(f.extent)
    if not isinstance(v0, IntImm) or not isinstance(ext, IntImm):
        v0 = simplify(Max(const(0, v.dtype), Min(ext, v0)))  # clamped: both parts may be empty
    main = dataclasses.replace(f, extent=v0, body=_without(f.body, proven))
    rest = simplify(ext - v0)
    if isinstance(rest, IntImm) and rest.value == 1:
        tail: Stmt = unroll_loop(dataclasses.replace(f, min=v0, extent=rest))
    else:
        # the tail starts at 0 (the simplifier reads a loop's range as [0, extent))
        tail = dataclasses.replace(f, extent=rest, body=substitute(f.body, {v: v + v0}))
    # the tail's checks that now fold (a last iteration's steps past the end) leave empty loops
    return main, _drop_empty(simplify_stmt(tail)), shared


def _drop_empty(s: Stmt) -> Stmt:
    """``s`` without loops and ``if``s that do nothing."""
    def fn(n):
        if isinstance(n, For) and isinstance(n.body, NoOp):
            return NOP
        if isinstance(n, IfThenElse) and isinstance(n.then_case, NoOp) and \
                (n.else_case is None or isinstance(n.else_case, NoOp)):
            return NOP
        if isinstance(n, SeqStmt):
            return seq(*n.seq)
        return None

    return rewrite_stmts(s, fn)


def _visit(s: Stmt, ctx: _Context, fixed_ok: Set[Var], cuda: bool) -> Stmt:
    """Top-down: a loop is split before its body is visited; then the body of each part is visited
    on its own (a part is not split again)."""
    if isinstance(s, SeqStmt):
        return seq(*[_visit(x, ctx, fixed_ok, cuda) for x in s.seq])
    if isinstance(s, IfThenElse):
        known = [d for d in (_as_negative(c) for c in conjuncts(s.condition, through_likely=True))
                 if d is not None]
        then = _visit(s.then_case, ctx.add(known=known), fixed_ok, cuda)
        other = None if s.else_case is None else _visit(s.else_case, ctx, fixed_ok, cuda)
        return IfThenElse(s.condition, then, other)
    if isinstance(s, AttrStmt) and s.attr_key == attr.THREAD_EXTENT:
        if cuda and not ctx.kernel and _pipelined(s):
            return s  # a pipelined CUDA kernel is left whole (see the module docstring)
        ext = simplify(s.value)
        inner = dataclasses.replace(ctx, kernel=True)
        if _thread_index(s) and isinstance(ext, IntImm) and ext.value > 0:
            inner = inner.add(threads=[(s.node.var, 0, ext.value - 1)])
        return dataclasses.replace(s, body=_visit(s.body, inner, fixed_ok, cuda))
    if isinstance(s, For):
        inside = ctx.add(loops=[s.loop_var])

        def visit_body(f: For) -> For:
            return dataclasses.replace(f, body=_visit(f.body, inside, fixed_ok, cuda))

        whole = _partition_guarded(s)
        if whole is not None:
            return seq(*[visit_body(x) for x in whole.seq])
        got = _split(s, ctx, fixed_ok)
        if got is None:
            return visit_body(s)
        main, tail, shared = got
        # a part is not split again; the loops inside either are
        out = seq(visit_body(main), visit_body(tail) if isinstance(tail, For) and tail.loop_var is s.loop_var
                  else _visit(tail, ctx, fixed_ok, cuda))
        for a in reversed(shared):
            out = dataclasses.replace(a, body=out)
        return out
    body = getattr(s, "body", None)
    if isinstance(body, Stmt):
        return dataclasses.replace(s, body=_visit(body, ctx, fixed_ok, cuda))
    return s


def partition_loops(stmt: Stmt, target: str = "c") -> Stmt:
    """Every serial loop of ``stmt`` split where its bound checks start to fail (see the module
    docstring); ``target`` decides whether pipelined kernels are left whole (CUDA)."""
    nodes = collect(stmt, lambda n: isinstance(n, (For, LetStmt, AttrStmt, Allocate)))
    bound = bound_vars(nodes) | {n.buffer.data for n in nodes if isinstance(n, Allocate)}
    blocks = {n.node.var for n in nodes if isinstance(n, AttrStmt) and n.attr_key == attr.THREAD_EXTENT
              and n.node.thread_tag.startswith("blockIdx")}
    # what a split point may name besides enclosing loops: sizes and arguments, block indices
    free = {v for v in collect(stmt, lambda n: isinstance(n, Var)) if v not in bound}
    return _visit(stmt, _Context(), free | blocks, str(target).split()[0] == "cuda")
