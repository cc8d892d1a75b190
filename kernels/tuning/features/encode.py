"""Feature vectors: a candidate's :class:`~.walk.ProgramFeatures` as a fixed-length float vector.

:func:`feature_vector` gives the same length for every configuration of every task (zero where a
slot is empty), each count scaled as ``log2(1 + x)``:

- ``"itervar"`` (TVM autotvm's default): the launch and kernel summary, one slot per loop level of
  the main store (:data:`LOOP_SLOTS`, outermost first) and one slot per argument buffer
  (:data:`ARG_SLOTS`, in argument order) and per scope, each with its access features;
- ``"curve"``: the launch and kernel summary, and per scope the footprint and the access count of
  the loops of the main nest, from the innermost level outwards (:data:`CURVE_SAMPLES` samples): how
  fast the working set grows with the nest, TVM's buffer-reuse curves in another form.

:func:`feature_names` names each element.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np

from .walk import _ARITH, _THREAD_TAGS, LOOP_KINDS, Access, FeatureError, ProgramFeatures

__all__ = ["FEATURE_TYPES", "LOOP_SLOTS", "ARG_SLOTS", "SCOPES", "CURVE_SAMPLES", "feature_vector",
           "feature_names", "feature_length"]

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
#: the features of a group of accesses (the slot of one buffer or of one scope)
_ACCESS_FEATURES = ("loads", "stores", "bytes_thread", "bytes_block", "reuse", "stride_inner", "stride_tx",
                    "vector_lanes", "contiguous_share", "irregular")


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
