"""Schedule.rfactor on blocks: the factored reduction runs on C and OpenCL (PoCL) and matches numpy
in float64; the loop nest and buffers are those TVM builds; the rules are refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels.script import tir as T
from kernels.tir.schedule.testing import verify_trace_roundtrip

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@T.prim_func
def rowsum_split(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (24, 50), "float32")
    B = T.match_buffer(b, (24,), "float32")
    for i, k_0, k_1 in T.grid(24, 13, 4):
        with T.block("B"):
            T.where(k_0 * 4 + k_1 < 50)
            vi = T.axis.spatial(24, i)
            vk = T.axis.reduce(50, k_0 * 4 + k_1)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def rowmax(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (8, 64), "float32")
    B = T.match_buffer(b, (8,), "float32")
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.min_value("float32")
            B[vi] = T.max(B[vi], A[vi, vk])


@T.prim_func
def total(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (96,), "float32")
    B = T.match_buffer(b, (), "float32")
    for k0, k1 in T.grid(12, 8):
        with T.block("B"):
            vk = T.axis.reduce(96, k0 * 8 + k1)
            with T.init():
                B[()] = 0.0
            B[()] = B[()] + A[vk]


@T.prim_func
def rowsum_minus(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (8, 16), "float32")
    B = T.match_buffer(b, (8,), "float32")
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] - A[vi, vk]


def build_run(mod, target, *arrays):
    f = tvm.build(mod, target=target)
    dev = tvm.cpu(0) if target == "c" else tvm.opencl(0)
    nd = [tvm.nd.array(x, dev) for x in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


@pytest.mark.parametrize("loop, axis", [(1, 0), (1, 1), (2, 0), (2, -1)])
def test_rowsum_with_predicate_on_c(loop, axis):
    s = tvm.tir.Schedule(rowsum_split)
    loops = s.get_loops(s.get_block("B"))
    rf = s.rfactor(loops[loop], axis)
    assert s.get(rf).name_hint == "B_rf"
    extent = [24, 13, 4][loop]
    rf_buf = s.get(rf).writes[0].buffer
    shape = [24]
    shape.insert(axis if axis >= 0 else axis + 2, extent)
    assert [int(x.value) for x in rf_buf.shape] == shape
    verify_trace_roundtrip(s, mod=rowsum_split)
    a = np.random.default_rng(loop + axis).uniform(-1, 1, (24, 50)).astype("float32")
    _, b = build_run(s.mod, "c", a, np.full(24, np.nan, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_max_reduction_and_zero_dim_output_on_c():
    s = tvm.tir.Schedule(rowmax)
    _, k = s.get_loops(s.get_block("B"))
    ko, ki = s.split(k, [None, 8])
    s.rfactor(ki, 0)
    a = np.random.default_rng(4).uniform(-5, 5, (8, 64)).astype("float32")
    _, b = build_run(s.mod, "c", a, np.full(8, np.nan, "float32"))
    np.testing.assert_array_equal(b, a.max(axis=1))
    s = tvm.tir.Schedule(total)
    k0, _ = s.get_loops(s.get_block("B"))
    s.rfactor(k0, 0)
    x = np.random.default_rng(5).uniform(-1, 1, 96).astype("float32")
    _, t = build_run(s.mod, "c", x, np.full((), np.nan, "float32"))
    np.testing.assert_allclose(t, x.astype(np.float64).sum(), rtol=1e-5)


@needs_opencl
def test_rfactor_then_bind_runs_on_opencl():
    s = tvm.tir.Schedule(rowsum_split)
    i, k_0, k_1 = s.get_loops(s.get_block("B"))
    rf = s.rfactor(k_1, 0)
    ri, _, rk1 = s.get_loops(rf)
    s.bind(ri, "blockIdx.x")
    s.bind(rk1, "threadIdx.x")  # the partial sums are independent: a spatial loop of the rf block
    wi, _ = s.get_loops(s.get_block("B"))
    s.bind(wi, "blockIdx.x")
    a = np.random.default_rng(6).uniform(-1, 1, (24, 50)).astype("float32")
    _, b = build_run(s.mod, "opencl", a, np.full(24, np.nan, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("func, loop, axis, msg", [
    (rowsum_split, 0, 0, "loop i is used by a spatial variable of block B"),
    (rowsum_split, 2, 2, r"factor_axis 2 is out of range \[-2, 1\] for buffer B"),
    (rowsum_minus, 1, 0, "not with a commutative reducer"),
])
def test_refusals_name_the_rule(func, loop, axis, msg):
    s = tvm.tir.Schedule(func)
    loops = s.get_loops(s.get_block("B"))
    with pytest.raises(tvm.tir.ScheduleError, match=msg):
        s.rfactor(loops[loop], axis)


@T.prim_func
def rowsum40(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (8, 40), "float32")
    B = T.match_buffer(b, (8,), "float32")
    for i, k in T.grid(8, 40):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


def _sum_rows(s):
    a = np.random.default_rng(7).uniform(-1, 1, (8, 40)).astype("float32")
    _, b = build_run(s.mod, "c", a, np.full(8, np.nan, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_partial_results_no_iteration_reaches_are_not_summed():
    # split 40 by 64: the partials k_1 = 40..63 see no iteration; the write-back skips them
    s = tvm.tir.Schedule(rowsum40)
    _, k = s.get_loops(s.get_block("B"))
    _, k1 = s.split(k, [None, 64])
    s.rfactor(k1, 0)
    assert "k_1 < 40" in s.mod.script().split('T.block("B")')[1]
    _sum_rows(s)


def test_write_back_keeps_the_spatial_predicate():
    # i split 8 by 3 runs i_0 * 3 + i_1 up to 8: the write-back must not store B[8]
    s = tvm.tir.Schedule(rowsum40)
    i, k = s.get_loops(s.get_block("B"))
    s.split(i, [None, 3])
    _, k1 = s.split(k, [None, 8])
    s.rfactor(k1, 0)
    assert "i_0 * 3 + i_1 < 8" in s.mod.script().split('T.block("B")')[1]
    _sum_rows(s)
