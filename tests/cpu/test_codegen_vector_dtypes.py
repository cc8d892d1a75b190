"""Tensors of vector types (``dtype="float32x4"``): NDArrays, lowering and code on C, OpenCL and CUDA."""

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
from kernels import te
from kernels.errors import BuildError

TARGETS = ["c", "opencl"]


def _add_one(dtype: str, lanes: int, target: str, n: int = 64):
    A = te.placeholder((n,), name="A", dtype=f"{dtype}x{lanes}")
    B = te.compute((n,), lambda i: A[i] + tvm.tir.const(1, A.dtype), name="B")
    s = te.create_schedule(B.op)
    if target != "c":
        xo, xi = s[B].split(B.op.axis[0], factor=8)
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.x"))
    return A, B, tvm.build(s, [A, B], target)


def test_ndarray_of_a_vector_type_holds_its_lanes():
    host = np.arange(24, dtype="int8").reshape(8, 3)
    a = tvm.nd.empty((8,), "int8x3", tvm.cpu(0)).copyfrom(host)
    assert a.shape == (8,) and a.dtype == "int8x3"
    assert a.numpy().shape == (8, 3) and a.numpy().dtype == np.int8
    np.testing.assert_array_equal(a.numpy(), host)
    with pytest.raises(tvm.TVMError, match=r"source shape \(8,\) does not match the array's shape \(8, 3\)"):
        a.copyfrom(np.zeros(8, "int8"))


def test_const_of_a_vector_type_is_a_broadcast():
    c = tvm.tir.const(1, "float32x4")
    assert isinstance(c, tvm.tir.Broadcast) and c.lanes == 4 and c.dtype == "float32x4"
    assert c.value.dtype == "float32" and c.value.value == 1.0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype, lanes", [("float32", 4), ("float32", 3), ("int8", 4), ("uint8", 2),
                                          ("int8", 16), ("float64", 2)])
def test_vector_elements_add(target, dtype, lanes):
    A, B, f = _add_one(dtype, lanes, target)
    dev = tvm.device(target, 0)
    rng = np.random.default_rng(7)
    if dtype.startswith("float"):
        host = rng.uniform(-4, 4, size=(64, lanes)).astype(dtype)
    else:
        host = rng.integers(0, 100, size=(64, lanes)).astype(dtype)
    a = tvm.nd.empty((64,), A.dtype, dev).copyfrom(host)
    b = tvm.nd.empty((64,), B.dtype, dev)
    f(a, b)
    want = host.astype("float64") + 1  # each lane of each element plus one
    np.testing.assert_allclose(b.numpy().astype("float64"), want, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_vector_elements_copy_with_a_wrong_type_is_refused(target):
    A, B, f = _add_one("float32", 4, target)
    dev = tvm.device(target, 0)
    a = tvm.nd.empty((64,), "float32", dev)
    b = tvm.nd.empty((64,), "float32x4", dev)
    with pytest.raises(tvm.TVMError, match=r"argument A \(index 0\)"):
        f(a, b)


def _vectorized_double():
    A = te.placeholder((64,), name="A", dtype="float32x4")
    B = te.compute((64,), lambda i: A[i] * tvm.tir.const(2, A.dtype), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(xi)
    return s, xo, A, B


def test_vectorizing_the_elements_of_a_vector_buffer():
    # on C the vectorized loop stays a loop (correct); where it would become vector accesses of
    # vector elements, the build is refused
    s, _, A, B = _vectorized_double()
    f = tvm.build(s, [A, B], "c")
    host = np.random.default_rng(5).uniform(size=(64, 4)).astype("float32")
    a = tvm.nd.empty((64,), "float32x4", tvm.cpu(0)).copyfrom(host)
    b = tvm.nd.empty((64,), "float32x4", tvm.cpu(0))
    f(a, b)
    np.testing.assert_allclose(b.numpy(), host.astype("float64") * 2)
    s, xo, A, B = _vectorized_double()
    s[B].bind(xo, te.thread_axis("threadIdx.x"))
    with pytest.raises(BuildError, match=r"a load of buffer A \(float32x4\) at the vector index "
                                         r"ramp\(\(threadIdx.x \* 4\), 1, 4\).*do not vectorize"):
        tvm.build(s, [A, B], "opencl")


def test_cuda_source_of_vector_elements():
    # nvcc compiles it (no GPU needed): float16x8 moves as four half2, int8x4 values go to __dp4a as char4
    _, _, f = _add_one("float16", 8, "cuda")
    src = f.imported_modules[0].get_source()
    assert src.count("*(half2*)(A + ") == 4 and "make_half2(" in src
    n = 64
    A = te.placeholder((n,), name="A", dtype="int8x4")
    B = te.placeholder((n,), name="B", dtype="int8x4")
    C = te.placeholder((n,), name="C", dtype="int32")
    D = te.compute((n,), lambda i: tvm.tir.call_pure_extern("int32", "__dp4a", A[i], B[i], C[i]), name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(D.op.axis[0], factor=8)
    s[D].bind(xo, te.thread_axis("blockIdx.x"))
    s[D].bind(xi, te.thread_axis("threadIdx.x"))
    src = tvm.build(s, [A, B, C, D], "cuda").imported_modules[0].get_source()
    assert "__dp4a(make_char4(A[" in src and ", make_char4(B[" in src


@pytest.mark.gpu
def test_vector_elements_on_cuda():
    for dtype, lanes in (("float32", 4), ("float16", 8), ("int8", 3)):
        A, B, f = _add_one(dtype, lanes, "cuda")
        host = np.random.default_rng(3).integers(0, 50, size=(64, lanes)).astype(dtype)
        a = tvm.nd.empty((64,), A.dtype, tvm.cuda(0)).copyfrom(host)
        b = tvm.nd.empty((64,), B.dtype, tvm.cuda(0))
        f(a, b)
        np.testing.assert_allclose(b.numpy().astype("float64"), host.astype("float64") + 1)


@pytest.mark.parametrize("dtype", ["complex64", "int4x8", "handlex2", "float33x4"])
def test_vector_type_of_an_unknown_element_is_refused(dtype):
    with pytest.raises(tvm.TVMError, match=rf"unknown dtype '{dtype}'"):
        te.placeholder((4,), dtype=dtype, name="P")


def test_tensorir_buffers_of_a_vector_type():
    from kernels.script import from_source

    f = from_source('''
@T.prim_func
def f(A: T.Buffer[(16,), "float32x4"], B: T.Buffer[(16,), "float32x4"]) -> None:
    for i in T.serial(16):
        with T.block("B"):
            vi = T.axis.S(16, i)
            B[vi] = A[vi] * T.broadcast(T.float32(2), 4) + T.Cast("float32x4", T.ramp(0, 1, 4))
''')
    assert from_source(f.script()).script() == f.script()
    m = tvm.build(f, target="c")
    host = np.random.default_rng(9).uniform(size=(16, 4)).astype("float32")
    a = tvm.nd.empty((16,), "float32x4").copyfrom(host)
    b = tvm.nd.empty((16,), "float32x4")
    m(a, b)
    np.testing.assert_allclose(b.numpy(), host.astype("float64") * 2 + np.arange(4), rtol=1e-6)
