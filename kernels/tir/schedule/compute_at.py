"""compute_at and reverse_compute_at: move a block under a loop of another nest.

``compute_at(block, loop)`` moves a producer under ``loop``, before its first consumer there, with
a new loop nest (``ax0``, ``ax1`` ...) covering the region its consumers under ``loop`` read in one
iteration of ``loop``. The consumers' loops below ``loop`` are relaxed over their ranges; the loops
above stay fixed, except threads that share the buffer's memory (``threadIdx`` for ``shared``,
every thread for ``global``), as TVM does. ``reverse_compute_at(block, loop)`` moves a consumer
after its producers under ``loop`` over the region they write there::

    for i_0 in T.thread_binding(8, thread="blockIdx.x"):        # compute_at(A_shared, i_1)
        for i_1 in T.thread_binding(128, thread="threadIdx.x"):
            for ax0 in T.serial(130):
                with T.block("A_shared"):
                    v0 = T.axis.spatial(1026, i_0 * 128 + ax0)
            with T.block("C"): ...          # reads A_shared[vi : vi + 3], vi = i_0 * 128 + i_1

Where the covering region may run past the block variable's domain, the moved block gets a
``T.where`` predicate keeping it inside.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

from ...errors import ScheduleError
from .. import attr
from ..block import BlockRealize, BlockToken, IterVarType, loop_thread, make_for, replace_stmt
from ..expr import And, IntImm, PrimExpr, Var, const
from ..functor import vars_of
from ..printer import expr_str
from ..region import Interval, bound, loop_dom, union_intervals
from ..simplify import can_prove, const_int_bound, simplify
from ..stmt import For, ForKind, seq
from .analysis import (
    block_names,
    check_iter_kinds,
    compact_dataflow_violation,
    consumers,
    is_reduction,
    producers,
)
from .state import (
    ScheduleState,
    body_items,
    child_realizes,
    is_output_buffer,
    loop_ranges,
    remove_realize,
    simplify_bindings,
)


def _relax_dom(st: ScheduleState, q: BlockRealize, lp: For, scope: Optional[str]) -> Dict[Var, Interval]:
    dom: Dict[Var, Interval] = {}
    for a in st.index.ancestors(q):
        if a is lp:
            break
        if isinstance(a, For):
            dom[a.loop_var] = loop_dom(a)
    if scope is not None:
        for a in [lp] + st.index.ancestors(lp):
            if isinstance(a, For) and loop_thread(a) and attr.threads_share(scope, loop_thread(a)):
                dom[a.loop_var] = loop_dom(a)
    return dom


def compute_at(st: ScheduleState, token: BlockToken, name: str, var: Var, preserve_unit_loops: bool,
               index: int, reverse: bool) -> None:
    prim = "reverse_compute_at" if reverse else "compute_at"
    r = st.realize(token, prim, name)
    blk = r.block
    lp = st.loop(var, prim)
    idx = st.index
    prods, cons = _check_movable(prim, st, r, lp, reverse)
    required = prods if reverse else cons
    items = body_items(lp.body)
    pos = _position(prim, st, r, lp, items, prods, cons, index)
    _check_order(prim, st, r, lp, items, pos, prods if reverse else [])
    want = _wanted_intervals(prim, st, blk, lp, required, reverse)
    ranges = loop_ranges(idx.all_loops_above(lp) + [lp])
    values, new_loops, pred = _cover(blk, want, ranges, preserve_unit_loops, reverse)
    if is_reduction(blk):
        _check_reduction_not_shared(prim, blk, values, idx.all_loops_above(lp) + [lp])
    moved: object = BlockRealize(tuple(values), pred, blk)
    for lv, ext in reversed(new_loops):
        moved = make_for(lv, const(0, lv.dtype), ext, ForKind.SERIAL, moved)
    new_items = items[:pos] + [moved] + items[pos:]
    new_lp = dataclasses.replace(lp, body=seq(*new_items))
    new_lp = simplify_bindings(new_lp, idx.all_loops_above(lp))
    body = remove_realize(st.func.body, idx, r)
    body = replace_stmt(body, lp, new_lp)
    st.set_body(body)


def _check_movable(prim: str, st: ScheduleState, r: BlockRealize, lp: For, reverse: bool):
    """(producers, consumers) of the block of ``r`` in its scope, once it is checked that it may move
    under ``lp``: not the root, in the same scope, not under ``lp`` already, not an output block
    (compute_at), its consumers (producers) all under ``lp``, its loop nest of compact dataflow and
    (reverse_compute_at) no loop above ``lp`` running a producer's reduction."""
    blk = r.block
    idx = st.index
    scope = idx.scope_block(r)
    if scope is None:
        raise ScheduleError(f"{prim}: block {blk.name_hint} is the root block")
    if idx.scope_block(lp) is not scope:
        raise ScheduleError(f"{prim}: block {blk.name_hint} and loop {lp.loop_var.name} are not under the "
                            "same block scope")
    if idx.is_ancestor(lp, r):
        raise ScheduleError(f"{prim}: loop {lp.loop_var.name} is an ancestor of block {blk.name_hint}; the "
                            "block must be moved under a loop of another loop nest")
    check_iter_kinds(prim, blk)
    if not reverse:
        for w in blk.writes:
            if is_output_buffer(st.func, w.buffer):
                raise ScheduleError(f"compute_at: block {blk.name_hint} is an output block (it writes the "
                                    f"output buffer {w.buffer.name}); "
                                    "only intermediate stages (a cache or alloc_buffer) can be computed at a "
                                    "loop (use reverse_compute_at for a consumer)")
    prods, cons = producers(scope, r), consumers(scope, r)
    required = prods if reverse else cons
    missing = [q for q in required if not idx.is_ancestor(lp, q)]
    if missing:
        rel = "producer" if reverse else "consumer"
        verb = "is" if len(missing) == 1 else "are"
        raise ScheduleError(f"{prim}: the primitive requires all the {rel}s of block {blk.name_hint} to be "
                            f"under loop {lp.loop_var.name}; {block_names(missing)} {verb} not")
    top = ([a for a in idx.ancestors(r) if isinstance(a, For) and idx.scope_block(a) is scope] or [None])[-1]
    for q in child_realizes(top) if top is not None else []:
        why = compact_dataflow_violation(scope, q)
        if why:
            raise ScheduleError(f"{prim}: the loop nest of block {blk.name_hint} (loop {top.loop_var.name}) "
                                f"does not have compact dataflow: block {q.block.name_hint} "
                                f"{why.replace('it ', '', 1)}")
    if reverse:
        chain = [lp] + [a for a in idx.ancestors(lp) if isinstance(a, For)]
        for q in prods:
            for iv, v in zip(q.block.iter_vars, q.iter_values):
                if iv.iter_type == IterVarType.DataPar:
                    continue
                hit = [a for a in chain if a.loop_var in vars_of(v)]
                if hit:
                    pname = q.block.name_hint
                    raise ScheduleError(f"reverse_compute_at: loop {hit[0].loop_var.name} runs the reduction "
                                        f"variable {iv.var.name} of producer {pname}; what {pname} writes is "
                                        f"complete only after that loop, so block {blk.name_hint} cannot go "
                                        f"under loop {lp.loop_var.name}")
    return prods, cons


def _position(prim: str, st: ScheduleState, r: BlockRealize, lp: For, items, prods, cons, index: int) -> int:
    """Where among ``items`` (the statements of ``lp``'s body) the block goes: before its first
    consumer (``index`` -1), after its last producer (-2), or at ``index`` between the two."""
    idx = st.index
    blk = r.block

    def positions(rs) -> List[int]:
        return [k for k, it in enumerate(items) if any(q is it or idx.is_ancestor(it, q) for q in rs)]

    last_prod = max(positions(prods), default=-1)
    first_cons = min(positions(cons), default=len(items))
    if last_prod >= first_cons:
        raise ScheduleError(f"{prim}: under loop {lp.loop_var.name}, a producer of block {blk.name_hint} "
                            "comes after one of its consumers; there is no place for the block")
    if index == -1:
        pos = first_cons
    elif index == -2:
        pos = last_prod + 1
    elif last_prod < index <= first_cons:
        pos = index
    else:
        raise ScheduleError(f"{prim}: index {index} for block {blk.name_hint} under loop "
                            f"{lp.loop_var.name} must "
                            f"be -1, -2 or in [{last_prod + 1}, {first_cons}]")
    return pos


def _wanted_intervals(prim: str, st: ScheduleState, blk, lp: For, required, reverse: bool
                      ) -> Dict[int, List[Optional[Interval]]]:
    """For each block variable of ``blk`` (by id), the intervals of it that the ``required`` blocks
    (its consumers, or producers for reverse_compute_at) access under ``lp`` in one iteration of it
    (None: unbounded)."""
    provided = blk.reads if reverse else blk.writes
    ivars = {id(iv.var): iv for iv in blk.iter_vars}
    want: Dict[int, List[Optional[Interval]]] = {}
    for reg in provided:
        req_regions = []
        for q in required:
            qregs = q.block.writes if reverse else q.block.reads
            vmap = {iv.var: v for iv, v in zip(q.block.iter_vars, q.iter_values)}
            relax = _relax_dom(st, q, lp, None if reverse else reg.buffer.scope)
            for qr in qregs:
                if qr.buffer is not reg.buffer:
                    continue
                dims = []
                for x in qr.region:
                    lo = bound(substitute_stmt_expr(x.min, vmap), relax)[0]
                    hi = bound(substitute_stmt_expr(simplify(x.min + x.extent - 1), vmap), relax)[1]
                    dims.append(None if lo is None or hi is None else (lo, hi))
                req_regions.append(dims)
        if not req_regions:
            continue
        for d, rg in enumerate(reg.region):
            m = rg.min
            point = isinstance(rg.extent, IntImm) and rg.extent.value == 1
            if isinstance(m, Var) and id(m) in ivars and point:
                want.setdefault(id(m), []).append(union_intervals([rr[d] for rr in req_regions]))
            elif not (vars_of(m) & {iv.var for iv in blk.iter_vars}):
                continue
            elif not reverse and _tile(m, rg.extent, ivars) is not None:
                # X[c * v + d : c * v + d + e] with e >= c: v's tiles cover [lo, hi] from the tile of lo
                # to the tile of hi
                v, c, off = _tile(m, rg.extent, ivars)
                it = union_intervals([rr[d] for rr in req_regions])
                want.setdefault(id(v), []).append(
                    None if it is None else (simplify((it[0] - off) // c), simplify((it[1] - off) // c)))
            else:
                raise ScheduleError(f"{prim}: block {blk.name_hint} accesses {reg.buffer.name} at "
                                    f"{expr_str(m)} in dimension {d}; the moved block must access each "
                                    "element at its block variables (X[v0, v1])")
    return want


def _cover(blk, want: Dict[int, List[Optional[Interval]]], ranges, preserve_unit_loops: bool, reverse: bool):
    """(values, new_loops, pred): the moved block's bindings, the new loops (variable, extent) over
    the ``want``-ed intervals (a variable's whole domain where none is known), and the predicate that
    keeps each binding inside its domain where that is not proven under ``ranges``."""
    values: List[PrimExpr] = []
    new_loops: List[tuple] = []
    preds: List[PrimExpr] = []
    for iv in blk.iter_vars:
        dmin = iv.dom.min
        dmax = simplify(iv.dom.min + iv.dom.extent - 1)
        got = want.get(id(iv.var))
        it = union_intervals(got) if got else None
        if it is None:
            lo, hi = dmin, dmax
        else:
            lo, hi = simplify(it[0], ranges), simplify(it[1], ranges)
        ext = simplify(hi - lo + 1, ranges)
        if not isinstance(ext, IntImm):
            ub = const_int_bound(ext, ranges)[1]
            if ub is not None and not reverse:
                ext = const(ub)
        if isinstance(ext, IntImm) and ext.value <= 0:
            ext = const(1)
        if isinstance(ext, IntImm) and ext.value == 1 and not preserve_unit_loops:
            value = lo
        else:
            lv = Var(f"ax{len(new_loops)}", iv.var.dtype)
            new_loops.append((lv, ext))
            value = simplify(lo + lv)
        values.append(value)
        if not can_prove(simplify(lo >= dmin), ranges):
            preds.append(value >= dmin)
        last = simplify(lo + ext - 1)
        if not can_prove(simplify(last <= dmax), ranges):
            preds.append(value <= dmax)
    pred: PrimExpr = const(True)
    for p in preds:
        pred = p if isinstance(pred, IntImm) else And(pred, p)
    return values, new_loops, pred


def _check_order(prim: str, st: ScheduleState, r: BlockRealize, lp: For, items, pos: int,
                 producers_at: List[BlockRealize]) -> None:
    """The block may not move past, or interleave with, a block that writes what it reads or reads or
    writes what it writes (its consumers may read its output; for reverse_compute_at its producers
    under the loop may write its inputs): the values it reads or leaves would change."""
    from ..block import walk

    # the blocks of the scope, in the order they run (a nested block is summarised by its parent)
    order = child_realizes(st.index.scope_block(r))
    ids = {id(q) for q in order}
    here = {id(q) for q in walk(lp) if isinstance(q, BlockRealize) and id(q) in ids}
    later = [q for it in items[pos:] for q in walk(it) if isinstance(q, BlockRealize) and id(q) in ids]
    if later:
        n = order.index(later[0])
    else:
        inside = [k for k, q in enumerate(order) if id(q) in here]
        n = (max(inside) + 1) if inside else len(order)
    o = order.index(r)
    between = order[o + 1:n] if n > o else order[n:o]
    above = {id(a) for a in st.index.ancestors(r)}
    allowed = {id(q) for q in producers_at}
    reads = {id(x.buffer) for x in r.block.reads}
    writes = {id(x.buffer) for x in r.block.writes}
    seen = set()
    for q in between + [q for q in order if id(q) in here]:
        if q is r or id(q) in above or id(q) in seen:
            continue
        seen.add(id(q))
        hit = [x.buffer.name for x in q.block.writes if id(x.buffer) in writes]
        if id(q) not in allowed:
            hit += [x.buffer.name for x in q.block.writes if id(x.buffer) in reads]
        if prim == "reverse_compute_at":
            hit += [x.buffer.name for x in q.block.reads if id(x.buffer) in writes]
        if hit:
            name = r.block.name_hint
            raise ScheduleError(f"{prim}: block {q.block.name_hint} writes or reads {hit[0]}, which block "
                                f"{name} accesses too; moving block {name} under loop {lp.loop_var.name} "
                                "would change the order of those accesses")


def _tile(m: PrimExpr, extent: PrimExpr, ivars) -> Optional[tuple]:
    """``(v, c, d)`` when ``m`` is ``c * v + d`` for one block variable ``v``, a constant ``c > 0`` and
    ``d`` free of block variables, and ``extent`` is a constant at least ``c`` (tiles without gaps)."""
    from ..simplify import to_linear

    if not isinstance(extent, IntImm):
        return None
    lin = to_linear(simplify(m))
    found = None
    rest: PrimExpr = const(lin.const, m.dtype)
    for coef, term in lin.terms.values():
        if isinstance(term, Var) and id(term) in ivars:
            if found is not None or coef <= 0:
                return None
            found = (term, coef)
        elif vars_of(term) & {iv.var for iv in ivars.values()}:
            return None
        else:
            rest = rest + term * coef
    if found is None or extent.value < found[1]:
        return None
    return found[0], found[1], simplify(rest)


def _check_reduction_not_shared(prim: str, blk, values: List[PrimExpr], outer: List[For]) -> None:
    """A reduction block may not be moved under a loop run in parallel (threads, ``parallel``,
    ``vectorized``) whose iterations share the memory it writes (``local`` buffers are each thread's
    own; ``shared`` ones are shared by the threads of a GPU block, ``global`` ones by all): its
    read-modify-write updates would be run by several iterations at once, each on a part of one
    element's reduction or, for the threads of a GPU block the moved block is not bound to, all of
    them redundantly."""
    from ..block import IterVarType

    scopes = {w.buffer.scope for w in blk.writes}

    def shared_by(lp: For) -> bool:
        tag = loop_thread(lp)
        if tag:
            return any(attr.threads_share(sc, tag) for sc in scopes)
        return lp.kind not in (ForKind.SERIAL, ForKind.UNROLLED) and scopes != {"local"}

    par = [lp for lp in outer if shared_by(lp)]

    def feeds_reduction(lp: For) -> list:
        return [iv for iv, v in zip(blk.iter_vars, values)
                if iv.iter_type != IterVarType.DataPar and lp.loop_var in vars_of(v)]

    par.sort(key=lambda lp: not feeds_reduction(lp))  # a loop a reduction variable uses first
    for lp in par:
        how = loop_thread(lp) or lp.kind
        reduce_ = feeds_reduction(lp)
        why = f"its reduction variable {reduce_[0].var.name} would depend on loop {lp.loop_var.name} " \
              f"({how})" if reduce_ else f"loop {lp.loop_var.name} above it runs in parallel ({how})"
        raise ScheduleError(f"{prim}: block {blk.name_hint} is a reduction block and {why}; parallel "
                            "iterations would update its output at once (move it under serial loops, or "
                            "rfactor the reduction)")


def substitute_stmt_expr(e: PrimExpr, vmap) -> PrimExpr:
    from ..functor import substitute

    return simplify(substitute(e, vmap))

