"""TensorIR (block-level) PrimFunc -> the loop IR the tensor-expression path produces.

The result goes through the same target passes (:func:`kernels.lower.lower_for_target`) and the
same code generator as a lowered TE schedule: one backend under both front ends. The passes, in
order (``BLOCK_PASSES``), each a function from a statement to a statement:

0. ``hoist_reduction_init`` (:mod:`kernels.lower.accumulate`) — a reduction block's ``T.init()``
   runs once before its reduction loops where those loops are innermost around it.
1. ``lower_init_block`` — any other ``T.init()`` runs under the condition that every
   reduction variable is at the start of its domain: ``if vk == 0: init`` before the update.
2. ``lower_blocks`` — blocks disappear: block variables are replaced by their bindings, ``T.where``
   becomes an ``if``, a block's ``alloc_buffer`` an ``Allocate`` at the block (``storage_align``
   annotations ride along as ``buffer_dim_align`` attributes), an element of a buffer matched to a
   region (``T.match_buffer(A[...], ...)`` in a block) the element of the source buffer. A reduction
   variable bound to a ``threadIdx`` loop (a cross-thread reduction) is refused here: it would race.
3. ``compact_buffers`` — each allocated buffer moves to the innermost loop that contains all of its
   accesses and shrinks to the region accessed there (loops below relaxed; for ``shared`` memory
   the ``threadIdx`` loops too, since the threads of a block share it; ``global`` buffers stay at
   the function top, outside every kernel). ``A_shared[1024, 1024]`` cached per ``k_0`` becomes
   ``A_shared[64, 8]``, indices offset by the region's start.
4. ``bind_threads`` — ``T.thread_binding`` loops become ``attr [threadIdx.x] "thread_extent"`` as
   TE's ``bind`` produces; a loop nested in another bound to the same thread reuses its index (the
   extents must agree).
5. ``flatten_buffers`` — ``A[i, j]`` becomes ``A[i * stride + j]`` with row-major strides padded by
   ``storage_align``; ``(e // c) * c + e % c`` pairs fold back into ``e``.
6. ``simplify`` — scoped simplification, as at the end of TE lowering.

Vectorized and unrolled loops stay ``For`` loops of those kinds; the target passes and the code
generator handle them (and insert the barriers shared memory needs) as for TE.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

from ..errors import LoweringError
from ..tir import attr
from ..tir.block import (
    THREAD_BINDING,
    Block,
    BlockRealize,
    BufferRegion,
    ExprMutator,
    IterVarType,
    Range,
    StmtMutator,
    ThreadBindingFor,
    children_stmts,
    is_true,
    loop_thread,
    substitute_stmt,
    walk,
)
from ..tir.expr import (
    And,
    Buffer,
    BufferLoad,
    BufferView,
    FloorDiv,
    FloorMod,
    IntImm,
    PrimExpr,
    Var,
    const,
)
from ..tir.function import PrimFunc
from ..tir.functor import collect, vars_of
from ..tir.region import Interval, bound, loop_dom, row_major_strides, union_intervals
from ..tir.simplify import const_int_bound, simplify, structural_equal, to_linear
from ..tir.stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    BufferRealize,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    ThreadIndex,
    While,
    seq,
)
from .accumulate import hoist_reduction_init
from .pipeline import Pass, _body
from .simplify import simplify_stmt

ALIGN_KEY = "buffer_dim_align"


# -- 1. init blocks ------------------------------------------------------------------------------------


def lower_init_block(stmt: Stmt) -> Stmt:
    """``T.init()`` -> ``if all reduction vars at their start: init`` before the block body."""

    class _M(StmtMutator):
        def visit_Block(self, b: Block) -> Stmt:
            b = self.generic(b)
            if b.init is None:
                return b
            cond: Optional[PrimExpr] = None
            for iv in b.iter_vars:
                if iv.iter_type == IterVarType.CommReduce:
                    c = iv.var.equal(iv.dom.min)
                    cond = c if cond is None else And(cond, c)
            init = b.init if cond is None else IfThenElse(cond, b.init)
            return dataclasses.replace(b, init=None, body=seq(init, b.body))

    return _M()(stmt)


# -- 2. blocks -> loops ------------------------------------------------------------------------------


def _realize_size(b: Buffer) -> PrimExpr:
    size: PrimExpr = const(1)
    for s in b.shape:
        size = size * s
    return simplify(size)


def lower_blocks(stmt: Stmt) -> Stmt:
    """Remove blocks: bindings substituted, predicates as ``if``, allocations as ``Allocate``."""
    loops: List[For] = []
    # storage_align annotates the block writing a buffer; the allocation may sit in another block
    aligns: Dict[int, Tuple[Tuple[int, int, int], ...]] = {}
    for b in walk(stmt):
        if isinstance(b, Block):
            for key, entries in _aligns(b).items():
                aligns[key] = aligns.get(key, ()) + entries

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, BlockRealize):
            return realize(s)
        if isinstance(s, For):
            loops.append(s)
            body = visit(s.body)
            loops.pop()
            return s if body is s.body else dataclasses.replace(s, body=body)
        if isinstance(s, SeqStmt):
            return seq(*[visit(x) for x in s.seq])
        if isinstance(s, IfThenElse):
            return IfThenElse(s.condition, visit(s.then_case),
                              None if s.else_case is None else visit(s.else_case))
        if isinstance(s, (LetStmt, Allocate, AttrStmt)):
            return dataclasses.replace(s, body=visit(s.body))
        if isinstance(s, Block):
            raise LoweringError(f"block {s.name_hint} has no BlockRealize")
        if isinstance(s, (While, BufferRealize, AssertStmt)):
            what = {While: "a while loop", BufferRealize: "T.realize", AssertStmt: "an assert"}[type(s)]
            raise LoweringError(f"{what} ({type(s).__name__}) cannot be lowered: kernels lowers "
                                "TensorIR blocks and loops; write a bounded loop / index buffers directly")
        return s

    def realize(r: BlockRealize) -> Stmt:
        blk = r.block
        if blk.init is not None:
            raise LoweringError(f"block {blk.name_hint}: init left after lower_init_block")
        _check_cross_thread(blk, r, loops)
        body = visit(_inline_match_buffers(blk) if blk.match_buffers else blk.body)
        body = substitute_stmt(body, {iv.var: v for iv, v in zip(blk.iter_vars, r.iter_values)})
        for b in reversed(blk.alloc_buffers):
            body = Allocate(b, _realize_size(b), body)
            if id(b) in aligns:
                body = AttrStmt(b, ALIGN_KEY, aligns[id(b)], body)
        if not is_true(r.predicate):
            body = IfThenElse(r.predicate, body)
        return body

    return visit(stmt)


def _inline_match_buffers(blk: Block) -> Stmt:
    """The body of ``blk`` with every element access of a buffer matched to a region
    (``A0 = T.match_buffer(A[i0:i0 + 16, 0:16], (16, 16))``) turned into the access of the source
    buffer at the region's offset (``A0[i, j]`` -> ``A[i0 + i, j]``); regions of inner blocks too.
    Using the matched buffer's pointer, offset or strides is refused (its layout is not planned)."""
    matched = {id(m.buffer): m for m in blk.match_buffers}
    dims: Dict[int, List[int]] = {}  # matched buffer -> the region dimension of each of its dimensions
    for m in blk.match_buffers:
        region = m.source.region
        if len(m.buffer.shape) == len(region):
            dims[id(m.buffer)] = list(range(len(region)))
            continue
        wide = [k for k, rg in enumerate(region)
                if not (isinstance(rg.extent, IntImm) and rg.extent.value == 1)]
        if len(wide) != len(m.buffer.shape):
            raise LoweringError(f"block {blk.name_hint}: {m.buffer.name} has {len(m.buffer.shape)} "
                                f"dimension(s) but matches a region of {len(wide)} non-unit dimension(s) of "
                                f"{m.source.buffer.name}; only a buffer of the region's rank can be lowered")
        dims[id(m.buffer)] = wide  # A[vi, 0:4] matched as (4,): its dimension is the region's second

    def shifted(m, indices):
        out = [rg.min for rg in m.source.region]
        for d, i in zip(dims[id(m.buffer)], indices):
            out[d] = out[d] + i
        return tuple(simplify(x) for x in out)

    def load(e):
        if isinstance(e, BufferLoad) and id(e.buffer) in matched:
            m = matched[id(e.buffer)]
            return BufferLoad(m.source.buffer, shifted(m, e.indices))
        return None

    class _M(ExprMutator):
        def __init__(self):
            super().__init__(rewrite_expr=load)

        def region(self, r: BufferRegion) -> BufferRegion:
            r = super().region(r)
            m = matched.get(id(r.buffer))
            if m is None:
                return r
            rng = [Range(sr.min, const(1)) for sr in m.source.region]
            for d, x in zip(dims[id(m.buffer)], r.region):
                rng[d] = Range(simplify(m.source.region[d].min + x.min), x.extent)
            return BufferRegion(m.source.buffer, tuple(rng))

        def visit_BufferStore(self, s: BufferStore) -> Stmt:
            s2 = self.generic(s)
            m = matched.get(id(s2.buffer))
            if m is None:
                return s2
            return BufferStore(m.source.buffer, s2.value, shifted(m, s2.indices))

    body = _M()(blk.body)
    forbidden = {}
    for m in blk.match_buffers:
        b = m.buffer
        for v, what in [(b.data, "data"), (getattr(b, "elem_offset", None), "elem_offset")] + \
                [(x, f"strides[{k}]") for k, x in enumerate(b.strides)]:
            if isinstance(v, Var):
                forbidden[id(v)] = f"{b.name}.{what}"
    for n in collect(body, lambda x: isinstance(x, (Var, BufferLoad, BufferStore))):
        used = forbidden.get(id(n) if isinstance(n, Var) else id(n.buffer.data))
        if used is not None:
            raise LoweringError(f"block {blk.name_hint}: {used} of a buffer matched to a region cannot be "
                                "lowered (only its elements can); index the source buffer instead")
    return body


def _aligns(blk: Block) -> Dict[int, Tuple[Tuple[int, int, int], ...]]:
    """``buffer_dim_align`` of a block: buffer id -> ((axis, factor, offset), ...)."""
    out: Dict[int, list] = {}
    for entry in blk.annotation(ALIGN_KEY, ()) or ():
        idx, axis, factor, offset = (int(x) for x in entry)
        buf = blk.writes[idx].buffer
        out.setdefault(id(buf), []).append((axis, factor, offset))
    return {k: tuple(v) for k, v in out.items()}


def _check_cross_thread(blk: Block, r: BlockRealize, loops: List[For]) -> None:
    for iv, v in zip(blk.iter_vars, r.iter_values):
        if iv.iter_type != IterVarType.CommReduce:
            continue
        used = vars_of(v)
        for lp in loops:
            tag = loop_thread(lp)
            if tag and lp.loop_var in used and (tag.startswith("threadIdx") or tag.startswith("vthread")):
                raise LoweringError(
                    f"block {blk.name_hint}: reduction variable {iv.var.name} is bound to loop "
                    f"{lp.loop_var.name} on {tag}; cross-thread reductions are not lowered from TensorIR "
                    "(the threads would race on the result): bind only spatial loops to threads")


# -- 3. buffer placement and compaction -----------------------------------------------------------------


class _Access:
    __slots__ = ("indices", "path")

    def __init__(self, indices, path):
        self.indices = indices
        self.path = path


def compact_buffers(stmt: Stmt) -> Stmt:
    """Move each allocation to the innermost loop holding its accesses and shrink it to their region."""
    allocs: Dict[int, Allocate] = {}
    aligns: Dict[int, AttrStmt] = {}
    access: Dict[int, List[_Access]] = {}
    path: List[Stmt] = []

    def note(buf: Buffer, indices) -> None:
        if id(buf) in allocs:
            access.setdefault(id(buf), []).append(_Access(indices, list(path)))

    def scan(s: Stmt) -> None:
        if isinstance(s, Allocate):
            allocs[id(s.buffer)] = s
        if isinstance(s, AttrStmt) and s.attr_key == ALIGN_KEY:
            aligns[id(s.node)] = s
        if isinstance(s, BufferStore):
            note(s.buffer, s.indices)
        from ..tir.block import children_stmts, exprs_of

        for e in exprs_of(s):
            for ld in collect(e, lambda n: isinstance(n, BufferLoad)):
                note(ld.buffer, ld.indices)
        pushed = isinstance(s, (For, LetStmt))
        if pushed:
            path.append(s)
        for c in children_stmts(s):
            scan(c)
        if pushed:
            path.pop()

    scan(stmt)
    plans: Dict[int, Tuple[Buffer, Tuple[PrimExpr, ...], Optional[Stmt]]] = {}
    for key, alloc in allocs.items():
        buf = alloc.buffer
        acc = access.get(key, [])
        if not acc:
            plans[key] = (buf, tuple(const(0) for _ in buf.shape), None)  # never used: dropped below
            continue
        plans[key] = _plan(buf, acc)

    at_loop: Dict[int, List[int]] = {}
    at_root: List[int] = []
    for key, (_nb, _off, lca) in plans.items():
        if not access.get(key):
            continue
        if lca is None:
            at_root.append(key)
        else:
            at_loop.setdefault(id(lca), []).append(key)

    def wrap(keys: List[int], body: Stmt) -> Stmt:
        for key in reversed(keys):
            nb = plans[key][0]
            body = Allocate(nb, _realize_size(nb), body)
            if key in aligns:
                body = AttrStmt(nb, ALIGN_KEY, aligns[key].value, body)
        return body

    old_to_new = {key: plans[key] for key in plans}

    def remap(e: PrimExpr):
        if isinstance(e, BufferLoad) and id(e.buffer) in old_to_new:
            nb, off, _ = old_to_new[id(e.buffer)]
            return BufferLoad(nb, tuple(simplify(i - o) for i, o in zip(e.indices, off)))
        return None

    class _M(ExprMutator):
        def __init__(self):
            super().__init__(rewrite_expr=remap)

        def visit_Allocate(self, s: Allocate) -> Stmt:
            if id(s.buffer) in plans:
                return self.visit(s.body)
            return self.generic(s)

        def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
            if s.attr_key == ALIGN_KEY and id(s.node) in plans:
                return self.visit(s.body)
            return self.generic(s)

        def visit_BufferStore(self, s: BufferStore) -> Stmt:
            s2 = self.generic(s)
            if id(s.buffer) in old_to_new:
                nb, off, _ = old_to_new[id(s.buffer)]
                return BufferStore(nb, s2.value, tuple(simplify(i - o) for i, o in zip(s2.indices, off)))
            return s2

        def visit_For(self, s: For) -> Stmt:
            s2 = self.generic(s)
            keys = at_loop.get(id(s))
            if keys:
                s2 = dataclasses.replace(s2, body=wrap(keys, s2.body))
            return s2

    out = _M()(stmt)
    return wrap(at_root, out)


def _plan(buf: Buffer, acc: List[_Access]) -> Tuple[Buffer, Tuple[PrimExpr, ...], Optional[Stmt]]:
    """(compacted buffer, index offsets, loop to allocate under or None for the function top)."""
    # the innermost loop containing every access
    common: List[Stmt] = [x for x in acc[0].path if isinstance(x, For)]
    for a in acc[1:]:
        loops = [x for x in a.path if isinstance(x, For)]
        n = 0
        while n < len(common) and n < len(loops) and common[n] is loops[n]:
            n += 1
        common = common[:n]
    if buf.scope == attr.GLOBAL:
        common = []
    lca = common[-1] if common else None
    outer = {id(x) for x in common}
    intervals: List[List[Optional[Interval]]] = []
    for a in acc:
        dom: Dict[Var, Interval] = {}
        for x in a.path:
            if isinstance(x, For):
                tag = loop_thread(x)
                if id(x) not in outer or (tag and attr.threads_share(buf.scope, tag)):
                    dom[x.loop_var] = loop_dom(x)
            elif isinstance(x, LetStmt):
                dom[x.var] = (None, None)
        dims = []
        for i in a.indices:
            lo, hi = bound(i, dom)
            dims.append(None if lo is None or hi is None else (lo, hi))
        intervals.append(dims)
    ranges = {}
    for x in common:
        hi = const_int_bound(simplify(x.min + x.extent - 1))[1]
        lo = const_int_bound(x.min)[0]
        ranges[x.loop_var] = (lo, hi)
    shape, offsets = [], []
    for d, full in enumerate(buf.shape):
        it = union_intervals([iv[d] for iv in intervals])
        if it is None:
            shape.append(full)
            offsets.append(const(0))
            continue
        lo, hi = it
        ext = simplify(hi - lo + 1, ranges)
        if not isinstance(ext, IntImm):
            ub = const_int_bound(ext, ranges)[1]
            ext = const(ub) if ub is not None else ext
        if not isinstance(ext, IntImm) or (isinstance(full, IntImm) and ext.value >= full.value):
            shape.append(full)
            offsets.append(const(0))
            continue
        shape.append(ext)
        offsets.append(lo)
    nb = Buffer(buf.name, buf.dtype, tuple(shape), _storage_scope(buf), ())
    return nb, tuple(offsets), lca


def _storage_scope(buf: Buffer) -> str:
    """The scope the code generator allocates: dynamic shared memory of a known size is static shared
    memory; warp memory needs a lowering of its own, which TensorIR does not have here."""
    if buf.scope == attr.SHARED_DYN:
        return attr.SHARED
    if buf.scope == attr.WARP:
        raise LoweringError(f"buffer {buf.name} is in warp memory, which the TensorIR lowering does not "
                            "support; use shared or local")
    return buf.scope


# -- 4. thread bindings ----------------------------------------------------------------------------------


def bind_threads(stmt: Stmt) -> Stmt:
    """``T.thread_binding`` loops -> ``attr [IterVar(threadIdx.x)] "thread_extent"``."""
    bound_tags: Dict[str, Tuple[Var, PrimExpr, str]] = {}

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, ThreadBindingFor):
            tag = loop_thread(s)
            if tag.startswith("vthread"):
                raise LoweringError(f"loop {s.loop_var.name} is bound to {tag}; virtual threads are not "
                                    "lowered from TensorIR: bind to threadIdx.* or use a serial loop")
            ext = simplify(s.extent)
            outer = bound_tags.get(tag)
            if outer is not None:
                tv, oext, oname = outer
                if not structural_equal(simplify(oext), ext):
                    raise LoweringError(f"loop {s.loop_var.name} is bound to {tag} with extent {ext}, "
                                        f"inside loop "
                                        f"{oname} bound to {tag} with extent {oext}; nested loops bound "
                                        "to one thread must have equal extents")
                return visit(substitute_stmt(s.body, {s.loop_var: simplify(tv + s.min)}))
            tv = Var(tag, s.loop_var.dtype)
            body = substitute_stmt(s.body, {s.loop_var: simplify(tv + s.min)})
            bound_tags[tag] = (tv, ext, s.loop_var.name)
            body = visit(body)
            del bound_tags[tag]
            return AttrStmt(ThreadIndex(tv, tag, ext), attr.THREAD_EXTENT, ext, body)
        if isinstance(s, For):
            return dataclasses.replace(s, body=visit(s.body))
        if isinstance(s, SeqStmt):
            return seq(*[visit(x) for x in s.seq])
        if isinstance(s, IfThenElse):
            return IfThenElse(s.condition, visit(s.then_case),
                              None if s.else_case is None else visit(s.else_case))
        if isinstance(s, (LetStmt, Allocate, AttrStmt)):
            return dataclasses.replace(s, body=visit(s.body))
        return s

    return visit(stmt)


# -- 5. flattening -------------------------------------------------------------------------------------


def _same_mod(x: PrimExpr, y: PrimExpr, c: int) -> bool:
    """Whether ``x % c == y % c`` for all values: ``x - y`` is a multiple of ``c`` term by term."""
    d = to_linear(simplify(x - y))
    return d.const % c == 0 and all(coef % c == 0 for coef, _ in d.terms.values())


def merge_div_mod(e: PrimExpr) -> PrimExpr:
    """Fold ``(y // c) * (c * k) + (x % c) * k`` into ``y * k`` when ``x % c == y % c`` (``y - x`` a
    multiple of ``c``), which is what a flattened split-and-fused index looks like."""
    e = simplify(e)
    if not collect(e, lambda n: isinstance(n, FloorMod)):
        return e
    lin = to_linear(e)
    changed = True
    while changed:
        changed = False
        items = list(lin.terms.values())
        for coef_m, t_m in items:
            if not (isinstance(t_m, FloorMod) and isinstance(t_m.b, IntImm) and t_m.b.value > 0):
                continue
            c = t_m.b.value
            for coef_d, t_d in items:
                if (isinstance(t_d, FloorDiv) and isinstance(t_d.b, IntImm) and t_d.b.value == c
                        and coef_d == coef_m * c and _same_mod(t_d.a, t_m.a, c)):
                    lin.add_term(t_m, -coef_m)
                    lin.add_term(t_d, -coef_d)
                    lin.add(to_linear(simplify(t_d.a)), coef_m)
                    changed = True
                    break
            if changed:
                break
    return simplify(lin.to_expr())


def flatten_buffers(stmt: Stmt, params: Tuple[Buffer, ...]) -> Stmt:
    """Multi-dimensional accesses -> one flat index; allocations sized with their (aligned) strides."""
    strides: Dict[int, Tuple[PrimExpr, ...]] = {id(b): (b.strides or row_major_strides(b.shape))
                                                for b in params}
    flat: Dict[int, Buffer] = {id(b): b for b in params}
    by_data: Dict[int, Buffer] = {id(b.data): b for b in params}

    def index(buf: Buffer, indices) -> Tuple[Buffer, Tuple[PrimExpr, ...]]:
        if isinstance(buf, BufferView):  # T.load / T.store: an element offset from the data pointer
            owner = by_data.get(id(buf.data))
            if owner is None:
                raise LoweringError(f"T.load/T.store of {buf.name}.data: a flat access of memory the "
                                    f"function allocates cannot be lowered (lowering plans its layout); "
                                    f"index the buffer ({buf.name}[...]) instead")
            if buf.dtype != owner.dtype:
                raise LoweringError(f"T.load/T.store of {buf.name}.data as {buf.dtype}: {buf.name} holds "
                                    f"{owner.dtype}; a flat access must use the buffer's type")
            return flat[id(owner)], tuple(indices)
        st = strides.get(id(buf))
        if st is None:
            raise LoweringError(f"buffer {buf.name} is accessed outside its allocation")
        off: PrimExpr = const(0)
        for i, s in zip(indices, st):
            off = off + i * s
        return flat[id(buf)], (merge_div_mod(off),)

    def declare(b: Buffer, align=()) -> Buffer:
        amap = {}
        for axis, factor, offset in align:
            amap[axis % max(len(b.shape), 1)] = (factor, offset)
        st = row_major_strides(b.shape, amap)
        nb = Buffer(b.name, b.dtype, b.shape, b.scope, st, b.data)
        strides[id(b)] = st
        flat[id(b)] = nb
        return nb

    def remap(e):
        if isinstance(e, BufferLoad):
            nb, idx = index(e.buffer, e.indices)
            return BufferLoad(nb, idx)
        return None

    class _M(ExprMutator):
        def __init__(self):
            super().__init__(rewrite_expr=remap)

        def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
            if s.attr_key == ALIGN_KEY and isinstance(s.body, Allocate) and s.body.buffer is s.node:
                return self.allocate(s.body, s.value)
            return self.generic(s)

        def visit_Allocate(self, s: Allocate) -> Stmt:
            return self.allocate(s, ())

        def allocate(self, s: Allocate, align) -> Stmt:
            nb = declare(s.buffer, align)
            size = simplify(nb.strides[0] * nb.shape[0]) if nb.shape else const(1)
            return Allocate(nb, size, self.visit(s.body))

        def visit_BufferStore(self, s: BufferStore) -> Stmt:
            s2 = self.generic(s)
            nb, idx = index(s.buffer, s2.indices)
            return BufferStore(nb, s2.value, idx)

    return _M()(stmt)


# -- the pipeline ---------------------------------------------------------------------------------------


#: the passes that turn a block-level body into the loop IR, in order
BLOCK_PASSES: List[Pass] = [
    Pass("hoist_reduction_init", _body(hoist_reduction_init),
         "a reduction's init block hoisted out of the loops that do not reduce"),
    Pass("lower_init_block", _body(lower_init_block), "init blocks -> a guarded store at the first iteration"),
    Pass("lower_blocks", _body(lower_blocks), "blocks -> their bodies with the block iterators bound"),
    Pass("compact_buffers", _body(compact_buffers), "allocations shrunk to the region used"),
    Pass("bind_threads", _body(bind_threads), "thread-bound loops -> thread_extent attributes"),
    Pass("flatten_buffers", lambda f: f.with_body(flatten_buffers(f.body, f.buffers)),
         "multi-dimensional buffers -> flat row-major ones"),
    Pass("simplify", _body(simplify_stmt), "arithmetic simplification"),
]


def is_block_level(func) -> bool:
    """Whether ``func`` is a TensorIR PrimFunc whose body still holds blocks."""
    return isinstance(func, PrimFunc) and any(isinstance(s, BlockRealize) for s in walk(func.body))


def lower_block_func(func: PrimFunc) -> PrimFunc:
    """Run ``BLOCK_PASSES``: the same function with a loop-IR body (blocks gone, buffers flat)."""
    for p in BLOCK_PASSES:
        func = p(func)
    return func


def check_for_target(func: PrimFunc, target: str) -> None:
    """Refuse, naming the block and loop, what ``target`` cannot run: GPU thread bindings on ``c``,
    a top-level loop nest with no thread binding on a GPU target."""
    body = func.body
    if isinstance(body, BlockRealize) and body.block.name_hint == "root":
        body = body.block.body
    parts = list(body.seq) if isinstance(body, SeqStmt) else [body]
    for part in parts:
        names = [s.block.name_hint for s in walk(part) if isinstance(s, BlockRealize)]
        bound = [s for s in walk(part) if isinstance(s, For) and s.kind == THREAD_BINDING]
        what = f"block {', '.join(names)}" if names else "a loop nest"
        if target == "c" and bound:
            lp = bound[0]
            raise LoweringError(f"{what}: loop {lp.loop_var.name} is bound to {loop_thread(lp)}; target c "
                                "cannot run GPU thread bindings (build for cuda or opencl, or do not bind "
                                "the loop)")
        if target in ("cuda", "opencl") and not bound and names:
            raise LoweringError(f"{what} is not under any loop bound to a GPU thread; target {target} needs "
                                'sch.bind(loop, "blockIdx.x") and sch.bind(loop, "threadIdx.x") '
                                "(did you forget to bind?)")
    if target in ("cuda", "opencl"):
        _check_local_buffers(func.body)


def _check_local_buffers(body: Stmt) -> None:
    """A ``local`` buffer is one copy per GPU thread: every block that accesses it must run under the
    same loops bound to ``threadIdx`` (else a thread reads elements another thread wrote in its own
    copy, or a block outside the thread loops reads elements of one thread only)."""
    seen: dict = {}

    def visit(s: Stmt, threads: tuple) -> None:
        if isinstance(s, For) and loop_thread(s).startswith("threadIdx"):
            threads = threads + (s,)
        if isinstance(s, BlockRealize):
            for reg in s.block.reads + s.block.writes:
                if reg.buffer.scope != attr.LOCAL:
                    continue
                key = tuple(id(t) for t in threads)
                first = seen.setdefault(id(reg.buffer), (key, s.block.name_hint, threads))
                if first[0] != key:
                    def where(ts):
                        return ("under " + ", ".join(f"loop {t.loop_var.name} ({loop_thread(t)})" for t in ts)
                                if ts else "outside every threadIdx loop")
                    raise LoweringError(
                        f"buffer {reg.buffer.name} is local (one copy per GPU thread) but block {first[1]} "
                        f"accesses it {where(first[2])} and block {s.block.name_hint} {where(threads)}; "
                        "every block that accesses a local buffer must run under the same threadIdx loops "
                        "(use shared memory to pass values between threads)")
        for c in children_stmts(s):
            visit(c, threads)

    visit(body, ())


__all__ = ["BLOCK_PASSES", "lower_block_func", "is_block_level", "check_for_target", "lower_init_block",
           "lower_blocks", "compact_buffers", "bind_threads", "flatten_buffers", "merge_div_mod"]



def tir_function(inputs, target: str, name: str = "default_function") -> PrimFunc:
    """What ``build`` builds from a TensorIR input: an ``IRModule`` of one function, a ``PrimFunc``
    or a ``tir.Schedule`` (its ``mod``), checked for ``target`` and lowered to the loop IR."""
    from ..errors import TVMError
    from ..tir.function import IRModule

    if hasattr(inputs, "mod") and isinstance(getattr(inputs, "mod"), IRModule):
        inputs = inputs.mod
    if isinstance(inputs, IRModule):
        if len(inputs.functions) != 1:
            raise TVMError(f"build: the module has {len(inputs.functions)} functions "
                           f"({', '.join(inputs.functions)}); build one at a time, e.g. "
                           f"tvm.build(mod['main'])")
        func = next(iter(inputs.functions.values()))
    elif isinstance(inputs, PrimFunc):
        func = inputs
    else:
        raise TVMError(f"build: expected a TensorIR IRModule or PrimFunc, got {type(inputs).__name__}")
    if name != "default_function":
        func = func.with_name(name)
    check_for_target(func, target)
    return lower_block_func(func)
