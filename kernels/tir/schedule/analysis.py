"""Checks the schedule primitives share: affine bindings, block kinds, producers and consumers."""

from __future__ import annotations

from typing import List, Set

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
