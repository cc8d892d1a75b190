"""Block partitioning: interior thread blocks without bound checks, edge blocks with them.

A GPU kernel of a split whose factor does not divide the extent keeps ``if (likely(i < n))`` inside
its tiles: every multiply-add of a ragged matrix product tests its row and column, the register
tile's loops cannot be unrolled into registers, and vector fetches fall back to scalar ones. Which
blocks need the checks is known at launch: a check ``a < b`` holds for every thread and every
iteration of a block when the largest value of ``a`` over the block's thread indices and loops
(whose ranges are constant) is below the smallest value of ``b`` — a condition on the block indices
and the arguments' sizes alone. The kernel body becomes

    if (<every such condition>) { the body without those checks } else { the body as it was }

so interior blocks run the unchecked copy and the edge blocks the checked one. Where the kernel is a
statement of the function's top level and the interior blocks form a box of its grid (every condition
bounds one of at most two block indices by a constant), the two copies become two launches instead
(:func:`_two_launches`): the unchecked copy over the box, then the checked copy over the blocks
outside it, numbered in a one-dimensional grid whose blocks compute their original indices. Each
launch is compiled on its own: in one kernel ptxas gives both copies the registers of the larger, and
a register-tiled product then spills in its interior too (docs/PERF.md, ragged products). The edge
launch is marked as the rest of the interior's grid, so CUDA runs the two at once
(:mod:`kernels.runtime.cuda`): run after the interior, the few edge blocks each ran the whole
reduction on a nearly idle GPU, about a fifth of a 3000 x 2000 x 1500 product's time per ragged
dimension (docs/PERF.md). Kernels with
the tensor-core pragma keep one launch (their edge copy has no tensor cores and runs far longer a
block; in one launch it overlaps the interior).

Kernels whose checks all sit outside serial loops (one check a thread, as in an elementwise kernel,
or checks of a vectorized loop, which the vectorize pass turns into one test a vector) are left
whole: a second copy would cost more code than the checks cost time. The condition is the same
for all threads of a block, so barriers inside either copy stay uniform. In one kernel the shared
arrays the copies use are declared once, above the branch (a second declaration would double the
block's shared memory); two launches declare them once each. A check is taken out only where it
is proven for the whole block; one that depends on anything else (a loop of symbolic extent, a value
loaded from memory, a ``let``) stays in both copies, and a check that no block satisfies (a ragged reduction axis) stays too. Barriers inside
the copies are uniform (CUDA allows them there); other targets keep kernels with barriers whole
(see :func:`partition_blocks`).

Kernels with pipelined fetches (double-buffered stages, ``cp.async`` copies) are left whole too,
because ptxas (CUDA 13.0.88, at -O1 and above, for sm_75, sm_80 and sm_90 alike) miscompiles one
such kernel once it is split: an int8 warp-tile product at 549 x 317 x 78 with ``double_buffer=1``
gave every interior output wrong on an H200 and every edge output right. The CUDA source is right:
built with ``-Xptxas -O0`` the split kernel computes every output right, and it stays wrong with
its asynchronous copies made plain stores, so ``cp.async`` is not the cause.
``compute-sanitizer --tool racecheck`` reports the scalar fallback of the prefetch (the stores of
bytes 1-15 of a row into the next stage) racing with the reads of the current stage. In the SASS
the first byte's address takes its stage from the loop counter and the other bytes' from a
predicate the compiler toggles once an iteration, which starts in the wrong phase, so those bytes
land in the stage being read. ``scripts/device_ptxas_repro.py`` rebuilds the case as a standalone
program (no kbench at run time) for a compiler bug report. The same kernel left whole, and every
pipelined kernel of the GPU fuzzer's samples, compiles right; no pipelined kernel is split until a
ptxas release without the fault is the oldest one kbench accepts.

This is TVM's loop partitioning for the outermost (block) loops, as its GPU schedules use it; the
serial loops inside a kernel are partitioned by :mod:`kernels.lower.loop_partition`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from ..tir import all as all_of
from ..tir import attr
from ..tir.expr import (GE, GT, LE, LT, BufferLoad, Call, FloorDiv, FloorMod, IntImm, PrimExpr, ProducerLoad,
                        Select, Sub, Var, const)
from ..tir.functor import bound_vars, children, collect, conjuncts, rewrite, substitute
from ..tir.simplify import simplify, structural_equal
from ..tir.stmt import Allocate, AttrStmt, For, ForKind, IfThenElse, LetStmt, SeqStmt, Stmt, ThreadIndex, seq
from .bound import eval_interval
from .tensor_core_analysis import has_pragma
from .te_stmt import ThreadAllReduce

__all__ = ["partition_blocks"]

_COMPARISONS = (LT, LE, GT, GE)


def _launch_chain(s: AttrStmt) -> Tuple[List[AttrStmt], Stmt]:
    """The thread_extent attributes at the top of a kernel, and the statement below them."""
    chain: List[AttrStmt] = []
    while isinstance(s, AttrStmt) and s.attr_key == attr.THREAD_EXTENT:
        chain.append(s)
        s = s.body
    return chain, s


def _ranges(chain: List[AttrStmt], body: Stmt) -> Optional[Dict[Var, Tuple[int, int]]]:
    """Inclusive constant ranges of the thread indices and loops of the kernel; a variable bound
    twice with different ranges gets their union. None when a range is empty."""
    out: Dict[Var, Tuple[int, int]] = {}

    def note(v: Var, lo: int, extent: int) -> bool:
        if extent <= 0:
            return False
        hi = lo + extent - 1
        if v in out:
            lo, hi = min(lo, out[v][0]), max(hi, out[v][1])
        out[v] = (lo, hi)
        return True

    nodes = list(chain) + collect(body, lambda n: isinstance(n, (AttrStmt, For)))
    for n in nodes:
        if isinstance(n, AttrStmt):
            if n.attr_key != attr.THREAD_EXTENT or n.node.thread_tag.startswith("blockIdx"):
                continue
            ext = simplify(n.value)
            if isinstance(ext, IntImm) and not note(n.node.var, 0, ext.value):
                return None
        else:
            lo, ext = simplify(n.min), simplify(n.extent)
            if isinstance(lo, IntImm) and isinstance(ext, IntImm) and not note(n.loop_var, lo.value, ext.value):
                return None
    return out


def _bound_inside(chain: List[AttrStmt], body: Stmt) -> set:
    """Variables the kernel binds (loops, lets, thread indices, buffers it allocates)."""
    nodes = collect(body, lambda n: isinstance(n, (For, LetStmt, AttrStmt, Allocate)))
    return bound_vars(list(chain) + nodes) | {n.buffer.data for n in nodes if isinstance(n, Allocate)}


class _Prover:
    """Per kernel: for a condition, the block-level condition under which it holds everywhere."""

    def __init__(self, ranges: Dict[Var, Tuple[int, int]], blocks: set, bound: set):
        self.dom = {v: (const(lo, v.dtype), const(hi, v.dtype)) for v, (lo, hi) in ranges.items()}
        self.blocks = blocks
        self.bound = bound

    def _usable(self, e: PrimExpr) -> bool:
        """Whether ``e`` reads nothing but ranged variables, block indices and argument sizes."""
        if collect(e, lambda n: isinstance(n, (BufferLoad, ProducerLoad))):
            return False
        if collect(e, lambda n: isinstance(n, Call) and n.op.name != "tir.likely"):
            return False
        for v in collect(e, lambda n: isinstance(n, Var)):
            if v not in self.dom and v not in self.blocks and v in self.bound:
                return False
        return True

    def block_condition(self, cond: PrimExpr) -> Optional[List[PrimExpr]]:
        """Conditions on the block indices (and sizes) under which ``cond`` holds for every thread
        and iteration of a block; None when ``cond`` is not of that kind or never provable."""
        if not self._usable(cond):
            return None
        out = []
        for c in conjuncts(cond, through_likely=True):
            if not isinstance(c, _COMPARISONS) or not c.a.dtype.startswith(("int", "uint")):
                return None
            small, big = (c.a, c.b) if isinstance(c, (LT, LE)) else (c.b, c.a)
            hi = eval_interval(small, self.dom)[1]
            lo = eval_interval(big, self.dom)[0]
            if hi is None or lo is None:
                return None
            got = simplify(LT(hi, lo) if isinstance(c, (LT, GT)) else LE(hi, lo))
            if isinstance(got, IntImm):
                if not got.value:
                    return None  # no block satisfies it: the check stays in both copies
                continue
            if any(v in self.dom for v in collect(got, lambda n: isinstance(n, Var))):
                return None  # the interval did not eliminate a thread or loop variable
            out.append(got)
        return out


def _checks(body: Stmt) -> List[Tuple[IfThenElse, bool]]:
    """Every ``if`` of ``body``, and whether its innermost enclosing loop is a serial or unrolled
    one (a check inside a vectorized loop becomes one test of the vector's last lane, with a scalar
    tail, in the vectorize pass: no copy of the kernel needed for it)."""
    out: List[Tuple[IfThenElse, bool]] = []

    def walk(n, in_loop: bool) -> None:
        if isinstance(n, IfThenElse):
            out.append((n, in_loop))
        if isinstance(n, For):
            in_loop = n.kind in (ForKind.SERIAL, ForKind.UNROLLED)
        for c in children(n):
            if isinstance(c, Stmt):
                walk(c, in_loop)

    walk(body, False)
    return out


def _shared_allocation(n: Any) -> bool:
    return isinstance(n, Allocate) and n.buffer.scope in (attr.SHARED, attr.SHARED_DYN)


def _hoist_shared(stmt: Stmt) -> Tuple[Stmt, List[Allocate]]:
    """``stmt`` without its shared allocations (their bodies in their place), and those allocations
    (one per buffer); None as the list when one buffer is allocated with two different sizes."""
    found: Dict[int, Allocate] = {}
    for n in collect(stmt, _shared_allocation):
        prev = found.get(id(n.buffer))
        if prev is not None and not structural_equal(simplify(prev.extent), simplify(n.extent)):
            return stmt, None
        found.setdefault(id(n.buffer), n)
    if not found:
        return stmt, []
    out = rewrite(stmt, lambda n: n.body if isinstance(n, Allocate) and id(n.buffer) in found else None)
    return out, list(found.values())


def _has_barriers(body: Stmt) -> bool:
    """Whether the kernel will hold barriers: shared arrays (storage_sync adds them later),
    cross-thread reductions (lowered to shared trees on OpenCL) or explicit barriers."""
    return bool(collect(body, lambda n: _shared_allocation(n) or isinstance(n, ThreadAllReduce)
                        or (isinstance(n, Call) and n.op.name == "tir.tvm_storage_sync")))


#: attributes of pipelined fetches (double buffers, asynchronous copies): kernels holding them are
#: left whole (see the module docstring)
_PIPELINE_ATTRS = (attr.ASYNC_COPY, attr.DOUBLE_BUFFER_WRITE, attr.DOUBLE_BUFFER_SCOPE)


def _pipelined(body: Stmt) -> bool:
    return bool(collect(body, lambda n: isinstance(n, AttrStmt) and n.attr_key in _PIPELINE_ATTRS))


def _interior_box(needs: List[PrimExpr], chain: List[AttrStmt], body: Stmt
                  ) -> Optional[Dict[Var, Tuple[int, int]]]:
    """Per block index of the launch, ``(X, extent)`` such that the block condition ``needs`` holds
    exactly for the blocks whose every index ``b`` is below its ``X`` (both directions proven with
    interval bounds over ranges of ``b``); None when the launch or a condition is not of that form (a
    grid of one or two constant axes, each condition a comparison of one block index and constants)."""
    axes: Dict[Var, int] = {}
    for a in chain:
        if a.node.thread_tag.startswith("blockIdx"):
            ext = simplify(a.value)
            if not isinstance(ext, IntImm) or a.node.thread_tag == "blockIdx.z" or a.node.var in axes:
                return None
            axes[a.node.var] = ext.value
    if not 1 <= len(axes) <= 2:
        return None
    if collect(body, _is_launch):  # a block index bound again inside: its extent would not follow
        return None
    box = dict(axes)
    for c in needs:
        used = {id(v): v for v in collect(c, lambda n: isinstance(n, Var))}
        if len(used) != 1 or not isinstance(c, _COMPARISONS):
            return None
        (v,) = used.values()
        if v not in axes:
            return None
        # c holds where d < 0 (strict) or d <= 0
        d = Sub(c.a, c.b) if isinstance(c, (LT, LE)) else Sub(c.b, c.a)
        strict = isinstance(c, (LT, GT))

        def bounds(lo: int, hi: int, v=v, d=d) -> Tuple[Optional[int], Optional[int]]:
            lo_e, hi_e = eval_interval(d, {v: (const(lo, v.dtype), const(hi, v.dtype))})
            lo_e, hi_e = simplify(lo_e), simplify(hi_e)
            return (lo_e.value if isinstance(lo_e, IntImm) else None,
                    hi_e.value if isinstance(hi_e, IntImm) else None)

        def holds(x: int) -> bool:  # for every b < x
            hi = bounds(0, x - 1)[1]
            return hi is not None and (hi < 0 if strict else hi <= 0)

        lo, hi = 0, axes[v]
        while lo < hi:  # the largest x proven; the proof over [0, x) only weakens as x grows
            mid = (lo + hi + 1) // 2
            if holds(mid):
                lo = mid
            else:
                hi = mid - 1
        if lo < axes[v]:  # and it fails for every b >= x
            low = bounds(lo, axes[v] - 1)[0]
            if low is None or not (low >= 0 if strict else low > 0):
                return None
        box[v] = min(box[v], lo)
    return {v: (box[v], axes[v]) for v in axes}


def _wrap(chain: List[AttrStmt], body: Stmt, shared: List[Allocate]) -> Stmt:
    for a in reversed(shared):
        body = dataclasses.replace(a, body=body)
    for a in reversed(chain):
        body = dataclasses.replace(a, body=body)
    return body


def _two_launches(chain: List[AttrStmt], box: Dict[Var, Tuple[int, int]], fast: Stmt, checked: Stmt,
                  shared: List[Allocate]) -> Stmt:
    """The interior blocks as one launch of the unchecked copy (its grid the interior box), then the
    edge blocks as a second launch of the checked copy over a one-dimensional grid, each block's
    original indices computed from its place: first the blocks right of the box (every row), then
    those below it. Each launch is compiled on its own, so the interior kernel gets the registers of
    the unchecked copy alone. The edge launch is marked :data:`attr.CONCURRENT_LAUNCH`: its blocks
    and the interior's are one grid's, so the runtime may run both at once (the edge blocks are few
    and slow, and after the interior launch they would run on a nearly idle GPU)."""
    interior = [dataclasses.replace(a, value=const(box[a.node.var][0], a.value.dtype))
                if a.node.var in box else a for a in chain]
    order = sorted(box, key=lambda v: next(a.node.thread_tag for a in chain if a.node.var is v))
    u = order[0]  # blockIdx.x, else the only axis
    x, ex = box[u]
    dt = u.dtype
    e = Var("blockIdx_edge", dt)
    lets: List[Tuple[Var, PrimExpr]]
    if len(order) == 1:
        total = ex - x
        lets = [(u, e + const(x, dt))]
    else:
        w = order[1]
        y, ey = box[w]
        right, below = (ex - x) * ey, x * (ey - y)
        total = right + below
        k = e - const(right, dt)
        u_right, w_right = FloorMod(e, const(max(ex - x, 1), dt)) + const(x, dt), FloorDiv(e, const(max(ex - x, 1), dt))
        u_below, w_below = FloorMod(k, const(max(x, 1), dt)), FloorDiv(k, const(max(x, 1), dt)) + const(y, dt)
        if not below:
            lets = [(u, u_right), (w, w_right)]
        elif not right:
            lets = [(u, u_below), (w, w_below)]
        else:
            first = LT(e, const(right, dt))
            lets = [(u, Select(first, u_right, u_below)), (w, Select(first, w_right, w_below))]
    # the edge launch names its block indices with variables of its own (the interior launch keeps
    # the originals, bound to the box's extents)
    fresh = {var: Var(var.name, var.dtype) for var, _ in lets}
    body = substitute(checked, fresh)
    for var, value in reversed(lets):
        body = LetStmt(fresh[var], value, body)
    # the two launches are the blocks of one grid: nothing orders them (kernels.runtime.cuda runs the
    # edge launch beside the interior one instead of after it)
    body = AttrStmt(e, attr.CONCURRENT_LAUNCH, const(1, "int32"), body)
    axis = next(a for a in chain if a.node.var is u)
    edge_attr = dataclasses.replace(axis, node=ThreadIndex(e, axis.node.thread_tag, const(total, dt)),
                                    value=const(total, axis.value.dtype))
    edge_chain = [edge_attr if a is axis else a for a in chain if a.node.var is u or a.node.var not in box]
    return seq(_wrap(interior, fast, shared), _wrap(edge_chain, body, shared))


def _partition_kernel(launch: AttrStmt, barriers_ok: bool, launches: bool = False) -> Optional[Stmt]:
    chain, body = _launch_chain(launch)
    blocks = {a.node.var for a in chain if a.node.thread_tag.startswith("blockIdx")}
    if not blocks or (not barriers_ok and _has_barriers(body)) or _pipelined(body):
        return None
    ranges = _ranges(chain, body)
    if ranges is None:
        return None
    prover = _Prover(ranges, blocks, _bound_inside(chain, body))
    removable: set = set()
    needs: List[PrimExpr] = []
    in_loops = False
    for node, in_loop in _checks(body):
        got = prover.block_condition(node.condition)
        if got is None:
            continue
        removable.add(id(node.condition))
        in_loops = in_loops or in_loop
        for c in got:
            if not any(structural_equal(c, d) for d in needs):
                needs.append(c)
    if not in_loops or not needs:
        # nothing to take out of a loop (one check a thread costs less than a second copy of the
        # kernel), or nothing a block must satisfy (simplify's job)
        return None
    body, shared = _hoist_shared(body)
    if shared is None:
        return None
    fast = rewrite(body, lambda n: (n.then_case if isinstance(n, IfThenElse) and id(n.condition) in removable
                                    else None))
    # a tensor-core kernel keeps one launch: its edge copy runs without tensor cores, many times slower
    # a block than the interior's, and in one launch it overlaps the interior blocks (ragged float16
    # 4000 x 3000 on an H200: 8.1 ms in one launch, 10.0 ms in two)
    if launches and collect(body, has_pragma):
        launches = False
    box = _interior_box(needs, chain, body) if launches else None
    if box is not None and all(x > 0 for x, _ in box.values()):
        if all(x == ext for x, ext in box.values()):
            return _wrap(chain, fast, shared)  # every block is interior
        return _two_launches(chain, box, fast, body, shared)
    return _wrap(chain, IfThenElse(all_of(*needs), fast, body), shared)


def _is_launch(n: Any) -> bool:
    return isinstance(n, AttrStmt) and n.attr_key == attr.THREAD_EXTENT and n.node.thread_tag.startswith("blockIdx")


def partition_blocks(stmt: Stmt, target: str = "cuda") -> Stmt:
    """Every kernel of ``stmt`` (an outermost ``blockIdx`` launch) split into an unchecked copy for
    the blocks its bound checks cannot fail in and the checked copy for the others (see the module
    docstring); kernels without such checks are returned as they were.

    A kernel at the top level of the function whose interior blocks form a box of its grid (each
    condition bounds one block index by a constant) becomes two launches (:func:`_two_launches`);
    any other kernel keeps both copies in one, behind the block condition.

    On targets other than CUDA a kernel with barriers (shared memory, cross-thread reductions) is
    left whole: OpenCL allows a barrier in a branch every work-item of a group takes, but PoCL's
    work-group compiler gives wrong results for some of them (a fill loop, then a barrier, inside
    such a branch), so only CUDA gets barriers inside the two copies."""
    barriers_ok = str(target).split()[0] == "cuda"

    def pre(n):
        if _is_launch(n):
            return _partition_kernel(n, barriers_ok) or n
        return None

    items = list(stmt.seq) if isinstance(stmt, SeqStmt) else [stmt]
    out = [(_partition_kernel(n, barriers_ok, launches=True) or n) if _is_launch(n)
           else rewrite(n, lambda m: None, pre) for n in items]
    return seq(*out)
