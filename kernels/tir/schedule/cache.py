"""cache_read and cache_write: copy stages through a buffer in another storage scope.

``cache_read(block, i, "shared")`` allocates ``A_shared`` (the ``i``-th buffer ``block`` reads, in
``shared`` memory), inserts a block ``A_shared`` that copies the region of ``A`` the scope needs
(all of it for a function argument, else what its producer writes) at the start of the scope (or
right after the producer), and makes the readers of ``A`` read ``A_shared``::

    for ax0, ax1 in T.grid(1024, 1024):
        with T.block("A_shared"):
            v0, v1 = T.axis.spatial(1024, ax0), T.axis.spatial(1024, ax1)
            A_shared[v0, v1] = A[v0, v1]

``cache_write(block, i, "local")`` makes ``block`` write ``C_local`` instead of its ``i``-th output
``C`` and inserts a block ``C_local`` after it that copies the region written back into ``C``.
``compute_at`` / ``reverse_compute_at`` then move these stages next to their use.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Set

from ...errors import ScheduleError
from ..block import (
    Block,
    BlockRealize,
    BlockToken,
    BufferRegion,
    ExprMutator,
    IterVar,
    IterVarType,
    Range,
    make_for,
    walk,
)
from ..expr import Buffer, BufferLoad, Var, const
from ..functor import substitute
from ..region import bound, interval_range, loop_dom, row_major_strides, union_intervals
from ..simplify import simplify
from ..stmt import BufferStore, ForKind, Stmt, seq
from .state import ScheduleState, body_items, child_realizes

SCOPES = ("global", "shared", "shared.dyn", "local", "warp")


def _check_scope(prim: str, scope: str) -> None:
    if scope not in SCOPES:
        raise ScheduleError(f"{prim}: unknown storage scope {scope!r}; expected one of {', '.join(SCOPES)}")


def _unique(names: Set[str], base: str) -> str:
    name, k = base, 1
    while name in names:
        name = f"{base}_{k}"
        k += 1
    return name


def _names(st: ScheduleState):
    blocks = {s.name_hint for s in walk(st.func.body) if isinstance(s, Block)}
    bufs = {b.name for s in walk(st.func.body) if isinstance(s, Block) for b in s.alloc_buffers}
    bufs |= {b.name for b in st.func.buffers}
    return blocks, bufs


def copy_stage(name: str, src: Buffer, dst: Buffer, region: Sequence[Range]) -> Stmt:
    """Loops ``ax0..`` over ``region`` around a block ``name`` doing ``dst[v] = src[v]``."""
    loops = [Var(f"ax{k}") for k in range(len(region))]
    ivs = tuple(IterVar(Range(const(0), s), Var(f"v{k}"), IterVarType.DataPar)
                for k, s in enumerate(src.shape))
    vals = tuple(simplify(r.min + lv) for r, lv in zip(region, loops))
    idx = tuple(iv.var for iv in ivs)
    body = BufferStore(dst, BufferLoad(src, idx), idx)
    blk = Block(ivs, (BufferRegion.from_point(src, idx),), (BufferRegion.from_point(dst, idx),), name, body)
    out: Stmt = BlockRealize(vals, const(True), blk)
    for lv, r in reversed(list(zip(loops, region))):
        out = make_for(lv, const(0), r.extent, ForKind.SERIAL, out)
    return out


def _relaxed_region(st: ScheduleState, r: BlockRealize, reg: BufferRegion) -> List[Range]:
    vmap = {iv.var: v for iv, v in zip(r.block.iter_vars, r.iter_values)}
    dom = {lp.loop_var: loop_dom(lp) for lp in st.index.loops_above(r)}
    out = []
    for d, x in enumerate(reg.region):
        lo = bound(simplify(substitute(x.min, vmap)), dom)[0]
        hi = bound(simplify(substitute(simplify(x.min + x.extent - 1), vmap)), dom)[1]
        it = union_intervals([None if lo is None or hi is None else (lo, hi)])
        out.append(Range(const(0), reg.buffer.shape[d]) if it is None else interval_range(it))
    return out


def _new_buffer(buf: Buffer, scope: str, names: Set[str]) -> Buffer:
    name = _unique(names, f"{buf.name}_{scope.replace('.', '_')}")
    return Buffer(name, buf.dtype, buf.shape, scope, row_major_strides(buf.shape))


def _insert(st: ScheduleState, scope_token: BlockToken, pos_of, stage: Stmt, new_buf: Buffer) -> None:
    scope_r = st.index.realize[scope_token]
    scope = scope_r.block
    items = body_items(scope.body)
    pos = pos_of(items)
    new_scope = dataclasses.replace(scope, body=seq(*(items[:pos] + [stage] + items[pos:])),
                                    alloc_buffers=scope.alloc_buffers + (new_buf,))
    st.replace(scope, new_scope)


def _item_index(st: ScheduleState, items, r: BlockRealize) -> int:
    for k, it in enumerate(items):
        if it is r or st.index.is_ancestor(it, r):
            return k
    return -1


class _RedirectReads(ExprMutator):
    """Loads of ``old`` and read regions of ``old`` go to ``new`` (stores are untouched)."""

    def __init__(self, old: Buffer, new: Buffer):
        super().__init__(rewrite_expr=lambda e: BufferLoad(new, e.indices)
                         if isinstance(e, BufferLoad) and e.buffer is old else None)
        self.old, self.new = old, new

    def visit_Block(self, b: Block) -> Stmt:
        out = self.generic(b)
        reads = tuple(BufferRegion(self.new, x.region) if x.buffer is self.old else x for x in out.reads)
        return dataclasses.replace(out, reads=reads)


def _cache_target(st: ScheduleState, token: BlockToken, name: str, index: int, scope: str, prim: str):
    """What cache_read / cache_write (``prim``) start from: the block's realize, the buffer its
    ``index``-th read / write region names (checked), the enclosing scope block, the cache buffer in
    ``scope`` and the new stage's name."""
    r = st.realize(token, prim, name)
    blk = r.block
    _check_scope(prim, scope)
    regions, verb = (blk.reads, "read") if prim == "cache_read" else (blk.writes, "write")
    if not isinstance(index, int) or not 0 <= index < len(regions):
        names = ", ".join(x.buffer.name for x in regions) or "none"
        raise ScheduleError(f"{prim}: block {blk.name_hint} {verb}s {len(regions)} buffer(s) ({names}); "
                            f"{verb}_buffer_index {index!r} is out of range")
    buf = regions[index].buffer
    scope_blk = st.index.scope_block(r)
    bnames, fnames = _names(st)
    new_buf = _new_buffer(buf, scope, fnames)
    return r, buf, scope_blk, new_buf, _unique(bnames, new_buf.name)


def cache_read(st: ScheduleState, token: BlockToken, name: str, index: int, scope: str,
               consumer_tokens: Optional[Sequence[BlockToken]] = None) -> BlockToken:
    r, buf, scope_blk, new_buf, stage_name = _cache_target(st, token, name, index, scope, "cache_read")
    scope_token = scope_blk.sref
    siblings = child_realizes(scope_blk)
    writers = [q for q in siblings if any(w.buffer is buf for w in q.block.writes)]
    if len(writers) > 1:
        raise ScheduleError(f"cache_read: buffer {buf.name} is written by several blocks "
                            f"({', '.join(q.block.name_hint for q in writers)}); cache_read needs one "
                            f"producer")
    if writers:
        wreg = next(w for w in writers[0].block.writes if w.buffer is buf)
        region = _relaxed_region(st, writers[0], wreg)
    else:
        region = [Range(const(0), s) for s in buf.shape]
    if consumer_tokens is None:
        readers = [q for q in siblings if any(x.buffer is buf for x in q.block.reads)]
    else:
        readers = [st.realize(t, "cache_read", "consumer") for t in consumer_tokens]
    stage = copy_stage(stage_name, buf, new_buf, region)
    stage_token = _stage_token(stage)
    writer_token = writers[0].block.sref if writers else None
    reader_tokens = [q.block.sref for q in readers]
    for t in reader_tokens:
        q = st.index.realize[t]
        st.replace(q, _RedirectReads(buf, new_buf)(q))

    def pos_of(items) -> int:
        if writer_token is None:
            return 0
        return _item_index(st, items, st.index.realize[writer_token]) + 1

    _insert(st, scope_token, pos_of, stage, new_buf)
    return stage_token


def cache_write(st: ScheduleState, token: BlockToken, name: str, index: int, scope: str) -> BlockToken:
    r, buf, scope_blk, new_buf, stage_name = _cache_target(st, token, name, index, scope, "cache_write")
    blk = r.block
    scope_token = scope_blk.sref
    region = _relaxed_region(st, r, blk.writes[index])
    stage = copy_stage(stage_name, new_buf, buf, region)
    stage_token = _stage_token(stage)
    st.replace(r, ExprMutator(buffer_map={buf: new_buf})(r))

    def pos_of(items) -> int:
        return _item_index(st, items, st.index.realize[token]) + 1

    _insert(st, scope_token, pos_of, stage, new_buf)
    return stage_token


def _stage_token(stage: Stmt) -> BlockToken:
    return next(s for s in walk(stage) if isinstance(s, Block)).sref
