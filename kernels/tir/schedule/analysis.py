"""Checks the schedule primitives share: affine bindings, block kinds, producers and consumers."""

from __future__ import annotations

from typing import List, Optional, Set

from ...errors import ScheduleError
from ..block import Block, BlockRealize, IterVarType
from ..expr import Add, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var
from ..functor import vars_of
from ..printer import expr_str
from .state import child_realizes


def is_quasi_affine(e: PrimExpr, loop_vars: Set[int]) -> bool:
    """Whether ``e`` is built from loop variables with ``+``, ``-``, multiplication by a loop-invariant
    factor and ``//``/``%`` by a positive constant (TVM's affine bindings, in the forms split and fuse
    produce)."""
    used = {id(v) for v in vars_of(e)} & loop_vars
    if not used:
        return True
    if isinstance(e, Var):
        return True
    if isinstance(e, (Add, Sub)):
        return is_quasi_affine(e.a, loop_vars) and is_quasi_affine(e.b, loop_vars)
    if isinstance(e, Mul):
        a_inv = not ({id(v) for v in vars_of(e.a)} & loop_vars)
        b_inv = not ({id(v) for v in vars_of(e.b)} & loop_vars)
        if a_inv:
            return is_quasi_affine(e.b, loop_vars)
        if b_inv:
            return is_quasi_affine(e.a, loop_vars)
        return False
    if isinstance(e, (FloorDiv, FloorMod)):
        return isinstance(e.b, IntImm) and e.b.value > 0 and is_quasi_affine(e.a, loop_vars)
    return False


def check_affine(prim: str, r: BlockRealize, loop_vars: Set[int]) -> None:
    """Refuse a block whose bindings are not affine in the loops around it."""
    for iv, v in zip(r.block.iter_vars, r.iter_values):
        if not is_quasi_affine(v, loop_vars):
            raise ScheduleError(f"{prim}: block {r.block.name_hint} has a non-affine binding "
                                f"{iv.var.name} = {expr_str(v)}; the primitive needs bindings that are "
                                "affine in the loop variables")


def check_iter_kinds(prim: str, blk: Block) -> None:
    for iv in blk.iter_vars:
        if iv.iter_type not in (IterVarType.DataPar, IterVarType.CommReduce):
            raise ScheduleError(f"{prim}: block {blk.name_hint} has the opaque or ordered block variable "
                                f"{iv.var.name}; only spatial and reduction variables can be scheduled")


def is_reduction(blk: Block) -> bool:
    return any(iv.iter_type == IterVarType.CommReduce for iv in blk.iter_vars)


def producers(scope: Block, r: BlockRealize) -> List[BlockRealize]:
    """Blocks of the same scope that write a buffer ``r`` reads."""
    reads = {id(x.buffer) for x in r.block.reads}
    return [o for o in child_realizes(scope) if o is not r
            and any(id(w.buffer) in reads for w in o.block.writes)]


def consumers(scope: Block, r: BlockRealize) -> List[BlockRealize]:
    """Blocks of the same scope that read a buffer ``r`` writes."""
    writes = {id(x.buffer) for x in r.block.writes}
    return [o for o in child_realizes(scope) if o is not r
            and any(id(x.buffer) in writes for x in o.block.reads)]


def block_names(rs) -> str:
    return ", ".join(x.block.name_hint for x in rs)


def _only_writer(scope: Block, r: BlockRealize) -> Optional[str]:
    """Why ``r`` is not the only writer of its outputs in ``scope`` (None when it is)."""
    for w in r.block.writes:
        others = [o for o in child_realizes(scope) if o is not r
                  and any(x.buffer is w.buffer for x in o.block.writes)]
        if others:
            return f"{block_names(others)} also write{'' if len(others) > 1 else 's'} {w.buffer.name}"
    return None


def compact_dataflow_violation(scope: Block, r: BlockRealize) -> Optional[str]:
    """Why block ``r`` breaks TVM's compact data flow rule (None when it keeps it).

    A block keeps it when it is a *complete* block (only spatial variables, the only writer of its
    outputs in the scope, reading none of the buffers it writes) or a *reduction* block (an ``init``,
    only spatial and reduction variables, the only writer of its outputs, no reduction variable in
    the indices of what it writes). Only such blocks can run the iterations of a loop in any order
    or at once: any other block carries a dependence between iterations.
    """
    blk = r.block
    kinds = {iv.iter_type for iv in blk.iter_vars}
    writer = _only_writer(scope, r)
    if kinds <= {IterVarType.DataPar}:
        if writer:
            return f"it is not the only writer of its output ({writer})"
        written = {id(w.buffer) for w in blk.writes}
        both = [x.buffer.name for x in blk.reads if id(x.buffer) in written]
        if both:
            return f"it reads the buffer{'s' if len(both) > 1 else ''} it writes ({', '.join(both)}) " \
                   "without being a reduction (no init)"
        return None
    if not kinds <= {IterVarType.DataPar, IterVarType.CommReduce}:
        return "it has opaque or ordered block variables"
    if blk.init is None:
        return "it has reduction variables but no init"
    if writer:
        return f"it is not the only writer of its output ({writer})"
    red = {iv.var for iv in blk.iter_vars if iv.iter_type == IterVarType.CommReduce}
    for w in blk.writes:
        for x in w.region:
            used = (vars_of(x.min) | vars_of(x.extent)) & red
            if used:
                return f"its reduction variable {sorted(v.name for v in used)[0]} indexes its output " \
                       f"{w.buffer.name}"
    return None


def _relaxed(st, r: BlockRealize, reg, upto) -> List[Optional[tuple]]:
    """The region ``reg`` of block ``r`` over the loops between ``r`` and ``upto`` (exclusive), per
    dimension as inclusive symbolic bounds (None where unknown)."""
    from ..functor import substitute
    from ..region import bound, loop_dom
    from ..simplify import simplify
    from ..stmt import For

    vmap = {iv.var: v for iv, v in zip(r.block.iter_vars, r.iter_values)}
    dom = {}
    for a in st.index.ancestors(r):
        if a is upto:
            break
        if isinstance(a, For):
            dom[a.loop_var] = loop_dom(a)
    out = []
    for x in reg.region:
        lo = bound(simplify(substitute(x.min, vmap)), dom)[0]
        hi = bound(simplify(substitute(simplify(x.min + x.extent - 1), vmap)), dom)[1]
        out.append(None if lo is None or hi is None else (lo, hi))
    return out


def _lca(st, a, b):
    anc_a = [a] + st.index.ancestors(a)
    anc_b = set(id(x) for x in [b] + st.index.ancestors(b))
    return next(x for x in anc_a if id(x) in anc_b)


def stage_pipeline_violation(st, scope: Block) -> Optional[str]:
    """Why the blocks under ``scope`` are not a stage pipeline (None when they are): a block writes a
    buffer an earlier block reads (write after read), or the earlier blocks writing a buffer a block
    reads do not cover the region it reads (each region taken over the loops below the innermost
    loop the two blocks share), as TVM's ``stage_pipeline`` flag requires."""
    from ..simplify import can_prove, simplify

    rs = child_realizes(scope)
    for k, q in enumerate(rs):
        for w in q.block.writes:
            earlier = [p for p in rs[:k] if any(x.buffer is w.buffer for x in p.block.reads)
                       and not any(x.buffer is w.buffer for x in p.block.writes)]
            if earlier:
                return f"block {q.block.name_hint} writes {w.buffer.name} after block " \
                       f"{earlier[0].block.name_hint} reads it"
    for k, q in enumerate(rs):
        for rd in q.block.reads:
            prods = [p for p in rs[:k] if any(x.buffer is rd.buffer for x in p.block.writes)]
            groups: dict = {}
            for p in prods:
                lca = _lca(st, p, q)
                groups.setdefault(id(lca), (lca, []))[1].append(p)
            for lca, ps in groups.values():
                consumed = _relaxed(st, q, rd, lca)
                produced = [_relaxed(st, p, next(x for x in p.block.writes if x.buffer is rd.buffer), lca)
                            for p in ps]
                for d, c in enumerate(consumed):
                    ok = c is not None and any(
                        pr[d] is not None and can_prove(simplify(pr[d][0] <= c[0]))
                        and can_prove(simplify(pr[d][1] >= c[1])) for pr in produced)
                    if not ok and c is not None and len(ps) > 1:
                        from ..region import union_intervals

                        hull = union_intervals([pr[d] for pr in produced])
                        ok = hull is not None and can_prove(simplify(hull[0] <= c[0])) and \
                            can_prove(simplify(hull[1] >= c[1]))
                    if not ok:
                        return f"block {q.block.name_hint} reads a region of {rd.buffer.name} that " \
                               f"{block_names(ps)} do{'es' if len(ps) == 1 else ''} not cover"
    return None
