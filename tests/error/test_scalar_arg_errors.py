"""Bad scalar arguments: refused at lowering (dtype, duplicates, name clashes) and at call time
(missing, wrong type, out of range, disagreeing with a tensor's shape), naming the argument and its
position."""

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
from kernels import te
from kernels.errors import ArgumentError, BuildError, LoweringError


def _pick():
    m, n, x = te.size_var("m"), te.size_var("n"), te.size_var("x")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n // x), lambda i, j: A[i, j * x], name="B")
    return A, B, x, te.create_schedule(B.op)


@pytest.fixture(scope="module")
def pick_c():
    A, B, x, s = _pick()
    return tvm.build(s, [A, B, x], "c")


# -- lowering -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "float16", "handle"])
def test_scalar_dtype_refused(dtype):
    A, B, _x, s = _pick()
    flag = te.var("flag", dtype)
    with pytest.raises(LoweringError, match=rf"argument 3 \(flag\) is a scalar variable of dtype {dtype}; "
                                            r"scalar arguments may be int8, .*float64"):
        tvm.lower(s, [A, B, _x, flag])


def test_scalar_twice():
    A, B, x, s = _pick()
    with pytest.raises(LoweringError, match=r"argument 3 \(x\) appears twice in the argument list "
                                            r"\(argument 2\)"):
        tvm.lower(s, [A, B, x, x])


def test_two_scalars_share_a_name():
    A, B, x, s = _pick()
    with pytest.raises(LoweringError, match=r"argument 3 \(x\) has the name of another scalar argument"):
        tvm.lower(s, [A, B, x, te.var("x")])


def test_scalar_named_like_a_tensor():
    A, B, x, s = _pick()
    with pytest.raises(LoweringError, match=r"scalar argument A has the name of tensor argument A"):
        tvm.lower(s, [A, B, x, te.var("A")])


def test_scalar_shadowing_a_shape_variable():
    A, B, x, s = _pick()
    with pytest.raises(LoweringError, match=r"scalar argument m is not the shape variable m of tensor A"):
        tvm.lower(s, [A, B, x, te.var("m")])


def test_used_variable_missing_from_arguments():
    A, B, _x, s = _pick()
    # x is in B's shape only through n // x, so no tensor dimension binds it
    with pytest.raises(ArgumentError, match=r"shape variable\(s\) x not bound by the shape of any argument"):
        tvm.build(s, [A, B], "c")(np.zeros((2, 4), "float32"), np.zeros((2, 2), "float32"))
    n = te.size_var("n")
    k = te.var("k")
    C = te.placeholder((n,), name="C")
    D = te.compute((n,), lambda i: C[i] + k.astype("float32"), name="D")
    with pytest.raises(BuildError, match=r"variable k is used in .* nor a scalar argument; pass it in the "
                                         r"argument list"):
        tvm.build(te.create_schedule(D.op), [C, D], "c")


# -- calling ------------------------------------------------------------------------------------


def test_missing_scalar_argument(pick_c):
    a, b = np.zeros((2, 6), "float32"), np.zeros((2, 3), "float32")
    with pytest.raises(ArgumentError, match=r"takes 3 argument\(s\) \(A, B, x\), got 2; "
                                            r"missing x \(index 2\)"):
        pick_c(a, b)


@pytest.mark.parametrize("value, what", [
    ("2", r"got builtins\.str"),
    (None, r"got builtins\.NoneType"),
    (True, r"got builtins\.bool"),
    (2.0, r"expected an integer for dtype int32, got the float 2\.0"),
    (np.float32(2), r"expected an integer for dtype int32, got the float 2\.0"),
    (np.zeros(2, "int32"), r"got numpy\.ndarray"),
])
def test_wrong_scalar_type(pick_c, value, what):
    a, b = np.zeros((2, 6), "float32"), np.zeros((2, 3), "float32")
    with pytest.raises(ArgumentError, match=rf"scalar argument x \(index 2\): .*{what}"):
        pick_c(a, b, value)


def test_scalar_out_of_range(pick_c):
    a, b = np.zeros((2, 6), "float32"), np.zeros((2, 3), "float32")
    with pytest.raises(ArgumentError, match=r"scalar argument x \(index 2\): 4294967298 does not fit in "
                                            r"int32"):
        pick_c(a, b, 2**32 + 2)


def test_scalar_gives_the_wrong_output_shape(pick_c):
    a, b = np.zeros((2, 6), "float32"), np.zeros((2, 3), "float32")
    with pytest.raises(ArgumentError, match=r"argument B \(index 1\): shape\[1\] must be "
                                            r"floordiv\(n, x\) = 2, got 3"):
        pick_c(a, b, 3)
    with pytest.raises(ArgumentError, match=r"argument B \(index 1\): shape\[1\] = "
                                            r"floordiv\(n, x\) cannot be evaluated .*x = 0"):
        pick_c(a, b, 0)


def test_shape_variable_passed_and_disagreeing():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B, n], "c")
    a = np.ones(8, "float32")
    b = np.zeros(8, "float32")
    f(a, b, 8)
    np.testing.assert_array_equal(b, 2 * a)
    with pytest.raises(ArgumentError, match=r"argument A \(index 0\): shape\[0\] = 8 but n = 5 from scalar "
                                            r"argument n \(index 2\)"):
        f(a, b, 5)


@pytest.mark.opencl
def test_wrong_scalar_on_opencl():
    A, B, x, s = _pick()
    ax = s[B].fuse(*s[B].op.axis)
    bx, tx = s[B].split(ax, factor=8)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B, x], "opencl")
    dev = tvm.opencl(0)
    a = tvm.nd.array(np.zeros((2, 6), "float32"), dev)
    b = tvm.nd.empty((2, 3), "float32", dev)
    with pytest.raises(ArgumentError, match=r"scalar argument x \(index 2\): expected a number for "
                                            r"dtype int32"):
        f(a, b, "2")
    with pytest.raises(ArgumentError, match=r"scalar argument x \(index 2\): -2147483649 does not fit"):
        f(a, b, -2**31 - 1)
