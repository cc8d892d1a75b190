"""Kernels whose shared arrays exceed CUDA's 48 KiB of static shared memory, shared by the dynamic
shared memory tests (tests/cpu/test_dynamic_shared.py, tests/error/test_dynamic_shared_errors.py,
tests/gpu/test_dynamic_shared_gpu.py)."""

from __future__ import annotations

import kernels as tvm
from kernels import te
from kernels.workloads import get as get_workload
from kernels.workloads.tensorir import matmul_module

#: the tensor-core configuration whose 1024^3 double-buffered float16 tiles need 0x11000 bytes
BIG = dict(bx=8, by=16, step_k=4, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1, double_buffer=1)
# by hand: A's tile is (by * ty) = 128 rows of step_k * 16 = 64 halves padded by storage_align(16, 8)
# to rows of 72, twice (double buffer): 128 * 72 * 2 halves = 36864 bytes; B's tile is 64 rows of
# bx * tx = 128 halves, twice: 32768 bytes; B starts right after A (36864 is a multiple of 32)
BIG_A_BYTES, BIG_B_BYTES = 128 * 72 * 2 * 2, 64 * 128 * 2 * 2

#: the float32 matmul workload's shared_blocked knobs with 128 x 32 and 32 x 128 tiles, double-buffered:
#: 2 * (128 * 32 + 32 * 128) floats = 64 KiB of shared memory (no tensor cores)
TE_MATMUL_KNOBS = dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=32, double_buffer=1)


def te_matmul_big_tile(n: int = 512):
    """``(schedule, [A, B, C])`` of the float32 ``n``-cubed matmul with :data:`TE_MATMUL_KNOBS`."""
    return get_workload("matmul").build("shared_blocked", {"n": n, "m": n, "k": n}, "float32",
                                        TE_MATMUL_KNOBS)


def tir_matmul_shared_dyn(n: int, tile_k: int) -> tvm.tir.Schedule:
    """The notes' blocking_with_shared on ``n x n`` float32 with ``shared.dyn`` caches: 8 x 8 threads of
    8 x 8 outputs, A and B tiles of 64 x ``tile_k`` and ``tile_k`` x 64 floats."""
    sch = tvm.tir.Schedule(matmul_module({"n": n}))
    block = sch.get_block("C")
    c_local = sch.cache_write(block, 0, "local")
    i, j, k = sch.get_loops(block=block)
    i0, i1, i2 = sch.split(loop=i, factors=[None, 8, 8])
    j0, j1, j2 = sch.split(loop=j, factors=[None, 8, 8])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    for idx in (0, 1):
        cache = sch.cache_read(block=block, read_buffer_index=idx, storage_scope="shared.dyn")
        sch.compute_at(block=cache, loop=k0)
        inner = sch.fuse(*sch.get_loops(block=cache)[-2:])
        _, tx, vec = sch.split(loop=inner, factors=[None, 64, 4])
        sch.vectorize(vec)
        sch.bind(tx, "threadIdx.x")
    sch.decompose_reduction(block, k0)
    return sch


def staged_copy(tile: int, dtype: str = "float32"):
    """``B = A * 2`` with each block's ``tile`` elements of A staged in shared memory (one array of
    ``tile`` elements; ``tile`` a multiple of 256), 256 threads a block, 4 blocks."""
    n = 4 * tile
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    xo, xi = s[B].split(B.op.axis[0], factor=tile)
    _, tx = s[B].split(xi, factor=256)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], xo)
    _, ftx = s[AA].split(AA.op.axis[0], factor=256)
    s[AA].bind(ftx, te.thread_axis("threadIdx.x"))
    return s, [A, B]
