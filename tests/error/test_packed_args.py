"""int4 / int1 tensors passed as packed 32-bit words: a wrong packed shape, a wrong dtype or a
wrong number of dimensions is refused before anything runs, naming the argument, its position and
the packed shape it needs; programs storing single sub-byte elements are refused at build time,
naming the buffer."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kernels as tvm
from kernels import te
from kernels.errors import ArgumentError, BuildError


def _matmul_tn(dtype: str, n: int = 4, length: int = 64, m: int = 2):
    A = te.placeholder((n, length), name="A", dtype=dtype)
    B = te.placeholder((m, length), name="B", dtype=dtype)
    k = te.reduce_axis((0, length), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k].astype("int32") * B[j, k].astype("int32"), axis=k),
                   name="C")
    return tvm.build(te.create_schedule(C.op), [A, B, C], "c")


@pytest.fixture(scope="module")
def int4_c():
    return _matmul_tn("int4")


@pytest.fixture(scope="module")
def int1_c():
    return _matmul_tn("int1")


def _words(shape, dtype="int32"):
    return np.zeros(shape, dtype)


def test_unpacked_shape_names_the_packed_shape(int4_c):
    # one int32 per element: the array has the logical shape, not the 8-elements-a-word one
    with pytest.raises(ArgumentError, match=re.escape(
            "argument A (index 0): an int4 tensor of shape (4, 64) is passed as int32 words packing 8 "
            "elements each, so it needs shape (4, 8); got shape (4, 64)")):
        int4_c(_words((4, 64)), _words((2, 8)), np.zeros((4, 2), "int32"))


def test_int1_words_hold_32_elements(int1_c):
    with pytest.raises(ArgumentError, match=re.escape(
            "argument B (index 1): an int1 tensor of shape (2, 64) is passed as uint32 words packing 32 "
            "elements each, so it needs shape (2, 2); got shape (2, 8)")):
        int1_c(_words((4, 2), "uint32"), _words((2, 8), "uint32"), np.zeros((4, 2), "int32"))


@pytest.mark.parametrize("dtype", ["float32", "int8", "int64", "uint16"])
def test_words_of_another_type(int4_c, dtype):
    with pytest.raises(ArgumentError, match=re.escape(
            f"argument A (index 0): dtype is {dtype}, expected int4: an int4 NDArray, or its packed words "
            "(8 elements a 32-bit word, element 0 in the highest bits) as an int32 or uint32 array of "
            "shape (4, 8)")):
        int4_c(_words((4, 8), dtype), _words((2, 8)), np.zeros((4, 2), "int32"))


def test_words_with_another_number_of_dimensions(int4_c):
    with pytest.raises(ArgumentError, match=re.escape(
            "argument B (index 1): has 1 dimension(s) (shape (16,)), expected 2: the packed words of int4 "
            "shape (2, 64) have shape (2, 8)")):
        int4_c(_words((4, 8)), _words((16,)), np.zeros((4, 2), "int32"))


def test_last_dimension_that_cannot_be_packed():
    f = _matmul_tn("int4", length=12)
    with pytest.raises(ArgumentError, match=r"argument A \(index 0\): an int4 tensor of shape \(4, 12\) "
                                            r".*a last dimension of 12, not a multiple of 8, which cannot "
                                            r"be packed"):
        f(_words((4, 1)), _words((2, 1)), np.zeros((4, 2), "int32"))


def test_logical_ndarray_of_another_shape(int4_c):
    # an int4 NDArray made with its logical shape is checked against the tensor's shape as usual
    a = tvm.nd.empty((4, 32), "int4")
    with pytest.raises(ArgumentError, match=re.escape("argument A (index 0): shape[1] = 32, expected 64")):
        int4_c(a, tvm.nd.empty((2, 64), "int4"), np.zeros((4, 2), "int32"))


def test_storing_single_int4_elements_is_refused_naming_the_buffer():
    A = te.placeholder((4, 16), name="A", dtype="int4")
    B = te.compute((4, 16), lambda i, j: A[i, j], name="B")
    with pytest.raises(BuildError, match=r"buffer B \(int4\) is stored packed, 8 elements a 32-bit word: "
                                         r"storing single elements into it is not supported"):
        tvm.build(te.create_schedule(B.op), [A, B], "c")
