"""cache_read and cache_write: copy stages through a buffer in another storage scope.

``cache_read(block, i, "shared")`` allocates ``A_shared`` (the ``i``-th buffer ``block`` reads, in
``shared`` memory), inserts a block ``A_shared`` that copies the region of ``A`` the scope needs and
makes the readers of ``A`` read ``A_shared``. For a function argument the copy goes at the start of
the scope over the whole buffer::

    for ax0, ax1 in T.grid(1024, 1024):
        with T.block("A_shared"):
            v0, v1 = T.axis.spatial(1024, ax0), T.axis.spatial(1024, ax1)
            A_shared[v0, v1] = A[v0, v1]

For a buffer the scope produces, it goes right after the producer, inside the innermost loop the
producer shares with a reader, over what the producer writes in one iteration of that loop::

    for i in T.serial(8):
        for j in T.serial(16):
            with T.block("A"): ...                  # A[i * 16 + j] = ...
        for ax0 in T.serial(16):
            with T.block("A_global"): ...           # A_global[i * 16 + ax0] = A[i * 16 + ax0]
        for j in T.serial(16):
            with T.block("B"): ...                  # B[vi] = A_global[vi] + 1

``cache_write(block, i, "local")`` makes ``block`` write ``C_local`` instead of its ``i``-th output
``C`` and inserts a block ``C_local`` that copies the region written back into ``C`` at the same
place (after ``block``, inside the loop it shares with a reader; at the end of the scope when
nothing in the scope reads ``C``). ``compute_at`` / ``reverse_compute_at`` then move these stages
next to their use.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Set, Tuple

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
    with_loop,
)
from ..expr import Buffer, BufferLoad, IntImm, Var, const
from ..functor import substitute
from ..region import bound, interval_range, loop_dom, row_major_strides, union_intervals
from ..simplify import simplify
from ..stmt import BufferStore, For, ForKind, Stmt, seq
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


def copy_stage(name: str, src: Buffer, dst: Buffer, region: Sequence[Range], ranges=None) -> Stmt:
    """Loops ``ax0..`` over ``region`` around a block ``name`` doing ``dst[v] = src[v]``. Where the
    region may run past the buffer (a ragged split), the block gets a ``T.where`` keeping it inside
    (``ranges``: bounds of the variables around, for the proof)."""
    from ..expr import And
    from ..simplify import can_prove

    loops = [Var(f"ax{k}") for k in range(len(region))]
    ivs = tuple(IterVar(Range(const(0), s), Var(f"v{k}"), IterVarType.DataPar)
                for k, s in enumerate(src.shape))
    vals = tuple(simplify(r.min + lv) for r, lv in zip(region, loops))
    idx = tuple(iv.var for iv in ivs)
    body = BufferStore(dst, BufferLoad(src, idx), idx)
    blk = Block(ivs, (BufferRegion.from_point(src, idx),), (BufferRegion.from_point(dst, idx),), name, body)
    pred = const(True)
    for r, v, shape in zip(region, vals, src.shape):
        conds = []
        if not can_prove(simplify(r.min >= 0), ranges):
            conds.append(v >= 0)
        if not can_prove(simplify(r.min + r.extent <= shape), ranges):
            conds.append(v < shape)
        for c in conds:
            pred = c if isinstance(pred, IntImm) else And(pred, c)
    out: Stmt = BlockRealize(vals, pred, blk)
    for lv, r in reversed(list(zip(loops, region))):
        out = make_for(lv, const(0), r.extent, ForKind.SERIAL, out)
    return out


def _outer_ranges(st: ScheduleState, scope: Block, loops: Sequence[For]):
    """Bounds of what a stage inserted under ``loops`` of ``scope`` sees: the loops above the scope
    and those loops, and the variables of the blocks above."""
    from .state import loop_ranges

    realize = next(q for q in st.index.realize.values() if q.block is scope)
    above = st.index.all_loops_above(realize) + list(loops)
    ranges = loop_ranges(above)
    for a in [realize] + st.index.ancestors(realize):
        if isinstance(a, BlockRealize):
            for iv in a.block.iter_vars:
                lo = iv.dom.min.value if isinstance(iv.dom.min, IntImm) else None
                hi = simplify(iv.dom.min + iv.dom.extent - 1)
                ranges[iv.var] = (lo, hi.value if isinstance(hi, IntImm) else None)
    return ranges


def _relaxed_region(st: ScheduleState, r: BlockRealize, reg: BufferRegion,
                    fixed: Sequence[For] = ()) -> List[Range]:
    """The region ``reg`` of block ``r`` covers over the loops between ``r`` and its scope, the loops in
    ``fixed`` (those around the place the cache stage goes) excepted."""
    vmap = {iv.var: v for iv, v in zip(r.block.iter_vars, r.iter_values)}
    fixed_ids = {id(lp) for lp in fixed}
    dom = {lp.loop_var: loop_dom(lp) for lp in st.index.loops_above(r) if id(lp) not in fixed_ids}
    out = []
    for d, x in enumerate(reg.region):
        lo = bound(simplify(substitute(x.min, vmap)), dom)[0]
        hi = bound(simplify(substitute(simplify(x.min + x.extent - 1), vmap)), dom)[1]
        it = union_intervals([None if lo is None or hi is None else (lo, hi)])
        if it is not None and isinstance(reg.buffer.shape[d], IntImm):
            # a ragged split relaxes past the buffer: keep constant bounds inside it
            a, b = it
            if isinstance(a, IntImm) and a.value < 0:
                a = const(0, a.dtype)
            last = reg.buffer.shape[d].value - 1
            if isinstance(b, IntImm) and b.value > last:
                b = const(last, b.dtype)
            it = (a, b)
        out.append(Range(const(0), reg.buffer.shape[d]) if it is None else interval_range(it))
    return out


def _new_buffer(buf: Buffer, scope: str, names: Set[str]) -> Buffer:
    name = _unique(names, f"{buf.name}_{scope.replace('.', '_')}")
    return Buffer(name, buf.dtype, buf.shape, scope, row_major_strides(buf.shape))


def _contains(st: ScheduleState, item: Stmt, r: BlockRealize) -> bool:
    return item is r or st.index.is_ancestor(item, r)


def _locate(st: ScheduleState, scope: Block, block: BlockRealize,
            related: Sequence[BlockRealize]) -> Tuple[List[int], List[For], int]:
    """Where a cache stage of ``block``'s output goes: the innermost loop (or the scope block) that
    holds ``block`` and one of ``related`` (the blocks reading what it writes) in different
    statements, right before the first of those statements after ``block``'s. Returns the path of
    statement positions from the scope's body down to that loop, the loops on the path, and the
    position in its body. Without related blocks: the end of the scope's body (as TVM places them)."""
    path: List[int] = []
    loops: List[For] = []
    node: Stmt = scope
    while True:
        items = body_items(node.body)
        if not related:
            return path, loops, len(items)
        kw = next(k for k, it in enumerate(items) if _contains(st, it, block))
        rel = sorted({k for k, it in enumerate(items) for q in related if _contains(st, it, q)})
        inner = items[kw]
        if kw in rel and isinstance(inner, For):
            path.append(kw)
            loops.append(inner)
            node = inner
            continue
        after = [k for k in rel if k > kw]
        return path, loops, (after[0] if after else kw + 1)


def _insert_at(st: ScheduleState, scope_token: BlockToken, path: Sequence[int], pos: int, stage: Stmt,
               new_buf: Buffer) -> None:
    """Insert ``stage`` at position ``pos`` of the loop reached by ``path`` from the scope's body
    (the scope's body itself for an empty path); the scope allocates ``new_buf``."""

    def put(node: Stmt, depth: int) -> Stmt:
        items = body_items(node.body)
        if depth == len(path):
            new_items = items[:pos] + [stage] + items[pos:]
        else:
            k = path[depth]
            new_items = items[:k] + [put(items[k], depth + 1)] + items[k + 1:]
        if isinstance(node, For):
            return with_loop(node, body=seq(*new_items))
        return dataclasses.replace(node, body=seq(*new_items))

    scope = st.index.realize[scope_token].block
    new_scope = put(scope, 0)
    new_scope = dataclasses.replace(new_scope, alloc_buffers=scope.alloc_buffers + (new_buf,))
    st.replace(scope, new_scope)


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
    """Insert a copy of the ``index``-th buffer block ``token`` reads. For a buffer the scope writes,
    the copy goes right after its producer, inside the innermost loop the producer shares with a
    reader (so the readers in that loop see this iteration's values), over the region the producer
    writes in one iteration of that loop; for a function input, at the start of the scope over the
    whole buffer."""
    r, buf, scope_blk, new_buf, stage_name = _cache_target(st, token, name, index, scope, "cache_read")
    scope_token = scope_blk.sref
    siblings = child_realizes(scope_blk)
    writers = [q for q in siblings if any(w.buffer is buf for w in q.block.writes)]
    if len(writers) > 1:
        raise ScheduleError(f"cache_read: buffer {buf.name} is written by several blocks "
                            f"({', '.join(q.block.name_hint for q in writers)}); cache_read needs one "
                            f"producer")
    if consumer_tokens is None:  # a producer reading its own output inside keeps reading it
        readers = [q for q in siblings if any(x.buffer is buf for x in q.block.reads) and q not in writers]
    else:
        readers = [st.realize(t, "cache_read", "consumer") for t in consumer_tokens]
    if writers:
        w = writers[0]
        wreg = next(x for x in w.block.writes if x.buffer is buf)
        related = [q for q in readers if q is not w]
        path, loops, pos = _locate(st, scope_blk, w, related)
        region = _relaxed_region(st, w, wreg, loops)
    else:
        path, loops, pos = [], [], 0
        region = [Range(const(0), s) for s in buf.shape]
    stage = copy_stage(stage_name, buf, new_buf, region, _outer_ranges(st, scope_blk, loops))
    stage_token = _stage_token(stage)
    for t in [q.block.sref for q in readers]:
        q = st.index.realize[t]
        st.replace(q, _RedirectReads(buf, new_buf)(q))
    _insert_at(st, scope_token, path, pos, stage, new_buf)
    return stage_token


def cache_write(st: ScheduleState, token: BlockToken, name: str, index: int, scope: str) -> BlockToken:
    """Make block ``token`` write a cache of its ``index``-th output and copy it back right after it,
    inside the innermost loop the block shares with a reader of the buffer (at the end of the scope
    when nothing in the scope reads it), over the region it writes in one iteration of that loop."""
    r, buf, scope_blk, new_buf, stage_name = _cache_target(st, token, name, index, scope, "cache_write")
    blk = r.block
    scope_token = scope_blk.sref
    siblings = child_realizes(scope_blk)
    writers = [q for q in siblings if any(w.buffer is buf for w in q.block.writes)]
    if len(writers) > 1:
        raise ScheduleError(f"cache_write: buffer {buf.name} is written by several blocks "
                            f"({', '.join(q.block.name_hint for q in writers)}); cache_write needs one "
                            f"producer")
    related = [q for q in siblings if q is not r and any(x.buffer is buf for x in q.block.reads)]
    path, loops, pos = _locate(st, scope_blk, r, related)
    region = _relaxed_region(st, r, blk.writes[index], loops)
    stage = copy_stage(stage_name, new_buf, buf, region, _outer_ranges(st, scope_blk, loops))
    stage_token = _stage_token(stage)
    st.replace(r, ExprMutator(buffer_map={buf: new_buf})(r))
    _insert_at(st, scope_token, path, pos, stage, new_buf)
    return stage_token


def _stage_token(stage: Stmt) -> BlockToken:
    return next(s for s in walk(stage) if isinstance(s, Block)).sref
