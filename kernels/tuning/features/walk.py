"""The loop and memory analysis of a candidate's lowered code: what the cost model's features are made of.

A candidate (a task under one configuration) is lowered to the loop IR as ``build`` would lower it,
without the native compiler and with three passes left out so that the loop structure stays
visible: unrolled loops stay loops (``unroll``), vectorized loops stay loops (``vectorize``) and
guarded loops are not split in two (``loop_partition``). Barriers (``storage_sync``) and
tensor-core fragments (``rewrite_tensor_core``, CUDA) are in the IR analysed (:func:`lower_for_features`).
:func:`analyze` walks it and gives a :class:`ProgramFeatures` of plain numbers:

- the launch: ``blockIdx``/``threadIdx`` extents, virtual threads, threads per block, blocks;
- the loop nest of the main store (the store executed most often by one thread): each level's
  extent and kind (serial, unrolled, vectorized, parallel, bound to a block or thread index), the
  product of the extents outside it (``topdown``) and inside it (``bottomup``), as TVM's itervar
  features describe a loop;
- every buffer access: the buffer's scope (global, shared, local, a tensor-core fragment), how
  often one thread makes it, how many distinct elements one thread / one block touch with it
  (loops whose variable the index does not use re-touch the same elements), the stride of the
  innermost enclosing loop and of ``threadIdx.x`` in its flat index (1: contiguous, a coalesced
  or vector access) and the vector width of an enclosing vectorized loop over contiguous elements;
- arithmetic per thread, weighted by the trip counts of the enclosing loops (float add/sub, mul,
  div/mod, min/max, math calls; integer arithmetic, comparisons, selects);
- allocations per scope (shared bytes a block, local bytes a thread), barriers and tensor-core
  ``mma_sync`` per thread, and occupancy proxies (resident blocks a multiprocessor given its thread,
  shared-memory and register limits).

:mod:`.encode` turns a :class:`ProgramFeatures` into a vector; :mod:`.service` extracts the features
of many candidates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...tir import attr
from ...errors import TVMError
from ...tir import dtype as dt
from ...tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from ...tir.stmt import Allocate, AttrStmt, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt

__all__ = ["SKIPPED_PASSES", "LOOP_KINDS", "Loop", "Access", "ProgramFeatures", "FeatureError",
           "DeviceLimits", "lower_for_features", "analyze"]

#: the passes of :data:`kernels.lower.PASSES` / :data:`TARGET_PASSES` left out (see the docstring), by name
SKIPPED_PASSES = ("unroll", "vectorize", "loop_partition", "block_partition")

#: loop kinds of a level, as the one-hot part of a loop slot
LOOP_KINDS = ("serial", "unrolled", "vectorized", "parallel", "block", "thread")
#: the thread indices of a launch, in the order the summary lists them
_THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")
#: the kinds of arithmetic counted per thread
_ARITH = ("float_addsub", "float_mul", "float_divmod", "float_minmax", "float_math", "int_arith",
          "int_divmod", "compare", "select")


class FeatureError(TVMError):
    """A candidate whose features cannot be extracted (its template refuses the configuration, its
    lowering fails, an unknown feature type)."""


@dataclass(frozen=True)
class DeviceLimits:
    """Per-multiprocessor limits the occupancy proxy divides by (defaults: sm_90; for a CPU target
    the proxy only ranks, its absolute value means nothing)."""

    max_threads: int = 2048
    max_blocks: int = 32
    shared_bytes: int = 228 * 1024
    registers: int = 65536
    warp: int = 32

    @staticmethod
    def of_target(target: Any) -> "DeviceLimits":
        """The limits of a CUDA target's architecture (``-arch=sm_XX``, from NVIDIA's tables of
        compute capabilities); the defaults for other targets and unknown architectures."""
        arch = getattr(target, "arch", None) if target is not None else None
        try:
            cc = int(str(arch).split("_")[1]) if arch else 0
        except (IndexError, ValueError):
            cc = 0
        if not cc:
            return DeviceLimits()
        if cc < 80:  # Turing sm_75 (and older)
            return DeviceLimits(max_threads=1024, max_blocks=16, shared_bytes=64 * 1024)
        if cc == 80:
            return DeviceLimits(max_threads=2048, max_blocks=32, shared_bytes=164 * 1024)
        if cc < 90:  # sm_86, sm_87, sm_89
            return DeviceLimits(max_threads=1536, max_blocks=16 if cc < 89 else 24, shared_bytes=100 * 1024)
        return DeviceLimits()


@dataclass(frozen=True)
class Loop:
    """One level of a loop nest: a loop or a thread binding (``kind`` is serial, unrolled,
    vectorized, parallel or the bound index's tag, e.g. ``threadIdx.x``)."""

    name: str
    extent: int
    kind: str

    @property
    def category(self) -> str:
        """The level's kind among :data:`LOOP_KINDS`."""
        if self.kind.startswith("blockIdx"):
            return "block"
        if self.kind.startswith("threadIdx") or self.kind.startswith("vthread"):
            return "thread"
        return self.kind if self.kind in LOOP_KINDS else "serial"

    @property
    def per_thread(self) -> bool:
        """Whether one thread runs the level's iterations (not a block, thread or parallel level)."""
        return self.category in ("serial", "unrolled", "vectorized")


@dataclass(frozen=True)
class Access:
    """One load or store in the code (see the module docstring). ``count`` is per thread;
    ``touch_thread``/``touch_block`` are distinct elements; strides are in elements (``None``
    where the index is not affine in that variable)."""

    buffer: str
    scope: str
    element_bytes: int
    store: bool
    count: float
    touch_thread: float
    touch_block: float
    stride_inner: Optional[int]
    stride_tx: Optional[int]
    vector_lanes: int
    depth: int
    #: accesses to a buffer with the same flat index share a number (they touch the same elements)
    pattern: int = 0
    #: the buffer's size in elements (None when symbolic)
    buffer_elements: Optional[int] = None
    #: per level of the main nest (outermost first): (elements touched, accesses made) inside it;
    #: empty when the access is not inside the main nest
    curve: Tuple[Tuple[float, float], ...] = ()


@dataclass(frozen=True)
class ProgramFeatures:
    """What :func:`analyze` finds in a lowered function (raw numbers, unscaled)."""

    thread_extents: Tuple[Tuple[str, int], ...]
    vthreads: int
    loops: Tuple[Loop, ...]
    accesses: Tuple[Access, ...]
    arith: Tuple[Tuple[str, float], ...]
    shared_bytes: int
    local_bytes: int
    global_scratch_bytes: int
    fragments: int
    fragment_bytes: int
    barriers: float
    static_barriers: int
    mma: float
    main_count: float
    arguments: Tuple[str, ...] = ()
    limits: DeviceLimits = field(default_factory=DeviceLimits)

    def extent(self, tag: str) -> int:
        """The extent bound to ``tag`` (``"threadIdx.x"``...), 1 when unbound."""
        return dict(self.thread_extents).get(tag, 1)

    @property
    def threads_per_block(self) -> int:
        return self.extent("threadIdx.x") * self.extent("threadIdx.y") * self.extent("threadIdx.z")

    @property
    def blocks(self) -> int:
        return self.extent("blockIdx.x") * self.extent("blockIdx.y") * self.extent("blockIdx.z")

    def arith_count(self, kind: str) -> float:
        return dict(self.arith).get(kind, 0.0)

    @property
    def float_ops(self) -> float:
        return sum(v for k, v in self.arith if k.startswith("float"))

    def buffer_accesses(self, name: str) -> List[Access]:
        return [a for a in self.accesses if a.buffer == name]

    @property
    def blocks_per_sm(self) -> int:
        """Blocks one multiprocessor can hold: the least of its thread, block, shared-memory and
        register limits (registers: local bytes / 4 per thread, at least 16)."""
        lim, tpb = self.limits, max(1, self.threads_per_block)
        warps = math.ceil(tpb / lim.warp) * lim.warp
        regs = max(16, self.local_bytes // 4 + 16) * warps
        bounds = [lim.max_blocks, lim.max_threads // warps if warps <= lim.max_threads else 0,
                  lim.registers // regs if regs <= lim.registers else 0]
        if self.shared_bytes:
            bounds.append(lim.shared_bytes // self.shared_bytes)
        return max(0, min(bounds))

    @property
    def occupancy(self) -> float:
        """Resident threads a multiprocessor over its maximum (0..1)."""
        return min(1.0, self.blocks_per_sm * max(1, self.threads_per_block) / self.limits.max_threads)


# -- lowering ------------------------------------------------------------------------------------


def _target_kind(target: Any) -> str:
    from ...build_module import resolve_target

    return str(resolve_target(target).kind)


def lower_for_features(inputs: Any, args: Optional[Sequence[Any]] = None, target: Any = "cuda"):
    """``(function, virtual threads)``: ``inputs`` (a TE schedule with ``args``, or TensorIR) lowered
    for ``target`` by every pass but :data:`SKIPPED_PASSES`; the virtual-thread extent is read
    before the pass that removes the virtual-thread loops."""
    from ...lower import (
        BLOCK_PARTITION,
        INJECT_VIRTUAL_THREAD,
        LOOP_PARTITION,
        PASSES,
        TARGET_PASSES,
        UNROLL,
        VECTORIZE,
        is_tensor_ir,
        schedule_to_primfunc,
    )

    kind = _target_kind(target)
    if is_tensor_ir(inputs):
        from ...lower.from_blocks import tir_function

        func = tir_function(inputs, kind, "main")
    else:
        if args is None:
            raise FeatureError("lower_for_features: a TE schedule needs its argument list")
        func = schedule_to_primfunc(inputs, args, "main")
    vthreads = 1
    # SKIPPED_PASSES, the objects themselves (block partitioning: one copy of the kernel, not two)
    skipped = (UNROLL, VECTORIZE, LOOP_PARTITION, BLOCK_PARTITION)
    for p in PASSES:
        if p in skipped:
            continue
        if p is INJECT_VIRTUAL_THREAD:
            vthreads = _vthread_extent(func.body)
        func = p(func)
    for p in TARGET_PASSES:
        if p not in skipped:
            func = p(func, kind)
    return func, vthreads


def _vthread_extent(stmt: Stmt) -> int:
    """The product of the virtual-thread loop extents on the deepest path (before they are injected)."""

    def visit(s) -> int:
        if isinstance(s, SeqStmt):
            return max((visit(x) for x in s.seq), default=1)
        if isinstance(s, For):
            inner = visit(s.body)
            return inner * (_const_extent(s.extent) if s.kind == attr.VTHREAD else 1)
        if isinstance(s, IfThenElse):
            return max(visit(s.then_case), visit(s.else_case) if s.else_case is not None else 1)
        body = getattr(s, "body", None)
        return visit(body) if isinstance(body, Stmt) else 1

    return visit(stmt)


def _const_extent(e: PrimExpr) -> int:
    if isinstance(e, IntImm):
        return max(0, e.value)
    from ...tir.simplify import const_int_bound

    hi = const_int_bound(e)[1]
    return max(1, hi) if hi is not None else 1  # a symbolic extent without a bound counts once


# -- analysis ------------------------------------------------------------------------------------

_FLOAT_KIND = {Add: "float_addsub", Sub: "float_addsub", Mul: "float_mul", Div: "float_divmod",
               Mod: "float_divmod", FloorDiv: "float_divmod", FloorMod: "float_divmod",
               Min: "float_minmax", Max: "float_minmax"}
_INT_KIND = {Add: "int_arith", Sub: "int_arith", Mul: "int_arith", Div: "int_divmod", Mod: "int_divmod",
             FloorDiv: "int_divmod", FloorMod: "int_divmod", Min: "int_arith", Max: "int_arith"}
_COMPARE = (EQ, NE, LT, LE, GT, GE, And, Or)
#: calls that are not arithmetic (annotations, addresses, tensor-core and synchronisation calls)
_NOT_MATH = ("tir.likely", "tir.address_of", "tir.type_annotation", "tir.tvm_storage_sync",
             "tir.tvm_mma_sync", "tir.tvm_load_matrix_sync", "tir.tvm_store_matrix_sync",
             "tir.tvm_fill_fragment", "tir.if_then_else", "tir.reinterpret", "tir.tvm_call_packed",
             "tir.tvm_stack_make_array")


class _Level:
    """A level of the nest being walked: a loop, or a thread index (possibly bound several times)."""

    __slots__ = ("loop", "vars", "node")

    def __init__(self, loop: Loop, var: Var, node: Any):
        self.loop, self.vars, self.node = loop, {id(var)}, node


@dataclass
class _RawAccess:
    buffer: Any
    store: bool
    index: PrimExpr
    levels: Tuple[_Level, ...]
    weight: float


def _scope_of(buf) -> str:
    scope = buf.scope or "global"
    if scope.startswith(attr.WMMA_PREFIX):
        return "fragment"
    if scope.startswith("local") or scope == "warp":
        return "local"
    if scope.startswith("shared"):
        return "shared"
    return "global"


def _elements(buf, alloc_extent: Optional[int]) -> Optional[int]:
    if alloc_extent is not None:
        return alloc_extent
    n = 1
    for d in buf.shape:
        if not isinstance(d, IntImm):
            return None
        n *= d.value
    return n


def _flat_index(indices: Sequence[PrimExpr], buf) -> PrimExpr:
    if len(indices) == 1:
        return indices[0]
    strides = list(buf.strides) if buf.strides and len(buf.strides) == len(indices) else None
    if strides is None:
        strides, acc = [], None
        for d in reversed(buf.shape):
            strides.append(acc if acc is not None else IntImm("int32", 1))
            acc = d if acc is None else acc * d
        strides.reverse()
    out = None
    for i, s in zip(indices, strides):
        term = i * s
        out = term if out is None else out + term
    return out


class _Walker:
    def __init__(self):
        self.levels: List[_Level] = []
        self.by_tag: Dict[str, _Level] = {}
        self.weight = 1.0
        self.accesses: List[_RawAccess] = []
        self.stores: List[Tuple[_RawAccess, int]] = []
        self.arith: Dict[str, float] = {k: 0.0 for k in _ARITH}
        self.allocs: Dict[int, int] = {}
        self.shared = self.local = self.scratch = self.fragments = self.fragment_bytes = 0
        self.barriers = 0.0
        self.static_barriers = 0
        self.mma = 0.0
        self.thread_extents: Dict[str, int] = {}
        self.lets: Dict[Var, PrimExpr] = {}

    # statements -----------------------------------------------------------------------------
    def stmt(self, s) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, For):
            ext = _const_extent(s.extent)
            self.expr(s.extent)
            lv = _Level(Loop(s.loop_var.name, ext, s.kind), s.loop_var, s)
            self._enter(lv)
            self.stmt(s.body)
            self._leave(lv)
        elif isinstance(s, AttrStmt) and s.attr_key in (attr.THREAD_EXTENT, attr.VIRTUAL_THREAD):
            tag = getattr(s.node, "thread_tag", "") or "vthread"
            ext = _const_extent(s.value)
            known = self.by_tag.get(tag)
            if known is not None:  # the same threads, bound again around a cache stage
                known.vars.add(id(s.node.var))
                self.stmt(s.body)
                return
            lv = _Level(Loop(tag, ext, tag), s.node.var, s)
            self.thread_extents[tag] = max(self.thread_extents.get(tag, 1), ext)
            self.by_tag[tag] = lv
            self._enter(lv)
            self.stmt(s.body)
            self._leave(lv)
            del self.by_tag[tag]
        elif isinstance(s, BufferStore):
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
            acc = self._access(s.buffer, s.indices, True)
            self.stores.append((acc, self._ops(s.value)))
        elif isinstance(s, Allocate):
            ext = _const_extent(s.extent)
            self.allocs[id(s.buffer.data)] = ext
            nbytes = ext * dt.bits(s.buffer.dtype) * dt.lanes(s.buffer.dtype) // 8
            scope = _scope_of(s.buffer)
            if scope == "shared":
                self.shared += nbytes
            elif scope == "local":
                self.local += nbytes
            elif scope == "fragment":
                self.fragments += 1
                self.fragment_bytes += nbytes
            else:
                self.scratch += nbytes
            self.stmt(s.body)
        elif isinstance(s, Evaluate):
            v = s.value
            if isinstance(v, Call) and v.op.name == "tir.tvm_storage_sync":
                self.barriers += self.weight
                self.static_barriers += 1
                return
            if isinstance(v, Call) and v.op.name == "tir.tvm_mma_sync":
                self.mma += self.weight
            self.expr(v)
        elif isinstance(s, IfThenElse):
            self.expr(s.condition)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, LetStmt):
            self.expr(s.value)
            self.lets[s.var] = s.value
            self.stmt(s.body)
        elif isinstance(s, AttrStmt):
            self.stmt(s.body)
        else:  # any other statement (a cross-thread reduction on a CPU target...): its children
            from ...tir.functor import children

            for c in children(s):
                if isinstance(c, Stmt):
                    self.stmt(c)
                else:
                    self.expr(c)

    def _enter(self, lv: _Level) -> None:
        self.levels.append(lv)
        if lv.loop.per_thread:
            self.weight *= max(1, lv.loop.extent)

    def _leave(self, lv: _Level) -> None:
        self.levels.pop()
        if lv.loop.per_thread:
            self.weight /= max(1, lv.loop.extent)

    # expressions ----------------------------------------------------------------------------
    def _access(self, buf, indices, store: bool) -> _RawAccess:
        acc = _RawAccess(buf, store, _flat_index(indices, buf), tuple(self.levels), self.weight)
        self.accesses.append(acc)
        return acc

    def expr(self, e) -> None:
        stack = [e]
        w = self.weight
        arith = self.arith
        while stack:
            x = stack.pop()
            t = type(x)
            if t in _FLOAT_KIND:
                lanes = dt.lanes(x.dtype)
                if dt.is_float(x.dtype):
                    arith[_FLOAT_KIND[t]] += w * lanes
                else:
                    arith[_INT_KIND[t]] += w * lanes
                stack.append(x.a)
                stack.append(x.b)
            elif isinstance(x, _COMPARE):
                arith["compare"] += w
                stack.append(x.a)
                stack.append(x.b)
            elif t is BufferLoad:
                self._access(x.buffer, x.indices, False)
                stack.extend(x.indices)
            elif t is Call:
                if x.op.name not in _NOT_MATH and dt.is_float(x.dtype):
                    arith["float_math"] += w * dt.lanes(x.dtype)
                stack.extend(a for a in x.args if isinstance(a, PrimExpr))
            elif t is Select:
                arith["select"] += w
                stack.extend((x.condition, x.true_value, x.false_value))
            elif t is Not:
                stack.append(x.a)
            elif t in (Cast, Broadcast):
                stack.append(x.value)
            elif t is Ramp:
                stack.extend((x.base, x.stride))
            elif t is Let:
                stack.extend((x.value, x.body))

    @staticmethod
    def _ops(e) -> int:
        """Arithmetic nodes in a stored value (to pick the main store among equally frequent ones)."""
        n, stack = 0, [e]
        while stack:
            x = stack.pop()
            if type(x) in _FLOAT_KIND:
                n += 1
                stack.extend((x.a, x.b))
            elif isinstance(x, (Call, Cast, Select)):
                stack.extend(a for a in getattr(x, "args", ()) if isinstance(a, PrimExpr))
                if isinstance(x, Cast):
                    stack.append(x.value)
        return n


def _var_ids(e: PrimExpr) -> set:
    from ...tir.functor import collect

    return {id(v) for v in collect(e, lambda n: isinstance(n, Var))}


def _stride(index: PrimExpr, level: _Level) -> Optional[int]:
    """The coefficient of the level's variable in ``index`` (0 when it does not occur), or None when
    ``index`` is not affine in it."""
    from ...tir.simplify import to_linear

    if isinstance(index, Ramp):
        base = _stride(index.base, level)
        return base
    if not dt.is_integer(index.dtype):
        return None
    try:
        lin = to_linear(index)
    except Exception:  # pragma: no cover - an index the linear form cannot take
        return None
    coef = 0
    for c, term in lin.terms.values():
        if isinstance(term, Var):
            if id(term) in level.vars:
                coef += c
        elif level.vars & _var_ids(term):
            return _stride_at_origin(index, level)
    return coef


def _stride_at_origin(index: PrimExpr, level: _Level) -> Optional[int]:
    """The step of a non-affine index (``floordiv``/``floormod`` of a fused thread index...) when the
    level's variable goes from 0 to 1 with every other variable at 0; None where the index cannot
    be evaluated (it loads from memory)."""
    from ...tir.analysis import evaluate
    from ...tir.functor import collect

    variables = collect(index, lambda n: isinstance(n, Var))
    env0 = {v.name: 0 for v in variables}
    env1 = dict(env0)
    env1.update({v.name: 1 for v in variables if id(v) in level.vars})
    try:
        return int(evaluate(index, env1)) - int(evaluate(index, env0))
    except (TVMError, TypeError, ValueError, ZeroDivisionError):
        return None


def analyze(func: Any, vthreads: int = 1, limits: Optional[DeviceLimits] = None) -> ProgramFeatures:
    """The features of a lowered function (see the module docstring)."""
    from ...tir.functor import substitute
    from ...tir.simplify import skey

    w = _Walker()
    w.stmt(func.body)
    # the main store: the one a thread executes most often, then the one with the most arithmetic
    main = None
    for acc, ops in w.stores:
        if main is None or (acc.weight, ops) > (main[0].weight, main[1]):
            main = (acc, ops)
    main_levels = main[0].levels if main is not None else ()
    main_pos = {id(lv): k for k, lv in enumerate(main_levels)}
    accesses = []
    patterns: Dict[Tuple[int, tuple], int] = {}
    for raw in w.accesses:
        index = raw.index
        if w.lets:
            index = substitute(index, w.lets)
        pattern = patterns.setdefault((id(raw.buffer.data), skey(index)), len(patterns))
        used = _var_ids(index)
        buf = raw.buffer
        cap = _elements(buf, w.allocs.get(id(buf.data)))
        touch_t = touch_b = 1.0
        for lv in raw.levels:
            if lv.vars & used:
                if lv.loop.per_thread:
                    touch_t *= lv.loop.extent
                    touch_b *= lv.loop.extent
                elif lv.loop.category == "thread":
                    touch_b *= lv.loop.extent
        lanes = dt.lanes(raw.index.dtype) if isinstance(raw.index, Ramp) else 1
        touch_t, touch_b = touch_t * lanes, touch_b * lanes
        if cap is not None:
            touch_t, touch_b = min(touch_t, cap), min(touch_b, cap)
        inner = next((lv for lv in reversed(raw.levels) if lv.loop.per_thread), None)
        stride_inner = _stride(index, inner) if inner is not None else 0
        tx = next((lv for lv in raw.levels if lv.loop.kind == "threadIdx.x"), None)
        stride_tx = _stride(index, tx) if tx is not None else 0
        vec = lanes
        if inner is not None and inner.loop.kind == "vectorized" and stride_inner == 1:
            vec = inner.loop.extent
        curve: List[Tuple[float, float]] = []
        if main_levels:
            # (elements touched, accesses made) inside each level of the main nest the access is in
            own = list(raw.levels)
            for lv in main_levels:
                if lv not in own:
                    curve.append((0.0, 0.0))
                    continue
                start = own.index(lv)
                touched, count = float(lanes), float(lanes)
                for inner_lv in own[start:]:
                    count *= max(1, inner_lv.loop.extent)
                    if inner_lv.vars & used:
                        touched *= max(1, inner_lv.loop.extent)
                if cap is not None:
                    touched = min(touched, cap)
                curve.append((touched, count))
        accesses.append(Access(
            buffer=buf.name, scope=_scope_of(buf), element_bytes=max(1, dt.bits(buf.dtype) // 8),
            store=raw.store, count=raw.weight, touch_thread=touch_t, touch_block=touch_b,
            stride_inner=stride_inner, stride_tx=stride_tx, vector_lanes=vec, pattern=pattern,
            buffer_elements=cap, depth=sum(1 for lv in raw.levels if id(lv) in main_pos),
            curve=tuple(curve)))
    order = [t for t in _THREAD_TAGS if t in w.thread_extents] + \
        sorted(t for t in w.thread_extents if t not in _THREAD_TAGS)
    arguments = tuple(b.name for b in getattr(func, "buffers", ()) or ())
    return ProgramFeatures(
        thread_extents=tuple((t, w.thread_extents[t]) for t in order), vthreads=int(vthreads),
        loops=tuple(lv.loop for lv in main_levels), accesses=tuple(accesses),
        arith=tuple((k, v) for k, v in w.arith.items()), shared_bytes=w.shared, local_bytes=w.local,
        global_scratch_bytes=w.scratch, fragments=w.fragments, fragment_bytes=w.fragment_bytes,
        barriers=w.barriers, static_barriers=w.static_barriers, mma=w.mma,
        main_count=main[0].weight if main is not None else 0.0, arguments=arguments,
        limits=limits or DeviceLimits())

