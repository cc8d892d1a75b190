"""cache_write: a stage computed into a register (local) or shared cache and copied out, checked
against numpy float64 on C and OpenCL (PoCL)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import gpu_target_params, run

import kernels as tvm
from kernels import te
from kernels.errors import ScheduleError

RNG = np.random.default_rng(5)


def _matmul(n, m, kk):
    A = te.placeholder((n, kk), name="A")
    B = te.placeholder((kk, m), name="B")
    k = te.reduce_axis((0, kk), "k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def _blocked_gpu(s, A, B, C, tile=16, reg=2, ktile=8):
    """The register-blocked, shared-memory matmul: C.local per thread, A/B tiles fetched together."""
    CC = s.cache_write(C, "local")
    AA = s.cache_read(A, "shared", [CC])
    BB = s.cache_read(B, "shared", [CC])
    i, j = s[C].op.axis
    bi, bj, ti, tj = s[C].tile(i, j, tile, tile)
    tio, tii = s[C].split(ti, factor=reg)
    tjo, tji = s[C].split(tj, factor=reg)
    s[C].reorder(bi, bj, tio, tjo, tii, tji)
    tx, ty = te.thread_axis("threadIdx.x"), te.thread_axis("threadIdx.y")
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(tio, ty)
    s[C].bind(tjo, tx)
    s[CC].compute_at(s[C], tjo)
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=ktile)
    s[CC].reorder(ko, ki, *s[CC].op.axis)
    threads = tile // reg
    for st in (AA, BB):
        s[st].compute_at(s[CC], ko)
        fo, fi = s[st].split(s[st].fuse(*s[st].op.axis), factor=threads)
        _, fy = s[st].split(fo, factor=threads)
        s[st].bind(fi, tx)
        s[st].bind(fy, ty)
    return CC


@pytest.mark.parametrize("target", gpu_target_params())
@pytest.mark.parametrize("n, m, kk", [(64, 64, 64), (50, 37, 29)])  # tiles divide / ragged everywhere
def test_blocked_matmul_with_register_cache(n, m, kk, target):
    A, B, C = _matmul(n, m, kk)
    s = te.create_schedule(C.op)
    _blocked_gpu(s, A, B, C)
    f = tvm.build(s, [A, B, C], target)
    a = RNG.standard_normal((n, kk)).astype("float32")
    b = RNG.standard_normal((kk, m)).astype("float32")
    *_, c = run(f, target, a, b, np.full((n, m), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [32, 21])
def test_cache_write_on_c_blocked_in_registers(n):
    A, B, C = _matmul(n, n, n)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(*s[C].op.axis, 4, 4)
    s[CC].compute_at(s[C], yo)
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, ki, *s[CC].op.axis)
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    assert "allocate(C.local: Pointer(local float32), float32, [16])" in text, text
    f = tvm.build(s, [A, B, C], "c")
    a, b = RNG.standard_normal((n, n)).astype("float32"), RNG.standard_normal((n, n)).astype("float32")
    *_, c = run(f, "c", a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_cache_write_of_a_tuple_reduction():
    """Both outputs of an argmax stage are cached together."""
    def fcombine(x, y):
        lhs = te.if_then_else(x[1] >= y[1], x[0], y[0])
        return lhs, te.if_then_else(x[1] >= y[1], x[1], y[1])

    def fidentity(t0, t1):
        return tvm.tir.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    n, m = 6, 17
    idx = te.placeholder((n, m), name="idx", dtype="int32")
    val = te.placeholder((n, m), name="val")
    k = te.reduce_axis((0, m), "k")
    T0, T1 = te.compute((n,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    with pytest.raises(ScheduleError, match="cache all of them together"):
        s.cache_write(T0, "local")
    c0, c1 = s.cache_write([T0, T1], "local")
    s[c0].compute_at(s[T0], s[T0].op.axis[0])
    f = tvm.build(s, [idx, val, T0, T1], "c")
    iv = np.tile(np.arange(m, dtype="int32"), (n, 1))
    vv = RNG.standard_normal((n, m)).astype("float32")
    _, _, t0, t1 = run(f, "c", iv, vv, np.zeros(n, "int32"), np.zeros(n, "float32"))
    np.testing.assert_array_equal(t0, vv.argmax(1))
    np.testing.assert_array_equal(t1, vv.max(1))


def test_cache_write_after_scheduling_is_refused():
    A, B, C = _matmul(8, 8, 8)
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match=r"stage C: cache_write: cache_write must come before the "
                       r"stage is split"):
        s.cache_write(C, "local")
    with pytest.raises(ScheduleError, match=r"stage C: cache_write: unknown storage scope 'register'"):
        s.cache_write(C, "register")
