"""decompose_reduction: split a reduction block into an init block and an update block.

``decompose_reduction(C, k_0)`` puts a block ``C_init`` (the ``T.init()`` body) right before loop
``k_0``, under copies (``i_2_init``...) of the loops between ``k_0`` and the block that its spatial
variables use, and renames ``C`` to ``C_update`` without its init::

    for i_2_init, j_2_init in T.grid(8, 8):
        with T.block("C_init"): ... C_local[vi, vj] = T.float32(0)
    for k_0 in T.serial(256):
        ...
            with T.block("C_update"): ... C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]

``k_0`` must be above every loop the reduction variables use (else the init would run inside the
reduction), as TVM requires.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List

from ...errors import ScheduleError
from ..block import (
    Block,
    BlockRealize,
    BlockToken,
    IterVar,
    IterVarType,
    StmtMutator,
    replace_stmt,
    substitute_stmt,
    with_loop,
)
from ..expr import And, IntImm, PrimExpr, Var, const
from ..functor import vars_of
from ..region import infer_regions
from ..stmt import For, Stmt, seq
from .state import ScheduleState, simplify_bindings


def _keep_predicate(pred: PrimExpr, dropped: set) -> PrimExpr:
    """The conjuncts of ``pred`` that use none of the dropped loops (the init block has no such loop)."""
    out: PrimExpr = const(True)
    stack = [pred]
    while stack:
        p = stack.pop()
        if isinstance(p, And):
            stack += [p.b, p.a]
            continue
        if isinstance(p, IntImm) or vars_of(p) & dropped:
            continue
        out = p if isinstance(out, IntImm) else And(out, p)
    return out


def decompose_reduction(st: ScheduleState, token: BlockToken, name: str, var: Var) -> BlockToken:
    r = st.realize(token, "decompose_reduction", name)
    blk = r.block
    lp = st.loop(var, "decompose_reduction")
    idx = st.index
    loops = idx.loops_above(r)
    if not any(x is lp for x in loops):
        raise ScheduleError(f"decompose_reduction: loop {lp.loop_var.name} is not an ancestor of block "
                            f"{blk.name_hint}")
    if blk.init is None or not any(iv.iter_type == IterVarType.CommReduce for iv in blk.iter_vars):
        raise ScheduleError(f"decompose_reduction: block {blk.name_hint} is not a reduction block (it needs "
                            "reduction variables and a T.init())")
    for iv, v in zip(blk.iter_vars, r.iter_values):
        if iv.iter_type != IterVarType.CommReduce:
            continue
        for higher in loops:
            if higher is lp:
                break
            if higher.loop_var in vars_of(v):
                raise ScheduleError(f"decompose_reduction: loop {lp.loop_var.name} must be above all the "
                                    f"loops the reduction variables of block {blk.name_hint} use, but loop "
                                    f"{higher.loop_var.name} (used by {iv.var.name}) is above it")
    # the init block: spatial variables only
    init_ivs: List[IterVar] = []
    init_vals: List[PrimExpr] = []
    vmap: Dict[Var, PrimExpr] = {}
    for iv, v in zip(blk.iter_vars, r.iter_values):
        if iv.iter_type != IterVarType.DataPar:
            continue
        nv = Var(iv.var.name, iv.var.dtype)
        init_ivs.append(IterVar(iv.dom, nv, iv.iter_type, iv.thread_tag))
        init_vals.append(v)
        vmap[iv.var] = nv
    init_body = substitute_stmt(blk.init, vmap)
    init_blk = Block(tuple(init_ivs), (), (), blk.name_hint + "_init", init_body, None, (), blk.annotations)
    writes = infer_regions(init_blk)[1]
    init_blk = dataclasses.replace(init_blk, writes=writes)
    # loops from `lp` down to the block that the init bindings use
    chosen: List[For] = []
    dropped = set()
    below = loops[[id(x) for x in loops].index(id(lp)):]
    for x in reversed(below):
        if any(x.loop_var in vars_of(v) for v in init_vals):
            chosen.append(x)
        else:
            dropped.add(x.loop_var)
    pred = _keep_predicate(r.predicate, dropped)
    init: Stmt = BlockRealize(tuple(init_vals), pred, init_blk)
    lmap: Dict[Var, PrimExpr] = {}
    for x in chosen:
        nv = Var(x.loop_var.name + "_init", x.loop_var.dtype)
        lmap[x.loop_var] = nv
        init = with_loop(x, loop_var=nv, body=init)
    init = substitute_stmt(init, lmap)
    init = simplify_bindings(init, idx.all_loops_above(lp))
    # the update block: renamed, no init, the written region read first
    read_bufs = {id(x.buffer) for x in blk.reads}
    reads = tuple(w for w in blk.writes if id(w.buffer) not in read_bufs) + blk.reads
    upd = dataclasses.replace(blk, name_hint=blk.name_hint + "_update", init=None, reads=reads)

    class _M(StmtMutator):
        def visit_Block(self, b: Block) -> Stmt:
            if b is blk:
                return upd
            return self.generic(b)

    new_lp = _M()(lp)
    # a sequence that gets the pair as one item flattens it (StmtMutator rebuilds with seq())
    st.set_body(replace_stmt(st.func.body, lp, seq(init, new_lp)))
    return init_blk.sref
