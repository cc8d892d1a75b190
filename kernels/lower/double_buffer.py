"""Double buffering (TVM's InjectDoubleBuffer): a stage computed at a loop gets two copies of its
buffer, so the tile of iteration ``k + 1`` is fetched into one half while iteration ``k`` computes
on the other, and one barrier per iteration separates them instead of two::

    for k in range(K):                      A.shared[0:S] = fetch(0)
        A.shared = fetch(k)                 for k in range(K - 1):
        compute(A.shared)           ->          A.shared[((k+1) % 2) S:] = fetch(k + 1)   # idle half
                                                compute(A.shared[(k % 2) S:])
                                            compute(A.shared[((K-1) % 2) S:])

Two passes: :func:`mark_double_buffer` (before storage flattening) wraps the producer of every stage
marked with ``s[T].double_buffer()`` in ``attr double_buffer_scope``; :func:`inject_double_buffer`
(after it) rewrites the innermost loop around each marked producer as above. The write into the
idle half sits in ``attr double_buffer_write``, which tells the barrier pass (storage_sync.py) that
it does not conflict with the reads of the same iteration. Each half is padded to 16 bytes so that
vector accesses stay aligned in both.

Both fetches (the first and the prefetch) also sit in ``attr async_copy``: their copies from global
memory may complete asynchronously. The CUDA code generator prints such 4-, 8- and 16-byte copies as
``cp.async`` on sm_80 and newer and waits for them before every barrier, so the prefetch of tile
``k + 1`` really runs while tile ``k`` is computed instead of stalling in registers; the barrier
pass treats those writes as unseen by every thread, their own included, until the next barrier.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import LoweringError
from ..tir import attr
from ..tir import dtype as dt
from ..tir.expr import GE, LT, Buffer, BufferLoad, FloorMod, IntImm, PrimExpr, Var, const
from ..tir.functor import collect, rewrite, rewrite_stmts, substitute
from ..tir.simplify import can_prove, simplify
from ..tir.stmt import Allocate, AttrStmt, BufferStore, For, IfThenElse, SeqStmt, Stmt, seq
from .storage_sync import ASYNC_COPY, DOUBLE_BUFFER_WRITE
from .te_stmt import ProducerRealize, ProducerStore

DOUBLE_BUFFER_SCOPE = attr.DOUBLE_BUFFER_SCOPE
#: inside double_buffer_scope: how many copies of the buffer a multi-buffered stage keeps (> 2)
BUFFER_STAGES = attr.BUFFER_STAGES
#: around a fetch of a multi-buffered stage: the asynchronous copies issued so far form one group
#: (``cp.async.commit_group`` after the body, also when its guard is false)
ASYNC_COMMIT = attr.ASYNC_COMMIT
#: around a multi-buffered loop: barriers directly in its body wait until at most ``value`` groups of
#: asynchronous copies are still in flight (those of later tiles) instead of all of them
ASYNC_WAIT = attr.ASYNC_WAIT
#: each half starts at a multiple of this many bytes (a float4 / 16-byte vector access)
HALF_ALIGN_BYTES = 16


# -- marking (TE level) ------------------------------------------------------------------------


def _stores_to(s: Stmt, tensors) -> bool:
    ops = {id(t.op) for t in tensors}
    return bool(collect(s, lambda n: isinstance(n, ProducerStore) and id(n.producer.op) in ops))


def _mark(n) -> Optional[Stmt]:
    if not isinstance(n, ProducerRealize) or not getattr(n.stage, "double_buffered", False):
        return None
    st = n.stage
    if st.attach_type != "scope":
        raise LoweringError(f"stage {st.name}: double_buffer: the stage is computed at the root; double "
                            "buffering needs it computed at a loop of its consumer (s[T].compute_at(s[C], "
                            "k_outer)), which then prefetches the next tile")
    items = list(n.body.seq) if isinstance(n.body, SeqStmt) else [n.body]
    out = []
    stages = getattr(st, "buffer_stages", 2)
    for item in items:
        if _stores_to(item, n.tensors):
            for t in reversed(n.tensors):
                if stages > 2:
                    item = AttrStmt(t, BUFFER_STAGES, stages, item)
                item = AttrStmt(t, DOUBLE_BUFFER_SCOPE, st.name, item)
        out.append(item)
    return dataclasses.replace(n, body=seq(*out))


def mark_double_buffer(stmt: Stmt) -> Stmt:
    """Wrap the producer of every double-buffered stage in ``attr double_buffer_scope``."""
    return rewrite_stmts(stmt, _mark)


# -- injection (flat buffers) ------------------------------------------------------------------


@dataclasses.dataclass
class _Entry:
    tensor: object  # the stage's output tensor (the attr's node)
    stage: str
    buffer: Buffer
    extent: PrimExpr  # elements of one half before padding
    loop_var: Var  # of the innermost loop around the producer
    alloc_inside: bool  # whether the buffer is allocated inside that loop
    stages: int = 2  # copies of the buffer
    stride: PrimExpr = None  # elements between the two halves


def _find(stmt: Stmt) -> List[_Entry]:
    found: List[_Entry] = []

    def visit(s, outer: Tuple[Stmt, ...]):
        if isinstance(s, AttrStmt) and s.attr_key == DOUBLE_BUFFER_SCOPE:
            t, stage = s.node, s.value
            allocs = [k for k, a in enumerate(outer) if isinstance(a, Allocate) and a.buffer.name == t.name]
            loops = [k for k, f in enumerate(outer) if isinstance(f, For)]
            if not allocs:
                raise LoweringError(f"stage {stage}: double_buffer: no buffer of the stage is allocated "
                                    "around its producer (is it an output or at global scope?)")
            if not loops:
                return  # its loop has a single iteration (and is gone): one tile, nothing to overlap
            alloc, loop = outer[allocs[-1]], outer[loops[-1]]
            if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
                raise LoweringError(f"stage {stage}: double_buffer: loop {loop.loop_var.name} starts at "
                                    f"{loop.min}, not 0")
            if any(e.buffer is alloc.buffer for e in found):
                raise LoweringError(f"stage {stage}: double_buffer: the stage is produced at two places")
            stages = s.body.value if isinstance(s.body, AttrStmt) and s.body.attr_key == BUFFER_STAGES else 2
            found.append(_Entry(t, stage, alloc.buffer, alloc.extent, loop.loop_var, allocs[-1] > loops[-1],
                                int(stages)))
        for c in _stmt_children(s):
            visit(c, outer + (s,))

    visit(stmt, ())
    return found


def _stmt_children(s: Stmt):
    for name in ("body", "then_case", "else_case"):
        c = getattr(s, name, None)
        if isinstance(c, Stmt):
            yield c
    for c in getattr(s, "seq", ()):
        yield c


def _half_stride(e: _Entry) -> PrimExpr:
    ext = simplify(e.extent)
    if not isinstance(ext, IntImm):
        return ext
    per = max(1, HALF_ALIGN_BYTES * 8 // max(8, dt.bits(e.buffer.dtype)))
    return const(-(-ext.value // per) * per)


def _offset(n, bufs: Dict[int, _Entry], half: PrimExpr):
    """Loads and stores of the double-buffered ``bufs`` shifted into the half ``half``."""
    if isinstance(n, (BufferLoad, BufferStore)) and id(n.buffer) in bufs:
        e = bufs[id(n.buffer)]
        return dataclasses.replace(n, indices=(n.indices[0] + half * e.stride,))
    return None


def _rewrite_body(loop: For, entries: List[_Entry], slot: PrimExpr, primitive: str,
                  fetch: Callable[[List[_Entry], Stmt], Stmt]) -> Stmt:
    """``loop``'s body with the buffered ``entries`` read from copy ``slot`` and each of their
    producers replaced by ``fetch(own, body)``: ``own`` the entries it fills, ``body`` the producer
    writing copy ``slot`` (``fetch`` substitutes the loop variable for the tile it fetches)."""
    bufs = {id(e.buffer): e for e in entries}
    by_tensor = {id(e.tensor): e for e in entries}

    def producer(a: AttrStmt) -> Stmt:
        own, body = _owned(a, by_tensor)
        owned = {id(e.buffer): e for e in own}
        body = rewrite(body, lambda n: _offset(n, owned, slot))
        reads = [n for n in collect(body, lambda n: isinstance(n, BufferLoad))
                 if id(n.buffer) in bufs and id(n.buffer) not in owned]
        if reads:
            kind = primitive.split("_")[0]
            raise LoweringError(f"stage {own[0].stage}: {primitive}: its producer reads "
                                f"{reads[0].buffer.name}, another {kind}-buffered stage of the same loop")
        return fetch(own, body)

    def pre(n):
        if isinstance(n, AttrStmt) and n.attr_key == DOUBLE_BUFFER_SCOPE and id(n.node) in by_tensor:
            return producer(n)
        if isinstance(n, Allocate) and id(n.buffer) in bufs:
            return rewrite(n.body, post, pre)  # allocated around the loop instead
        return None

    def post(n):
        return _offset(n, bufs, slot)

    return rewrite(loop.body, post, pre)


def _allocated(out: Stmt, entries: List[_Entry], copies: int) -> Stmt:
    """``out`` inside the allocations of the entries that were allocated inside the loop."""
    for e in reversed(entries):
        if e.alloc_inside:
            out = Allocate(e.buffer, simplify(e.stride * copies), out)
    return out


def _rewrite_loop(loop: For, entries: List[_Entry]) -> Stmt:
    """The loop with its double-buffered producers prefetching, preceded by the first fetch."""
    k, ext = loop.loop_var, loop.extent
    prologue: List[Stmt] = []

    def fetch(own: List[_Entry], body: Stmt) -> Stmt:
        first = substitute(body, {k: const(0, k.dtype)})
        nxt = substitute(body, {k: k + 1})
        for e in own:
            first = AttrStmt(e.buffer, ASYNC_COPY, 1, first)
            nxt = AttrStmt(e.buffer, DOUBLE_BUFFER_WRITE, 1, AttrStmt(e.buffer, ASYNC_COPY, 1, nxt))
        prologue.append(first)
        return IfThenElse(LT(k + 1, ext), nxt)

    body = _rewrite_body(loop, entries, FloorMod(k, const(2, k.dtype)), "double_buffer", fetch)
    last = simplify(ext - 1)
    out = seq(*prologue, dataclasses.replace(loop, extent=last, body=body), substitute(body, {k: last}))
    if not can_prove(GE(ext, const(1, ext.dtype))):
        out = IfThenElse(GE(ext, const(1, ext.dtype)), out)  # the first fetch needs one iteration
    return _allocated(out, entries, 2)


def _owned(a: AttrStmt, by_tensor) -> Tuple[List[_Entry], Stmt]:
    """The entries a producer marked ``a`` fills (every output of a multi-output stage) and its body."""
    own, body = [], a
    while isinstance(body, AttrStmt) and body.attr_key in (DOUBLE_BUFFER_SCOPE, BUFFER_STAGES):
        if body.attr_key == DOUBLE_BUFFER_SCOPE:
            own.append(by_tensor[id(body.node)])
        body = body.body
    return own, body


def _rewrite_loop_stages(loop: For, entries: List[_Entry], stages: int) -> Stmt:
    """The loop with its multi-buffered producers fetching ``stages - 1`` tiles ahead (see
    :meth:`kernels.te.Stage.multi_buffer`); every iteration commits one group of asynchronous copies
    per producer, so waiting for the current tile leaves ``producers * (stages - 2)`` groups in
    flight."""
    k, ext = loop.loop_var, loop.extent
    prologue: List[List[Stmt]] = [[] for _ in range(stages - 1)]
    producers = []

    def fetch(own: List[_Entry], body: Stmt) -> Stmt:
        producers.append(own)

        def tile_fetch(tile: PrimExpr, stmt: Stmt, write_attr: bool) -> Stmt:
            if not can_prove(LT(tile, ext)):
                stmt = IfThenElse(LT(tile, ext), stmt)
            for e in own:
                stmt = AttrStmt(e.buffer, ASYNC_COPY, 1, stmt)
                if write_attr:
                    stmt = AttrStmt(e.buffer, DOUBLE_BUFFER_WRITE, 1, stmt)
            return AttrStmt(own[0].buffer, ASYNC_COMMIT, 1, stmt)

        for j in range(stages - 1):
            prologue[j].append(tile_fetch(const(j, k.dtype), substitute(body, {k: const(j, k.dtype)}), False))
        return tile_fetch(k + (stages - 1), substitute(body, {k: k + (stages - 1)}), True)

    body = _rewrite_body(loop, entries, FloorMod(k, const(stages, k.dtype)), "multi_buffer", fetch)
    pipelined = AttrStmt(entries[0].buffer, ASYNC_WAIT, len(producers) * (stages - 2),
                         dataclasses.replace(loop, body=body))
    return _allocated(seq(*(p for tile in prologue for p in tile), pipelined), entries, stages)


def inject_double_buffer(stmt: Stmt) -> Stmt:
    """Rewrite the loops around the producers marked by :func:`mark_double_buffer` (innermost
    loops first); buffers get two padded halves."""
    entries = _find(stmt)
    if not entries:
        return _strip_marks(stmt)
    by_loop: Dict[int, List[_Entry]] = {}
    outside: Dict[int, _Entry] = {}
    for e in entries:
        e.stride = _half_stride(e)
        by_loop.setdefault(id(e.loop_var), []).append(e)
        if not e.alloc_inside:
            outside[id(e.buffer)] = e

    def post(n):
        if isinstance(n, For) and id(n.loop_var) in by_loop:
            group = by_loop[id(n.loop_var)]
            stages = {e.stages for e in group}
            if len(stages) > 1:
                raise LoweringError(f"stages {', '.join(e.stage for e in group)}: multi_buffer: the stages "
                                    f"fetched in loop {n.loop_var.name} keep different numbers of copies "
                                    f"({sorted(stages)}); give them the same")
            (count,) = stages
            return _rewrite_loop(n, group) if count == 2 else _rewrite_loop_stages(n, group, count)
        if isinstance(n, Allocate) and id(n.buffer) in outside:
            e = outside[id(n.buffer)]
            return dataclasses.replace(n, extent=simplify(e.stride * e.stages))
        return None

    return _strip_marks(rewrite_stmts(stmt, post))


def _strip_marks(stmt: Stmt) -> Stmt:
    """Drop the markers of producers that needed no double buffering."""
    def strip(n):
        if isinstance(n, AttrStmt) and n.attr_key in (DOUBLE_BUFFER_SCOPE, BUFFER_STAGES):
            return n.body
        return None

    return rewrite_stmts(stmt, strip)
