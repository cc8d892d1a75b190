"""Scalar variables (``te.var``) in the argument list of ``lower``/``build``: passed by value to the
C function and to every GPU kernel that uses them, bound from the call's arguments, checked against
the tensors' shapes when they are shape variables too. References are numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
from kernels import te
from kernels.contrib import nvcc

RNG = np.random.default_rng(5)
TARGETS = ["c", "opencl"]


def _dev(target):
    return tvm.cpu(0) if target == "c" else tvm.opencl(0)


def _nd(x, target):
    return tvm.nd.array(x, _dev(target))


def _empty(shape, dtype, target):
    return tvm.nd.empty(shape, dtype, _dev(target))


def _bind_1d(s, T, factor=32):
    """One GPU kernel over T's flattened axes (block x thread)."""
    ax = s[T].fuse(*s[T].op.axis) if len(s[T].op.axis) > 1 else s[T].op.axis[0]
    bx, tx = s[T].split(ax, factor=factor)
    s[T].bind(bx, te.thread_axis("blockIdx.x"))
    s[T].bind(tx, te.thread_axis("threadIdx.x"))


def _gpu(target):
    return target != "c"


def _strided_pick():
    """TVM's dependent output shape: B has n // x columns and x is only known from the argument."""
    m, n, x = te.size_var("m"), te.size_var("n"), te.size_var("x")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n // x), lambda i, j: A[i, j * x] + A[i, j * x + x - 1], name="B")
    return A, B, x


# -- lowering ---------------------------------------------------------------------------------


def test_scalar_in_primfn_parameters():
    A, B, x = _strided_pick()
    s = te.create_schedule(B.op)
    text = str(tvm.lower(s, [A, B, x], simple_mode=True))
    assert "primfn(A_1: handle, B_1: handle, x: int32) -> ()" in text
    func = tvm.lower(s, [x, A, B])["main"]
    assert [getattr(p, "name", None) for p in func.params] == ["x", "A", "B"]
    assert func.scalar_params == (x,)
    assert "primfn(x: int32, A_1: handle, B_1: handle)" in str(func)


def test_dependent_output_shape():
    """TVM's test_te_build_lower.py::test_dependent_output_shape, checked by running it: the output
    shape depends on a variable only the scalar argument binds."""
    n, m, x = te.size_var("n"), te.size_var("m"), te.size_var("x")
    A = te.placeholder((n, m), name="A")
    B = te.compute((m, n // x), lambda i, j: A[i, j], name="B")
    s = te.create_schedule(B.op)
    mod = tvm.build(s, [A, B, x])
    assert mod is not None
    for nv, mv, xv in [(12, 5, 3), (10, 4, 5), (7, 7, 2)]:
        a = RNG.standard_normal((nv, mv)).astype("float32")
        b = np.full((mv, nv // xv), np.nan, "float32")
        mod(a, b, xv)
        ref = a.astype("float64")[:mv, :nv // xv]
        np.testing.assert_allclose(b, ref, rtol=0, atol=0)


@pytest.mark.parametrize("target", TARGETS)
def test_strided_pick(target):
    A, B, x = _strided_pick()
    s = te.create_schedule(B.op)
    if _gpu(target):
        _bind_1d(s, B, 16)
    f = tvm.build(s, [A, B, x], target)
    for xv, nv in [(1, 8), (3, 12), (4, 18)]:
        a = RNG.standard_normal((5, nv)).astype("float32")
        b = _empty((5, nv // xv), "float32", target)
        f(_nd(a, target), b, xv)
        a64 = a.astype("float64")
        ref = a64[:, 0:(nv // xv) * xv:xv] + a64[:, xv - 1:(nv // xv) * xv:xv]
        np.testing.assert_allclose(b.numpy(), ref, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_scalars(target, dtype):
    """y = alpha * x + beta with alpha float32 and beta float64 (cast into the element type)."""
    n = te.size_var("n")
    alpha, beta = te.var("alpha", "float32"), te.var("beta", "float64")
    X = te.placeholder((n,), dtype, name="X")
    Y = te.compute((n,), lambda i: X[i] * alpha.astype(dtype) + beta.astype(dtype), name="Y")
    s = te.create_schedule(Y.op)
    if _gpu(target):
        _bind_1d(s, Y)
    f = tvm.build(s, [X, alpha, Y, beta], target)
    src = f.imported_modules[0].get_source() if _gpu(target) else f.get_source()
    assert "float alpha" in src and "double beta" in src
    x = RNG.standard_normal(100).astype(dtype)
    y = _empty((100,), dtype, target)
    for av, bv in [(2.5, -1.25), (np.float32(0.5), np.float64(3.0)), (3, np.int64(-2))]:
        f(_nd(x, target), av, y, bv)
        ref = x.astype("float64") * float(np.float32(av)) + float(bv)
        tol = 1e-6 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(y.numpy(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("target", TARGETS)
def test_int64_scalar_offset(target):
    """An int64 scalar beyond the 32-bit range, added to int64 elements."""
    n = te.size_var("n")
    off = te.var("off", "int64")
    A = te.placeholder((n,), "int64", name="A")
    B = te.compute((n,), lambda i: A[i] + off, name="B")
    s = te.create_schedule(B.op)
    if _gpu(target):
        _bind_1d(s, B)
    f = tvm.build(s, [A, B, off], target)
    a = RNG.integers(-1000, 1000, 70).astype("int64")
    b = _empty((70,), "int64", target)
    big = 3 * 2**33 + 7
    f(_nd(a, target), b, big)
    np.testing.assert_array_equal(b.numpy(), a + big)
    f(_nd(a, target), b, np.int64(-5))
    np.testing.assert_array_equal(b.numpy(), a - 5)


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_as_loop_extent_and_shape_var_passed_explicitly(target):
    """The row sum over the first k columns (k a scalar only); n is a shape variable passed as well,
    so it must agree with A's shape."""
    n, m, k = te.size_var("n"), te.size_var("m"), te.var("k")
    A = te.placeholder((n, m), name="A")
    r = te.reduce_axis((0, k), name="r")
    B = te.compute((n,), lambda i: te.sum(A[i, r], axis=r), name="B")
    s = te.create_schedule(B.op)
    if _gpu(target):
        _bind_1d(s, B, 8)
    f = tvm.build(s, [n, A, k, B], target)
    a = RNG.standard_normal((20, 9)).astype("float32")
    b = _empty((20,), "float32", target)
    for kv in (0, 1, 5, 9):
        f(20, _nd(a, target), kv, b)
        np.testing.assert_allclose(b.numpy(), a.astype("float64")[:, :kv].sum(axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_reaches_only_the_kernels_using_it(target):
    """Two root stages; scale is used by the first only, shift by the second only. The GPU kernels
    take just the scalars they read; the C function takes both."""
    n = te.size_var("n")
    scale, shift = te.var("scale", "float32"), te.var("shift", "int32")
    A = te.placeholder((n,), name="A")
    T = te.compute((n,), lambda i: A[i] * scale, name="T")
    B = te.compute((n,), lambda i: T[i] + shift.astype("float32"), name="B")
    s = te.create_schedule(B.op)
    if _gpu(target):
        _bind_1d(s, T)
        _bind_1d(s, B)
    f = tvm.build(s, [A, B, scale, shift], target)
    kernels = f.spec.kernels
    params = [set(kn.params) for kn in kernels]
    if _gpu(target):
        assert len(kernels) == 2
        assert "scale" in params[0] and "shift" not in params[0]
        assert "shift" in params[1] and "scale" not in params[1]
    else:
        assert {"scale", "shift"} <= params[0]
    a = RNG.standard_normal(50).astype("float32")
    b = _empty((50,), "float32", target)
    f(_nd(a, target), b, 1.5, -3)
    np.testing.assert_allclose(b.numpy(), a.astype("float64") * 1.5 - 3, rtol=1e-6, atol=1e-6)


def test_scalar_to_packed_call():
    """A scalar argument handed on to a packed function of an extern stage."""
    n = te.size_var("n")
    x = te.var("x", "float32")
    A = te.placeholder((n,), name="A")
    B = te.extern((n,), [A], lambda ins, outs: tvm.tir.call_packed("test.scalar_args.axpy", ins[0], outs[0],
                                                                   x), name="B")
    s = te.create_schedule(B.op)

    def axpy(a, b, xv):
        b.copyfrom(a.numpy() * xv + 1)

    tvm.register_func("test.scalar_args.axpy", axpy, override=True)
    try:
        f = tvm.build(s, [A, B, x], "c")
        a = RNG.standard_normal(16).astype("float32")
        b = np.zeros(16, "float32")
        f(a, b, 0.25)
        np.testing.assert_allclose(b, a.astype("float64") * 0.25 + 1, rtol=1e-6)
    finally:
        tvm.runtime.remove_global_func("test.scalar_args.axpy")


def test_extern_matmul_plus_scalar_bias():
    """The extern_op tutorial's pattern: an extern stage (a registered matmul standing in for the
    BLAS call) into a temporary, then a bias added from a float32 scalar argument; target llvm."""
    n, k, m = 33, 17, 9
    bias = te.var("bias", dtype="float32")
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    C = te.extern((n, m), [A, B], lambda ins, outs: tvm.tir.call_packed(
        "test.scalar_args.matmul", ins[0], ins[1], outs[0]), name="C")
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    s = te.create_schedule(D.op)

    def matmul(a, b, c):
        c.copyfrom((a.numpy().astype("float64") @ b.numpy().astype("float64")).astype("float32"))

    tvm.register_func("test.scalar_args.matmul", matmul, override=True)
    try:
        f = tvm.build(s, [A, B, D, bias], "llvm")
        a = RNG.uniform(size=(n, k)).astype("float32")
        b = RNG.uniform(size=(k, m)).astype("float32")
        d = tvm.nd.array(np.zeros((n, m), "float32"), tvm.cpu(0))
        f(tvm.nd.array(a), tvm.nd.array(b), d, 10.0)
        ref = a.astype("float64") @ b.astype("float64") + 10.0
        np.testing.assert_allclose(d.numpy(), ref, rtol=1e-5)
    finally:
        tvm.runtime.remove_global_func("test.scalar_args.matmul")


def test_tensorir_scalar_parameters():
    """A TVMScript function's scalar parameters (a size and a float) are arguments of the built
    function at their positions, as the TE path's are."""
    from kernels.script import tir as T

    @T.prim_func
    def shift(a: T.handle, n: T.int32, b: T.handle, c: T.float32):
        T.func_attr({"global_symbol": "shift", "tir.noalias": True})
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in T.serial(n):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] * c - T.cast(vi, "float32")

    f = tvm.build(shift, target="c")
    assert [(sc.name, sc.index) for sc in f.spec.scalars] == [("n", 1), ("c", 3)]
    a = RNG.standard_normal(11).astype("float32")
    b = np.zeros(11, "float32")
    f(a, 11, b, -0.75)
    np.testing.assert_allclose(b, a.astype("float64") * -0.75 - np.arange(11), rtol=1e-6, atol=1e-6)


# -- time_evaluator, export_library / load_module -----------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_time_evaluator_with_scalar(target):
    A, B, x = _strided_pick()
    s = te.create_schedule(B.op)
    if _gpu(target):
        _bind_1d(s, B)
    f = tvm.build(s, [A, B, x], target)
    a = _nd(RNG.standard_normal((4, 12)).astype("float32"), target)
    b = _empty((4, 4), "float32", target)
    res = f.time_evaluator(f.entry_name, _dev(target), number=3, repeat=2)(a, b, 3)
    assert len(res.results) == 2 and all(t > 0 for t in res.results)
    a64 = a.numpy().astype("float64")
    np.testing.assert_allclose(b.numpy(), a64[:, 0:12:3] + a64[:, 2:12:3], rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_export_load_with_scalar(target, suffix, tmp_path):
    A, B, x = _strided_pick()
    s = te.create_schedule(B.op)
    if _gpu(target):
        _bind_1d(s, B)
    f = tvm.build(s, [x, A, B], target)
    path = tmp_path / f"lib{suffix}"
    f.export_library(str(path))
    g = tvm.runtime.load_module(str(path))
    assert g.spec.scalars == f.spec.scalars
    a = RNG.standard_normal((3, 10)).astype("float32")
    b = _empty((3, 5), "float32", target)
    g(2, _nd(a, target), b)
    a64 = a.astype("float64")
    np.testing.assert_allclose(b.numpy(), a64[:, 0:10:2] + a64[:, 1:10:2], rtol=1e-6)


# -- CUDA: source and nvcc build here; running needs a GPU -----------------------------------------


def _cuda_saxpy():
    n = te.size_var("n")
    alpha, lim = te.var("alpha", "float32"), te.var("lim", "int64")
    X = te.placeholder((n,), name="X")
    Y = te.placeholder((n,), name="Y")
    Z = te.compute((n,), lambda i: te.if_then_else(i.astype("int64") < lim, alpha * X[i] + Y[i], Y[i]),
                   name="Z")
    s = te.create_schedule(Z.op)
    _bind_1d(s, Z, 64)
    return s, [X, Y, alpha, Z, lim]


@pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found")
def test_cuda_source_takes_scalars_and_compiles():
    s, args = _cuda_saxpy()
    mod = tvm.build(s, args, "cuda -arch=sm_75")
    dev = mod.imported_modules[0]
    src = dev.get_source()
    assert "float alpha" in src and "int64_t lim" in src
    assert dev.binary and dev.binary[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_cuda_runs_with_scalars():
    s, args = _cuda_saxpy()
    f = tvm.build(s, args, "cuda")
    dev = tvm.cuda(0)
    x = RNG.standard_normal(1000).astype("float32")
    y = RNG.standard_normal(1000).astype("float32")
    z = tvm.nd.empty((1000,), "float32", dev)
    f(tvm.nd.array(x, dev), tvm.nd.array(y, dev), np.float32(2.0), z, 777)
    ref = np.where(np.arange(1000) < 777, 2.0 * x.astype("float64") + y, y.astype("float64"))
    np.testing.assert_allclose(z.numpy(), ref, rtol=1e-6)
    timer = f.time_evaluator(f.entry_name, dev, number=5)
    res = timer(tvm.nd.array(x, dev), tvm.nd.array(y, dev), 0.5, z, 10)
    assert res.mean > 0
    ref = np.where(np.arange(1000) < 10, 0.5 * x.astype("float64") + y, y.astype("float64"))
    np.testing.assert_allclose(z.numpy(), ref, rtol=1e-6)


@pytest.mark.gpu
def test_cuda_dependent_output_shape():
    A, B, x = _strided_pick()
    s = te.create_schedule(B.op)
    _bind_1d(s, B)
    f = tvm.build(s, [A, B, x], "cuda")
    dev = tvm.cuda(0)
    a = RNG.standard_normal((6, 21)).astype("float32")
    b = tvm.nd.empty((6, 7), "float32", dev)
    f(tvm.nd.array(a, dev), b, 3)
    a64 = a.astype("float64")
    np.testing.assert_allclose(b.numpy(), a64[:, 0:21:3] + a64[:, 2:21:3], rtol=1e-6)
