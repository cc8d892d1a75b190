"""rfactor: split a reduction into partial reductions over one loop and a reduction of the partials.

``rfactor(k_1, factor_axis=0)`` on ``C[vi] += A[vi, vk]`` with ``vk = k_0 * 4 + k_1`` creates the
buffer ``C_rf`` (``C``'s shape with the extent of ``k_1`` inserted at ``factor_axis``), a block
``C_rf`` under a copy of the loops that keeps one partial sum per value of ``k_1``, and turns ``C``
into the write-back block that reduces the partials, under the loops of ``C`` without those only
its reduction used (``k_1`` stays)::

    for i, k_0, k_1 in T.grid(128, 32, 4):
        with T.block("C_rf"):
            vk_1, vi, vk_0 = T.axis.remap("SSR", [k_1, i, k_0])
            with T.init():
                C_rf[vk_1, vi] = T.float32(0)
            C_rf[vk_1, vi] = C_rf[vk_1, vi] + A[vi, vk_0 * 4 + vk_1]
    for i, k_1 in T.grid(128, 4):
        with T.block("C"):
            vk_1, vi = T.axis.remap("RS", [k_1, i])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + C_rf[vk_1, vi]

The block must be a reduction block (an ``init``, affine bindings, its output indexed by spatial
variables only, the only writer of it) whose init and body store to the same element, with a body
``C[...] = C[...] <op> rhs`` of a commutative reducer (``+`` from 0, ``*`` from 1, ``min`` from the
largest value, ``max`` from the smallest); its scope must be a stage pipeline. The loop must be
serial, used by no spatial variable, the only block under it; the outermost loop of the block must
have it as its first block; no loop is used by both kinds of variables; below the first loop of the
reduction, every loop the block variables do not use has extent 1 (TVM's rules).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Set, Tuple

from ...errors import ScheduleError
from ..block import (
    Block,
    BlockRealize,
    IterVar,
    IterVarType,
    Range,
    StmtMutator,
    loop_thread,
    with_loop,
)
from ..expr import (
    GE,
    GT,
    LE,
    LT,
    Add,
    And,
    Buffer,
    BufferLoad,
    FloatImm,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Var,
    const,
)
from ..functor import conjuncts, substitute, vars_of
from ..printer import expr_str
from ..region import row_major_strides, with_inferred_regions
from ..simplify import simplify, structural_equal, to_linear
from ..stmt import BufferStore, For, ForKind, SeqStmt, Stmt, seq
from .analysis import check_affine, compact_dataflow_violation, stage_pipeline_violation
from .state import ScheduleState, child_realizes, loop_ranges


def _identity(op: type, dtype: str) -> PrimExpr:
    from .. import max_value, min_value

    if op is Add:
        return const(0, dtype)
    if op is Mul:
        return const(1, dtype)
    if op is Min:
        return max_value(dtype)
    return min_value(dtype)


_REDUCERS: Dict[type, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    Add: lambda a, b: Add(a, b), Mul: lambda a, b: Mul(a, b),
    Min: lambda a, b: Min(a, b), Max: lambda a, b: Max(a, b)}


def _same_indices(a, b) -> bool:
    return len(a) == len(b) and all(structural_equal(simplify(x), simplify(y)) for x, y in zip(a, b))


def _match_reducer(blk: Block) -> Tuple[type, PrimExpr, BufferStore]:
    """The reducer of ``blk`` (its node class), the right-hand side of its combiner and its update."""
    init, body = blk.init, blk.body
    if not isinstance(init, BufferStore) or not isinstance(body, BufferStore):
        raise ScheduleError(f"rfactor: the init and the body of block {blk.name_hint} must both be a single "
                            "store to a buffer element (C[...] = ...)")
    if init.buffer is not body.buffer or not _same_indices(init.indices, body.indices):
        at_init = ", ".join(expr_str(i) for i in init.indices)
        at_body = ", ".join(expr_str(i) for i in body.indices)
        raise ScheduleError(f"rfactor: the init and the body of block {blk.name_hint} must store to the same "
                            f"element (init stores {init.buffer.name}[{at_init}], the body "
                            f"{body.buffer.name}[{at_body}])")
    v = body.value
    op = type(v)
    if op not in _REDUCERS:
        raise ScheduleError(f"rfactor: block {blk.name_hint} updates {body.buffer.name} with "
                            f"{expr_str(v)}, not with a commutative reducer (+, *, min, max) of "
                            f"{body.buffer.name}[...] and a value")

    def is_lhs(e) -> bool:
        return isinstance(e, BufferLoad) and e.buffer is body.buffer and \
            _same_indices(e.indices, body.indices)

    if is_lhs(v.a):
        rhs = v.b
    elif is_lhs(v.b):
        rhs = v.a
    else:
        raise ScheduleError(f"rfactor: block {blk.name_hint} updates {body.buffer.name} with "
                            f"{expr_str(v)}; one operand of the reducer must be the element stored "
                            f"({body.buffer.name}[...])")
    ident = _identity(op, body.buffer.dtype)
    iv = init.value
    if not (isinstance(iv, (IntImm, FloatImm)) and float(iv.value) == float(ident.value)):
        raise ScheduleError(f"rfactor: block {blk.name_hint} starts its {op.__name__.lower()} reduction from "
                            f"{expr_str(iv)}, not from its identity {expr_str(ident)}; no commutative "
                            "reducer matches")
    return op, rhs, body


def _loop_vars_of(e: PrimExpr, loop_ids: Set[int]) -> List[Var]:
    """The loop variables in ``e``, in the order they appear."""
    out: List[Var] = []

    def visit(x):
        if isinstance(x, Var):
            if id(x) in loop_ids and all(x is not y for y in out):
                out.append(x)
            return
        for f in dataclasses.fields(x) if dataclasses.is_dataclass(x) else ():
            c = getattr(x, f.name)
            if isinstance(c, PrimExpr):
                visit(c)
            elif isinstance(c, tuple):
                for y in c:
                    if isinstance(y, PrimExpr):
                        visit(y)

    visit(e)
    return out


def rfactor(st: ScheduleState, var: Var, factor_axis: int) -> Tuple[Block, Block]:
    """See the module docstring; returns the rfactor block and the write-back block."""
    rf_loop = st.loop(var, "rfactor")
    r, scope, loops, reduce_ = _check_rfactor(st, rf_loop)
    blk = r.block
    op, rhs, update = _match_reducer(blk)
    out_buf = update.buffer
    factor_axis = _factor_axis(blk, out_buf, factor_axis)
    rf_buf = _rfactor_buffer(st, out_buf, rf_loop, factor_axis)
    combine = _REDUCERS[op]
    ident = _identity(op, out_buf.dtype)
    loop_of = {id(lp.loop_var): lp for lp in loops}
    rf_dom = Range(rf_loop.min, rf_loop.extent)
    rf_block, add_iv, vals, rf_idx_t = _rfactor_block(r, rf_loop, rf_dom, loop_of, update, rhs, rf_buf,
                                                      factor_axis, combine, ident)
    wb_block, wb_realize, keep_ids = _write_back(st, r, rf_loop, rf_dom, loops, reduce_, add_iv, update,
                                                 rf_buf, rf_idx_t, combine, ident)
    # the loops of the rfactor block: copies of the block's loops
    new_vars = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    rf_stmt: Stmt = BlockRealize(tuple(simplify(substitute(v, new_vars)) for v in vals),
                                 substitute(r.predicate, new_vars), rf_block)
    for lp in reversed(loops):
        rf_stmt = with_loop(lp, loop_var=new_vars[lp.loop_var], body=rf_stmt)
    _replace_nest(st, scope, r, loops, loop_of, keep_ids, rf_stmt, wb_realize, rf_buf)
    return rf_block, wb_block


def _check_rfactor(st: ScheduleState, rf_loop: For) -> Tuple[BlockRealize, Block, List[For], Set[int]]:
    """(the block under ``rf_loop``, its scope block, its loops, the ids of the loop variables its
    reduction variables use), once it is checked that rfactor applies: one reduction block of affine
    bindings and compact dataflow under a serial loop of its reduction, in a stage pipeline, first
    under its outermost loop, no loop used by both kinds of variable, none of the reduction's loops
    shared with another block and no loop used by no variable under a reduction loop (unless of
    extent 1)."""
    idx = st.index
    rs = child_realizes(rf_loop)
    if len(rs) != 1:
        names = ", ".join(r.block.name_hint for r in rs) or "none"
        raise ScheduleError(f"rfactor: loop {rf_loop.loop_var.name} has {len(rs)} blocks under it ({names}); "
                            "rfactor needs exactly one")
    r = rs[0]
    blk = r.block
    scope = idx.scope_block(r)
    if blk.init is None:
        raise ScheduleError(f"rfactor: block {blk.name_hint} is not a reduction block (it has no init)")
    loops = idx.loops_above(r)
    check_affine("rfactor", r, {id(lp.loop_var) for lp in idx.all_loops_above(r)})
    why = compact_dataflow_violation(scope, r)
    if why:
        raise ScheduleError(f"rfactor: block {blk.name_hint} is not a reduction block: {why}")
    why = stage_pipeline_violation(st, scope)
    if why:
        raise ScheduleError(f"rfactor: the scope of block {blk.name_hint} is not a stage pipeline: {why}")
    if rf_loop.kind != ForKind.SERIAL or loop_thread(rf_loop):
        raise ScheduleError(f"rfactor: loop {rf_loop.loop_var.name} (block {blk.name_hint}) is "
                            f"{loop_thread(rf_loop) or rf_loop.kind}; rfactor needs a serial loop")
    loop_ids = {id(lp.loop_var) for lp in loops}
    data_par: Set[int] = set()
    reduce_: Set[int] = set()
    for iv, v in zip(blk.iter_vars, r.iter_values):
        ids = {id(x) for x in vars_of(v)} & loop_ids
        (data_par if iv.iter_type == IterVarType.DataPar else reduce_).update(ids)
    first = child_realizes(loops[0])
    if first[0] is not r:
        raise ScheduleError(f"rfactor: the first block under the outermost loop {loops[0].loop_var.name} of "
                            f"block {blk.name_hint} is {first[0].block.name_hint}; it must be "
                            f"{blk.name_hint}")
    _check_loop_kinds(blk, loops, rf_loop, data_par, reduce_)
    return r, scope, loops, reduce_


def _check_loop_kinds(blk: Block, loops: List[For], rf_loop: For, data_par: Set[int],
                      reduce_: Set[int]) -> None:
    """Each of ``loops`` is used by spatial variables (``data_par``) or reduction ones (``reduce_``), not
    both; ``rf_loop`` by reduction ones; the outermost reduction loop holds only ``blk``; a loop used by
    none is of extent 1 if it lies under a reduction loop."""
    met_reduction = False
    for lp in loops:
        name = lp.loop_var.name
        dp, rd = id(lp.loop_var) in data_par, id(lp.loop_var) in reduce_
        if dp and rd:
            raise ScheduleError(f"rfactor: loop {name} is used by both spatial and reduction variables of "
                                f"block {blk.name_hint}")
        if dp:
            if lp is rf_loop:
                raise ScheduleError(f"rfactor: loop {name} is used by a spatial variable of block "
                                    f"{blk.name_hint}; rfactor needs a loop of the reduction")
            continue
        if rd:
            if not met_reduction:
                under = child_realizes(lp)
                if len(under) != 1:
                    raise ScheduleError(f"rfactor: the outermost reduction loop {name} of block "
                                        f"{blk.name_hint} has {len(under)} blocks under it; it must have "
                                        "only this one")
                met_reduction = True
            continue
        if met_reduction and not (isinstance(lp.extent, IntImm) and lp.extent.value == 1):
            raise ScheduleError(f"rfactor: loop {name} (extent {expr_str(lp.extent)}) is used by no variable "
                                f"of block {blk.name_hint} but lies under a reduction loop")


def _factor_axis(blk: Block, out_buf: Buffer, factor_axis: int) -> int:
    """``factor_axis`` in [0, ndim] (negative: from the end), or a ScheduleError."""
    ndim = len(out_buf.shape)
    if not isinstance(factor_axis, int) or not -(ndim + 1) <= factor_axis <= ndim:
        raise ScheduleError(f"rfactor: factor_axis {factor_axis!r} is out of range [{-(ndim + 1)}, {ndim}] "
                            f"for buffer {out_buf.name} of {ndim} dimension(s) (block {blk.name_hint})")
    if factor_axis < 0:
        factor_axis += ndim + 1
    return factor_axis


def _rfactor_buffer(st: ScheduleState, out_buf: Buffer, rf_loop: For, factor_axis: int) -> Buffer:
    """The rfactor buffer: ``out_buf`` with the rfactor loop's extent inserted at ``factor_axis``,
    named ``<out>_rf`` (``_rf_1``, ... where the name is taken)."""
    shape = list(out_buf.shape)
    shape.insert(factor_axis, rf_loop.extent)
    names = {b.name for s in _blocks(st.func.body) for b in s.alloc_buffers} | \
        {b.name for b in st.func.buffers}
    rf_name, k = f"{out_buf.name}_rf", 1
    while rf_name in names:
        rf_name, k = f"{out_buf.name}_rf_{k}", k + 1
    return Buffer(rf_name, out_buf.dtype, tuple(shape), out_buf.scope, row_major_strides(tuple(shape)))


def _rfactor_block(r: BlockRealize, rf_loop: For, rf_dom: Range, loop_of: Dict[int, For], update: BufferStore,
                   rhs: PrimExpr, rf_buf: Buffer, factor_axis: int, combine, ident: PrimExpr):
    """(rf_block, add_iv, vals, rf_idx): the rfactor block, its spatial variable for the rfactor loop,
    its bindings and the index of the rfactor buffer it updates. A reduction variable per other loop
    of the reduction variables that use the rfactor loop."""
    blk = r.block
    add_iv = IterVar(rf_dom, Var("v" + rf_loop.loop_var.name, rf_loop.loop_var.dtype), IterVarType.DataPar)
    binding: Dict[int, Var] = {id(rf_loop.loop_var): add_iv.var}
    ivs, vals = [add_iv], [rf_loop.loop_var]
    vmap: Dict[Var, PrimExpr] = {}
    for iv, v in zip(blk.iter_vars, r.iter_values):
        if iv.iter_type == IterVarType.DataPar or rf_loop.loop_var not in vars_of(v):
            ivs.append(iv)
            vals.append(v)
            continue
        for lv in _loop_vars_of(v, set(loop_of)):
            if id(lv) not in binding:
                lp = loop_of[id(lv)]
                niv = IterVar(Range(lp.min, lp.extent), Var("v" + lv.name, lv.dtype), IterVarType.CommReduce)
                binding[id(lv)] = niv.var
                ivs.append(niv)
                vals.append(lv)
        vmap[iv.var] = substitute(v, {loop_of[i].loop_var: b for i, b in binding.items()})
    rf_idx = list(update.indices)
    rf_idx.insert(factor_axis, add_iv.var)
    rf_idx_t = tuple(rf_idx)
    rf_body = BufferStore(rf_buf, combine(BufferLoad(rf_buf, rf_idx_t), rhs), rf_idx_t)
    rf_block = Block(tuple(ivs), (), (), blk.name_hint + "_rf",
                     _subst_stmt(rf_body, vmap), _subst_stmt(BufferStore(rf_buf, ident, rf_idx_t), vmap))
    return with_inferred_regions(rf_block), add_iv, vals, rf_idx_t


def _write_back(st: ScheduleState, r: BlockRealize, rf_loop: For, rf_dom: Range, loops: List[For],
                reduce_: Set[int], add_iv: IterVar, update: BufferStore, rf_buf: Buffer, rf_idx_t, combine,
                ident: PrimExpr):
    """(wb_block, wb_realize, keep_ids): the write-back block (a reduction variable for the rfactor loop
    and copies of the spatial ones), its realize, and the ids of the loops the nest keeps (the
    rfactor loop and those the reduction does not use)."""
    blk = r.block
    out_buf = update.buffer
    wb_rf = IterVar(rf_dom, Var("v" + rf_loop.loop_var.name, rf_loop.loop_var.dtype), IterVarType.CommReduce)
    wmap: Dict[Var, PrimExpr] = {add_iv.var: wb_rf.var}
    wivs, wvals = [wb_rf], [rf_loop.loop_var]
    for iv, v in zip(blk.iter_vars, r.iter_values):
        if iv.iter_type == IterVarType.DataPar:
            niv = IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), IterVarType.DataPar)
            wmap[iv.var] = niv.var
            wivs.append(niv)
            wvals.append(v)
    out_idx = tuple(update.indices)
    wb_value = combine(BufferLoad(out_buf, out_idx), BufferLoad(rf_buf, rf_idx_t))
    wb_body = BufferStore(out_buf, wb_value, out_idx)
    wb_block = Block(tuple(wivs), (), (), blk.name_hint, _subst_stmt(wb_body, wmap),
                     _subst_stmt(BufferStore(out_buf, ident, out_idx), wmap), sref=blk.sref,
                     annotations=blk.annotations)
    wb_block = with_inferred_regions(wb_block)
    keep_ids = {id(lp.loop_var) for lp in loops if lp is rf_loop or id(lp.loop_var) not in reduce_}
    removed = [lp for lp in loops if id(lp.loop_var) not in keep_ids]
    ranges = loop_ranges(st.index.all_loops_above(r))
    wb_pred = _write_back_predicate(blk.name_hint, r.predicate, removed, ranges)
    return wb_block, BlockRealize(tuple(wvals), wb_pred, wb_block), keep_ids


def _replace_nest(st: ScheduleState, scope: Block, r: BlockRealize, loops: List[For], loop_of: Dict[int, For],
                  keep: Set[int], rf_stmt: Stmt, wb_realize: BlockRealize, rf_buf: Buffer) -> None:
    """The original nest: the write-back block in place of the block, without the loops only the
    reduction used (the rfactor loop stays), the rfactor nest right before it; ``rf_buf`` allocated
    in the block ``scope``."""

    class _Replace(StmtMutator):
        def visit_For(self, f: For) -> Stmt:
            if id(f.loop_var) not in loop_of:
                return f
            body = self.visit(f.body)
            out = with_loop(f, body=body) if id(f.loop_var) in keep else body
            return seq(rf_stmt, out) if f is loops[0] else out

        def visit_BlockRealize(self, q: BlockRealize) -> Stmt:
            return wb_realize if q is r else q

        def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
            return seq(*[self.visit(x) for x in s.seq])

    new_outer = _Replace()(loops[0])
    new_scope_body = _replace_in(scope.body, loops[0], new_outer)
    new_scope = dataclasses.replace(scope, body=new_scope_body, alloc_buffers=scope.alloc_buffers + (rf_buf,))
    st.replace(scope, new_scope)


def _write_back_predicate(name: str, pred: PrimExpr, removed: List[For], ranges) -> PrimExpr:
    """The predicate of the write-back block: the clauses of the block's predicate over the loops it
    keeps, and for a clause over the loops only the reduction used (gone from its nest), that clause
    at their most permissive values, so that it reads only the partial results some iteration
    computed (a partial result no iteration reaches is never initialised).

    A clause over removed loops must be a comparison linear in each of them, every clause moving
    each loop the same way: then the most permissive values are the same corner of their ranges
    for all clauses, and a partial result is computed exactly where the clauses hold there."""
    if isinstance(pred, IntImm):
        return const(True) if pred.value else pred
    gone = {id(lp.loop_var): lp for lp in removed}
    direction: Dict[int, int] = {}
    pending = []
    kept: List[PrimExpr] = []
    for c in conjuncts(pred):
        used = [v for v in vars_of(c) if id(v) in gone]
        if not used:
            kept.append(c)
            continue
        if not isinstance(c, (LT, LE, GT, GE)):
            raise ScheduleError(f"rfactor: the predicate {expr_str(c)} of block {name} uses a loop the "
                                "reduction removes in a form other than a linear comparison; the partial "
                                "results it leaves out cannot be told apart")
        upper = isinstance(c, (LT, LE))  # c holds when (a - b) is small
        lin = to_linear(simplify(c.a - c.b))
        for coef, term in lin.terms.values():
            if vars_of(term) & set(v for v in used):
                if not (isinstance(term, Var) and id(term) in gone):
                    raise ScheduleError(f"rfactor: the predicate {expr_str(c)} of block {name} is not linear "
                                        f"in loop {used[0].name}, which the reduction removes")
                want = -1 if (coef > 0) == upper else 1  # -1: smallest value, 1: largest
                if direction.setdefault(id(term), want) != want:
                    raise ScheduleError(f"rfactor: the clauses of the predicate of block {name} need loop "
                                        f"{term.name} at both ends of its range")
        pending.append(c)
    for c in pending:
        vmap = {}
        for i, d in direction.items():
            lp = gone[i]
            vmap[lp.loop_var] = lp.min if d < 0 else simplify(lp.min + lp.extent - 1)
        cc = simplify(substitute(c, vmap), ranges)
        if not (isinstance(cc, IntImm) and cc.value):
            kept.append(cc)
    out: PrimExpr = const(True)
    for c in kept:
        out = c if isinstance(out, IntImm) else And(out, c)
    return out


def _blocks(s: Stmt):
    from ..block import walk

    return [x for x in walk(s) if isinstance(x, Block)]


def _subst_stmt(s: Stmt, vmap: Dict[Var, PrimExpr]) -> Stmt:
    from ..block import substitute_stmt

    return substitute_stmt(s, vmap) if vmap else s


def _replace_in(body: Stmt, old: Stmt, new: Stmt) -> Stmt:
    from ..block import replace_stmt

    out = replace_stmt(body, old, new)
    return _flatten(out)


def _flatten(s: Stmt) -> Stmt:
    if isinstance(s, SeqStmt):
        items = []
        for x in s.seq:
            x = _flatten(x)
            items.extend(x.seq if isinstance(x, SeqStmt) else [x])
        return seq(*items)
    return s
