"""compute_inline and reverse_compute_inline: remove an elementwise stage by substitution.

``compute_inline(B)`` with ``B[v0, v1] = A[v0, v1] * 2`` replaces every ``B[i, j]`` its consumers
load by ``A[i, j] * 2`` and removes ``B`` (its loops and its allocation). ``reverse_compute_inline(C)``
with ``C[v0, v1] = B[v0, v1] + 1`` makes the producer of ``B`` store ``B's value + 1`` into ``C``
directly. Both need the stage to be a single store indexed by its (spatial) block variables.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Tuple

from ...errors import ScheduleError
from ..block import (
    Block,
    BlockRealize,
    BlockToken,
    ExprMutator,
    IterVarType,
    StmtMutator,
    is_true,
    walk,
)
from ..expr import Buffer, BufferLoad, PrimExpr, Var
from ..functor import collect, substitute
from ..region import infer_regions
from ..stmt import BufferStore, Stmt
from .state import ScheduleState, alloc_owner, is_output_buffer, remove_realize


def _single_store(prim: str, blk: Block) -> BufferStore:
    if not isinstance(blk.body, BufferStore):
        raise ScheduleError(f"{prim}: the body of block {blk.name_hint} is not a single buffer store; only "
                            "elementwise stages (X[v0, v1] = expr) can be inlined")
    if blk.init is not None or any(iv.iter_type != IterVarType.DataPar for iv in blk.iter_vars):
        raise ScheduleError(f"{prim}: block {blk.name_hint} is a reduction block; only spatial blocks can be "
                            "inlined")
    return blk.body


def _index_vars(prim: str, blk: Block, indices, what: str) -> List[Var]:
    ivars = [iv.var for iv in blk.iter_vars]
    out = []
    for i in indices:
        if not isinstance(i, Var) or not any(i is v for v in ivars) or any(i is o for o in out):
            raise ScheduleError(f"{prim}: block {blk.name_hint} {what} at "
                                f"[{', '.join(str(x) for x in indices)}]; "
                                "the indices must be distinct block variables")
        out.append(i)
    if len(out) != len(ivars):
        raise ScheduleError(f"{prim}: block {blk.name_hint} {what} with {len(out)} of its {len(ivars)} block "
                            "variables; every block variable must index the buffer")
    return out


def _intermediate(prim: str, st: ScheduleState, buf: Buffer, blk: Block) -> Block:
    if is_output_buffer(st.func, buf):
        raise ScheduleError(f"{prim}: block {blk.name_hint} writes the output buffer {buf.name}; an output "
                            "cannot be inlined")
    owner = alloc_owner(st.func.body, buf)
    if owner is None:
        raise ScheduleError(f"{prim}: buffer {buf.name} of block {blk.name_hint} is not allocated by a block")
    return owner


def _drop_alloc(st: ScheduleState, buf: Buffer) -> None:
    owner = alloc_owner(st.func.body, buf)
    if owner is not None:
        st.replace(owner, dataclasses.replace(owner, alloc_buffers=tuple(b for b in owner.alloc_buffers
                                                                         if b is not buf)))


def _reinfer_reads(s: Stmt, buf: Buffer) -> Stmt:
    """Blocks that accessed ``buf`` get their read regions recomputed."""

    class _M(StmtMutator):
        def visit_Block(self, b: Block) -> Stmt:
            out = self.generic(b)
            if any(x.buffer is buf for x in b.reads + b.writes):
                reads, writes = infer_regions(out)
                out = dataclasses.replace(out, reads=reads, writes=writes)
            return out

    return _M()(s)


def _program_order(st: ScheduleState) -> List[BlockRealize]:
    """The block realizes of the function in the order they first run."""
    return [q for q in walk(st.func.body) if isinstance(q, BlockRealize)]


def compute_inline(st: ScheduleState, token: BlockToken, name: str) -> None:
    r = st.realize(token, "compute_inline", name)
    blk = r.block
    store = _single_store("compute_inline", blk)
    buf = store.buffer
    _intermediate("compute_inline", st, buf, blk)
    if not is_true(r.predicate):
        raise ScheduleError(f"compute_inline: block {blk.name_hint} has a predicate (T.where); it cannot be "
                            "inlined")
    vars_ = _index_vars("compute_inline", blk, store.indices, f"stores {buf.name}")
    if any(ld.buffer is buf for ld in collect(store.value, lambda n: isinstance(n, BufferLoad))):
        raise ScheduleError(f"compute_inline: block {blk.name_hint} reads the buffer {buf.name} it writes")
    order = _program_order(st)
    above = {id(a) for a in st.index.ancestors(r)}
    others = [q for q in order if q is not r and id(q) not in above
              and any(w.buffer is buf for w in q.block.writes)]
    if others:
        raise ScheduleError(f"compute_inline: buffer {buf.name} is also written by block "
                            f"{others[0].block.name_hint}; block {blk.name_hint} must be its only producer")
    reads = {id(ld.buffer): ld.buffer for ld in collect(store.value, lambda n: isinstance(n, BufferLoad))}
    for q in order[order.index(r) + 1:]:
        for w in q.block.writes:
            if id(w.buffer) in reads:
                raise ScheduleError(f"compute_inline: block {q.block.name_hint} writes {w.buffer.name} after "
                                    f"block {blk.name_hint} reads it; the consumers of {buf.name} would read "
                                    "the new values once it is inlined")
    value = store.value

    def inline(e):
        if isinstance(e, BufferLoad) and e.buffer is buf:
            return substitute(value, dict(zip(vars_, e.indices)))
        return None

    body = remove_realize(st.func.body, st.index, r)
    body = ExprMutator(rewrite_expr=inline)(body)
    body = _reinfer_reads(body, buf)
    st.set_body(body)
    _drop_alloc(st, buf)


def reverse_compute_inline(st: ScheduleState, token: BlockToken, name: str) -> None:
    r = st.realize(token, "reverse_compute_inline", name)
    blk = r.block
    store = _single_store("reverse_compute_inline", blk)
    if not is_true(r.predicate):
        raise ScheduleError(f"reverse_compute_inline: block {blk.name_hint} has a predicate (T.where); it "
                            "cannot be inlined")
    loads = [ld for ld in collect(store.value, lambda n: isinstance(n, BufferLoad))]
    ivars = {id(iv.var) for iv in blk.iter_vars}
    produced = []
    for ld in loads:
        writers = [q for q in walk(st.func.body) if isinstance(q, BlockRealize) and q is not r
                   and any(w.buffer is ld.buffer for w in q.block.writes)]
        if writers:
            produced.append((ld, writers))
    bufs = {id(ld.buffer): ld.buffer.name for ld, _ in produced}
    if len(bufs) != 1:
        names = f" ({', '.join(bufs.values())})" if bufs else ""
        raise ScheduleError(f"reverse_compute_inline: block {blk.name_hint} must read exactly one buffer "
                            f"produced by another block, it reads {len(bufs)}{names}")
    ld0, writers = produced[0]
    buf = ld0.buffer
    if len(writers) != 1:
        raise ScheduleError(f"reverse_compute_inline: buffer {buf.name} is written by several blocks")
    readers = [q for q in walk(st.func.body) if isinstance(q, BlockRealize) and q is not r
               and any(x.buffer is buf for x in q.block.reads)]
    if readers:
        names = ", ".join(q.block.name_hint for q in readers)
        plural = "s" if len(readers) > 1 else ""
        raise ScheduleError(f"reverse_compute_inline: buffer {buf.name} is also read by block{plural} "
                            f"{names}; "
                            f"block {blk.name_hint} must be its only consumer")
    for ld, _ in produced:
        if any(a is not b for a, b in zip(ld.indices, ld0.indices)) or len(ld.indices) != len(ld0.indices):
            raise ScheduleError(f"reverse_compute_inline: block {blk.name_hint} reads {buf.name} at "
                                "different indices; it must read one element per block instance")
    cvars = _index_vars("reverse_compute_inline", blk, ld0.indices, f"reads {buf.name}")
    order = _program_order(st)
    lo, hi = order.index(writers[0]), order.index(r)
    reads = {id(ld.buffer) for ld in loads if ld.buffer is not buf}
    writes = {id(w.buffer) for w in blk.writes}
    for q in order[lo + 1:hi]:
        hit = [x.buffer.name for x in q.block.writes if id(x.buffer) in reads | writes] + \
            [x.buffer.name for x in q.block.reads if id(x.buffer) in writes]
        if hit:
            raise ScheduleError(f"reverse_compute_inline: block {q.block.name_hint} between producer "
                                f"{writers[0].block.name_hint} and block {blk.name_hint} accesses {hit[0]}, "
                                f"which block {blk.name_hint} accesses too; it cannot move before it")
    del ivars
    prod_r = writers[0]
    pstore = _single_store("reverse_compute_inline", prod_r.block)
    if pstore.buffer is not buf:
        raise ScheduleError(f"reverse_compute_inline: producer {prod_r.block.name_hint} does not store "
                            f"{buf.name}")
    _index_vars("reverse_compute_inline", prod_r.block, pstore.indices, f"stores {buf.name}")
    _intermediate("reverse_compute_inline", st, buf, prod_r.block)
    vmap: Dict[Var, PrimExpr] = dict(zip(cvars, pstore.indices))

    def swap(e):
        if isinstance(e, BufferLoad) and e.buffer is buf:
            return pstore.value
        return None

    new_value = substitute(ExprMutator(rewrite_expr=swap).visit_expr(store.value), vmap)
    new_idx: Tuple[PrimExpr, ...] = tuple(substitute(i, vmap) for i in store.indices)
    new_store = BufferStore(store.buffer, new_value, new_idx)
    pblk = dataclasses.replace(prod_r.block, body=new_store)
    reads, writes = infer_regions(pblk)
    pblk = dataclasses.replace(pblk, reads=reads, writes=writes)
    body = remove_realize(st.func.body, st.index, r)
    from ..block import replace_stmt

    body = replace_stmt(body, prod_r.block, pblk)
    st.set_body(body)
    _drop_alloc(st, buf)
