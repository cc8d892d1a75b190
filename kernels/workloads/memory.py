"""Workloads of the GPU-acceleration notes, written with the TE API: vector add, a window sum staged
in shared memory (with and without cooperative fetching) and a float32 matmul blocked in registers
and then in shared memory with vectorized cooperative loads.

Each GPU variant is the notes' schedule with its tile sizes as knobs; the ``default`` variants are the
plain loop nests for the C target. Sizes are compiled in as constants (as in the notes): the native
compiler then sees every trip count and drops the bound checks that a tile never needs.
"""

from __future__ import annotations

from typing import List

import numpy as np

from .. import te
from .base import Variant, Workload, _isize, _poison, register, uniform

GPU = ("cuda", "opencl")
CPU = ("c",)


def _bind_1d(s, stage, axis, threads: int, vector: int = 1, items: int = 1):
    """``axis`` split into blocks of ``threads`` x ``vector`` x ``items`` elements: each thread
    handles ``items`` vectors of ``vector`` consecutive elements, ``threads * vector`` apart (so every
    step's loads are contiguous across the block), in an unrolled loop."""
    if vector > 1:
        axis, vec = s[stage].split(axis, factor=vector)
        s[stage].vectorize(vec)
    axis, tx = s[stage].split(axis, factor=threads)
    if items > 1:
        axis, item = s[stage].split(axis, factor=items)
        s[stage].unroll(item)
    s[stage].bind(axis, te.thread_axis("blockIdx.x"))
    s[stage].bind(tx, te.thread_axis("threadIdx.x"))


# -- vector add ------------------------------------------------------------------------------------


def _vadd_compute(params, dtype):
    n = params["n"]
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    return A, B, C


def _vadd_default(params, dtype):
    A, B, C = _vadd_compute(params, dtype)
    return te.create_schedule(C.op), [A, B, C]


def _vadd_bind(params, dtype, threads=128, vector=1, items=1):
    A, B, C = _vadd_compute(params, dtype)
    s = te.create_schedule(C.op)
    _bind_1d(s, C, C.op.axis[0], threads, vector, items)
    return s, [A, B, C]


register(Workload(
    name="vector_add",
    params=("n",),
    dtypes=("float32", "float16"),
    variants={
        "default": Variant("default", _vadd_default, CPU, (), "one loop"),
        "bind": Variant("bind", _vadd_bind, GPU, (("threads", 128), ("vector", 1), ("items", 1)),
                        "`threads` threads a block, `items` vectors of `vector` consecutive elements a "
                        "thread (the notes: split by 128, bound to blockIdx.x / threadIdx.x)"),
    },
    make_args=lambda p, d, rng: [uniform(rng, p["n"], d, -1, 1),
                                 uniform(rng, p["n"], d, -1, 1), _poison((p["n"],), d)],
    reference=lambda a: [a[0].astype(np.float64) + a[1].astype(np.float64)],
    outputs=(2,),
    flops=lambda p: float(p["n"]),
    bytes=lambda p, d: float(3 * p["n"] * _isize(d)),
    write_bytes=lambda p, d: float(p["n"] * _isize(d)),
    peers=("torch.add",),
    description="C[i] = A[i] + B[i]",
    tolerance={"float16": (1e-3, 1e-3)},
))


# -- window sum --------------------------------------------------------------------------------------


def _window_compute(params, dtype):
    n = params["n"]
    A = te.placeholder((n + 2,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    return A, B


def _window_default(params, dtype):
    A, B = _window_compute(params, dtype)
    return te.create_schedule(B.op), [A, B]


def _window_global(params, dtype, threads=128):
    A, B = _window_compute(params, dtype)
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], threads)
    return s, [A, B]


def _window_shared(params, dtype, threads=128):
    """The notes' first shared version: A's window of the block staged in shared memory by every
    thread (computed at the thread loop: each thread copies the whole window)."""
    A, B = _window_compute(params, dtype)
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=threads)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], tx)
    return s, [A, B]


def _window_shared_coop(params, dtype, threads=128, vector=1, items=1):
    """Cooperative fetching: the block's threads copy the window together (its outputs + 2
    elements), ``vector`` consecutive elements per thread and step; each thread then computes
    ``items`` outputs, ``threads`` apart."""
    A, B = _window_compute(params, dtype)
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bx, inner = s[B].split(B.op.axis[0], factor=threads * items)
    item, tx = s[B].split(inner, factor=threads)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].reorder(bx, tx, item)
    if items > 1:
        s[B].unroll(item)
    s[AS].compute_at(s[B], bx)
    ax = s[AS].op.axis[0]
    if vector > 1:
        ax, vec = s[AS].split(ax, factor=vector)
        s[AS].vectorize(vec)
    _, ftx = s[AS].split(ax, factor=threads)
    s[AS].bind(ftx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


register(Workload(
    name="window_sum",
    params=("n",),
    dtypes=("float32",),
    variants={
        "default": Variant("default", _window_default, CPU, (), "one loop"),
        "global": Variant("global", _window_global, GPU, (("threads", 128),),
                          "one output per thread, inputs read from global memory"),
        "shared": Variant("shared", _window_shared, GPU, (("threads", 128),),
                          "the block's window in shared memory, copied by every thread (the notes)"),
        "shared_coop": Variant("shared_coop", _window_shared_coop, GPU,
                               (("threads", 128), ("vector", 1), ("items", 1)),
                               "the window fetched cooperatively by the block's threads"),
    },
    make_args=lambda p, d, rng: [uniform(rng, p["n"] + 2, d, -1, 1), _poison((p["n"],), d)],
    reference=lambda a: [a[0][:-2].astype(np.float64) + a[0][1:-1] + a[0][2:]],
    outputs=(1,),
    flops=lambda p: float(2 * p["n"]),
    bytes=lambda p, d: float((2 * p["n"] + 2) * _isize(d)),
    write_bytes=lambda p, d: float(p["n"] * _isize(d)),
    peers=("torch.window_sum",),
    description="B[i] = A[i] + A[i + 1] + A[i + 2]",
))


# -- matmul ----------------------------------------------------------------------------------------


def _matmul_compute(params, dtype):
    n, m, k = params["n"], params["m"], params["k"]
    A = te.placeholder((n, k), name="A", dtype=dtype)
    B = te.placeholder((k, m), name="B", dtype=dtype)
    r = te.reduce_axis((0, k), "r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def _matmul_default(params, dtype):
    A, B, C = _matmul_compute(params, dtype)
    return te.create_schedule(C.op), [A, B, C]


def _matmul_naive(params, dtype, tile=16):
    """One output per thread, ``tile`` x ``tile`` threads a block, operands from global memory."""
    A, B, C = _matmul_compute(params, dtype)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], tile, tile)
    s[C].bind(io, te.thread_axis("blockIdx.y"))
    s[C].bind(jo, te.thread_axis("blockIdx.x"))
    s[C].bind(ii, te.thread_axis("threadIdx.y"))
    s[C].bind(ji, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def _register_tiles(s, C, local_y, local_x, block_y, block_x, vthread=1):
    """The notes' ``blocking``: each thread computes a ``local_y`` x ``local_x`` tile of C in
    registers (C.local), a block ``block_y`` x ``block_x`` threads. With ``vthread`` > 1 a thread's
    tile is ``vthread`` x ``vthread`` sub-tiles spread over the block's tile (virtual threads): the
    threads of a warp then read nearer rows and columns of the shared tiles (fewer bank conflicts).
    Returns (CC, i1, j1): the cache and the two thread loops."""
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    i0, irest = s[C].split(i, factor=block_y * local_y)
    j0, jrest = s[C].split(j, factor=block_x * local_x)
    outer = [i0, j0]
    if vthread > 1:
        vy, irest = s[C].split(irest, nparts=vthread)
        vx, jrest = s[C].split(jrest, nparts=vthread)
        outer += [vy, vx]
    i1, i2 = s[C].split(irest, nparts=block_y)
    j1, j2 = s[C].split(jrest, nparts=block_x)
    s[C].reorder(*outer, i1, j1, i2, j2)
    s[C].bind(i0, te.thread_axis("blockIdx.y"))
    s[C].bind(j0, te.thread_axis("blockIdx.x"))
    if vthread > 1:
        s[C].bind(vy, te.thread_axis((0, vthread), "vthread", name="vy"))
        s[C].bind(vx, te.thread_axis((0, vthread), "vthread", name="vx"))
    return CC, i1, j1


def _matmul_local_blocked(params, dtype, local_y=8, local_x=8, block_y=8, block_x=8, tile_k=4):
    A, B, C = _matmul_compute(params, dtype)
    s = te.create_schedule(C.op)
    CC, i1, j1 = _register_tiles(s, C, local_y, local_x, block_y, block_x)
    s[C].bind(i1, te.thread_axis("threadIdx.y"))
    s[C].bind(j1, te.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], j1)
    k0, k1 = s[CC].split(s[CC].op.reduce_axis[0], factor=tile_k)
    ci, cj = s[CC].op.axis
    s[CC].reorder(k0, k1, ci, cj)
    s[CC].unroll(k1)
    return s, [A, B, C]


def _matmul_shared_blocked(params, dtype, local_y=8, local_x=8, block_y=8, block_x=8, tile_k=8,
                           vector=4, double_buffer=0, vthread=1, reg_cache=0, unroll_k=1):
    """The notes' ``blocking_with_shared``: register tiles as in local_blocked, the block's threads
    fused into threadIdx.x, and the A and B tiles of each ``tile_k`` step fetched into shared memory
    cooperatively, ``vector`` consecutive elements per thread (optionally double-buffered). Knobs
    beyond the notes: ``vthread`` spreads a thread's tile (see _register_tiles) and ``reg_cache``
    copies each step's column of A and row of B into registers before the multiply-adds;
    ``unroll_k=0`` leaves the k loop inside a tile rolled (as the notes' TensorIR schedule does)."""
    A, B, C = _matmul_compute(params, dtype)
    s = te.create_schedule(C.op)
    CC, i1, j1 = _register_tiles(s, C, local_y, local_x, block_y, block_x, vthread)
    tx = s[C].fuse(i1, j1)
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], tx)
    k0, k1 = s[CC].split(s[CC].op.reduce_axis[0], factor=tile_k)
    ci, cj = s[CC].op.axis
    s[CC].reorder(k0, k1, ci, cj)
    if unroll_k:
        s[CC].unroll(k1)
    nthread = block_y * block_x
    shared = []
    for X in (A, B):
        XS = s.cache_read(X, "shared", [CC])
        shared.append(XS)
        s[XS].compute_at(s[CC], k0)
        fused = s[XS].fuse(*s[XS].op.axis)
        if vector > 1:
            fused, vec = s[XS].split(fused, factor=vector)
            s[XS].vectorize(vec)
        _, ftx = s[XS].split(fused, factor=nthread)
        s[XS].bind(ftx, te.thread_axis("threadIdx.x"))
        if double_buffer:
            s[XS].double_buffer()
    if reg_cache:
        for XS in shared:
            XL = s.cache_read(XS, "local", [CC])
            s[XL].compute_at(s[CC], k1)
    return s, [A, B, C]


def _matmul_tolerance(p):
    """(rtol, atol) of a float32 matmul with k terms a sum: 8 k ulp(1) absolute, at least 1e-4."""
    return 1e-4, max(1e-4, 8.0 * p["k"] * 2.0 ** -24)


def _matmul_args(p, d, rng) -> List[np.ndarray]:
    return [uniform(rng, (p["n"], p["k"]), d, -1, 1),
            uniform(rng, (p["k"], p["m"]), d, -1, 1), _poison((p["n"], p["m"]), d)]


_TILES = (("local_y", 8), ("local_x", 8), ("block_y", 8), ("block_x", 8))

register(Workload(
    name="matmul",
    params=("n", "m", "k"),
    dtypes=("float32",),
    variants={
        "default": Variant("default", _matmul_default, CPU, (), "the default loop nest"),
        "naive": Variant("naive", _matmul_naive, GPU, (("tile", 16),), "one output per thread"),
        "local_blocked": Variant("local_blocked", _matmul_local_blocked, GPU, _TILES + (("tile_k", 4),),
                                 "register tiles per thread (the notes' blocking)"),
        "shared_blocked": Variant(
            "shared_blocked", _matmul_shared_blocked, GPU,
            _TILES + (("tile_k", 8), ("vector", 4), ("double_buffer", 0), ("vthread", 1), ("reg_cache", 0),
                      ("unroll_k", 1)),
            "register tiles plus shared-memory tiles fetched cooperatively (blocking_with_shared)"),
    },
    make_args=_matmul_args,
    reference=lambda a: [a[0].astype(np.float64) @ a[1].astype(np.float64)],
    outputs=(2,),
    flops=lambda p: float(2 * p["n"] * p["m"] * p["k"]),
    bytes=lambda p, d: float((p["n"] * p["k"] + p["k"] * p["m"] + p["n"] * p["m"]) * _isize(d)),
    write_bytes=lambda p, d: float(p["n"] * p["m"] * _isize(d)),
    peers=("torch.matmul(tf32=off)",),
    description="C[i, j] = sum_r A[i, r] * B[r, j] (float32)",
    # sums of k products in a schedule-dependent order: the float32 reduction tolerance, with an
    # absolute part that grows with k (the rounding error of a k-term sum grows about linearly in
    # the worst case; at k = 4096 and inputs in [-1, 1] the observed worst is 4e-4 over 16M outputs)
    tolerance={"float32": _matmul_tolerance},
))
