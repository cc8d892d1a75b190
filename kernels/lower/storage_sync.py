"""Barriers for shared memory (TVM's ThreadSync on the ``shared`` scope).

A thread may read what another thread of its block wrote, or overwrite what another thread read,
only after a barrier. The pass walks every statement sequence of a GPU kernel keeping the shared
accesses made since the last barrier, and puts a barrier before the first statement that

* reads a buffer written since the last barrier (read after write),
* writes a buffer read since the last barrier (write after read),

then forgets the accesses it separated. A loop is also checked around its back edge: the accesses
left over at the end of the body against the first statements of the next iteration; when those
conflict, one barrier goes before the first conflicting statement of the body (if none was put
before it already). A loop or a branch is one statement of its parent sequence, with its
accesses summarised in order (barriers included), so a barrier inside a loop also separates the
accesses before and after it. Hence a shared-memory tile loop gets exactly two barriers: one
between the cooperative fetch and the compute, one before the next iteration's fetch.

Two accesses do not conflict when they touch the same element from the same thread: equal indices
that map distinct threads to distinct elements (``S[threadIdx.x]`` written then read). The write
into the idle half of a double buffer (attr ``double_buffer_write``) does not conflict with reads
of the same iteration, only across iterations. A write that may be an asynchronous copy (attr
``async_copy``: ``cp.async`` on CUDA, whose data is only known to have landed after the wait the
code generator prints before each barrier) conflicts even with the same thread's own accesses.

A barrier must be reached by every thread of the block. When one is needed inside a branch whose
condition differs between threads (a bound check on ``threadIdx``), the branch is split around it:
``if (c) { S1; sync; S2 }`` becomes ``if (c) { S1 } sync; if (c) { S2 }``, and
``if (c) { for ... { S1; sync; S2 } }`` becomes ``for ... { if (c) { S1 } sync; if (c) { S2 } }``.
A barrier in a loop whose trip count differs between threads cannot be placed: that is an error.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, List, Optional, Set, Tuple

from ..errors import BuildError
from ..tir import attr
from ..tir import dtype as dt
from ..tir.expr import Buffer, BufferLoad, Call, IntImm, Not, PrimExpr, Ramp, Var
from ..tir.functor import collect
from ..tir.printer import expr_str
from ..tir.simplify import simplify, structural_equal, to_linear
from ..tir.stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    seq,
)
from .allreduce import barrier

READ, WRITE, SYNC = "read", "write", "sync"
#: storage scopes whose accesses need barriers between threads
SYNC_SCOPES = (attr.SHARED,)
#: attribute of the statement that fills the idle half of a double buffer (set by double_buffer.py)
DOUBLE_BUFFER_WRITE = attr.DOUBLE_BUFFER_WRITE
#: attribute of the statements whose copies into shared memory may be asynchronous (set by
#: double_buffer.py; the CUDA code generator prints them as ``cp.async`` on sm_80 and newer)
ASYNC_COPY = attr.ASYNC_COPY


@dataclass(frozen=True, eq=False)
class Access:
    """One shared-memory access (or a barrier) as the planner sees it; ``index`` None = unknown."""

    kind: str
    buffer: Optional[Buffer] = None
    index: Optional[PrimExpr] = None
    double_buffer_write: bool = False
    async_write: bool = False


_SYNC = Access(SYNC)


def is_barrier(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op.name == "tir.tvm_storage_sync"


def has_barrier(s: Stmt) -> bool:
    return bool(collect(s, lambda n: isinstance(n, Evaluate) and is_barrier(n)))


def _reads(e) -> List[Access]:
    out = []
    for n in collect(e, lambda n: isinstance(n, BufferLoad)):
        if n.buffer.scope in SYNC_SCOPES:
            out.append(Access(READ, n.buffer, n.indices[0] if len(n.indices) == 1 else None))
    return out


def _uses(e, names: Set[Var]) -> bool:
    return any(v in names for v in collect(e, lambda n: isinstance(n, Var)))


class _Planner:
    def __init__(self):
        self.threads: List[Tuple[Var, Optional[int]]] = []  # threadIdx.* in scope, with extents
        self.varying: Set[Var] = set()  # variables whose value may differ between the threads

    # -- uniformity ---------------------------------------------------------------------------
    def is_varying(self, e: PrimExpr) -> bool:
        """Whether ``e`` may differ between the threads of a block (conservative)."""
        if collect(e, lambda n: isinstance(n, BufferLoad)):
            return True
        return _uses(e, self.varying)

    # -- the walk: (new statement, its accesses in order) --------------------------------------
    def visit(self, s: Stmt) -> Tuple[Stmt, List[Access]]:
        if isinstance(s, SeqStmt):
            return self.plan([self.visit(x) for x in s.seq], None)
        if isinstance(s, For):
            return self.visit_for(s)
        if isinstance(s, IfThenElse):
            return self.visit_if(s)
        if isinstance(s, AttrStmt):
            return self.visit_attr(s)
        if isinstance(s, Allocate):
            body, acc = self.visit(s.body)
            return dataclasses.replace(s, body=body), acc
        if isinstance(s, LetStmt):
            if self.is_varying(s.value):
                self.varying.add(s.var)
            body, acc = self.visit(s.body)
            acc = _relax(acc, {s.var})
            return dataclasses.replace(s, body=body), _reads(s.value) + acc
        if isinstance(s, BufferStore):
            acc = _reads(s.value) + [a for i in s.indices for a in _reads(i)]
            if s.buffer.scope in SYNC_SCOPES:
                acc.append(Access(WRITE, s.buffer, s.indices[0] if len(s.indices) == 1 else None))
            return s, acc
        if isinstance(s, Evaluate):
            return s, [_SYNC] if is_barrier(s) else _reads(s.value)
        return s, []

    def visit_for(self, s: For) -> Tuple[Stmt, List[Access]]:
        varying_loop = self.is_varying(s.min) or self.is_varying(s.extent)
        if varying_loop:
            self.varying.add(s.loop_var)
        items = list(s.body.seq) if isinstance(s.body, SeqStmt) else [s.body]
        body, acc = self.plan([self.visit(x) for x in items], s.loop_var)
        if varying_loop and any(a.kind == SYNC for a in acc):
            raise BuildError(
                f"a barrier (shared memory written by one thread and read by another) is needed inside "
                f"loop {s.loop_var.name}, whose trip count {expr_str(s.extent)} differs between the "
                "threads of a block; every thread must reach every barrier. Give the loop an extent "
                "that does not depend on threadIdx (guard the body instead)")
        acc = _relax(acc, {s.loop_var})
        return dataclasses.replace(s, body=body), [dataclasses.replace(a, double_buffer_write=False)
                                                   for a in acc]

    def visit_if(self, s: IfThenElse) -> Tuple[Stmt, List[Access]]:
        then, acc = self.plan_block(s.then_case)
        other, acc2 = (None, []) if s.else_case is None else self.plan_block(s.else_case)
        acc = _reads(s.condition) + acc + acc2
        out = IfThenElse(s.condition, then, other)
        if any(a.kind == SYNC for a in acc) and self.is_varying(s.condition):
            out = self.split_branch(s.condition, then, other)
        return out, acc

    def visit_attr(self, s: AttrStmt) -> Tuple[Stmt, List[Access]]:
        if s.attr_key == attr.THREAD_EXTENT:
            tag = s.node.thread_tag
            if tag.startswith("threadIdx"):
                ext = simplify(s.value)
                self.threads.append((s.node.var, ext.value if isinstance(ext, IntImm) else None))
                self.varying.add(s.node.var)
            body, acc = self.visit(s.body)
            return dataclasses.replace(s, body=body), acc
        body, acc = self.visit(s.body)
        if s.attr_key == DOUBLE_BUFFER_WRITE:
            acc = [dataclasses.replace(a, double_buffer_write=True)
                   if a.kind == WRITE and a.buffer is s.node else a for a in acc]
        if s.attr_key == ASYNC_COPY:
            acc = [dataclasses.replace(a, async_write=True)
                   if a.kind == WRITE and a.buffer is s.node else a for a in acc]
        return dataclasses.replace(s, body=body), acc

    def plan_block(self, s: Stmt) -> Tuple[Stmt, List[Access]]:
        items = list(s.seq) if isinstance(s, SeqStmt) else [s]
        return self.plan([self.visit(x) for x in items], None)

    # -- planning one sequence (TVM's ThreadSyncPlanner::Summarize) -----------------------------
    def plan(self, items: List[Tuple[Stmt, List[Access]]], loop_var: Optional[Var]):
        reads: List[Access] = []
        writes: List[Access] = []
        before: Set[int] = set()
        for k, (_s, acc) in enumerate(items):
            need = False
            for a in acc:
                if a.kind == SYNC:
                    reads, writes = [], []
                elif self.conflict(reads if a.kind == WRITE else writes, a, None):
                    need = True
                    break
            if need:
                reads, writes = [], []
                before.add(k)
            for a in acc:
                if a.kind == SYNC:
                    reads, writes = [], []
                else:
                    (reads if a.kind == READ else writes).append(a)
        if loop_var is not None:  # the back edge: what is left against the next iteration's start
            for k, (_s, acc) in enumerate(items):
                if k in before or not (reads or writes):
                    break
                need = False
                for a in acc:
                    if a.kind == SYNC:
                        reads, writes = [], []
                    elif self.conflict(reads if a.kind == WRITE else writes, a, loop_var):
                        need = True
                        break
                if need:
                    before.add(k)
                    break
        out: List[Stmt] = []
        summary: List[Access] = []
        tail: List[Access] = []
        nsync = 0
        for k, (s, acc) in enumerate(items):
            if k in before:
                out.append(barrier())
                acc = [_SYNC] + acc
            out.append(s)
            for a in acc:  # exposed accesses: all before the first barrier, those after the last
                if a.kind == SYNC:
                    if nsync == 0:
                        summary.append(_SYNC)
                    tail = []
                    nsync += 1
                elif nsync == 0:
                    summary.append(a)
                else:
                    tail.append(a)
        return seq(*out), summary + tail

    def conflict(self, prev: Iterable[Access], cur: Access, loop_var: Optional[Var]) -> bool:
        for x in prev:
            if x.buffer is not cur.buffer:
                continue
            if not (x.async_write or cur.async_write) and self.same_thread_element(x, cur, loop_var):
                continue  # (an asynchronous copy lands only at a barrier, even for its own thread)
            if x.double_buffer_write and cur.kind == READ and loop_var is None:
                continue  # the idle half is written while the current half is read
            return True
        return False

    def same_thread_element(self, x: Access, y: Access, loop_var: Optional[Var]) -> bool:
        """Both accesses touch the same element, and no two threads touch the same element."""
        if x.index is None or y.index is None or not structural_equal(x.index, y.index):
            return False
        if loop_var is not None and _uses(x.index, {loop_var}):
            return False  # across iterations the same expression names another element
        return self.thread_injective(x.index)

    def thread_injective(self, index: PrimExpr) -> bool:
        base, width = index, 1
        if isinstance(index, Ramp):
            s = simplify(index.stride)
            if not isinstance(s, IntImm):
                return False
            base, width = index.base, abs(s.value) * (index.lanes - 1) + 1
        if dt.lanes(base.dtype) != 1 or not self.threads:
            return False
        lin = to_linear(simplify(base))
        coef = {}
        for c, t in lin.terms.values():
            if isinstance(t, Var) and any(t is v for v, _ in self.threads):
                coef[t] = c
            elif _uses(t, {v for v, _ in self.threads}):
                return False  # a thread index inside a non-linear term
        span = width
        for c, ext in sorted(((abs(coef.get(v, 0)), e) for v, e in self.threads), key=lambda t: t[0]):
            if ext is None or (c == 0 and ext > 1) or (ext > 1 and c < span):
                return False
            span += c * (ext - 1)
        return True

    # -- barriers under thread-dependent conditions ---------------------------------------------
    def split_branch(self, cond: PrimExpr, then: Stmt, other: Optional[Stmt]) -> Stmt:
        if collect(cond, lambda n: isinstance(n, BufferLoad)):
            raise BuildError(f"a barrier is needed inside the branch if ({expr_str(cond)}), whose condition "
                             "reads memory and differs between threads; every thread must reach every "
                             "barrier")
        out = self.distribute(cond, then)
        if other is not None:
            out = seq(out, self.distribute(Not(cond), other))
        return out

    def distribute(self, cond: PrimExpr, s: Stmt) -> Stmt:
        """``if (cond) s`` with every barrier of ``s`` executed by every thread."""
        if not has_barrier(s):
            return IfThenElse(cond, s)
        if is_barrier(s):
            return s
        if isinstance(s, SeqStmt):
            return seq(*[self.distribute(cond, x) for x in s.seq])
        if isinstance(s, For):
            if self.is_varying(s.min) or self.is_varying(s.extent):
                raise BuildError(f"a barrier is needed inside loop {s.loop_var.name}, whose trip count "
                                 f"{expr_str(s.extent)} differs between threads; every thread must reach "
                                 "every barrier")
            return dataclasses.replace(s, body=self.distribute(cond, s.body))
        if isinstance(s, (Allocate, AttrStmt)):
            return dataclasses.replace(s, body=self.distribute(cond, s.body))
        if isinstance(s, LetStmt) and not collect(s.value, lambda n: isinstance(n, BufferLoad)):
            return dataclasses.replace(s, body=self.distribute(cond, s.body))
        if isinstance(s, IfThenElse) and not self.is_varying(s.condition):
            return IfThenElse(s.condition, self.distribute(cond, s.then_case),
                              None if s.else_case is None else self.distribute(cond, s.else_case))
        raise BuildError(f"a barrier is needed inside the branch if ({expr_str(cond)}), whose condition "
                         f"differs between threads, and it cannot be moved out of a {type(s).__name__}; "
                         "every thread must reach every barrier")


def _relax(acc: List[Access], bound: Set[Var]) -> List[Access]:
    """Accesses as seen from outside the scope of ``bound``: indices using them become unknown."""
    return [dataclasses.replace(a, index=None) if a.index is not None and _uses(a.index, bound) else a
            for a in acc]


def insert_storage_sync(stmt: Stmt, target: str = "cuda") -> Stmt:
    """Insert ``tvm_storage_sync`` barriers for the shared memory of GPU kernels (``target`` cuda
    or opencl; other targets run one thread per block and are returned unchanged)."""
    if target not in ("cuda", "opencl"):
        return stmt
    # each statement of the top level is a launch of its own (or host code): no barrier between them
    items = list(stmt.seq) if isinstance(stmt, SeqStmt) else [stmt]
    return seq(*[_Planner().visit(s)[0] for s in items])
