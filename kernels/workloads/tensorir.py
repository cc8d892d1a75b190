"""Workloads written in TensorIR: a TVMScript module plus named schedule functions with knobs.

A TensorIR variant's ``build(params, dtype, **knobs)`` makes the module for the sizes, applies its
schedule function to a ``tir.Schedule`` and returns ``(sch.mod, None)``; ``build_spec`` lowers such a
module through the same backend as a TE schedule, so suites can time TE- and TIR-written variants of
one computation side by side. :func:`tir_variant` makes such a variant, :func:`add_variants` attaches
variants to an existing workload (e.g. TIR variants to a TE workload of the same computation).

:func:`register_notes_workloads` registers the GPU-acceleration notes' workloads (``vector_add_tir``,
``window_sum_tir``, ``matmul_tir``) with the notes' schedules as variants. Importing this module
registers nothing: a suite that lists these workloads calls it first (every registered workload must
appear in the tutorials suite, with its peers).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..script import tir as T
from ..tir.function import IRModule
from ..tir.schedule import Schedule
from ..tuning.tir_task import cache_read_and_coop_fetch  # noqa: F401  (the notes' helper, defined there)
from .base import REGISTRY, Variant, Workload, WorkloadError, _isize, _poison, check_variant, register, uniform

GPU = ("cuda", "opencl")
ModuleFactory = Callable[[Dict[str, int], str], IRModule]
ScheduleFn = Callable[..., Any]


def tir_variant(name: str, module: ModuleFactory, schedule: Optional[ScheduleFn], targets: Sequence[str],
                knobs: Sequence[Tuple[str, Any]] = (), description: str = "") -> Variant:
    """A variant that schedules the TensorIR module ``module(params, dtype)`` with
    ``schedule(sch, **knobs)`` (None: the module as written).

    The schedule function may return the schedule or nothing (it works on ``sch`` in place).
    """

    def build(params: Dict[str, int], dtype: str, **kw):
        mod = module(params, dtype)
        if schedule is None:
            return mod, None
        sch = Schedule(mod)
        out = schedule(sch, **kw)
        return (out if isinstance(out, Schedule) else sch).mod, None

    return Variant(name, build, tuple(targets), tuple(knobs), description)


def add_variants(workload: str, variants: Dict[str, Variant]) -> Workload:
    """Attach ``variants`` to the registered workload ``workload`` (names must be new)."""
    w = REGISTRY.get(workload)
    if w is None:
        raise WorkloadError(f"unknown workload {workload!r}; known: {', '.join(sorted(REGISTRY))}")
    for name, v in variants.items():
        if name in w.variants:
            raise WorkloadError(f"workload {workload} already has a variant {name!r}")
        check_variant(workload, name, v)
        w.variants[name] = v
    return w


# -- the notes' modules, for any size ------------------------------------------------------------------


def vector_add_module(params: Dict[str, int], dtype: str = "float32") -> IRModule:
    """``C[i] = A[i] + B[i]`` (the notes' ``MyModuleVecAdd`` for ``n`` elements)."""
    n = int(params["n"])

    @T.prim_func
    def main(A: T.Buffer[(n,), dtype], B: T.Buffer[(n,), dtype], C: T.Buffer[(n,), dtype]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(n):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + B[vi]

    return IRModule({"main": main})


def window_sum_module(params: Dict[str, int], dtype: str = "float32") -> IRModule:
    """``B[i] = A[i] + A[i + 1] + A[i + 2]`` (the notes' ``MyModuleWindowSum`` for ``n`` outputs)."""
    n = int(params["n"])
    m = n + 2

    @T.prim_func
    def main(A: T.Buffer[(m,), dtype], B: T.Buffer[(n,), dtype]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(n):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + A[vi + 1] + A[vi + 2]

    return IRModule({"main": main})


def matmul_module(params: Dict[str, int], dtype: str = "float32") -> IRModule:
    """``C = A @ B`` for ``n x n`` matrices (the notes' ``MyModuleMatmul``)."""
    n = int(params["n"])

    @T.prim_func
    def main(A: T.Buffer[(n, n), dtype], B: T.Buffer[(n, n), dtype], C: T.Buffer[(n, n), dtype]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return IRModule({"main": main})


# -- the notes' schedules ----------------------------------------------------------------------------------


def bind_1d(sch: Schedule, threads: int = 128) -> Schedule:
    """One element per thread: the loop split by ``threads``, bound to blocks and threads."""
    block = sch.get_block("C")
    (i,) = sch.get_loops(block=block)
    i0, i1 = sch.split(i, [None, threads])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    return sch


def window_sum_shared_coop(sch: Schedule, threads: int = 128) -> Schedule:
    """The notes' window sum with ``A`` cached in shared memory and fetched cooperatively."""
    bind_1d(sch, threads)
    block = sch.get_block("C")
    i1 = sch.get_loops(block)[-1]
    a_shared = sch.cache_read(block, read_buffer_index=0, storage_scope="shared")
    sch.compute_at(a_shared, i1)
    ax = sch.get_loops(a_shared)[-1]
    _, tx = sch.split(ax, [None, threads])
    sch.bind(tx, "threadIdx.x")
    return sch


def blocking(sch: Schedule, tile_local_y: int = 8, tile_local_x: int = 8, tile_block_y: int = 8,
             tile_block_x: int = 8, tile_k: int = 4) -> Schedule:
    """The notes' ``blocking``: a ``tile_local`` output tile per thread in registers (``C_local``)."""
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_C, k0)
    return sch


def blocking_with_shared(sch: Schedule, tile_local_y: int = 8, tile_local_x: int = 8, tile_block_y: int = 8,
                         tile_block_x: int = 8, tile_k: int = 8) -> Schedule:
    """The notes' ``blocking_with_shared``: register tiles plus ``A``/``B`` tiles in shared memory."""
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    nthread = tile_block_y * tile_block_x
    cache_read_and_coop_fetch(sch, block_C, nthread, 0, k0)
    cache_read_and_coop_fetch(sch, block_C, nthread, 1, k0)
    sch.decompose_reduction(block_C, k0)
    return sch


_MATMUL_KNOBS = (("tile_local_y", 8), ("tile_local_x", 8), ("tile_block_y", 8), ("tile_block_x", 8))


NOTES_WORKLOADS = ("vector_add_tir", "window_sum_tir", "matmul_tir")


def register_notes_workloads() -> None:
    """Register the notes' TensorIR workloads (a no-op for those already registered)."""
    if all(name in REGISTRY for name in NOTES_WORKLOADS):
        return
    for name in NOTES_WORKLOADS:
        REGISTRY.pop(name, None)
    register(Workload(
        name="vector_add_tir",
        params=("n",),
        dtypes=("float32", "float64"),
        variants={"bind": tir_variant("bind", vector_add_module, bind_1d, GPU, (("threads", 128),),
                                      "the notes' split by 128, bound to blockIdx.x / threadIdx.x")},
        make_args=lambda p, d, rng: [uniform(rng, p["n"], d), uniform(rng, p["n"], d),
                                     _poison((p["n"],), d)],
        reference=lambda a: [a[0].astype(np.float64) + a[1]],
        outputs=(2,),
        flops=lambda p: float(p["n"]),
        bytes=lambda p, d: float(3 * p["n"] * _isize(d)),
        write_bytes=lambda p, d: float(p["n"] * _isize(d)),
        description="C[i] = A[i] + B[i], written in TVMScript (GPU notes)",
    ))
    register(Workload(
        name="window_sum_tir",
        params=("n",),
        dtypes=("float32", "float64"),
        variants={
            "global": tir_variant("global", window_sum_module, bind_1d, GPU, (("threads", 128),),
                                  "one output per thread, inputs read from global memory"),
            "shared_coop": tir_variant("shared_coop", window_sum_module, window_sum_shared_coop, GPU,
                                       (("threads", 128),),
                                       "inputs cached in shared memory, fetched cooperatively (notes)"),
        },
        make_args=lambda p, d, rng: [uniform(rng, p["n"] + 2, d), _poison((p["n"],), d)],
        reference=lambda a: [a[0][:-2].astype(np.float64) + a[0][1:-1] + a[0][2:]],
        outputs=(1,),
        flops=lambda p: float(2 * p["n"]),
        bytes=lambda p, d: float((2 * p["n"] + 2) * _isize(d)),
        write_bytes=lambda p, d: float(p["n"] * _isize(d)),
        description="B[i] = A[i] + A[i + 1] + A[i + 2], written in TVMScript (GPU notes)",
    ))
    register(Workload(
        name="matmul_tir",
        params=("n",),
        dtypes=("float32", "float64"),
        variants={
            "blocking": tir_variant("blocking", matmul_module, blocking, GPU,
                                    _MATMUL_KNOBS + (("tile_k", 4),),
                                    "the notes' register tiling (C_local per thread)"),
            "blocking_with_shared": tir_variant(
                "blocking_with_shared", matmul_module, blocking_with_shared, GPU,
                _MATMUL_KNOBS + (("tile_k", 8),),
                "the notes' register tiling plus A/B tiles in shared memory, vectorized cooperative fetch"),
        },
        make_args=lambda p, d, rng: [uniform(rng, (p["n"], p["n"]), d),
                                     uniform(rng, (p["n"], p["n"]), d),
                                     _poison((p["n"], p["n"]), d)],
        reference=lambda a: [a[0].astype(np.float64) @ a[1].astype(np.float64)],
        outputs=(2,),
        flops=lambda p: float(2 * p["n"] ** 3),
        bytes=lambda p, d: float(3 * p["n"] ** 2 * _isize(d)),
        write_bytes=lambda p, d: float(p["n"] ** 2 * _isize(d)),
        description="C = A @ B, written in TVMScript (GPU notes)",
        tolerance={"float32": (1e-4, 1e-4)},
    ))

