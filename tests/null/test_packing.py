"""kernels.contrib.packing: int4 and int1 values in int32 words, element 0 in the highest bits (the
tensor-core tutorial's packing), checked against words worked out by hand and against the tutorial's
own packing loops."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib import packing
from kernels.contrib.packing import pack, unpack


def _word(x: int) -> np.int32:
    """A 32-bit pattern as the int32 the words hold."""
    return np.array([x], dtype=np.uint32).view(np.int32)[0]


def test_int4_digits_read_as_hex():
    words = pack([1, 2, 3, 4, 5, 6, 7, 0], 4)
    assert words.dtype == np.int32 and words.shape == (1,)
    assert words[0] == 0x12345670


def test_int4_negative_values_are_twos_complement_nibbles():
    # -1 -> F, -8 -> 8, 7 -> 7, -2 -> E: 0xF87E0000 has its top bit set, so the int32 is negative
    words = pack([-1, -8, 7, -2, 0, 0, 0, 0], 4)
    assert words[0] == _word(0xF87E0000) and words[0] < 0


def test_int4_rows_pack_along_the_last_axis():
    values = np.array([[0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0],
                       [7, 6, 5, 4, 3, 2, 1, 0, -8, -7, -6, -5, -4, -3, -2, -1]])
    words = pack(values, 4)
    assert words.shape == (2, 2)
    assert words[0].tolist() == [0x00000001, 0x10000000]
    assert words[1, 0] == 0x76543210 and words[1, 1] == _word(0x89ABCDEF)


def test_unsigned_int4():
    assert pack([15, 0, 0, 0, 0, 0, 0, 9], 4, signed=False)[0] == _word(0xF0000009)
    assert unpack(np.array([_word(0xF0000009)]), 4, signed=False).tolist() == [15, 0, 0, 0, 0, 0, 0, 9]
    assert unpack(np.array([_word(0xF0000009)]), 4).tolist() == [-1, 0, 0, 0, 0, 0, 0, -7]


def test_int1_bits_from_the_top():
    bits = [1, 0, 1, 0] + [0] * 27 + [1]
    assert pack(bits, 1)[0] == _word(0xA0000001)
    assert pack([0] * 31 + [1], 1)[0] == 1
    assert pack([1] * 32, 1)[0] == -1


def test_the_tutorials_packing_loops_agree():
    """The tutorial's int4 loop: ``a[i, j] |= (x[i, j * 8 + k] & 0xF) << ((7 - k) * 4)`` over int32
    words; its int1 loop the same with 32 elements and shifts 31 - k."""
    rng = np.random.default_rng(7)
    for bits, lo, hi in ((4, -8, 8), (1, 0, 2)):
        per = 32 // bits
        x = rng.integers(lo, hi, size=(5, 4 * per)).astype(np.int32)
        expected = np.zeros((5, 4), dtype=np.int64)
        for i in range(5):
            for j in range(4):
                for k in range(per):
                    expected[i, j] |= (int(x[i, j * per + k]) & ((1 << bits) - 1)) << ((per - 1 - k) * bits)
        assert (pack(x, bits).view(np.uint32).astype(np.int64) == expected).all()


@pytest.mark.parametrize("bits, lo, hi", [(4, -8, 8), (1, 0, 2)])
def test_unpack_inverts_pack(bits, lo, hi):
    x = np.random.default_rng(3).integers(lo, hi, size=(3, 7, 64))
    words = pack(x, bits)
    assert words.shape == (3, 7, 64 * bits // 32)
    back = unpack(words, bits)
    assert back.dtype == np.int32 and (back == x).all()
    # uint32 words (how int1 arrays come back from the runtime) unpack the same
    assert (unpack(words.view(np.uint32), bits) == x).all()


def test_per_word_and_ranges():
    assert packing.per_word(4) == 8 and packing.per_word(1) == 32
    assert packing.value_range(4) == (-8, 7) and packing.value_range(4, signed=False) == (0, 15)
    assert packing.value_range(1) == (0, 1)


def test_exported_from_contrib():
    import kernels as tvm

    assert tvm.contrib.packing.pack is pack
