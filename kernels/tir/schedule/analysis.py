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
