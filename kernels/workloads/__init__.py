"""The tutorial workloads: compute definitions, numpy references, op and byte counts, and named
schedule variants with knobs. Suites refer to them by name (``row_sum``, variant ``bind`` ...).

A variant's ``build(params, dtype, **knobs)`` returns ``(schedule, args)``; ``make_args`` gives the
arguments as numpy arrays (outputs poisoned with NaN or a sentinel); ``reference`` computes the
outputs in float64 from the inputs (:meth:`Workload.reference_of` is what callers use).

Shape parameters are sizes (positive integers), or names from a fixed set where the workload lists
them in ``choices`` (``matmul_tensorcore``'s ``layout``). A case's dtype is the workload's logical
element type; the numpy arrays of sub-byte types are packed words (``int4``: 8 elements a 32-bit
word, ``int1``: 32, :mod:`kernels.contrib.packing`): :func:`array_dtype`, :func:`element_bits`
and :func:`storage_bytes` say what an array of a logical dtype is made of, for every place that
needs it (poisoning, byte counts, checks).

Random inputs are drawn with :func:`uniform`, directly in the argument's dtype (float32 values
come from float32 draws, not from float64 draws rounded): :data:`INPUTS_VERSION` names that way of
drawing, and changes whenever the values a seed gives change, so that results measured on other
inputs are recognisable (the harness stores it with each result).

``bytes`` counts what one launch moves; ``write_bytes``, when given, the part of it that is written
(the rest is read): :meth:`Workload.traffic` splits the two, which picks the bandwidth peak a kernel
is compared with (a read-only kernel with the read peak, a copy-like one with the copy peak).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..errors import TVMError


class WorkloadError(TVMError, KeyError):
    """An unknown workload or variant, or knobs a variant does not take."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[..., Tuple[Any, list]]
    targets: Tuple[str, ...]
    knobs: Tuple[Tuple[str, Any], ...] = ()  # defaults
    description: str = ""

    def knob_defaults(self) -> Dict[str, Any]:
        return dict(self.knobs)


@dataclass(frozen=True)
class Workload:
    name: str
    params: Tuple[str, ...]
    dtypes: Tuple[str, ...]
    variants: Dict[str, Variant]
    make_args: Callable[[Dict[str, int], str, np.random.Generator], List[np.ndarray]]
    reference: Callable[[List[np.ndarray]], List[np.ndarray]]
    outputs: Tuple[int, ...]
    flops: Callable[[Dict[str, int]], float]
    bytes: Callable[[Dict[str, int], str], float]
    peers: Tuple[str, ...] = ()  # names in harness.execute.peers, e.g. "torch.sum(dim=1)"
    description: str = ""
    # dtype -> (rtol, atol), or a function of the parameters giving them (a sum of k float32
    # products is checked within a tolerance that grows with k)
    tolerance: Dict[str, Any] = field(default_factory=dict)
    # parameters taking one of a fixed set of names instead of a size, e.g. {"layout": ("NN", "TN")}
    choices: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    # check(params, dtype) -> None, or why that combination makes no case (suites reject it early)
    check: Optional[Callable[[Dict[str, Any], str], Optional[str]]] = None
    # True: ``reference(args, params, dtype)`` (outputs that depend on more than the arrays' shapes)
    reference_takes_case: bool = False
    # the arguments holding elements of the case's dtype as packed words when it is a sub-byte type
    packed_args: Tuple[int, ...] = ()

    def logical_shape(self, index: int, array: np.ndarray, dtype: str) -> Optional[Tuple[int, ...]]:
        """The logical shape of argument ``index`` when ``array`` holds packed ``dtype`` words (its
        last axis times the elements a word holds), else None (the array is what it holds)."""
        if dtype not in PACKED_DTYPES or index not in self.packed_args:
            return None
        per_word = 32 // PACKED_DTYPES[dtype][0]
        return tuple(array.shape[:-1]) + (int(array.shape[-1]) * per_word,)

    def reference_of(self, args: List[np.ndarray], params: Dict[str, Any], dtype: str) -> List[np.ndarray]:
        """The reference outputs of ``args`` (from :attr:`make_args` at ``params`` and ``dtype``)."""
        if self.reference_takes_case:
            return self.reference(args, params, dtype)  # type: ignore[call-arg]
        return self.reference(args)

    def invalid(self, params: Dict[str, Any], dtype: str) -> Optional[str]:
        """Why ``params`` and ``dtype`` make no case of this workload, or None: a parameter missing,
        a choice not offered, or what the workload's own :attr:`check` says."""
        for k in self.params:
            if k not in params:
                return f"parameter {k!r} is missing"
            v = params[k]
            if k in self.choices:
                if v not in self.choices[k]:
                    return f"parameter {k} must be one of {', '.join(self.choices[k])}, got {v!r}"
            elif isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                return f"parameter {k} must be a positive integer, got {v!r}"
        if dtype not in self.dtypes:
            return f"dtype {dtype} is not one of {', '.join(self.dtypes)}"
        return self.check(params, dtype) if self.check is not None else None
    # bytes written by one launch (the rest of ``bytes`` is read); None: the split is not known
    write_bytes: Optional[Callable[[Dict[str, int], str], float]] = None

    def traffic(self, params: Dict[str, int], dtype: str) -> Tuple[float, Optional[float]]:
        """``(read bytes, written bytes)`` of one launch; ``(bytes, None)`` when the workload does
        not split its traffic."""
        total = float(self.bytes(params, dtype))
        if self.write_bytes is None:
            return total, None
        written = float(self.write_bytes(params, dtype))
        return total - written, written

    def tolerance_for(self, dtype: str, params: Dict[str, int]) -> Tuple[float, float]:
        """(rtol, atol) for ``dtype`` at ``params``: the workload's own, else the dtype's default."""
        tol = self.tolerance.get(dtype)
        if tol is None:
            from .tutorial import default_tolerance

            d = default_tolerance(dtype)
            return d["rtol"], d["atol"]
        rtol, atol = tol(params) if callable(tol) else tol
        return float(rtol), float(atol)

    def variant(self, name: str) -> Variant:
        v = self.variants.get(name)
        if v is None:
            raise WorkloadError(f"workload {self.name} has no variant {name!r}; variants: "
                                f"{', '.join(self.variants)}")
        return v

    def build(self, variant: str, params: Dict[str, int], dtype: str, knobs: Optional[Dict[str, Any]] = None):
        v = self.variant(variant)
        k = v.knob_defaults()
        for key in (knobs or {}):
            if key not in k:
                raise WorkloadError(f"variant {self.name}/{variant} has no knob {key!r}; knobs: "
                                    f"{', '.join(k) or 'none'}")
        k.update(knobs or {})
        if dtype not in self.dtypes:
            raise WorkloadError(f"workload {self.name} does not support dtype {dtype}; dtypes: "
                                f"{', '.join(self.dtypes)}")
        why = self.check(params, dtype) if self.check is not None else None
        if why is not None:
            raise WorkloadError(f"workload {self.name}: {why}")
        return v.build(params, dtype, **k)


REGISTRY: Dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    if w.name in REGISTRY:
        raise WorkloadError(f"workload {w.name} is already registered")
    REGISTRY[w.name] = w
    return w


def get(name: str) -> Workload:
    w = REGISTRY.get(name)
    if w is None:
        raise WorkloadError(f"unknown workload {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return w


def names() -> List[str]:
    return sorted(REGISTRY)


#: logical sub-byte dtypes -> (bits per element, numpy dtype of the packed words)
PACKED_DTYPES = {"int4": (4, "int32"), "uint4": (4, "uint32"), "int1": (1, "int32")}


def array_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of the arrays holding ``dtype`` elements: itself, or the 32-bit words the
    sub-byte types are packed into (int4, int1 -> int32; uint4 -> uint32)."""
    packed = PACKED_DTYPES.get(dtype)
    return np.dtype(packed[1] if packed else dtype)


def element_bits(dtype: str) -> int:
    """Bits one element of ``dtype`` occupies (4 for int4, 1 for int1, 8 * itemsize otherwise)."""
    packed = PACKED_DTYPES.get(dtype)
    return packed[0] if packed else 8 * np.dtype(dtype).itemsize


def storage_bytes(dtype: str, count: int) -> float:
    """Bytes ``count`` elements of ``dtype`` occupy (``count / 2`` for int4)."""
    return float(count) * element_bits(dtype) / 8.0


def _poison(shape, dtype: str) -> np.ndarray:
    dt = array_dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dtype=dt)
    return np.full(shape, np.iinfo(dt).min, dtype=dt)


def _isize(dtype: str) -> float:
    """Bytes per element (a fraction for the packed sub-byte types)."""
    return storage_bytes(dtype, 1)


#: how :func:`uniform` draws; changes whenever the inputs a seed gives change (2: float32 draws)
INPUTS_VERSION = 2


def uniform(rng: np.random.Generator, shape, dtype: str, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Uniform random values in ``[low, high)`` of ``dtype``: float32 and float64 drawn in that type
    (a float32 draw costs a fifth of a float64 draw and its conversion), float16 from float32 draws,
    other types from float64 draws converted."""
    dt = np.dtype(dtype)
    if dt in (np.float32, np.float64):
        out = rng.random(shape, dtype=dt)
        if (low, high) != (0.0, 1.0):
            out *= dt.type(high - low)
            out += dt.type(low)
        return out
    if dt == np.float16:
        return uniform(rng, shape, "float32", low, high).astype(dt)
    return rng.uniform(low, high, size=shape).astype(dt)


from . import memory, tensorcore, tutorial  # noqa: E402  (they register into REGISTRY, defined above)

__all__ = ["INPUTS_VERSION", "Variant", "Workload", "WorkloadError", "REGISTRY", "register", "get", "names",
           "uniform", "PACKED_DTYPES",
           "array_dtype", "element_bits", "storage_bytes"]
