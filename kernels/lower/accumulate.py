"""Reductions that accumulate in a register: the init hoisted out of the reduction loops, and loop-
invariant elements that a loop reads and writes kept in a local accumulator.

Two passes, each leaving the code as it is wherever its pattern does not hold:

``hoist_reduction_init`` (a block pass, before ``lower_init_block``): a reduction block whose
``T.init()`` sits under a perfectly nested chain of serial loops that iterate exactly its reduction
variables (every loop of the chain appears in a reduction binding and in no spatial one; no reduction
binding uses a loop outside the chain) has its init run once before the chain::

    for i, k in T.grid(n, m):           for i in range(n):
        with T.block("B"):                  B[i] = 0                  # the init, at vk == 0
            ...                     ->      for k in range(m):
            with T.init():                      with T.block("B"):    # no init any more
                B[vi] = 0                           B[vi] = B[vi] + A[vi, vk]
            B[vi] = B[vi] + A[vi, vk]

The block must write one buffer at one element given by its spatial variables. Conjuncts of a
``T.where`` that use only loops outside the chain guard the init too; those that use only chain loops
stay on the update; a conjunct mixing both leaves the block as it is.

``promote_accumulators`` (a target pass, after the tensor-core rewrite, cross-thread reductions and
intrinsics, before vectorizing; ``tvm.lower`` prints the loops without it, as TVM does): a serial
loop of at least one iteration that stores to a buffer element whose index does not change inside
the loop (a buffer allocated outside the loop), where every access to that buffer in the loop is
that element, unconditional and plain (no condition, no ``Select``, no call taking pointers, no
thread or attribute scope in the loop), gets a one-element ``local`` accumulator::

    for k in range(m):                  B_acc[0] = B[i]     # or v, where B[i] = v precedes the loop
        B[i] = B[i] + A[i*m + k]   ->   for k in range(m):
                                            B_acc[0] = B_acc[0] + A[i*m + k]
                                        B[i] = B_acc[0]

Shared-memory buffers are never promoted (other threads may read them between iterations), nor is
anything inside a vectorized loop (the accumulator would have to be a vector).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Set, Tuple

from ..tir import attr
from ..tir.block import (
    BlockRealize,
    ExprMutator,
    IterVarType,
    ThreadBindingFor,
    children_stmts,
    exprs_of,
    is_true,
    substitute_stmt,
    walk,
)
from ..tir.expr import And, Buffer, BufferLoad, Call, PrimExpr, Select, Var, const
from ..tir.functor import collect, conjuncts, vars_of
from ..tir.simplify import const_int_bound, structural_equal
from ..tir.stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    seq,
)

_SERIAL = (ForKind.SERIAL, ForKind.UNROLLED)
#: statements whose memory accesses are all visible as BufferLoad/BufferStore (anything else, e.g. a
#: call statement, an attribute scope or a cross-thread reduction, stops both passes)
_PLAIN = (For, SeqStmt, IfThenElse, BufferStore, LetStmt, Allocate)


def _all(conds: List[PrimExpr]) -> Optional[PrimExpr]:
    out: Optional[PrimExpr] = None
    for c in conds:
        out = c if out is None else And(out, c)
    return out


def _rebuild(s: Stmt, visit) -> Stmt:
    """``s`` with ``visit`` applied to its direct child statements (identity kept if none changed)."""
    if isinstance(s, SeqStmt):
        new = [visit(x) for x in s.seq]
        return s if all(a is b for a, b in zip(new, s.seq)) else seq(*new)
    if isinstance(s, IfThenElse):
        t = visit(s.then_case)
        e = None if s.else_case is None else visit(s.else_case)
        return s if (t is s.then_case and e is s.else_case) else IfThenElse(s.condition, t, e)
    if isinstance(s, (For, LetStmt, Allocate, AttrStmt)):
        b = visit(s.body)
        return s if b is s.body else dataclasses.replace(s, body=b)
    if isinstance(s, BlockRealize):
        blk = s.block
        body = visit(blk.body)
        init = None if blk.init is None else visit(blk.init)
        if body is blk.body and init is blk.init:
            return s
        return dataclasses.replace(s, block=dataclasses.replace(blk, body=body, init=init))
    return s


# -- the init out of the reduction loops ------------------------------------------------------------------


def _store_of(s: Stmt) -> Optional[BufferStore]:
    return s if isinstance(s, BufferStore) else None


def _hoistable(chain: List[For], outer: Set[Var], r: BlockRealize
               ) -> Optional[Tuple[Stmt, PrimExpr, PrimExpr]]:
    """(init statement over the loops, its guard, the update's predicate) when ``r``'s init can run
    once before ``chain``; None where the pattern does not hold."""
    blk = r.block
    if blk.match_buffers or blk.alloc_buffers or len(blk.writes) != 1:
        return None
    if any(isinstance(f, ThreadBindingFor) or f.kind not in _SERIAL for f in chain):
        return None
    inner = {f.loop_var for f in chain}
    used: Set[Var] = set()
    spatial: Dict[Var, PrimExpr] = {}
    for iv, v in zip(blk.iter_vars, r.iter_values):
        vs = vars_of(v)
        if iv.iter_type == IterVarType.DataPar:
            if vs & inner:
                return None
            spatial[iv.var] = v
        elif iv.iter_type == IterVarType.CommReduce:
            if vs & outer:
                return None
            used |= vs & inner
        else:
            return None
    if used != inner:
        return None
    init = _store_of(blk.init)
    if init is None:
        return None
    out = blk.writes[0].buffer
    if init.buffer.data is not out.data or (vars_of(init) & {iv.var for iv in blk.iter_vars
                                                             if iv.var not in spatial}):
        return None
    if any(ld.buffer.data is out.data for ld in collect(init.value, lambda n: isinstance(n, BufferLoad))):
        return None
    # every access to the output in the body is the init's element
    for s in walk(blk.body):
        if type(s) not in _PLAIN or isinstance(s, Allocate):
            return None
        if isinstance(s, BufferStore) and s.buffer.data is out.data and \
                not _same_index(s.indices, init.indices):
            return None
        for e in exprs_of(s):
            for ld in collect(e, lambda n: isinstance(n, BufferLoad)):
                if ld.buffer.data is out.data and not _same_index(ld.indices, init.indices):
                    return None
    guard, update = [], []
    for c in ([] if is_true(r.predicate) else conjuncts(r.predicate)):
        vs = vars_of(c)
        if vs & inner and vs & outer:
            return None
        (update if vs & inner else guard).append(c)
    stmt = substitute_stmt(init, spatial)
    return stmt, _all(guard), _all(update)


def _same_index(a, b) -> bool:
    return len(a) == len(b) and all(structural_equal(x, y) for x, y in zip(a, b))


def hoist_reduction_init(stmt: Stmt) -> Stmt:
    """Run a reduction block's init once before the loops of its reduction (see the module doc)."""
    outer: List[Var] = []

    def chain_of(f: For) -> Tuple[List[For], Stmt]:
        chain = [f]
        while isinstance(chain[-1].body, For):
            chain.append(chain[-1].body)
        return chain, chain[-1].body

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, For):
            chain, end = chain_of(s)
            if isinstance(end, BlockRealize) and end.block.init is not None:
                got = _hoistable(chain, set(outer), end)
                if got is not None:
                    init, guard, update = got
                    blk = dataclasses.replace(end.block, init=None)
                    r = dataclasses.replace(end, block=blk, predicate=const(True) if update is None
                                            else update)
                    loops: Stmt = r
                    for f in reversed(chain):
                        loops = dataclasses.replace(f, body=loops)
                    out = seq(init, loops)
                    return out if guard is None else IfThenElse(guard, out)
            outer.append(s.loop_var)
            try:
                return _rebuild(s, visit)
            finally:
                outer.pop()
        if isinstance(s, BlockRealize):
            # the loops inside a block are outer loops of the blocks nested in it, as are its variables
            return _rebuild(s, visit)
        return _rebuild(s, visit)

    return visit(stmt)


# -- a local accumulator for a loop-invariant element -----------------------------------------------------


def _bound_inside(s: Stmt) -> Set[Var]:
    out: Set[Var] = set()
    for n in walk(s):
        if isinstance(n, For):
            out.add(n.loop_var)
        elif isinstance(n, LetStmt):
            out.add(n.var)
    return out


def _conditional_loads(e: PrimExpr) -> List[BufferLoad]:
    """Loads under a ``Select`` or an ``if_then_else`` call in ``e``."""
    out: List[BufferLoad] = []
    for n in collect(e, lambda x: isinstance(x, Select) or (isinstance(x, Call) and x.name.endswith(
            "if_then_else"))):
        out.extend(collect(n, lambda x: isinstance(x, BufferLoad)))
    return out


def _promotable(f: For, skip: Set[int] = frozenset()) -> List[Tuple[Buffer, Tuple[PrimExpr, ...]]]:
    """The (buffer, element) pairs of loop ``f`` that can live in a local accumulator (buffers whose
    data is in ``skip``, or allocated inside the loop, excepted)."""
    lo, _ = const_int_bound(f.extent)
    if f.kind not in _SERIAL or isinstance(f, ThreadBindingFor) or lo is None or lo < 1:
        return []
    bound = _bound_inside(f)
    inside = {id(n.buffer.data) for n in walk(f.body) if isinstance(n, Allocate)}
    index: Dict[int, Tuple[Buffer, Tuple[PrimExpr, ...]]] = {}
    stored: Set[int] = set()
    bad: Set[int] = set()

    def note(buf: Buffer, idx, conditional: bool) -> None:
        key = id(buf.data)
        if key in bad:
            return
        if conditional or buf.scope not in (attr.GLOBAL, attr.LOCAL, "") or any(vars_of(i) & bound for i in idx):
            bad.add(key)
            return
        seen = index.get(key)
        if seen is None:
            index[key] = (buf, tuple(idx))
        elif seen[0].dtype != buf.dtype or not _same_index(seen[1], idx):
            bad.add(key)

    def scan(s: Stmt, conditional: bool) -> bool:
        # only statements whose every access is a BufferLoad/BufferStore seen here
        if type(s) not in _PLAIN:
            return False
        if isinstance(s, For) and (s.kind not in _SERIAL or isinstance(s, ThreadBindingFor)):
            return False
        for e in exprs_of(s):
            if collect(e, lambda x: isinstance(x, Call) and any(
                    getattr(a, "dtype", "") == "handle" for a in x.args)):
                return False
            cond_loads = {id(ld) for ld in _conditional_loads(e)}
            for ld in collect(e, lambda x: isinstance(x, BufferLoad)):
                note(ld.buffer, ld.indices, conditional or id(ld) in cond_loads
                     or isinstance(s, (IfThenElse, For)))
        if isinstance(s, BufferStore):
            note(s.buffer, s.indices, conditional)
            stored.add(id(s.buffer.data))
        if isinstance(s, IfThenElse):
            return all(scan(c, True) for c in children_stmts(s))
        return all(scan(c, conditional) for c in children_stmts(s))

    if not scan(f.body, False):
        return []
    return [index[k] for k in index if k in stored and k not in bad and k not in inside and k not in skip]


def promote_accumulators(stmt: Stmt) -> Stmt:
    """Keep loop-invariant elements that a loop updates in local accumulators (see the module doc)."""
    names: Set[str] = set()
    made: Set[int] = set()  # the accumulators' data: never promoted again in inner loops
    for n in walk(stmt):
        if isinstance(n, Allocate):
            names.add(n.buffer.name)

    def fresh(base: str) -> str:
        name, i = f"{base}_acc", 1
        while name in names:
            name, i = f"{base}_acc{i}", i + 1
        names.add(name)
        return name

    def visit(s: Stmt, in_vector: bool) -> Stmt:
        if isinstance(s, For):
            if s.kind == ForKind.VECTORIZED:
                return _rebuild(s, lambda c: visit(c, True))
            if not in_vector:
                found = _promotable(s, made)
                if found:
                    return promote(s, found)
        if isinstance(s, SeqStmt) and not in_vector:
            # ``B[i] = v`` just before a loop promoting ``B[i]``: the accumulator starts at ``v``
            out: List[Stmt] = []
            items = list(s.seq)
            j = 0
            while j < len(items):
                st, nxt = items[j], items[j + 1] if j + 1 < len(items) else None
                if isinstance(st, BufferStore) and isinstance(nxt, For) and nxt.kind != ForKind.VECTORIZED \
                        and not any(ld.buffer.data is st.buffer.data
                                    for ld in collect(st.value, lambda x: isinstance(x, BufferLoad))):
                    found = _promotable(nxt, made)
                    if any(b.data is st.buffer.data and _same_index(idx, st.indices) for b, idx in found):
                        out.append(promote(nxt, found, {id(st.buffer.data): st.value}))
                        j += 2
                        continue
                out.append(visit(st, in_vector))
                j += 1
            return seq(*out)
        return _rebuild(s, lambda c: visit(c, in_vector))

    def promote(f: For, found: List[Tuple[Buffer, Tuple[PrimExpr, ...]]],
                start: Optional[Dict[int, PrimExpr]] = None) -> Stmt:
        accs = {id(buf.data): Buffer(fresh(buf.name), buf.dtype, (const(1),), attr.LOCAL)
                for buf, _ in found}
        made.update(id(a.data) for a in accs.values())
        zero = (const(0),)

        def load(e: PrimExpr) -> Optional[PrimExpr]:
            if isinstance(e, BufferLoad) and id(e.buffer.data) in accs:
                return BufferLoad(accs[id(e.buffer.data)], zero)
            return None

        class _M(ExprMutator):
            def __init__(self):
                super().__init__(rewrite_expr=load)

            def visit_BufferStore(self, s: BufferStore) -> Stmt:
                s2 = self.generic(s)
                if id(s.buffer.data) in accs:
                    return BufferStore(accs[id(s.buffer.data)], s2.value, zero)
                return s2

        body = _M()(f.body)
        inner = _rebuild(dataclasses.replace(f, body=body), lambda c: visit(c, False))
        start = start or {}
        out: Stmt = seq(*[BufferStore(accs[id(b.data)], start.get(id(b.data), BufferLoad(b, idx)), zero)
                          for b, idx in found],
                        inner,
                        *[BufferStore(b, BufferLoad(accs[id(b.data)], zero), idx) for b, idx in found])
        for b, _ in reversed(found):
            out = Allocate(accs[id(b.data)], const(1), out)
        return out

    return visit(stmt, False)


__all__ = ["hoist_reduction_init", "promote_accumulators"]
