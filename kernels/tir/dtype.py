"""Data types of the IR, spelled as TVM spells them ("float32", "int8", "bool", "int4")."""

from __future__ import annotations

import functools
import re

from ..errors import TVMError

_DTYPE_RE = re.compile(r"^(float|int|uint|bool|handle)(\d*)$")

#: storage-only types: buffers hold them packed into 32-bit words (see docs/ARCHITECTURE.md)
STORAGE_ONLY = {"int4", "int1", "uint4", "uint1"}

_VALID = {
    "float16", "float32", "float64",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "bool", "handle",
} | STORAGE_ONLY


def normalize(dtype) -> str:
    """Return the canonical name of ``dtype`` (a string, numpy dtype or type), or raise TVMError."""
    if dtype is None:
        raise TVMError("dtype must not be None")
    if not isinstance(dtype, str):
        try:
            import numpy as np

            dtype = np.dtype(dtype).name
        except TypeError as exc:
            raise TVMError(f"unknown dtype {dtype!r}") from exc
    name = dtype.strip()
    if name == "float":
        name = "float32"
    elif name == "int":
        name = "int32"
    elif name == "double":
        name = "float64"
    elif name == "half":
        name = "float16"
    if name not in _VALID:
        raise TVMError(
            f"unknown dtype {dtype!r}; expected one of {', '.join(sorted(_VALID - {'handle'}))}"
        )
    return name


@functools.lru_cache(maxsize=1024)  # a pure function of a few names, called very often
def bits(dtype: str) -> int:
    """Bits of one element (of one lane, for a vector type)."""
    dtype = element_of(dtype)
    if dtype == "bool":
        return 1
    m = _DTYPE_RE.match(dtype)
    return int(m.group(2)) if m and m.group(2) else 64


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_int(dtype: str) -> bool:
    return dtype.startswith("int")


def is_uint(dtype: str) -> bool:
    return dtype.startswith("uint")


def is_integer(dtype: str) -> bool:
    """Signed or unsigned integer (bool excluded)."""
    return is_int(dtype) or is_uint(dtype)


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def result_type(a: str, b: str) -> str:
    """The type of a binary arithmetic on ``a`` and ``b`` (the wider one; float wins over int)."""
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if a == "bool":
        return b
    if b == "bool":
        return a
    return a if bits(a) >= bits(b) else b


# -- vector types: "float32x4" is four lanes of float32 (what vectorized expressions carry) -----------

_LANES_RE = re.compile(r"^([a-z]+\d*)x(\d+)$")


@functools.lru_cache(maxsize=1024)  # a pure function of a few names, called very often
def lanes(dtype: str) -> int:
    """Number of lanes: 1 for a scalar type, 4 for ``"float32x4"``."""
    if "x" not in dtype:
        return 1
    m = _LANES_RE.match(dtype)
    return int(m.group(2)) if m else 1


@functools.lru_cache(maxsize=1024)  # a pure function of a few names, called very often
def element_of(dtype: str) -> str:
    """The scalar type of one lane (``"float32x4"`` -> ``"float32"``; scalars map to themselves)."""
    if "x" not in dtype:
        return dtype
    m = _LANES_RE.match(dtype)
    return m.group(1) if m else dtype


def with_lanes(dtype: str, n: int) -> str:
    """The type of ``n`` lanes of ``dtype``'s element type (``n == 1`` gives the scalar type)."""
    base = element_of(dtype)
    if n < 1:
        raise TVMError(f"a vector type needs at least one lane, got {n}")
    return base if n == 1 else f"{base}x{n}"


def normalize_vector(dtype) -> str:
    """:func:`normalize` that also accepts a vector type (``"float32x4"``, ``"int8x2"``)."""
    if isinstance(dtype, str):
        m = _LANES_RE.match(dtype.strip())
        if m and int(m.group(2)) >= 1 and m.group(1) in _VALID - {"handle"} - STORAGE_ONLY:
            return with_lanes(m.group(1), int(m.group(2)))
    return normalize(dtype)
