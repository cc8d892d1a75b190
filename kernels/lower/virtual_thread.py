"""Virtual threads (TVM's InjectVirtualThread): a loop bound to ``vthread`` (or ``cthread``) runs its
iterations as if they were threads of their own, interleaved inside one real thread.

Lowering first emits the bound axis as a loop of kind ``vthread`` around everything computed inside
it; this pass (run on flat buffers) pushes that loop as deep as it can go:

- a statement that does not depend on the virtual thread index (directly, through a variable
  computed from it, or through a buffer written with values or at places that depend on it) runs
  once for all virtual threads: a cooperative fetch into shared memory inside a virtual-thread loop
  is made once, not once per virtual thread;
- a loop whose bounds do not depend on the index keeps its place and the virtual threads move into
  its body (a k loop runs once, each step doing the work of every virtual thread);
- a statement that depends on the index is repeated for each virtual thread (copies when it holds
  no loop, an unrolled loop over the index otherwise);
- a buffer allocated inside the loop that depends on the index gets one slice per virtual thread
  (``extent * n`` elements, the thread's slice at ``v * extent``); shared-memory buffers that do not
  depend on it stay shared (``vthread``; ``cthread`` gives every virtual thread its own copy).

The result computes the same values as running the loop's iterations one after another, with the
work of different virtual threads interleaved: what the register-tiled schedules use them for
(a thread's tile spread over its block's tile, so that a warp's threads read nearby shared memory).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Set

from ..tir import attr
from ..tir.expr import Buffer, BufferLoad, IntImm, PrimExpr, Var, const
from ..tir.functor import collect, rewrite, substitute
from ..tir.simplify import simplify
from ..tir.stmt import (Allocate, AttrStmt, BufferStore, For, ForKind, IfThenElse, LetStmt, SeqStmt, Stmt,
                        seq)
from .unroll import unroll_loop

#: the loop kind lowering gives an axis bound to a virtual thread until this pass removes it
VTHREAD = attr.VTHREAD


def _uses(node, touched: Set[int]) -> bool:
    """Whether ``node`` reads a touched variable or loads from a touched buffer."""
    if not isinstance(node, (PrimExpr, Stmt)):
        return False  # an attribute's value that is not an expression (a stage name, a tensor)
    return bool(collect(node, lambda n: (isinstance(n, Var) and id(n) in touched)
                        or (isinstance(n, BufferLoad) and id(n.buffer.data) in touched)))


def _touched(body: Stmt, var: Var) -> Set[int]:
    """Ids of the variables and buffer pointers whose values depend on ``var`` (a fixpoint: a store
    with a dependent value, index or enclosing condition makes its buffer dependent; so does a let
    or a loop with a dependent bound for its variable)."""
    touched = {id(var)}
    while True:
        before = len(touched)

        def visit(s, dep: bool):
            if isinstance(s, SeqStmt):
                for x in s.seq:
                    visit(x, dep)
            elif isinstance(s, BufferStore):
                if dep or _uses(s.value, touched) or any(_uses(i, touched) for i in s.indices):
                    touched.add(id(s.buffer.data))
            elif isinstance(s, For):
                d = dep or _uses(s.min, touched) or _uses(s.extent, touched)
                if d:
                    touched.add(id(s.loop_var))
                visit(s.body, d)
            elif isinstance(s, IfThenElse):
                d = dep or _uses(s.condition, touched)
                visit(s.then_case, d)
                if s.else_case is not None:
                    visit(s.else_case, d)
            elif isinstance(s, LetStmt):
                if dep or _uses(s.value, touched):
                    touched.add(id(s.var))
                visit(s.body, dep)
            elif isinstance(s, (Allocate, AttrStmt)):
                visit(s.body, dep)
            elif dep or _uses(s, touched):  # Evaluate and other leaves: calls that write memory
                for b in collect(s, lambda n: isinstance(n, Buffer)):
                    touched.add(id(b.data))

        visit(body, False)
        if len(touched) == before:
            return touched


def _expand(body: Stmt, var: Var, n: int, touched: Set[int], allow_share: bool):
    """Give every dependent buffer allocated in ``body`` (every one, without ``allow_share``) one
    slice per virtual thread. Returns the new body, or None where a buffer is used other than by
    loads and stores (the caller then falls back to copying the whole loop)."""
    allocs = [a for a in collect(body, lambda x: isinstance(x, Allocate))
              if id(a.buffer.data) in touched or not allow_share]
    if not allocs:
        return body
    slices: Dict[int, tuple] = {}
    for a in allocs:
        new = dataclasses.replace(a.buffer, shape=(simplify(a.extent * n),), data=None)
        slices[id(a.buffer)] = (new, simplify(var * a.extent))
        touched.add(id(new.data))
    bad = collect(body, lambda x: not isinstance(x, (BufferLoad, BufferStore, Allocate))
                  and isinstance(getattr(x, "buffer", None), Buffer) and id(x.buffer) in slices)
    if bad:
        return None

    def fn(x):
        if isinstance(x, (BufferLoad, BufferStore)) and id(x.buffer) in slices:
            new, offset = slices[id(x.buffer)]
            return dataclasses.replace(x, buffer=new, indices=(x.indices[0] + offset,) + tuple(x.indices[1:]))
        if isinstance(x, Allocate) and id(x.buffer) in slices:
            return dataclasses.replace(x, buffer=slices[id(x.buffer)][0], extent=simplify(x.extent * n))
        return None

    return rewrite(body, fn)


def _repeat(stmt: Stmt, var: Var, n: int) -> Stmt:
    """``stmt`` once per virtual thread: copies, or an unrolled loop where it holds loops."""
    if collect(stmt, lambda x: isinstance(x, For)):
        fresh = Var(var.name, var.dtype)
        return For(fresh, const(0, var.dtype), const(n, var.dtype), ForKind.UNROLLED,
                   substitute(stmt, {var: fresh}))
    return unroll_loop(For(var, const(0, var.dtype), const(n, var.dtype), ForKind.UNROLLED, stmt))


def _dependence(touched: Set[int]):
    """``dep(stmt)``: whether ``stmt`` reads or writes anything that depends on the virtual thread
    index (memoized per statement, so pushing the loop inwards stays linear in the body's size)."""
    memo: Dict[int, bool] = {}

    def dep(s) -> bool:
        got = memo.get(id(s))
        if got is not None:
            return got
        if isinstance(s, SeqStmt):
            out = any([dep(x) for x in s.seq])
        elif isinstance(s, For):
            out = _uses(s.min, touched) or _uses(s.extent, touched) or dep(s.body)
        elif isinstance(s, IfThenElse):
            out = _uses(s.condition, touched) or dep(s.then_case) or \
                (s.else_case is not None and dep(s.else_case))
        elif isinstance(s, LetStmt):
            out = _uses(s.value, touched) or id(s.var) in touched or dep(s.body)
        elif isinstance(s, (Allocate, AttrStmt)):
            out = _uses(getattr(s, "value", None), touched) or dep(s.body)
        elif isinstance(s, BufferStore):
            out = id(s.buffer.data) in touched or _uses(s.value, touched) or \
                any(_uses(i, touched) for i in s.indices)
        else:
            out = _uses(s, touched)
        memo[id(s)] = out
        return out

    return dep


def _inject(s: Stmt, var: Var, n: int, touched: Set[int], dep) -> Stmt:
    if not dep(s):
        return s  # the same for every virtual thread: done once
    if isinstance(s, SeqStmt):
        return seq(*(_inject(x, var, n, touched, dep) for x in s.seq))
    if isinstance(s, For) and not (_uses(s.min, touched) or _uses(s.extent, touched)):
        return dataclasses.replace(s, body=_inject(s.body, var, n, touched, dep))
    if isinstance(s, IfThenElse) and not _uses(s.condition, touched):
        return dataclasses.replace(s, then_case=_inject(s.then_case, var, n, touched, dep),
                                   else_case=None if s.else_case is None
                                   else _inject(s.else_case, var, n, touched, dep))
    if isinstance(s, LetStmt) and not _uses(s.value, touched) and id(s.var) not in touched:
        return dataclasses.replace(s, body=_inject(s.body, var, n, touched, dep))
    if isinstance(s, (Allocate, AttrStmt)) and not (isinstance(s, AttrStmt) and _uses(s.value, touched)):
        return dataclasses.replace(s, body=_inject(s.body, var, n, touched, dep))
    return _repeat(s, var, n)


def inject_virtual_thread(stmt: Stmt) -> Stmt:
    """Replace every loop of kind ``vthread`` by its body with the virtual threads pushed inside
    (inner virtual-thread loops first)."""

    def fn(s):
        if not isinstance(s, For) or s.kind != VTHREAD:
            return None
        ext = simplify(s.extent)
        var, body = s.loop_var, s.body
        if not isinstance(ext, IntImm):  # cannot happen for a bound vthread axis; keep a loop
            return dataclasses.replace(s, kind=ForKind.SERIAL)
        n = ext.value
        if n == 1:
            return substitute(body, {var: simplify(s.min)})
        if not (isinstance(s.min, IntImm) and s.min.value == 0):
            body = substitute(body, {var: var + s.min})
        allow_share = dict(s.annotations).get("thread_tag", "vthread") != "cthread"
        touched = _touched(body, var)
        expanded = _expand(body, var, n, touched, allow_share)
        if expanded is None:
            return unroll_loop(dataclasses.replace(s, kind=ForKind.UNROLLED))
        touched = _touched(expanded, var)
        return _inject(expanded, var, n, touched, _dependence(touched))

    return rewrite(stmt, fn, lambda x: x if not isinstance(x, Stmt) else None)
