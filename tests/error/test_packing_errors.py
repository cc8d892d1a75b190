"""Packing refuses what it cannot pack exactly, naming the argument and the first bad element."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib.packing import pack, unpack
from kernels.errors import ArgumentError


@pytest.mark.parametrize("bits, n, per", [(4, 12, 8), (1, 40, 32)])
def test_last_axis_not_whole_words(bits, n, per):
    with pytest.raises(ArgumentError, match=rf"last axis \({n} elements.*multiple of {per}"):
        pack(np.zeros((2, n), dtype=np.int32), bits)


def test_int4_out_of_range_names_the_element():
    x = np.zeros((2, 8), dtype=np.int32)
    x[1, 3] = 8
    with pytest.raises(ArgumentError, match=r"int4 values must lie in \[-8, 7\]; element \(1, 3\) is 8"):
        pack(x, 4)
    with pytest.raises(ArgumentError,
                       match=r"unsigned int4 values must lie in \[0, 15\]; element \(0,\) is -1"):
        pack([-1] + [0] * 7, 4, signed=False)


def test_int1_takes_only_zero_and_one():
    with pytest.raises(ArgumentError, match=r"int1 values must lie in \[0, 1\]; element \(5,\) is -1"):
        pack([0] * 5 + [-1] + [0] * 26, 1)


def test_floats_are_refused_not_rounded():
    with pytest.raises(ArgumentError, match="values must be integers, got an array of float64"):
        pack(np.full(8, 1.5), 4)


@pytest.mark.parametrize("bits", [2, 8, 0, True, "4"])
def test_bits_other_than_4_or_1(bits):
    with pytest.raises(ArgumentError, match="bits must be 4 .int4. or 1 .int1."):
        pack(np.zeros(32, dtype=np.int32), bits)


def test_scalars_and_wrong_word_types():
    with pytest.raises(ArgumentError, match="at least one axis"):
        pack(np.int32(3), 4)
    with pytest.raises(ArgumentError, match="words must be 32-bit integers .int32 or uint32., got int64"):
        unpack(np.zeros(4, dtype=np.int64), 4)
