"""Checks the schedule primitives share: affine bindings, block kinds, producers and consumers."""

from __future__ import annotations

from typing import List, Optional, Set

from ...errors import ScheduleError
from .. import attr
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
    """The region ``reg`` of block ``r`` over the loops between ``r`` and ``upto`` (exclusive) and the
    thread loops above that share the buffer's memory, per dimension as inclusive symbolic bounds
    (None where unknown)."""
    from ..block import loop_thread
    from ..functor import substitute
    from ..region import bound, loop_dom
    from ..simplify import simplify
    from ..stmt import For

    vmap = {iv.var: v for iv, v in zip(r.block.iter_vars, r.iter_values)}
    dom = {}
    above = False
    for a in st.index.ancestors(r):
        if a is upto:
            above = True
        if isinstance(a, For) and (not above or (loop_thread(a) and attr.threads_share(reg.buffer.scope,
                                                                             loop_thread(a)))):
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


def uncovered_read(st, rs: List[BlockRealize], k: int) -> Optional[str]:
    """Why the blocks before ``rs[k]`` that write what it reads do not cover the region it reads
    (None when they do): each region is taken over the loops below the innermost loop the two
    blocks share, and over the threads above that share the buffer's memory (TVM's
    ``region_cover``)."""
    from ..simplify import can_prove, simplify

    q = rs[k]
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
                ok = c is not None and any(can_prove(simplify(lo <= c[0])) and can_prove(simplify(hi >= c[1]))
                                           for lo, hi in _merged([pr[d] for pr in produced]))
                if not ok:
                    return f"block {q.block.name_hint} reads a region of {rd.buffer.name} that " \
                           f"{block_names(ps)} do{'es' if len(ps) == 1 else ''} not cover"
    return None


def _merged(items) -> List[tuple]:
    """The intervals ``items`` with those that provably overlap or touch merged (a lower bound of
    their union: a gap between two intervals is never bridged)."""
    from ..region import union_intervals
    from ..simplify import can_prove, simplify

    out: List[tuple] = [x for x in items if x is not None]
    changed = True
    while changed:
        changed = False
        for i in range(len(out)):
            for j in range(len(out)):
                if i == j:
                    continue
                a, b = out[i], out[j]
                if can_prove(simplify(b[0] <= a[1] + 1)) and can_prove(simplify(a[0] <= b[0])):
                    out[i] = union_intervals([a, b])
                    del out[j]
                    changed = True
                    break
            if changed:
                break
    return out


def stage_pipeline_violation(st, scope: Block) -> Optional[str]:
    """Why the blocks under ``scope`` are not a stage pipeline (None when they are): a block writes a
    buffer an earlier block reads (write after read), or the earlier blocks writing a buffer a block
    reads do not cover the region it reads (:func:`uncovered_read`), as TVM's ``stage_pipeline``
    flag requires."""
    rs = child_realizes(scope)
    for k, q in enumerate(rs):
        for w in q.block.writes:
            earlier = [p for p in rs[:k] if any(x.buffer is w.buffer for x in p.block.reads)
                       and not any(x.buffer is w.buffer for x in p.block.writes)]
            if earlier:
                return f"block {q.block.name_hint} writes {w.buffer.name} after block " \
                       f"{earlier[0].block.name_hint} reads it"
    for k in range(len(rs)):
        why = uncovered_read(st, rs, k)
        if why:
            return why
    return None


def is_affine_binding(st, r: BlockRealize) -> bool:
    """Whether the bindings of ``r`` are quasi-affine in the loops around it and no loop feeds two
    bindings except through ``//`` and ``%`` of a split (TVM's ``affine_binding``)."""
    loop_ids = {id(lp.loop_var) for lp in st.index.all_loops_above(r)}
    seen: Set[int] = set()
    for v in r.iter_values:
        if not is_quasi_affine(v, loop_ids):
            return False
        plain = _plain_vars(v) & loop_ids
        if plain & seen:
            return False
        seen |= plain
    return True


def _plain_vars(e: PrimExpr) -> Set[int]:
    """Ids of the variables of ``e`` used outside ``//`` and ``%``."""
    if isinstance(e, Var):
        return {id(e)}
    if isinstance(e, (FloorDiv, FloorMod)):
        return set()
    out: Set[int] = set()
    for name in ("a", "b"):
        c = getattr(e, name, None)
        if isinstance(c, PrimExpr):
            out |= _plain_vars(c)
    return out


def cached_flags(st, r: BlockRealize):
    """TVM's cached flags of block ``r``: affine bindings, reads covered by the producers of its
    scope, and its own scope a stage pipeline."""
    from .state import CachedFlags

    scope = st.index.scope_block(r)
    if scope is None:
        return CachedFlags(True, True, stage_pipeline_violation(st, r.block) is None)
    rs = child_realizes(scope)
    k = next(i for i, q in enumerate(rs) if q is r)
    return CachedFlags(is_affine_binding(st, r), uncovered_read(st, rs, k) is None,
                       stage_pipeline_violation(st, r.block) is None)
