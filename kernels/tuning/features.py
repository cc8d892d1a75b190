"""Loop and memory features of a candidate's lowered code: what the tuning engine's cost model learns.

A candidate (a task under one configuration) is instantiated and lowered to the loop IR as ``build``
would lower it, without the native compiler and with three passes left out so that the loop
structure stays visible: unrolled loops stay loops (``unroll``), vectorized loops stay loops
(``vectorize``) and guarded loops are not split in two (``loop_partition``). Barriers
(``storage_sync``) and tensor-core fragments (``rewrite_tensor_core``, CUDA) are in the IR analysed.
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

:func:`feature_vector` turns it into a fixed-length float vector (the same length for every
configuration of every task, zero where a slot is empty), each count scaled as ``log2(1 + x)``:

- ``"itervar"`` (TVM autotvm's default): the launch and kernel summary, one slot per loop level of
  the main store (:data:`LOOP_SLOTS`, outermost first) and one slot per argument buffer
  (:data:`ARG_SLOTS`, in argument order) and per scope, each with its access features;
- ``"curve"``: the launch and kernel summary, and per scope the footprint and the access count of
  the loops of the main nest, from the innermost level outwards (:data:`CURVE_SAMPLES` samples): how
  fast the working set grows with the nest, TVM's buffer-reuse curves in another form.

:class:`FeatureExtractor` caches one vector per configuration index; an extraction that fails gives
the zero vector and a logged reason (a search never stops on it), and many at once are extracted
in a pool of worker processes (each lowering is pure Python).
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..tir import attr
from ..errors import TVMError
from ..tir import dtype as dt
from ..tir.expr import (
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
from ..tir.stmt import Allocate, AttrStmt, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt

__all__ = ["FEATURE_TYPES", "LOOP_SLOTS", "ARG_SLOTS", "SCOPES", "CURVE_SAMPLES", "LOOP_KINDS",
           "SKIPPED_PASSES", "Loop", "Access", "ProgramFeatures", "FeatureError", "DeviceLimits",
           "lower_for_features", "analyze", "feature_vector", "feature_names", "feature_length",
           "candidate_features", "FeatureExtractor"]

logger = logging.getLogger("autotvm")

#: the loop-feature kinds (``"knob"``, the knob values, lives with the tuners)
FEATURE_TYPES = ("itervar", "curve")
#: loop levels of the main store described one by one (outermost first; deeper ones are dropped)
LOOP_SLOTS = 12
#: argument buffers described one by one (in argument order; the others count in their scope)
ARG_SLOTS = 4
#: scopes described as a whole ("fragment": the tensor-core wmma.* scopes)
SCOPES = ("global", "shared", "local", "fragment")
#: samples of each scope's curve, from the innermost level of the main nest outwards
CURVE_SAMPLES = 8
#: the passes of :data:`kernels.lower.PASSES` / :data:`TARGET_PASSES` left out (see the docstring)
SKIPPED_PASSES = ("unroll", "vectorize", "loop_partition")

#: loop kinds of a level, as the one-hot part of a loop slot
LOOP_KINDS = ("serial", "unrolled", "vectorized", "parallel", "block", "thread")
_THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")
_ARITH = ("float_addsub", "float_mul", "float_divmod", "float_minmax", "float_math", "int_arith",
          "int_divmod", "compare", "select")
_ACCESS_FEATURES = ("loads", "stores", "bytes_thread", "bytes_block", "reuse", "stride_inner", "stride_tx",
                    "vector_lanes", "contiguous_share", "irregular")


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
    from ..build_module import resolve_target

    return str(resolve_target(target).kind)


def lower_for_features(inputs: Any, args: Optional[Sequence[Any]] = None, target: Any = "cuda"):
    """``(function, virtual threads)``: ``inputs`` (a TE schedule with ``args``, or TensorIR) lowered
    for ``target`` by every pass but :data:`SKIPPED_PASSES`; the virtual-thread extent is read
    before the pass that removes the virtual-thread loops."""
    from ..lower import PASSES, TARGET_PASSES, is_tensor_ir, schedule_to_primfunc

    kind = _target_kind(target)
    if is_tensor_ir(inputs):
        from ..lower.from_blocks import tir_function

        func = tir_function(inputs, kind, "main")
    else:
        if args is None:
            raise FeatureError("lower_for_features: a TE schedule needs its argument list")
        func = schedule_to_primfunc(inputs, args, "main")
    vthreads = 1
    for p in PASSES:
        if p.name in SKIPPED_PASSES:
            continue
        if p.name == "inject_virtual_thread":
            vthreads = _vthread_extent(func.body)
        func = p(func)
    for p in TARGET_PASSES:
        if p.name not in SKIPPED_PASSES:
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
    from ..tir.simplify import const_int_bound

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
            from ..tir.functor import children

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
    from ..tir.functor import collect

    return {id(v) for v in collect(e, lambda n: isinstance(n, Var))}


def _stride(index: PrimExpr, level: _Level) -> Optional[int]:
    """The coefficient of the level's variable in ``index`` (0 when it does not occur), or None when
    ``index`` is not affine in it."""
    from ..tir.simplify import to_linear

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
    from ..tir.analysis import evaluate
    from ..tir.functor import collect

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
    from ..tir.functor import substitute
    from ..tir.simplify import skey

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


# -- vectors -------------------------------------------------------------------------------------


def _log(x: float) -> float:
    return math.log2(1.0 + x) if x > 0 else 0.0


def _slog(x: Optional[int]) -> float:
    if x is None:
        return 0.0
    return math.copysign(math.log2(1.0 + abs(x)), x)


_SUMMARY = (["blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
             "vthreads", "blocks", "threads_per_block", "warps_per_block", "shared_bytes", "local_bytes",
             "global_scratch_bytes", "fragments", "fragment_bytes", "barriers", "static_barriers", "mma",
             "main_count", "loops", "unrolled_loops", "vectorized_loops", "max_vector", "max_unroll",
             "blocks_per_sm", "occupancy", "registers_per_block", "float_ops", "global_bytes_thread",
             "arith_intensity"] + [f"arith.{k}" for k in _ARITH])


def _summary(pf: ProgramFeatures) -> List[float]:
    tpb = pf.threads_per_block
    loops = pf.loops
    unrolled = [lp.extent for lp in loops if lp.kind == "unrolled"]
    vectorized = [lp.extent for lp in loops if lp.kind == "vectorized"]
    global_bytes = sum(_buffer_bytes(pf, name, "thread") for name in
                       {a.buffer for a in pf.accesses if a.scope == "global"})
    flops = pf.float_ops
    raw = [pf.extent(t) for t in _THREAD_TAGS] + [
        pf.vthreads, pf.blocks, tpb, math.ceil(tpb / pf.limits.warp), pf.shared_bytes, pf.local_bytes,
        pf.global_scratch_bytes, pf.fragments, pf.fragment_bytes, pf.barriers, pf.static_barriers, pf.mma,
        pf.main_count, len(loops), len(unrolled), len(vectorized), max(vectorized, default=0),
        max(unrolled, default=0), pf.blocks_per_sm]
    out = [_log(x) for x in raw]
    out.append(pf.occupancy)  # a fraction, kept as is
    out += [_log(pf.local_bytes / 4 * tpb), _log(flops), _log(global_bytes),
            _log(flops / global_bytes) if global_bytes else 0.0]
    out += [_log(pf.arith_count(k)) for k in _ARITH]
    return out


def _buffer_bytes(pf: ProgramFeatures, name: str, per: str) -> float:
    """Bytes of buffer ``name`` one thread (``per="thread"``) or one block touches: accesses with
    the same index touch the same elements (a load and the store of an accumulation), different
    indices add up (overlaps count twice), at most the buffer's size."""
    accs = pf.buffer_accesses(name)
    if not accs:
        return 0.0
    key = "touch_thread" if per == "thread" else "touch_block"
    by_index: Dict[int, float] = {}
    for a in accs:
        by_index[a.pattern] = max(by_index.get(a.pattern, 0.0), getattr(a, key))
    total = sum(by_index.values())
    if accs[0].buffer_elements is not None:
        total = min(total, accs[0].buffer_elements)
    return total * accs[0].element_bytes


def _access_slot(pf: ProgramFeatures, accs: List[Access]) -> List[float]:
    """The features of a group of accesses (one buffer, or every buffer of a scope)."""
    if not accs:
        return [0.0] * len(_ACCESS_FEATURES)
    names = sorted({a.buffer for a in accs})
    bytes_t = sum(_buffer_bytes(pf, n, "thread") for n in names)
    bytes_b = sum(_buffer_bytes(pf, n, "block") for n in names)
    loads = sum(a.count for a in accs if not a.store)
    stores = sum(a.count for a in accs if a.store)
    elems = sum(_buffer_bytes(pf, n, "thread") / pf.buffer_accesses(n)[0].element_bytes for n in names)
    hot = max(accs, key=lambda a: (a.count, not a.store))
    total = loads + stores
    contiguous = sum(a.count for a in accs if a.stride_inner in (0, 1) or a.vector_lanes > 1)
    irregular = sum(a.count for a in accs if a.stride_inner is None or a.stride_tx is None)
    return [_log(loads), _log(stores), _log(bytes_t), _log(bytes_b), _log(total / elems if elems else 0.0),
            _slog(hot.stride_inner), _slog(hot.stride_tx), _log(hot.vector_lanes),
            contiguous / total if total else 0.0, irregular / total if total else 0.0]


def _loop_slots(pf: ProgramFeatures) -> List[float]:
    out: List[float] = []
    loops = pf.loops[:LOOP_SLOTS]
    extents = [max(1, lp.extent) for lp in pf.loops]
    for k in range(LOOP_SLOTS):
        if k >= len(loops):
            out += [0.0] * (3 + len(LOOP_KINDS))
            continue
        lp = loops[k]
        top = float(np.prod(extents[:k + 1]))
        bottom = float(np.prod(extents[k:]))
        out += [_log(lp.extent)] + [1.0 if lp.category == c else 0.0 for c in LOOP_KINDS] + \
            [_log(top), _log(bottom)]
    return out


def _itervar(pf: ProgramFeatures) -> List[float]:
    out = _summary(pf) + _loop_slots(pf)
    for k in range(ARG_SLOTS):
        name = pf.arguments[k] if k < len(pf.arguments) else None
        out += _access_slot(pf, pf.buffer_accesses(name) if name is not None else [])
    for scope in SCOPES:
        out += _access_slot(pf, [a for a in pf.accesses if a.scope == scope])
    return out


def _curve(pf: ProgramFeatures) -> List[float]:
    out = _summary(pf)
    depth = len(pf.loops)
    for scope in SCOPES:
        accs = [a for a in pf.accesses if a.scope == scope and a.curve]
        samples = []
        for s in range(CURVE_SAMPLES):
            k = max(0, depth - 1 - s)  # innermost level first; past the outermost, the outermost again
            if depth == 0 or not accs:
                samples += [0.0, 0.0, 0.0]
                continue
            # per buffer, the most its accesses touch inside the level; accesses add up
            by_buf: Dict[str, float] = {}
            count = 0.0
            for a in accs:
                touched, n = a.curve[k]
                by_buf[a.buffer] = max(by_buf.get(a.buffer, 0.0), touched * a.element_bytes)
                count += n
            nbytes = sum(by_buf.values())
            samples += [_log(nbytes), _log(count), _log(count / nbytes) if nbytes else 0.0]
        out += samples
    return out


def feature_names(feature_type: str = "itervar") -> List[str]:
    """The name of each element of :func:`feature_vector`'s vector."""
    _check_type(feature_type)
    names = list(_SUMMARY)
    if feature_type == "itervar":
        for k in range(LOOP_SLOTS):
            names += [f"loop{k}.{x}" for x in ["extent"] + [f"is_{c}" for c in LOOP_KINDS] +
                      ["topdown", "bottomup"]]
        for k in range(ARG_SLOTS):
            names += [f"arg{k}.{x}" for x in _ACCESS_FEATURES]
        for scope in SCOPES:
            names += [f"{scope}.{x}" for x in _ACCESS_FEATURES]
    else:
        for scope in SCOPES:
            for s in range(CURVE_SAMPLES):
                names += [f"curve.{scope}.{s}.{x}" for x in ("bytes", "accesses", "reuse")]
    return names


def _check_type(feature_type: str) -> None:
    if feature_type not in FEATURE_TYPES:
        raise FeatureError(f"feature_type {feature_type!r} is not a loop-feature type; use one of "
                           f"{', '.join(FEATURE_TYPES)}")


def feature_vector(pf: ProgramFeatures, feature_type: str = "itervar") -> np.ndarray:
    """The fixed-length vector of ``pf`` (see the module docstring and :func:`feature_names`)."""
    _check_type(feature_type)
    vals = _itervar(pf) if feature_type == "itervar" else _curve(pf)
    return np.asarray(vals, dtype=np.float32)


def feature_length(feature_type: str = "itervar") -> int:
    """The length of every ``feature_type`` vector."""
    return len(feature_names(feature_type))


# -- candidates ----------------------------------------------------------------------------------


def candidate_features(task: Any, config: Any) -> ProgramFeatures:
    """The :class:`ProgramFeatures` of ``task`` under ``config`` (a configuration or its index):
    instantiated and lowered for the task's target (see :func:`lower_for_features`)."""
    from ..lower import is_tensor_ir

    if isinstance(config, (int, np.integer)):
        config = task.config_space.get(int(config))
    target = task.target
    try:
        if target is not None and hasattr(target, "__enter__"):
            with target:
                sch, args = task.instantiate(config)
        else:
            sch, args = task.instantiate(config)
    except Exception as exc:
        raise FeatureError(f"configuration {getattr(config, 'index', config)}: the template refuses it: "
                           f"{type(exc).__name__}: {exc}") from exc
    try:
        func, vthreads = lower_for_features(sch, None if is_tensor_ir(sch) else args, target)
        return analyze(func, vthreads, DeviceLimits.of_target(target))
    except FeatureError:
        raise
    except Exception as exc:
        raise FeatureError(f"configuration {getattr(config, 'index', config)}: lowering for features "
                           f"failed: {type(exc).__name__}: {exc}") from exc


# a task handed to forked workers (set before the pool starts; the children inherit it)
_POOL_TASK: Any = None
_POOL_TYPE = "itervar"


def _pool_extract(index: int) -> Tuple[int, Optional[np.ndarray], str]:
    try:
        return index, feature_vector(candidate_features(_POOL_TASK, index), _POOL_TYPE), ""
    except Exception as exc:
        return index, None, f"{type(exc).__name__}: {exc}"


class FeatureExtractor:
    """Feature vectors of a task's configurations, by index, cached (see the module docstring).

    Parameters
    ----------
    task : Task or TIRTask
        What to instantiate (``config_space``, ``instantiate``, ``target``).
    feature_type : str
        ``"itervar"`` or ``"curve"``.
    n_workers : int, optional
        Worker processes (forked) for batches of at least :attr:`pool_min` missing vectors
        (default: the machine's cores but one, at most 16; 1 extracts in this process, as does a
        process connected to Ray).
    """

    #: fewer missing vectors than this are extracted in this process
    pool_min = 16

    def __init__(self, task: Any, feature_type: str = "itervar", n_workers: Optional[int] = None):
        _check_type(feature_type)
        self.task, self.feature_type = task, feature_type
        if n_workers is None:  # one core stays with the tuner (and with the builder's compilers)
            n_workers = max(1, min(16, (os.cpu_count() or 1) - 1))
        self.n_workers = int(n_workers)
        self.length = feature_length(feature_type)
        self.cache: Dict[int, np.ndarray] = {}
        self.failures: Dict[int, str] = {}
        self.seconds = 0.0  # time spent extracting (wall), and how many were extracted
        self.extracted = 0

    def __len__(self) -> int:
        return self.length

    def get(self, index: int) -> np.ndarray:
        """The vector of configuration ``index`` (the zero vector when extraction fails)."""
        got = self.cache.get(index)
        if got is None:
            self.get_many([index])
            got = self.cache[index]
        return got

    def get_many(self, indices: Iterable[int]) -> np.ndarray:
        """The vectors of ``indices`` as rows of one array; missing ones are extracted first."""
        indices = [int(i) for i in indices]
        missing = list(dict.fromkeys(i for i in indices if i not in self.cache))
        if missing:
            t0 = time.perf_counter()
            if self.n_workers > 1 and len(missing) >= self.pool_min:
                self._extract_pool(missing)
            else:
                for i in missing:
                    self._store(*_extract_here(self.task, i, self.feature_type))
            self.seconds += time.perf_counter() - t0
            self.extracted += len(missing)
        if not indices:
            return np.zeros((0, self.length), dtype=np.float32)
        return np.stack([self.cache[i] for i in indices])

    @property
    def seconds_per_candidate(self) -> float:
        return self.seconds / self.extracted if self.extracted else 0.0

    def _store(self, index: int, vec: Optional[np.ndarray], error: str) -> None:
        if vec is None:
            self.failures[index] = error
            logger.info("features of configuration %d: extraction failed, using zeros: %s", index, error)
            vec = np.zeros(self.length, dtype=np.float32)
        self.cache[index] = vec

    def _extract_pool(self, missing: List[int]) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        global _POOL_TASK, _POOL_TYPE
        try:
            ctx = mp.get_context("fork")
        except ValueError:  # no fork on this platform: in this process
            ctx = None
        if ctx is not None and _ray_connected():
            # a Ray driver's client threads do not survive a fork: extract in this process
            ctx = None
        if ctx is None:
            for i in missing:
                self._store(*_extract_here(self.task, i, self.feature_type))
            return
        _POOL_TASK, _POOL_TYPE = self.task, self.feature_type
        workers = min(self.n_workers, len(missing))
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                chunk = max(1, len(missing) // (4 * workers))
                for index, vec, error in pool.map(_pool_extract, missing, chunksize=chunk):
                    self._store(index, vec, error)
        except Exception as exc:  # a broken pool: the rest in this process
            logger.info("feature extraction pool failed (%s: %s); extracting in this process",
                        type(exc).__name__, exc)
            for i in missing:
                if i not in self.cache:
                    self._store(*_extract_here(self.task, i, self.feature_type))
        finally:
            _POOL_TASK = None


def _ray_connected() -> bool:
    import sys

    ray = sys.modules.get("ray")
    try:
        return bool(ray is not None and ray.is_initialized())
    except Exception:  # a partial or broken Ray import
        return False


def _extract_here(task: Any, index: int, feature_type: str) -> Tuple[int, Optional[np.ndarray], str]:
    try:
        return index, feature_vector(candidate_features(task, index), feature_type), ""
    except Exception as exc:
        return index, None, f"{type(exc).__name__}: {exc}"
