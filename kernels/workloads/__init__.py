"""The tutorial workloads: compute definitions, numpy references, op and byte counts, and named
schedule variants with knobs. Suites refer to them by name (``row_sum``, variant ``bind`` ...).

A variant's ``build(params, dtype, **knobs)`` returns ``(schedule, args)``; ``make_args`` gives the
arguments as numpy arrays (outputs poisoned with NaN or a sentinel); ``reference`` computes the
outputs in float64 from the inputs.
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


def _poison(shape, dtype: str) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype=dtype)
    return np.full(shape, np.iinfo(dtype).min, dtype=dtype)


def _isize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


from . import memory, tutorial  # noqa: E402  (they register into REGISTRY, defined above)

__all__ = ["Variant", "Workload", "WorkloadError", "REGISTRY", "register", "get", "names"]
