"""Property test: random legal schedules give numpy's answer (float64 reference) on C and OpenCL."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kbtest import conv2d_ref, opencl_available, run

import kernels as tvm
from kernels import te

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
factors = st.sampled_from([1, 2, 3, 4, 5, 8, 16, 32])


@st.composite
def row_sum_case(draw, target):
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=draw(factors))
    if target == "opencl":
        xo, xi = s[B].split(B.op.axis[0], factor=draw(st.sampled_from([1, 2, 4, 8])))
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.y"))
        mode = draw(st.sampled_from(["serial", "direct", "rfactor"]))
        if mode == "direct":
            s[B].bind(ki, te.thread_axis("threadIdx.x"))
        elif mode == "rfactor":
            BF = s.rfactor(B, ki)
            tx = te.thread_axis("threadIdx.x")
            s[B].bind(s[B].op.reduce_axis[0], tx)
            s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    else:
        mode = draw(st.sampled_from(["plain", "reorder", "rfactor", "rfactor_at", "parallel"]))
        xo, xi = s[B].split(B.op.axis[0], factor=draw(factors))
        if mode == "reorder":
            s[B].reorder(xo, ko, xi, ki)
        elif mode == "parallel":
            s[B].parallel(xo)
        elif mode.startswith("rfactor"):
            BF = s.rfactor(B, ki, factor_axis=draw(st.sampled_from([0, 1])))
            if mode == "rfactor_at":
                s[BF].compute_at(s[B], s[B].op.axis[0])
    return s, [A, B], draw(st.integers(1, 40)), draw(st.integers(1, 70))


def _row_sum_check(case, target):
    s, args, n, m = case
    f = tvm.build(s, args, target)
    a = np.random.default_rng(n * 100 + m).uniform(size=(n, m)).astype("float32")
    _, got = run(f, target, a, np.full(n, np.nan, "float32"))
    np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


@settings(max_examples=25, **SETTINGS)
@given(row_sum_case("c"))
def test_row_sum_schedules_c(case):
    _row_sum_check(case, "c")


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@settings(max_examples=12, **SETTINGS)
@given(row_sum_case("opencl"))
def test_row_sum_schedules_opencl(case):
    _row_sum_check(case, "opencl")


@st.composite
def conv_case(draw, target):
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Out = te.compute((n - 2, n - 2), lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj],
                                                         axis=[di, dj]), name="Output")
    s = te.create_schedule(Out.op)
    i, j = Out.op.axis
    io, jo, ii, ji = s[Out].tile(i, j, draw(factors), draw(factors))
    if target == "opencl":
        s[Out].bind(io, te.thread_axis("blockIdx.y"))
        s[Out].bind(jo, te.thread_axis("blockIdx.x"))
        s[Out].bind(ii, te.thread_axis("threadIdx.y"))
        s[Out].bind(ji, te.thread_axis("threadIdx.x"))
    else:
        order = draw(st.sampled_from(["inner", "outer", "fused"]))
        if order == "outer":
            s[Out].reorder(io, jo, di, dj, ii, ji)
        elif order == "fused":
            s[Out].fuse(io, jo)
            s[Out].unroll(dj)
    return s, [Input, Filter, Out], draw(st.integers(3, 30))


def _conv_check(case, target):
    s, args, n = case
    f = tvm.build(s, args, target)
    rng = np.random.default_rng(n)
    inp = rng.uniform(size=(n, n)).astype("float32")
    filt = rng.uniform(size=(3, 3)).astype("float32")
    _, _, got = run(f, target, inp, filt, np.full((n - 2, n - 2), np.nan, "float32"))
    np.testing.assert_allclose(got, conv2d_ref(inp, filt), rtol=1e-5, atol=1e-5)


@settings(max_examples=20, **SETTINGS)
@given(conv_case("c"))
def test_conv2d_schedules_c(case):
    _conv_check(case, "c")


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@settings(max_examples=8, **SETTINGS)
@given(conv_case("opencl"))
def test_conv2d_schedules_opencl(case):
    _conv_check(case, "opencl")


@st.composite
def reduce2d_case(draw):
    """B[i] = sum over (j, k) of A[i, j, k]: two reduce axes, split/fused/reordered/rfactored."""
    n, p, q = te.var("n"), te.var("p"), te.var("q")
    A = te.placeholder((n, p, q), name="A")
    j = te.reduce_axis((0, p), "j")
    k = te.reduce_axis((0, q), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, j, k], axis=[j, k]), name="B")
    s = te.create_schedule(B.op)
    mode = draw(st.sampled_from(["fuse", "split_reorder", "rfactor_j", "rfactor_fused"]))
    if mode == "fuse":
        s[B].fuse(j, k)
    elif mode == "split_reorder":
        ko, ki = s[B].split(k, factor=draw(factors))
        s[B].reorder(ki, j, ko)
    elif mode == "rfactor_j":
        s.rfactor(B, j)
    else:
        f = s[B].fuse(j, k)
        fo, fi = s[B].split(f, factor=draw(factors))
        s.rfactor(B, fi)
    return s, [A, B], draw(st.integers(1, 6)), draw(st.integers(1, 9)), draw(st.integers(1, 9))


@settings(max_examples=20, **SETTINGS)
@given(reduce2d_case())
def test_two_axis_reduction_schedules_c(case):
    s, args, n, p, q = case
    f = tvm.build(s, args, "c")
    a = np.random.default_rng(n + 10 * p + 100 * q).uniform(size=(n, p, q)).astype("float32")
    _, got = run(f, "c", a, np.full(n, np.nan, "float32"))
    np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)
