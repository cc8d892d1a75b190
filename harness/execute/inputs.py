"""A case's host data: its inputs, its poisoned outputs and its float64 reference, made once per
(workload, parameters, dtype, seed) in a worker process and reused by every variant and peer of that
shape.

Drawing random inputs and computing a float64 reference can cost seconds for a large shape (a
4096^3 matmul reference, 2^28-element vectors), and a suite times several variants and peers of the
same shape: :func:`case_data` keeps the most recent shapes (up to :data:`CACHE_BYTES` of arrays) and
hands every case fresh copies of the poisoned outputs, so what one case writes never reaches the
next one. Kernels and peers work on device copies of the arrays; the cached host inputs are
read-only (numpy's ``writeable`` flag off), so nothing can change them between cases.

The inputs depend only on the run's seed and the shape (not on the variant), so every variant and
peer of a shape is checked and timed on the same data, on every worker and rerun.

What identifies a case's inputs: the case key (workload, parameters, dtype, ...), the run's seed
(stored with the run's MeasureConfig) and the way the workloads draw (kernels.workloads.uniform,
named by ``kernels.workloads.INPUTS_VERSION``, which each result stores as ``Result.inputs_version``;
results without it were measured on version 1, float64 draws rounded to the dtype). Neither the case
key nor the environment fingerprint contains the version, so a result is still compared with older
results of its case: the timed kernels do the same work whatever the values (no data-dependent
control flow in the workloads), and a verdict between two versions is a comparison of the same
computation on other random values of the same distribution.
"""

from __future__ import annotations

import os
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np

import kernels as tvm

__all__ = ["CACHE_BYTES", "CaseData", "ShapeData", "cached", "case_data", "clear", "data_key", "device_array", "prime",
           "shape_data", "stats"]


def _default_cache_bytes() -> int:
    """4 GiB, or a quarter of the machine's memory when that is less."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 << 30
    return int(min(4 << 30, total // 4))


#: the most bytes of cached host arrays (inputs, output templates and references) a process keeps
CACHE_BYTES = _default_cache_bytes()


@dataclass
class CaseData:
    """One case's host arrays. ``args`` are the workload's arguments in order (the inputs shared with
    other cases of the shape: do not write them; the outputs fresh poisoned copies); ``reference``
    the float64 reference outputs (shared: do not write). ``inputs_s`` and ``reference_s`` are what
    making them cost (0 when they came from the cache, ``cached`` then True)."""

    args: List[np.ndarray]
    reference: List[np.ndarray]
    inputs_s: float = 0.0
    reference_s: float = 0.0
    cached: bool = False


@dataclass
class _Entry:
    args: List[np.ndarray]
    outputs: Tuple[int, ...]
    reference: List[np.ndarray]
    nbytes: int


_CACHE: "OrderedDict[str, _Entry]" = OrderedDict()
_STATS = {"hits": 0, "misses": 0}


def data_key(workload: str, params: Any, dtype: str, seed: int) -> str:
    """The cache key of a shape: everything the inputs depend on (not the variant, not the peer)."""
    return f"{workload}/{params}/{dtype}/{seed}"


def _seed(key: str, seed: int) -> int:
    return (int(seed) << 32) ^ zlib.crc32(key.encode())


def _evict(room: int) -> None:
    total = sum(e.nbytes for e in _CACHE.values())
    while _CACHE and total + room > CACHE_BYTES:
        _, old = _CACHE.popitem(last=False)
        total -= old.nbytes


@dataclass
class ShapeData:
    """A shape's host arrays made in one process for another (the Ray executor's CPU workers make
    them ahead of the shape's cases, the GPU runner that times them takes them: :func:`prime`), with
    what making them cost there."""

    key: str
    args: List[np.ndarray]
    outputs: Tuple[int, ...]
    reference: List[np.ndarray]
    inputs_s: float
    reference_s: float


def _read_only(args: List[np.ndarray], outputs: Tuple[int, ...]) -> None:
    """Make the inputs among ``args`` (not the outputs) read-only."""
    for i, a in enumerate(args):
        if i not in outputs:
            a.setflags(write=False)


def _entry(args: List[np.ndarray], outputs: Tuple[int, ...], reference: List[np.ndarray]) -> _Entry:
    """A cache entry of a shape's arrays: inputs and reference read-only, its bytes counted."""
    _read_only(args, outputs)
    for r in reference:
        r.setflags(write=False)
    return _Entry(args=list(args), outputs=tuple(outputs), reference=list(reference),
                  nbytes=sum(a.nbytes for a in args) + sum(r.nbytes for r in reference))


def _make(workload: Any, case: Any, seed: int, key: str) -> Tuple[_Entry, float, float]:
    t0 = time.perf_counter()
    args = workload.make_args(case.param_dict, case.dtype, np.random.default_rng(_seed(key, seed)))
    outputs = tuple(workload.outputs)
    _read_only(args, outputs)  # before the reference: a reference that writes its inputs fails
    inputs_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference = [np.asarray(r) for r in workload.reference_of(args, case.param_dict, case.dtype)]
    entry = _entry(args, outputs, reference)
    return entry, inputs_s, time.perf_counter() - t0


def shape_data(workload: Any, case: Any, seed: int) -> ShapeData:
    """The host arrays of ``case``'s shape for the run's ``seed``, made here (not cached here) to be
    sent to the process that runs the shape's cases."""
    key = data_key(case.workload, case.params, case.dtype, seed)
    entry, inputs_s, reference_s = _make(workload, case, seed, key)
    return ShapeData(key, entry.args, entry.outputs, entry.reference, inputs_s, reference_s)


def cached(key: str) -> bool:
    """Whether this process keeps the shape ``key`` (:func:`data_key`)."""
    return key in _CACHE


def prime(data: ShapeData) -> bool:
    """Keep a shape's arrays made elsewhere (:func:`shape_data`) as this process's cache entry of it,
    so that its cases here neither draw nor compute them; False when the entry was there already.
    Every input and the reference are made read-only (arrays from Ray's object store are already)."""
    if data.key in _CACHE:
        return False
    entry = _entry(data.args, data.outputs, data.reference)
    _evict(entry.nbytes)
    _CACHE[data.key] = entry
    return True


def case_data(workload: Any, case: Any, seed: int) -> CaseData:
    """The host data of ``case`` (a harness Case of ``workload``) for the run's ``seed``.

    Parameters
    ----------
    workload : kernels.workloads.Workload
    case : harness.model.Case
    seed : int
        The run's seed (MeasureConfig.seed).
    """
    key = data_key(case.workload, case.params, case.dtype, seed)
    entry = _CACHE.get(key)
    out = CaseData(args=[], reference=[])
    if entry is None:
        _STATS["misses"] += 1
        entry, out.inputs_s, out.reference_s = _make(workload, case, seed, key)
        _evict(entry.nbytes)
        _CACHE[key] = entry
    else:
        _STATS["hits"] += 1
        out.cached = True
        _CACHE.move_to_end(key)
    out.args = [a.copy() if i in entry.outputs else a for i, a in enumerate(entry.args)]
    out.reference = entry.reference
    return out


def device_array(workload: Any, case: Any, index: int, host: np.ndarray, device: Any) -> Any:
    """Argument ``index`` of ``case`` as a ``kernels`` NDArray on ``device``. A case's dtype is the
    workload's logical element type: where it is a packed sub-byte type (int4, int1) and the
    argument holds it, ``host`` is the packed int32 words and the array is made with the logical
    dtype and shape (``Workload.logical_shape``), so the kernel receives what its buffer declares.

    Parameters
    ----------
    workload : kernels.workloads.Workload
    case : harness.model.Case
    index : int
        The argument's position (``Workload.make_args`` order).
    host : numpy.ndarray
    device : kernels.runtime.Device
    """
    shape = workload.logical_shape(index, host, case.dtype)
    if shape is None:
        return tvm.nd.array(host, device)
    return tvm.nd.empty(shape, case.dtype, device).copyfrom(host)


def stats() -> Dict[str, int]:
    """Cache hits and misses in this process, the shapes kept and their bytes."""
    return dict(_STATS, entries=len(_CACHE), bytes=sum(e.nbytes for e in _CACHE.values()))


def clear() -> None:
    """Forget every cached shape (and the counts)."""
    _CACHE.clear()
    for k in _STATS:
        _STATS[k] = 0
