"""The values of the workload registry: :class:`Workload` and :class:`Variant`, their checks,
:data:`REGISTRY` with :func:`register`, :func:`get` and :func:`names`, and the helpers a workload's
functions use (dtypes of arrays, poisoned outputs, random inputs). The package :mod:`kernels.workloads`
(whose docstring describes them) re-exports every name and registers the project's workloads, which
import these values from here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..errors import TVMError


class WorkloadError(TVMError, KeyError):
    """An unknown workload or variant, knobs a variant does not take, or a workload that
    :func:`register` refuses (the message names the workload and the field at fault)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


@dataclass(frozen=True)
class Variant:
    """One named way to build a workload's kernel (docs/WORKLOADS.md).

    Attributes
    ----------
    name : str
        A Python identifier, the key the variant is registered under in :attr:`Workload.variants`.
    build : callable
        ``build(params, dtype, **knobs) -> (schedule, args)``: a TE schedule and its argument tensors
        (in :attr:`Workload.make_args` order), or ``(IRModule, None)`` for TensorIR.
    targets : tuple of str
        Where it can be built: some of ``"c"``, ``"opencl"``, ``"cuda"``.
    knobs : tuple of (str, value) pairs
        The knobs ``build`` takes, with their defaults (bool, int, float or str); a suite sets other
        values, or lists them as a tuning space.
    description : str
        Free text.
    kind : str
        ``"schedule"`` (the above), ``"cuda_source"`` (hand-written CUDA: ``build`` answers
        ``(CudaKernel, None)``, made by :func:`cuda_source`) or ``"callable"`` (a Python function on
        device arrays: ``build`` answers ``(BoundCall, None)``, made by :func:`device_callable`).
    library : str
        A callable variant's array library (``"torch"``, ``"cupy"``); ``""`` otherwise.
    """

    name: str
    build: Callable[..., Tuple[Any, list]]
    targets: Tuple[str, ...]
    knobs: Tuple[Tuple[str, Any], ...] = ()  # defaults
    description: str = ""
    kind: str = "schedule"
    library: str = ""

    def knob_defaults(self) -> Dict[str, Any]:
        return dict(self.knobs)


@dataclass(frozen=True)
class Workload:
    """A computation with its inputs, float64 reference, op and byte counts and named variants
    (docs/WORKLOADS.md describes each field with a worked example).

    Attributes
    ----------
    name : str
        A Python identifier (suites and case keys use it).
    params : tuple of str
        The shape parameters (identifiers); a case gives each a positive integer, or one of
        :attr:`choices`.
    dtypes : tuple of str
        The element types it supports, the first being a suite's default.
    variants : dict of str to Variant
        The variants by name.
    make_args : callable
        ``make_args(params, dtype, rng) -> list of numpy arrays``: every kernel argument, inputs drawn
        from ``rng`` (:func:`uniform`), outputs :func:`poison`-ed.
    reference : callable
        ``reference(args) -> list of arrays``: the outputs computed in float64 from the inputs, one per
        index of :attr:`outputs` (``reference(args, params, dtype)`` with ``reference_takes_case``).
    outputs : tuple of int
        The indices of the arguments the kernel writes, in the order ``reference`` returns them.
    flops : callable
        ``flops(params) -> float``: arithmetic operations of one launch (for FLOP/s).
    bytes : callable
        ``bytes(params, dtype) -> float``: bytes one launch moves (for GB/s); ``write_bytes`` the part
        written.
    peers, description, tolerance, choices, check, reference_takes_case, packed_args, write_bytes,
    peak_dtype
        See the comments beside each field and docs/WORKLOADS.md.
    """

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
    # dtype -> the arithmetic whose matmul peak its cases are a share of, where it is not the dtype's
    # own: {"float32": "tf32"} for float32 operands on the TF32 tensor cores (harness.stats.peaks)
    peak_dtype: Dict[str, str] = field(default_factory=dict)

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

#: the targets a variant may name
TARGETS = ("c", "opencl", "cuda")
#: the types a knob's default (and a suite's knob values) may have
KNOB_TYPES = (bool, int, float, str)
#: what a variant may be: a kbench schedule, hand-written CUDA source, a Python callable on device arrays
VARIANT_KINDS = ("schedule", "cuda_source", "callable")

#: the device arrays a callable variant may take
ARRAY_KINDS = ("torch", "cupy")


def _callable_takes(fn: Callable, count: int) -> bool:
    """Whether ``fn`` can be called with ``count`` positional arguments (True when that cannot be
    told, e.g. for some builtins)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        sig.bind(*range(count))
    except TypeError:
        return False
    return True


def _check_identifier(what: str, name: Any) -> None:
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier():
        raise WorkloadError(f"{what} must be an identifier of ASCII letters, digits and _ (not starting "
                            f"with a digit): it is part of case keys and generated function names; got "
                            f"{name!r} (free text belongs in `description`)")


def check_variant(workload: str, key: str, v: Any) -> None:
    """Check the variant ``v`` registered as ``key`` of the workload named ``workload``.

    Raises
    ------
    WorkloadError
        Naming the workload, the variant and the field at fault (see :func:`register`).
    """
    where = f"workload {workload!r}: variants[{key!r}]"
    _check_identifier(f"{where}: the variant name", key)
    if not isinstance(v, Variant):
        raise WorkloadError(f"{where} must be a kernels.workloads.Variant, got {type(v).__name__}")
    if v.name != key:
        raise WorkloadError(f"{where}: Variant.name is {v.name!r}, not the key {key!r} it is registered "
                            "under")
    if not callable(v.build):
        raise WorkloadError(f"{where}: `build` must be callable (params, dtype, **knobs) -> (schedule, "
                            f"args), got {type(v.build).__name__}")
    if isinstance(v.targets, str) or not isinstance(v.targets, (tuple, list)) or not v.targets:
        raise WorkloadError(f"{where}: `targets` must be a non-empty tuple of {', '.join(TARGETS)}, got "
                            f"{v.targets!r}")
    for t in v.targets:
        if t not in TARGETS:
            raise WorkloadError(f"{where}: `targets` names unknown target {t!r}; targets: "
                                f"{', '.join(TARGETS)}")
    if v.kind not in VARIANT_KINDS:
        raise WorkloadError(f"{where}: `kind` must be one of {', '.join(VARIANT_KINDS)}, got {v.kind!r}")
    if v.kind != "schedule" and tuple(v.targets) != ("cuda",):
        raise WorkloadError(f"{where}: a {v.kind} variant runs on the cuda target only; `targets` is "
                            f"{tuple(v.targets)!r}")
    if v.kind == "callable" and v.library not in ARRAY_KINDS:
        raise WorkloadError(f"{where}: a callable variant's `library` must be one of "
                            f"{', '.join(ARRAY_KINDS)}, got {v.library!r}")
    if not isinstance(v.knobs, (tuple, list)):
        raise WorkloadError(f"{where}: `knobs` must be a tuple of (name, default) pairs, got {v.knobs!r}")
    seen = set()
    for knob in v.knobs:
        if isinstance(knob, str) or not isinstance(knob, (tuple, list)) or not knob:
            raise WorkloadError(f"{where}: each of `knobs` must be a (name, default) pair, got {knob!r}")
        name = knob[0]
        _check_identifier(f"{where}: knob name", name)
        if len(knob) != 2:
            raise WorkloadError(f"{where}: knob {name!r} has no default value: write ({name!r}, default)"
                                if len(knob) == 1 else
                                f"{where}: knob {name!r} must be a (name, default) pair, got {knob!r}")
        default = knob[1]
        if not isinstance(default, KNOB_TYPES):
            raise WorkloadError(f"{where}: knob {name!r} has default {default!r}: a knob's value must be a "
                                f"bool, int, float or str (a suite lists its values in TOML)")
        if name in seen:
            raise WorkloadError(f"{where}: knob {name!r} is given twice")
        seen.add(name)
    if not isinstance(v.description, str):
        raise WorkloadError(f"{where}: `description` must be a string, got {type(v.description).__name__}")


def check_workload(w: Any) -> None:
    """Check the workload ``w`` (what :func:`register` does before adding it).

    Raises
    ------
    WorkloadError
        Naming the workload and the field at fault (see :func:`register`).
    """
    if not isinstance(w, Workload):
        raise WorkloadError(f"register() takes a kernels.workloads.Workload, got {type(w).__name__}")
    _check_identifier("Workload.name", w.name)
    where = f"workload {w.name!r}"
    if isinstance(w.params, str) or not isinstance(w.params, (tuple, list)):
        raise WorkloadError(f"{where}: `params` must be a tuple of parameter names, got {w.params!r}")
    for p in w.params:
        _check_identifier(f"{where}: parameter name in `params`", p)
    if len(set(w.params)) != len(w.params):
        raise WorkloadError(f"{where}: `params` names a parameter twice: {list(w.params)}")
    if isinstance(w.dtypes, str) or not isinstance(w.dtypes, (tuple, list)) or not w.dtypes:
        raise WorkloadError(f"{where}: `dtypes` must be a non-empty tuple of dtype names, got {w.dtypes!r}")
    for d in w.dtypes:
        try:
            if not isinstance(d, str):
                raise TypeError
            array_dtype(d)
        except TypeError:
            raise WorkloadError(f"{where}: `dtypes` holds {d!r}, which is not a dtype name (e.g. 'float32', "
                                "'float16', 'int8', 'int4')") from None
    if not isinstance(w.variants, dict) or not w.variants:
        raise WorkloadError(f"{where}: `variants` must be a non-empty dict of name -> Variant, got "
                            f"{w.variants!r}")
    for key, v in w.variants.items():
        check_variant(w.name, key, v)
    arity = {"make_args": ((3,), "(params, dtype, rng) -> list of numpy arrays"),
             "reference": ((3,) if w.reference_takes_case else (1,),
                           "(args, params, dtype) -> list of float64 arrays" if w.reference_takes_case
                           else "(args) -> list of float64 arrays"),
             "flops": ((1,), "(params) -> float"),
             "bytes": ((2,), "(params, dtype) -> float")}
    for fname, (counts, signature) in arity.items():
        fn = getattr(w, fname)
        if fn is None:
            raise WorkloadError(f"{where}: `{fname}` is missing: give a function {signature}")
        if not callable(fn):
            raise WorkloadError(f"{where}: `{fname}` must be callable {signature}, got {type(fn).__name__}")
        if not _callable_takes(fn, counts[0]):
            raise WorkloadError(f"{where}: `{fname}` cannot be called with {counts[0]} argument"
                                f"{'s' if counts[0] != 1 else ''}: it must be {signature}")
    for fname, signature in (("write_bytes", "(params, dtype) -> float"),
                             ("check", "(params, dtype) -> None or a reason")):
        fn = getattr(w, fname)
        if fn is not None and (not callable(fn) or not _callable_takes(fn, 2)):
            raise WorkloadError(f"{where}: `{fname}` must be None or callable {signature}, got {fn!r}")
    if isinstance(w.outputs, (str, int)) or not isinstance(w.outputs, (tuple, list)) or not w.outputs:
        raise WorkloadError(f"{where}: `outputs` must be a non-empty tuple of argument indices (the "
                            f"arrays make_args returns that the kernel writes), got {w.outputs!r}")
    for i in w.outputs:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise WorkloadError(f"{where}: `outputs` holds {i!r}, not an argument index (an integer >= 0)")
    if len(set(w.outputs)) != len(w.outputs):
        raise WorkloadError(f"{where}: `outputs` names an argument twice: {list(w.outputs)}")
    if not isinstance(w.tolerance, dict):
        raise WorkloadError(f"{where}: `tolerance` must be a dict dtype -> (rtol, atol), got {w.tolerance!r}")
    for d, tol in w.tolerance.items():
        if d not in w.dtypes:
            raise WorkloadError(f"{where}: `tolerance` is given for dtype {d!r}, which is not one of its "
                                f"dtypes ({', '.join(w.dtypes)})")
        if callable(tol):
            continue
        ok = (isinstance(tol, (tuple, list)) and len(tol) == 2
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in tol))
        if not ok:
            raise WorkloadError(f"{where}: `tolerance[{d!r}]` must be (rtol, atol), two numbers >= 0, or a "
                                f"function of the parameters giving them; got {tol!r}")
    if not isinstance(w.peak_dtype, dict) or not all(d in w.dtypes and isinstance(c, str)
                                                       for d, c in w.peak_dtype.items()):
        raise WorkloadError(f"{where}: `peak_dtype` must be a dict from its dtypes ({', '.join(w.dtypes)}) to "
                            f"the arithmetic of their matmul peak (e.g. 'tf32'), got {w.peak_dtype!r}")
    if not isinstance(w.choices, dict):
        raise WorkloadError(f"{where}: `choices` must be a dict parameter -> names, got {w.choices!r}")
    for p, names_ in w.choices.items():
        if p not in w.params:
            raise WorkloadError(f"{where}: `choices` is given for {p!r}, which is not one of its params "
                                f"({', '.join(w.params)})")
        if (isinstance(names_, str) or not isinstance(names_, (tuple, list)) or not names_
                or not all(isinstance(n, str) for n in names_)):
            raise WorkloadError(f"{where}: `choices[{p!r}]` must be a non-empty tuple of names, got "
                                f"{names_!r}")
    if isinstance(w.peers, str) or not all(isinstance(p, str) for p in w.peers):
        raise WorkloadError(f"{where}: `peers` must be a tuple of peer names, got {w.peers!r}")
    if not isinstance(w.description, str):
        raise WorkloadError(f"{where}: `description` must be a string, got {type(w.description).__name__}")


def register(w: Workload) -> Workload:
    """Add the workload ``w`` to the registry (suites then refer to it by name) and return it.

    Everything is checked before anything is registered; a mistake is a :class:`WorkloadError`
    naming the workload, the field and what it must be: names (the workload's, its variants',
    parameters' and knobs') must be Python identifiers; ``make_args``, ``reference``, ``flops``
    and ``bytes`` must be callables taking the documented arguments; ``outputs`` must be argument
    indices; each variant must be a :class:`Variant` stored under its own name, with a callable
    ``build``, known ``targets`` and knobs given as ``(name, default)`` pairs; a name already
    registered is refused. docs/WORKLOADS.md describes every field.

    Raises
    ------
    WorkloadError
        The workload is malformed or its name is taken.
    """
    check_workload(w)
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


def poison(shape, dtype: str) -> np.ndarray:
    """An output array of ``shape`` for elements of ``dtype``, filled with a value no correct kernel
    writes: NaN for floats, the type's minimum for integers (packed words for int4/uint4/int1).

    ``make_args`` returns its outputs this way, so that an element a kernel never writes is found
    when the outputs are checked against the reference.
    """
    dt = array_dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dtype=dt)
    return np.full(shape, np.iinfo(dt).min, dtype=dt)


_poison = poison  # the name the project's own workloads use


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


def default_tolerance(dtype: str) -> Dict[str, float]:
    """The default checking tolerances: float32 1e-5, float16 inputs 1e-3, integers exact."""
    if dtype == "float64":
        return {"rtol": 1e-10, "atol": 1e-10}
    if dtype == "float16":
        return {"rtol": 1e-3, "atol": 1e-3}
    if dtype.startswith(("int", "uint")):
        return {"rtol": 0.0, "atol": 0.0}
    return {"rtol": 1e-5, "atol": 1e-5}
