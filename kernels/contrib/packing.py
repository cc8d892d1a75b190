"""Packing of sub-byte integers into 32-bit words, as the tensor-core tutorial packs its int4 and
int1 operands (and as ``int4`` / ``int1`` buffers take them, :mod:`kernels.runtime.ndarray`).

Along the last axis, consecutive groups of ``32 // bits`` elements fill one word, element 0 of a
group in the highest bits::

    bits = 4:  [1, 2, 3, 4, 5, 6, 7, 8]  ->  0x12345678
    bits = 1:  [1, 0, 1, 0, ..., 0]      ->  0xA0000000 (32 elements)

An ``(..., L)`` array becomes ``(..., L * bits // 32)`` words of dtype ``int32`` (the tutorial's
``np.zeros(..., dtype=np.int32)`` filled with ``|=``: a word whose top bit is set is negative).
int4 elements are two's complement in [-8, 7] (``-1`` is the nibble ``0xF``), or unsigned in
[0, 15] with ``signed=False``; int1 elements are 0 or 1. :func:`unpack` is the inverse.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels.errors import ArgumentError

__all__ = ["pack", "unpack", "per_word", "value_range"]

_BITS = (4, 1)


def _check_bits(bits: Any) -> int:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or int(bits) not in _BITS:
        raise ArgumentError(f"packing: bits must be 4 (int4) or 1 (int1), got {bits!r}")
    return int(bits)


def per_word(bits: int) -> int:
    """How many ``bits``-bit elements one 32-bit word holds (8 for int4, 32 for int1)."""
    return 32 // _check_bits(bits)


def value_range(bits: int, signed: bool = True) -> tuple:
    """The (lowest, highest) element value :func:`pack` accepts: int4 [-8, 7] (unsigned [0, 15]),
    int1 [0, 1] (``signed`` does not apply to one bit)."""
    bits = _check_bits(bits)
    if bits == 1:
        return 0, 1
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def pack(values: Any, bits: int, signed: bool = True) -> np.ndarray:
    """Pack ``bits``-bit integers into int32 words along the last axis.

    Parameters
    ----------
    values : array_like of int
        Shape ``(..., L)`` with ``L`` a multiple of ``32 // bits``; integer values (floats are
        refused: packing never rounds).
    bits : int
        4 (int4) or 1 (int1).
    signed : bool
        int4 only: values are two's complement in [-8, 7] (default) or unsigned in [0, 15].

    Returns
    -------
    numpy.ndarray
        ``int32`` words of shape ``(..., L * bits // 32)``; element ``k`` of a word's group sits at
        bit ``32 - bits * (k + 1)`` (element 0 in the highest bits).

    Raises
    ------
    ArgumentError
        For other ``bits``, a non-integer array, a 0-d array, a last axis that is not a multiple of
        the elements per word, or a value out of range (the message names the first one).

    Examples
    --------
    >>> hex(int(pack([1, 2, 3, 4, 5, 6, 7, 8], 4)[0]))
    '0x12345678'
    """
    bits = _check_bits(bits)
    arr = np.asarray(values)
    if arr.dtype.kind not in "iub":
        raise ArgumentError(f"pack: values must be integers, got an array of {arr.dtype}")
    if arr.ndim == 0:
        raise ArgumentError("pack: values must have at least one axis (elements are packed along the last)")
    n = per_word(bits)
    if arr.shape[-1] % n:
        raise ArgumentError(f"pack: the last axis ({arr.shape[-1]} elements, shape {arr.shape}) must be a "
                            f"multiple of {n}: one int32 word holds {n} {bits}-bit elements")
    lo, hi = value_range(bits, signed)
    wide = arr.astype(np.int64)
    bad = (wide < lo) | (wide > hi)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        kind = "int1" if bits == 1 else ("int4" if signed else "unsigned int4")
        raise ArgumentError(f"pack: {kind} values must lie in [{lo}, {hi}]; element {where} is "
                            f"{int(wide[where])} ({int(bad.sum())} out of range)")
    mask = (1 << bits) - 1
    groups = (wide & mask).astype(np.uint64).reshape(arr.shape[:-1] + (arr.shape[-1] // n, n))
    shifts = np.array([32 - bits * (k + 1) for k in range(n)], dtype=np.uint64)
    words = np.bitwise_or.reduce(groups << shifts, axis=-1)
    return words.astype(np.uint32).view(np.int32)


def unpack(words: Any, bits: int, signed: bool = True) -> np.ndarray:
    """The elements of int32 (or uint32) words packed by :func:`pack`.

    Parameters
    ----------
    words : array_like
        32-bit integer words, shape ``(..., W)``.
    bits : int
        4 or 1.
    signed : bool
        int4: read each nibble as two's complement in [-8, 7] (default) or unsigned in [0, 15].
        Ignored for int1 (elements are 0 or 1).

    Returns
    -------
    numpy.ndarray
        ``int32`` elements of shape ``(..., W * 32 // bits)``.

    Raises
    ------
    ArgumentError
        For other ``bits``, words that are not 32-bit integers or a 0-d array.
    """
    bits = _check_bits(bits)
    arr = np.asarray(words)
    if arr.dtype.kind not in "iu" or arr.dtype.itemsize != 4:
        raise ArgumentError(f"unpack: words must be 32-bit integers (int32 or uint32), got {arr.dtype}")
    if arr.ndim == 0:
        raise ArgumentError("unpack: words must have at least one axis")
    n = per_word(bits)
    u = arr.view(np.uint32).astype(np.int64)
    shifts = np.array([32 - bits * (k + 1) for k in range(n)], dtype=np.int64)
    elems = (u[..., None] >> shifts) & ((1 << bits) - 1)
    if bits > 1 and signed:
        elems = np.where(elems >= 1 << (bits - 1), elems - (1 << bits), elems)
    return elems.reshape(arr.shape[:-1] + (arr.shape[-1] * n,)).astype(np.int32)
