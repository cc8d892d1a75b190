"""Loop primitives: split, fuse, reorder, and the loop kinds (parallel, vectorize, unroll, bind)."""

from __future__ import annotations

from typing import List, Optional, Sequence

from ...errors import ScheduleError
from ..block import (
    THREAD_BINDING,
    THREAD_TAGS,
    BlockRealize,
    IterVarType,
    StmtMutator,
    make_for,
    substitute_stmt,
    with_loop,
)
from ..expr import And, IntImm, PrimExpr, Var, const, convert
from ..functor import vars_of
from ..printer import expr_str
from ..simplify import can_prove, simplify
from ..stmt import For, ForKind, Stmt
from .analysis import block_names, check_affine, check_iter_kinds, compact_dataflow_violation
from .state import ScheduleState, child_realizes, simplify_bindings


def _plain(prim: str, lp: For) -> None:
    if lp.kind == THREAD_BINDING:
        raise ScheduleError(f"{prim}: {_ref(lp)} is bound to a thread; {prim} loops before binding "
                            "them")
    if lp.annotations:
        keys = ", ".join(k for k, _ in lp.annotations)
        raise ScheduleError(f"{prim}: {_ref(lp)} has annotations ({keys}); {prim} loops before "
                            "annotating them")
    if not (isinstance(lp.min, IntImm) and lp.min.value == 0):
        raise ScheduleError(f"{prim}: {_ref(lp)} starts at {expr_str(lp.min)}, not 0")


def _blocks_text(lp: For) -> str:
    rs = child_realizes(lp)
    return f" (block {block_names(rs)})" if rs else ""


def _ref(lp: For) -> str:
    """``loop i (block B, bound to blockIdx.x)``: the loop, the blocks under it and its thread."""
    from ..block import loop_thread

    rs = child_realizes(lp)
    parts = [f"block {block_names(rs)}"] if rs else []
    if loop_thread(lp):
        parts.append(f"bound to {loop_thread(lp)}")
    return f"loop {lp.loop_var.name}" + (f" ({', '.join(parts)})" if parts else "")


def _append_predicate(body: Stmt, cond: PrimExpr) -> Stmt:
    """``cond and`` the predicate of every block realize directly under ``body``."""

    class _M(StmtMutator):
        def visit_BlockRealize(self, r: BlockRealize) -> Stmt:
            pred = cond if (isinstance(r.predicate, IntImm) and r.predicate.value) else And(r.predicate, cond)
            return BlockRealize(r.iter_values, pred, r.block)

    return _M()(body)


def split(st: ScheduleState, var: Var, factors: Sequence, preserve_unit_iters: bool = True) -> List[Var]:
    """Split a loop into ``len(factors)`` nested loops; one factor may be None (inferred).

    ``for i in range(1024)`` split by ``[None, 128]`` gives::

        for i_0 in range(8):
            for i_1 in range(128):
                vi = i_0 * 128 + i_1

    When the factors' product exceeds the extent, the blocks under it get the predicate
    ``T.where(i_0 * 128 + i_1 < extent)``.
    """
    lp = st.loop(var, "split")
    _plain("split", lp)
    if not isinstance(factors, (list, tuple)) or not factors:
        raise ScheduleError(f"split: factors of {_ref(lp)} must be a non-empty list, got "
                            f"{factors!r}")
    nones = [k for k, f in enumerate(factors) if f is None]
    if len(nones) > 1:
        raise ScheduleError(f"split: at most one factor may be None (inferred), got {list(factors)} for "
                            f"{_ref(lp)}")
    vals: List[Optional[PrimExpr]] = []
    for f in factors:
        if f is None:
            vals.append(None)
            continue
        e = convert(int(f)) if isinstance(f, (int, IntImm)) and not isinstance(f, bool) else None
        if e is None:
            raise ScheduleError(f"split: factor {f!r} of {_ref(lp)} is not an integer")
        if e.value <= 0:
            raise ScheduleError(f"split: factor {e.value} of {_ref(lp)} must be positive")
        vals.append(e)
    ext = simplify(lp.extent)
    known: PrimExpr = const(1)
    for v in vals:
        if v is not None:
            known = simplify(known * v)
    if nones:
        vals[nones[0]] = simplify((ext + known - 1) // known)
        total = simplify(known * vals[nones[0]])
    else:
        total = known
        if can_prove(total < ext):
            raise ScheduleError(f"split: the factors {list(factors)} multiply to {expr_str(total)}, less "
                                f"than the extent {expr_str(ext)} of {_ref(lp)}")
    name = lp.loop_var.name
    new_vars = [Var(f"{name}_{k}", lp.loop_var.dtype) for k in range(len(vals))]
    keep = [preserve_unit_iters or not (isinstance(v, IntImm) and v.value == 1) for v in vals]
    expr: PrimExpr = const(0, lp.loop_var.dtype)
    for v, f, kp in zip(new_vars, vals, keep):
        expr = expr * f + (v if kp else const(0, lp.loop_var.dtype))
    expr = simplify(expr)
    body = substitute_stmt(lp.body, {lp.loop_var: expr})
    diff = simplify(total - ext)
    if not (isinstance(diff, IntImm) and diff.value == 0):
        body = _append_predicate(body, expr < ext)
    for v, f, kp in reversed(list(zip(new_vars, vals, keep))):
        if kp:
            body = make_for(v, const(0, v.dtype), f, ForKind.SERIAL, body)
    new_nest = body
    outer = st.index.all_loops_above(lp)
    new_nest = simplify_bindings(new_nest, outer)
    st.replace(lp, new_nest)
    return [v for v, kp in zip(new_vars, keep) if kp]


def fuse(st: ScheduleState, vars_: Sequence[Var], preserve_unit_iters: bool = True) -> Var:
    """Fuse consecutive nested loops into one: ``for i, j`` (extents 8, 8) become ``i_j_fused`` (64)
    with ``i = i_j_fused // 8``, ``j = i_j_fused % 8``."""
    if not vars_:
        raise ScheduleError("fuse: no loop given")
    loops = [st.loop(v, "fuse") for v in vars_]
    ids = [id(lp) for lp in loops]
    if len(set(ids)) != len(ids):
        raise ScheduleError(f"fuse: a loop is given twice ({', '.join(lp.loop_var.name for lp in loops)})")
    for lp in loops:
        _plain("fuse", lp)
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            if st.index.is_ancestor(outer, inner):
                raise ScheduleError(f"fuse: {_ref(inner)} is not the only child of loop "
                                    f"{outer.loop_var.name}; fused loops must be directly nested")
            raise ScheduleError(f"fuse: {_ref(inner)} is not directly inside loop "
                                f"{outer.loop_var.name}; give the loops outermost first, each the only "
                                "child of the previous")
    fused_ids = {id(lp.loop_var) for lp in loops}
    for lp in loops[1:]:
        if {id(v) for v in vars_of(lp.extent)} & fused_ids:
            raise ScheduleError(f"fuse: the extent of {_ref(lp)} depends on another fused loop")
    dtype = loops[0].loop_var.dtype
    fv = Var("_".join(lp.loop_var.name for lp in loops) + "_fused", dtype)
    exts = [simplify(lp.extent) for lp in loops]
    vmap = {}
    inner_prod: PrimExpr = const(1, dtype)
    for k in range(len(loops) - 1, -1, -1):
        e: PrimExpr = fv if k == len(loops) - 1 else simplify(fv // inner_prod)
        if k > 0:
            e = e % exts[k]
        if not preserve_unit_iters and isinstance(exts[k], IntImm) and exts[k].value == 1:
            e = const(0, dtype)
        vmap[loops[k].loop_var] = simplify(e) if k > 0 or len(loops) == 1 else e
        inner_prod = simplify(inner_prod * exts[k])
    total = inner_prod
    body = substitute_stmt(loops[-1].body, vmap)
    new = make_for(fv, const(0, dtype), total, ForKind.SERIAL, body)
    outer = st.index.all_loops_above(loops[0])
    new = simplify_bindings(new, outer)
    st.replace(loops[0], new)
    return fv


def reorder(st: ScheduleState, vars_: Sequence[Var]) -> None:
    """Put the given loops in the given order, in the positions they occupy in their nest. The loops
    must be nested in one chain (each loop between them the only child of its parent)."""
    loops = [st.loop(v, "reorder") for v in vars_]
    if len({id(x) for x in loops}) != len(loops):
        names = [lp.loop_var.name for lp in loops]
        dup = next(n for n in names if names.count(n) > 1)
        lp = next(x for x in loops if x.loop_var.name == dup)
        raise ScheduleError(f"reorder: {_ref(lp)} is given twice")
    if len(loops) < 2:
        return
    idx = st.index
    depth = {id(lp): len(idx.ancestors(lp)) for lp in loops}
    by_depth = sorted(loops, key=lambda lp: depth[id(lp)])
    top, bottom = by_depth[0], by_depth[-1]
    for lp in by_depth[:-1]:
        if not idx.is_ancestor(lp, bottom):
            raise ScheduleError(f"reorder: {_ref(lp)} and {_ref(bottom)} are not nested in one another (they "
                                "are in different loop nests or branches)")
    chain: List[For] = [top]
    while chain[-1] is not bottom:
        cur = chain[-1]
        if not isinstance(cur.body, For):
            raise ScheduleError(f"reorder: {_ref(cur)} has more than one child statement, so "
                                f"the loops "
                                f"from {top.loop_var.name} to {bottom.loop_var.name} are not a single chain")
        chain.append(cur.body)
    given = {id(lp) for lp in loops}
    it = iter(loops)
    new_chain = [next(it) if id(lp) in given else lp for lp in chain]
    for k, lp in enumerate(new_chain):
        later = {id(x.loop_var) for x in new_chain[k + 1:]}
        if {id(v) for v in vars_of(lp.extent)} & later or {id(v) for v in vars_of(lp.min)} & later:
            raise ScheduleError(f"reorder: the extent of {_ref(lp)} depends on a loop that "
                                "would move inside it")
    all_loop_vars = {id(x.loop_var) for x in idx.all_loops_above(bottom)} | {id(bottom.loop_var)}
    for r in child_realizes(bottom):
        check_iter_kinds("reorder", r.block)
        check_affine("reorder", r, all_loop_vars | {id(x.loop_var) for x in _loops_inside(bottom)})
    body: Stmt = bottom.body
    for lp in reversed(new_chain):
        body = with_loop(lp, body=body)
    st.replace(top, body)


def _loops_inside(lp: For) -> List[For]:
    from ..block import walk

    return [s for s in walk(lp.body) if isinstance(s, For)]


def _check_parallelizable(st: ScheduleState, lp: For, prim: str, thread: str = "") -> None:
    """TVM's rules for a parallel, vectorized or thread-bound loop: every block under it keeps compact
    data flow (a complete or a reduction block, see ``compact_dataflow_violation``), has affine
    bindings, and the loop computes only its spatial variables (``threadIdx`` may compute a
    reduction variable: a cross-thread reduction)."""
    what = f"bound to {thread}" if thread else {"parallel": "parallelized", "vectorize": "vectorized"}.get(
        prim, prim + "d")
    loop_vars = {id(x.loop_var) for x in st.index.all_loops_above(lp)} | {id(lp.loop_var)} | \
        {id(x.loop_var) for x in _loops_inside(lp)}
    scope = st.index.scope_block(lp)
    top = child_realizes(lp)
    for r in top:
        why = compact_dataflow_violation(scope, r) if scope is not None else None
        if why:
            raise ScheduleError(f"{prim}: loop {lp.loop_var.name} cannot be {what}: block "
                                f"{r.block.name_hint} under it does not have compact data flow ({why}); the "
                                "iterations of the loop would race")
    from ..block import walk

    for r in [q for q in walk(lp.body) if isinstance(q, BlockRealize)]:  # nested blocks too, as TVM
        blk = r.block
        for iv, v in zip(blk.iter_vars, r.iter_values):
            if lp.loop_var not in vars_of(v):
                continue
            if iv.iter_type == IterVarType.DataPar:
                continue
            if iv.iter_type == IterVarType.CommReduce and thread.startswith("threadIdx"):
                continue
            kind = "reduction" if iv.iter_type == IterVarType.CommReduce else "non-spatial"
            raise ScheduleError(f"{prim}: loop {lp.loop_var.name} computes the {kind} variable "
                                f"{iv.var.name} of "
                                f"block {blk.name_hint}; only loops over spatial block variables can be "
                                f"{'bound to ' + thread if thread else prim + 'd'}")
        if any(r is q for q in top):
            check_affine(prim, r, loop_vars)


def set_kind(st: ScheduleState, var: Var, kind: str, prim: str) -> None:
    lp = st.loop(var, prim)
    if kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
        _check_parallelizable(st, lp, prim)
    st.replace(lp, with_loop(lp, kind=kind))


def bind(st: ScheduleState, var: Var, thread: str) -> None:
    """Bind a loop to a GPU thread index (``blockIdx.x``, ``threadIdx.y`` ...)."""
    lp = st.loop(var, "bind")
    if not isinstance(thread, str) or thread not in THREAD_TAGS:
        raise ScheduleError(f"bind: {_ref(lp)}: unknown thread {thread!r}; "
                            f"expected one of {', '.join(THREAD_TAGS)}")
    _check_parallelizable(st, lp, "bind", thread)
    st.replace(lp, with_loop(lp, kind=THREAD_BINDING, thread_tag=thread))

