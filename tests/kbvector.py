"""Schedules with vectorized loops, shared-memory tiles and double buffering, shared by the vector
tests (tests/null/test_vectorize.py, tests/cpu/test_vector_cpu.py, tests/gpu/test_vector_gpu.py)
and the device script scripts/device_vector.py; each returns ``(schedule, args)``."""

from __future__ import annotations

from kernels import te, tir

#: ragged sizes (not multiples of any vector width or block) and one aligned size
RAGGED = [5, 1000, 100003]
ALIGNED = [1 << 16]


def unary(fn: str = "exp", width: int = 4, threads: int = 64, n=None, dtype: str = "float32"):
    """``B[i] = fn(A[i])`` over a symbolic length: blocks of ``threads`` threads, each thread a
    vector of ``width`` consecutive elements (the inner loop vectorized)."""
    n = te.var("n") if n is None else n
    A = te.placeholder((n,), name="A", dtype=dtype)
    ops = {"exp": te.exp, "log": te.log, "copy": lambda x: x,
           "add1": lambda x: x + tir.const(1, dtype), "half": lambda x: x.astype("float32") * 0.5}
    B = te.compute((n,), lambda i: ops[fn](A[i]), name="B")
    s = te.create_schedule(B.op)
    bx, r = s[B].split(B.op.axis[0], factor=threads * width)
    tx, v = s[B].split(r, factor=width)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    return s, [A, B]


def vector_add(width: int = 4, threads: int = 128, n=None):
    n = te.var("n") if n is None else n
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, r = s[C].split(C.op.axis[0], factor=threads * width)
    tx, v = s[C].split(r, factor=width)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[C].vectorize(v)
    return s, [A, B, C]


def rows(width: int = 4, threads: int = 32):
    """``B[i, j] = A[i, j] * 2`` with a symbolic row length: row starts are aligned only when it is
    a multiple of ``width`` (CUDA tests that at run time)."""
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    jo, v = s[B].split(B.op.axis[1], factor=width)
    jb, jt = s[B].split(jo, factor=threads)
    s[B].reorder(B.op.axis[0], jb, jt, v)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(jt, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    return s, [A, B]


def shifted(width: int = 4, threads: int = 64):
    """``B[i] = A[i + 1]``: the loads start one element past a multiple of ``width``."""
    n = te.var("n")
    A = te.placeholder((n + 1,), name="A")
    B = te.compute((n,), lambda i: A[i + 1], name="B")
    s = te.create_schedule(B.op)
    bx, r = s[B].split(B.op.axis[0], factor=threads * width)
    tx, v = s[B].split(r, factor=width)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    return s, [A, B]


def window_coop(width: int = 4, tile: int = 256, n=None):
    """The window sum ``B[i] = A[i] + A[i+1] + A[i+2]`` with its input staged in shared memory by a
    cooperative fetch whose inner loop is vectorized (global vector load -> shared vector store)."""
    n = te.var("n") if n is None else n
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=tile)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bx)
    f, v = s[AA].split(AA.op.axis[0], factor=width)
    _, t = s[AA].split(f, factor=tile)
    s[AA].bind(t, te.thread_axis("threadIdx.x"))
    s[AA].vectorize(v)
    return s, [A, B]


def matmul_shared(n: int = 128, m: int = 128, k: int = 64, block: int = 64, threads: int = 8,
                  k_tile: int = 8, width: int = 4, double_buffer=False):
    """``C = A @ B`` tiled per block in shared memory: ``block x block`` outputs per block of
    ``threads x threads`` threads, ``k_tile`` columns of A / rows of B fetched per step by every
    thread of the block with vector loads of ``width`` (cooperative fetch), optionally double
    buffered (True) or multi-buffered (a number of copies). Ragged ``n``, ``m``, ``k`` give bound
    checks on every level."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    i, j = C.op.axis
    by, yi = s[C].split(i, factor=block)
    bx, xi = s[C].split(j, factor=block)
    ty, yi = s[C].split(yi, nparts=threads)
    tx, xi = s[C].split(xi, nparts=threads)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=k_tile)
    s[C].reorder(by, bx, ty, tx, ko, ki, yi, xi)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    for S in (AA, BB):
        s[S].compute_at(s[C], ko)
        f = s[S].fuse(*s[S].op.axis)
        f, v = s[S].split(f, factor=width)
        f, tx2 = s[S].split(f, factor=threads)
        _, ty2 = s[S].split(f, factor=threads)
        s[S].bind(tx2, te.thread_axis("threadIdx.x"))
        s[S].bind(ty2, te.thread_axis("threadIdx.y"))
        s[S].vectorize(v)
        if double_buffer is not True and double_buffer:  # a number of copies
            s[S].multi_buffer(int(double_buffer))
        elif double_buffer:
            s[S].double_buffer()
    return s, [A, B, C]
