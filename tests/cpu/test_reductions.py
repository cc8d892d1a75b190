"""Every tutorial schedule against numpy (float64) on the C and OpenCL targets, at the tutorial's
size and ragged ones (n, m not multiples of the split factors, n below the thread count, 1x1)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import ROW_SUM_SIZES, conv2d_3x3, conv2d_ref, opencl_available, product_reduce, row_sum, run

import kernels as tvm

needs_cl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
RNG = np.random.default_rng(7)



def _check_row_sum(f, target, n, m):
    a = RNG.uniform(size=(n, m)).astype("float32")
    b = np.full(n, np.nan, dtype="float32")  # poisoned output
    _, out = run(f, target, a, b)
    np.testing.assert_allclose(out, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["default", "split", "rfactor"])
def test_row_sum_c(variant):
    s, args = row_sum(variant)
    f = tvm.build(s, args, "c")
    for n, m in ROW_SUM_SIZES:
        _check_row_sum(f, "c", n, m)


@needs_cl
@pytest.mark.parametrize("variant,factor,rows", [
    ("bind", 16, 32), ("crossthread", 16, 32), ("crossthread", 64, 4), ("crossthread", 5, 8),
    ("crossthread", 48, 2), ("direct_crossthread", 16, 8), ("direct_crossthread", 20, 3),
])
def test_row_sum_opencl(variant, factor, rows):
    s, args = row_sum(variant, factor=factor, rows=rows)
    f = tvm.build(s, args, "opencl")
    for n, m in ROW_SUM_SIZES:
        _check_row_sum(f, "opencl", n, m)


@pytest.mark.parametrize("target,bind", [("c", False), pytest.param("opencl", True, marks=needs_cl)])
def test_conv2d(target, bind):
    s, args = conv2d_3x3(bind=bind)
    f = tvm.build(s, args, target)
    for n in (3, 10, 37):
        inp = RNG.uniform(size=(n, n)).astype("float32")
        filt = RNG.uniform(size=(3, 3)).astype("float32")
        out = np.full((n - 2, n - 2), np.nan, dtype="float32")
        _, _, got = run(f, target, inp, filt, out)
        np.testing.assert_allclose(got, conv2d_ref(inp, filt), rtol=1e-5, atol=1e-5)


def test_product_reduce_c():
    s, args = product_reduce()
    f = tvm.build(s, args, "c")
    a = RNG.uniform(0.5, 1.5, size=(9, 13)).astype("float32")
    b = np.full(9, np.nan, dtype="float32")
    _, got = run(f, "c", a, b)
    np.testing.assert_allclose(got, np.prod(a.astype(np.float64), axis=1), rtol=1e-5)


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=needs_cl)])
@pytest.mark.parametrize("fname,ref", [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("tanh", np.tanh),
                                       ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("floor", np.floor),
                                       ("ceil", np.ceil), ("abs", np.abs)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_intrinsics(target, fname, ref, dtype):
    from kernels import te

    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda i: getattr(te, fname)(A[i]), name="B")
    s = te.create_schedule(B.op)
    if target == "opencl":
        bx, tx = s[B].split(B.op.axis[0], factor=64)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target)
    a = RNG.uniform(0.1, 3.0, size=100).astype(dtype)
    if fname in ("floor", "ceil", "abs", "tanh", "sigmoid"):
        a = (a - 1.5).astype(dtype)
    _, got = run(f, target, a, np.zeros(100, dtype))
    np.testing.assert_allclose(got, ref(a.astype(np.float64)), rtol=1e-5 if dtype == "float32" else 1e-12)


def test_argmax_tuple_reducer_c():
    from kernels import te

    def fcombine(x, y):
        lhs = tvm.tir.Select((x[1] >= y[1]), x[0], y[0])
        rhs = tvm.tir.Select((x[1] >= y[1]), x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tvm.tir.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    m, n = te.var("m"), te.var("n")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="float32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    f = tvm.build(s, [idx, val, T0, T1], "c")
    v = RNG.uniform(size=(6, 11)).astype("float32")
    ids = np.tile(np.arange(11, dtype="int32"), (6, 1))
    _, _, t0, t1 = run(f, "c", ids, v, np.zeros(6, "int32"), np.zeros(6, "float32"))
    np.testing.assert_array_equal(t0, v.argmax(axis=1))
    np.testing.assert_allclose(t1, v.max(axis=1))


def test_where_and_init_c():
    from kernels import te

    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k, where=(k % 2).equal(0), init=10.0), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "c")
    a = RNG.uniform(size=(5, 7)).astype("float32")
    _, got = run(f, "c", a, np.zeros(5, "float32"))
    np.testing.assert_allclose(got, 10.0 + a.astype(np.float64)[:, ::2].sum(axis=1), rtol=1e-6)


@needs_cl
def test_shared_stage_computed_cooperatively_opencl():
    # B is computed per block into shared memory by the block's threads, then read by other threads:
    # needs the barrier the storage-sync pass inserts
    from kernels import te

    n = te.var("n")
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], xo)
    s[B].set_scope("shared")
    _bo, bi = s[B].split(B.op.axis[0], factor=8)
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, C], "opencl")
    for size in (64, 13, 1):
        a = RNG.uniform(size=size + 2).astype("float32")
        _, got = run(f, "opencl", a, np.full(size, np.nan, "float32"))
        a64 = a.astype(np.float64) * 2
        np.testing.assert_allclose(got, a64[:-2] + a64[1:-1] + a64[2:], rtol=1e-6)


@needs_cl
def test_cache_read_shared_opencl():
    from kernels import te

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n - 2,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], xo)
    _, ai = s[AS].split(AS.op.axis[0], factor=32)
    s[AS].bind(ai, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], "opencl")
    assert "__local float A_shared[34];" in f.imported_modules[0].get_source()
    for size in (100, 3, 64):
        a = RNG.uniform(size=size).astype("float32")
        _, got = run(f, "opencl", a, np.full(size - 2, np.nan, "float32"))
        a64 = a.astype(np.float64)
        np.testing.assert_allclose(got, a64[:-2] + a64[1:-1] + a64[2:], rtol=1e-6)
