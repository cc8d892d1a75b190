"""Vectorization (TVM's VectorizeLoop): a loop of kind ``vectorized`` with a constant extent N becomes
one statement over N lanes. The loop variable becomes ``ramp(min, 1, N)``, values that do not
depend on it are broadcast, and ``floordiv``/``floormod`` of a ramp that stays inside one block
fold back into a ramp or a broadcast, so a contiguous access shows as ``A[ramp(base, 1, N)]``::

    vectorized for (v, 0, 4) {         ->   B[ramp(i*4, 1, 4)] = exp(A[ramp(i*4, 1, 4)])
      B[i*4 + v] = exp(A[i*4 + v])
    }

The printers turn a contiguous access of a global or shared buffer into the target's vector memory
instructions (CUDA ``*(float4*)(A + base)``, OpenCL ``vload4``) and compute the lanes one by one in
registers; other accesses are printed per lane. The C target keeps the loop (the C compiler
vectorizes it).

Where the loop cannot run as one vector operation for every instance, the pass chooses:

* a bound check on the loop variable (``split`` of a ragged extent) that is affine in it, or the
  same in every lane, becomes a run-time test that every lane is in bounds:
  ``if (all lanes in bounds) vector else scalar loop``;
* on CUDA a vector access must start at a multiple of its lanes (a ``float4`` load needs 16-byte
  alignment; argument buffers are at least 256-byte aligned and shared arrays with vector accesses
  are declared 16-byte aligned). Where the start is provably a multiple (a constant row length,
  a tile offset) nothing is added; where it may be one (a symbolic row length) the run-time test
  also checks ``floormod(base, N) == 0``; where it never is, the printer uses narrower vectors or
  per-lane accesses;
* a body it cannot express lane by lane (an index that is not affine in the loop variable, a
  condition, store address or loop bound that differs between lanes in another way, a call with
  side effects, an allocation, a non-affine bound check), or one where no access could use a
  vector instruction (no vector type of that width), stays the scalar loop, marked for
  unrolling (``#pragma unroll``). The result is never wrong code.

As in TVM, a vectorized loop's iterations are assumed independent (it comes from a data-parallel
axis): the lanes of one statement all run before the next statement.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Set, Tuple

from ..errors import LoweringError
from ..tir import attr
from ..tir import dtype as dt
from ..tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    And,
    BinaryOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    FloorMod,
    IntImm,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    StringImm,
    Var,
    const,
    node_kind,
)
from ..tir.functor import children, collect, rewrite_stmts, substitute
from ..tir.modular import can_be_multiple, is_multiple
from ..tir.printer import expr_str
from ..tir.simplify import VectorFolder, simplify, structural_equal
from ..tir.stmt import (
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    NoOp,
    SeqStmt,
    Stmt,
    seq,
)
from ..tir.vector import (  # noqa: F401  (re-exported; moved to tir)
    NEEDS_ALIGNMENT,
    VECTOR_LANES,
    VECTOR_SCOPES,
    lane_of,
    load_key,
    unconditional_loads,
)

#: calls computed lane by lane (pure); any other call keeps the loop scalar
LANEWISE_CALLS = {"tir.call_pure_extern", "tir.likely", "tir.if_then_else", "tir.shift_left",
                  "tir.shift_right", "tir.bitwise_and", "tir.bitwise_or"}


class _Scalar(Exception):
    """The body cannot be expressed lane by lane; the loop stays scalar (the message says why)."""


def _uses(e, var: Var) -> bool:
    return any(v is var for v in collect(e, lambda n: isinstance(n, Var)))


def _bcast(e: PrimExpr, lanes: int) -> PrimExpr:
    return e if dt.lanes(e.dtype) > 1 else Broadcast(e, lanes)


class _Lanes:
    """Rewrites a loop body with the loop variable ``var`` running over ``lanes`` lanes at once."""

    def __init__(self, var: Var, start: PrimExpr, lanes: int):
        self.var, self.lanes = var, lanes
        self.ramp = Ramp(start, const(1, var.dtype), lanes)
        self.dependent: Dict[int, bool] = {}  # id(expression) -> whether it uses var
        self.fold = VectorFolder()  # ramp/broadcast folding of one node (children done)

    def uses(self, e: PrimExpr) -> bool:
        """Whether ``e`` depends on the loop variable (memoized: each node is looked at once)."""
        got = self.dependent.get(id(e))
        if got is None:
            got = e is self.var or any(self.uses(c) for c in children(e))
            self.dependent[id(e)] = got
        return got

    def vec(self, t: str) -> str:
        return dt.with_lanes(t, self.lanes)

    # -- expressions ------------------------------------------------------------------------
    def expr(self, e: PrimExpr) -> PrimExpr:
        if not self.uses(e):
            return e
        if e is self.var:
            return self.ramp
        if isinstance(e, BinaryOp):
            a, b = self.expr(e.a), self.expr(e.b)
            n = self.lanes
            kind = node_kind(e)
            out_t = self.vec("bool") if isinstance(e, (CmpOp, And, Or)) else self.vec(e.dtype)
            return self.fold(kind(_bcast(a, n), _bcast(b, n), dtype=out_t))
        if isinstance(e, Cast):
            return Cast(self.vec(e.dtype), self.expr(e.value))
        if isinstance(e, Not):
            return Not(self.expr(e.a), dtype=self.vec("bool"))
        if isinstance(e, Select):
            c, t, f = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            return Select(c, _bcast(t, self.lanes), _bcast(f, self.lanes), self.vec(e.dtype))
        if isinstance(e, Call):
            if e.op.name not in LANEWISE_CALLS:
                raise _Scalar(f"call {e.op.name} has no lane-wise form")
            args = tuple(a if isinstance(a, StringImm) else self.expr(a) for a in e.args)
            if e.op.name == "tir.if_then_else":
                args = (args[0],) + tuple(_bcast(a, self.lanes) for a in args[1:])
            return Call(self.vec(e.dtype), e.op, args)
        if isinstance(e, BufferLoad):
            if len(e.indices) != 1:
                raise _Scalar(f"load of {e.buffer.name} is not flat")
            return BufferLoad(e.buffer, (self.index(e.buffer, e.indices[0]),), self.vec(e.dtype))
        raise _Scalar(f"{type(e).__name__} {expr_str(e)} has no lane-wise form")

    def index(self, buf, index: PrimExpr) -> PrimExpr:
        """The lanes' addresses: a ramp (the index is affine in the loop variable), else scalar code."""
        idx = self.expr(index)
        if dt.lanes(idx.dtype) > 1 and not isinstance(idx, Ramp):
            raise _Scalar(f"index {expr_str(index)} of {buf.name} is not affine in {self.var.name}")
        return idx

    # -- statements -------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, SeqStmt):
            return seq(*[self.stmt(x) for x in s.seq])
        if isinstance(s, BufferStore):
            return self.store(s)
        if isinstance(s, IfThenElse):
            c = self.expr(s.condition)
            if isinstance(c, Broadcast):
                c = c.value  # the same in every lane
            if dt.lanes(c.dtype) > 1:
                raise _Scalar(f"condition {expr_str(s.condition)} differs between lanes")
            other = None if s.else_case is None else self.stmt(s.else_case)
            return IfThenElse(c, self.stmt(s.then_case), other)
        if isinstance(s, For):
            if _uses(s.min, self.var) or _uses(s.extent, self.var):
                raise _Scalar(f"the extent of loop {s.loop_var.name} differs between lanes")
            return dataclasses.replace(s, body=self.stmt(s.body))
        if isinstance(s, LetStmt):
            v = self.expr(s.value)
            if dt.lanes(v.dtype) == 1:
                return LetStmt(s.var, v, self.stmt(s.body))
            nv = Var(s.var.name, v.dtype)
            return LetStmt(nv, v, self.stmt(substitute(s.body, {s.var: nv})))
        if isinstance(s, AttrStmt) and s.attr_key != attr.THREAD_EXTENT:
            return dataclasses.replace(s, body=self.stmt(s.body))
        if isinstance(s, NoOp):
            return s
        if isinstance(s, Evaluate):
            raise _Scalar(f"{expr_str(s.value)} runs once per lane")
        raise _Scalar(f"{type(s).__name__} inside the loop")

    def store(self, s: BufferStore) -> Stmt:
        if len(s.indices) != 1:
            raise _Scalar(f"store to {s.buffer.name} is not flat")
        idx, val = self.index(s.buffer, s.indices[0]), self.expr(s.value)
        if dt.lanes(idx.dtype) == 1:
            if dt.lanes(val.dtype) == 1 and not any(n.buffer is s.buffer for n in collect(
                    s.value, lambda n: isinstance(n, BufferLoad))):
                return s  # the same value to the same address in every lane: once is enough
            raise _Scalar(f"every lane stores to {s.buffer.name}[{expr_str(idx)}]")
        for ld in collect(val, lambda n: isinstance(n, BufferLoad)):
            if ld.buffer is s.buffer and not structural_equal(ld.indices[0], idx):
                raise _Scalar(f"the lanes read {s.buffer.name} where other lanes store")
        return BufferStore(s.buffer, _bcast(val, self.lanes), (idx,))

    # -- the bound check around the body ---------------------------------------------------------
    def all_lanes(self, cond: PrimExpr) -> PrimExpr:
        """A scalar condition true exactly when ``cond`` holds in every lane: each conjunct must be
        the same in every lane (e.g. ``floordiv(ramp, 8)`` within one block of 8) or compare two
        affine lane values, whose difference then moves one way and is checked at its hardest lane."""
        if isinstance(cond, Call) and cond.op.name == "tir.likely":
            return self.all_lanes(cond.args[0])
        if isinstance(cond, And):
            return And(self.all_lanes(cond.a), self.all_lanes(cond.b))
        vc = self.expr(cond)
        if dt.lanes(vc.dtype) == 1:
            return vc
        if isinstance(vc, Broadcast):
            return vc.value
        kind = node_kind(vc)
        if kind in (LT, LE, GT, GE) and all(isinstance(x, (Ramp, Broadcast)) for x in (vc.a, vc.b)):
            step = simplify(_stride(vc.a) - _stride(vc.b))
            if isinstance(step, IntImm):
                # a - b grows with the lane when step > 0: "<" and "<=" are hardest at the last lane
                lane = self.lanes - 1 if (step.value > 0) == (kind in (LT, LE)) else 0
                return kind(lane_of(vc.a, lane), lane_of(vc.b, lane))
        raise _Scalar(f"bound check {expr_str(cond)} is not affine in {self.var.name}")


def _stride(e: PrimExpr) -> PrimExpr:
    return e.stride if isinstance(e, Ramp) else const(0, e.value.dtype)


def _vector_accesses(s: Stmt) -> List[Tuple[object, Ramp]]:
    """(buffer, ramp index) of every contiguous vector access in ``s``."""
    out = []
    for n in collect(s, lambda n: isinstance(n, (BufferLoad, BufferStore))):
        idx = n.indices[0] if len(n.indices) == 1 else None
        if isinstance(idx, Ramp) and isinstance(idx.stride, IntImm) and idx.stride.value == 1:
            out.append((n.buffer, idx))
    return out


def vector_width(target: str, dtype: str, lanes: int) -> int:
    """The widest vector (in lanes) of ``target`` that divides ``lanes`` for elements of ``dtype``."""
    return next((w for w in VECTOR_LANES.get(target, {}).get(dtype, ()) if lanes % w == 0), 1)


def _alignment_checks(body: Stmt, target: str, lanes: int) -> List[PrimExpr]:
    """Run-time tests that make the widest vector accesses of ``body`` aligned (CUDA)."""
    if not NEEDS_ALIGNMENT.get(target, False):
        return []
    inner: Set[Var] = set()
    for n in collect(body, lambda n: isinstance(n, (For, LetStmt))):
        inner.add(n.loop_var if isinstance(n, For) else n.var)
    checks: List[PrimExpr] = []
    for buf, ramp in _vector_accesses(body):
        w = vector_width(target, dt.element_of(buf.dtype), lanes)
        if buf.scope not in VECTOR_SCOPES or w == 1 or is_multiple(ramp.base, w):
            continue
        free = collect(ramp.base, lambda n: isinstance(n, (Var, BufferLoad)))
        if any(isinstance(x, BufferLoad) or x in inner for x in free) or not can_be_multiple(ramp.base, w):
            continue  # cannot be tested before the loop, or never aligned: narrower accesses
        check = EQ(simplify(FloorMod(ramp.base, const(w, ramp.base.dtype))), const(0, ramp.base.dtype))
        if not any(structural_equal(check, c) for c in checks):
            checks.append(check)
    return checks


def _scalar_loop(f: For) -> For:
    return dataclasses.replace(f, kind=ForKind.UNROLLED)


def vectorize_loop(f: For, target: str) -> Stmt:
    """One vectorized loop rewritten for ``target`` (see the module docstring)."""
    ext = simplify(f.extent)
    if not isinstance(ext, IntImm):
        raise LoweringError(f"vectorize: loop {f.loop_var.name} has symbolic extent {expr_str(ext)}; split "
                            "it by a constant factor and vectorize the inner loop")
    n = ext.value
    if n <= 1:
        return seq() if n < 1 else substitute(f.body, {f.loop_var: f.min})
    if target not in VECTOR_LANES:
        return f  # a plain loop: the C compiler vectorizes it
    lanes = _Lanes(f.loop_var, f.min, n)
    body, guard = f.body, None
    try:
        if isinstance(body, IfThenElse) and body.else_case is None and _uses(body.condition, f.loop_var):
            guard = simplify(lanes.all_lanes(body.condition))
            body = body.then_case
        vec = lanes.stmt(body)
    except _Scalar:
        return _scalar_loop(f)
    if not any(buf.scope in VECTOR_SCOPES and vector_width(target, dt.element_of(buf.dtype), n) > 1
               for buf, _ in _vector_accesses(vec)):
        return _scalar_loop(f)  # no access can use a vector instruction: nothing to gain
    conds = ([] if guard is None else [guard]) + _alignment_checks(vec, target, n)
    if not conds:
        return vec
    cond = conds[0]
    for c in conds[1:]:
        cond = And(cond, c)
    return IfThenElse(cond, vec, _scalar_loop(f))


def vectorize_loops(stmt: Stmt, target: str) -> Stmt:
    """Rewrite every loop of kind ``vectorized`` (innermost first) for ``target``."""
    return rewrite_stmts(stmt, lambda n: vectorize_loop(n, target)
                   if isinstance(n, For) and n.kind == ForKind.VECTORIZED else None)
