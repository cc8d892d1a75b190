"""Case -> source -> binary through the compiler core.

CUDA binaries come from a content-addressed cache keyed by (source, arch, nvcc version, flags) —
kernels.contrib.nvcc keeps it — so an unchanged rerun calls nvcc zero times. ``build_artifact``
lowers a case and runs its native compiler (nvcc for ``cuda``, the C compiler for ``c``; ``opencl``
source is compiled by the OpenCL driver when loaded) without touching a device: it runs on Ray's CPU
workers and on the build-ahead thread of a worker (:mod:`harness.execute.ahead`). ``load_module``
turns a case (and optionally such an artifact) into a callable module on the worker that runs it.

nvcc calls are counted per build (``Artifact.nvcc_called``, ``Result.nvcc_calls``) from the compiler's
process-wide counter; every compile of this module holds :data:`COMPILE_LOCK` while it reads that
counter, so that builds running in two threads of one process count their own calls only.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple, TypeVar

import numpy as np

from kernels.build_module import build_spec
from kernels.contrib import nvcc
from kernels.errors import TVMError
from kernels.runtime import build_module
from kernels.runtime.spec import FuncSpec, KernelSpec
from kernels.workloads import Workload
from kernels.workloads import get as get_workload

from harness.model import Case

try:
    from kernels.workloads.variants import CudaKernel, VariantSpecError
except ImportError:  # an older kernels/ (kbench ab's export of a base tree) has only schedule variants
    class CudaKernel:  # type: ignore[no-redef]  # nothing is an instance: no CUDA-source variants
        pass

    class VariantSpecError(Exception):  # type: ignore[no-redef]
        pass

__all__ = ["Artifact", "COMPILE_LOCK", "CaseBuildError", "arg_layout", "build_artifact", "is_callable",
           "counted_compile", "load_module",
           "load_module_counted", "lower_case"]

T = TypeVar("T")

#: held around every native compile of a build (and the read of nvcc's call counter around it)
COMPILE_LOCK = threading.RLock()


class CaseBuildError(Exception):
    """The case could not be lowered or compiled; the message carries the compiler output."""


@dataclass(frozen=True)
class Artifact:
    """A case built ahead of running it: its source, its binary (CUDA cubin) or shared library (C),
    and its lowered spec, so that the worker running it neither lowers nor compiles again.

    ``started`` and ``finished`` are wall-clock times (``time.time()``) of the build, for the
    timeline of a run (how far ahead of its case a build ran)."""

    case_key: str
    target: str
    arch: str
    source: str
    binary: Optional[bytes]
    build_s: float
    nvcc_called: bool
    spec: Optional[FuncSpec] = None
    library: str = ""  # the C target's shared library (a path on the building machine)
    started: float = 0.0
    finished: float = 0.0


def _target_string(case: Case, arch: Optional[str]) -> str:
    if case.target == "cuda" and arch:
        return f"cuda -arch={arch}"
    return case.target


_LAYOUTS: Dict[Tuple[str, str, str], Tuple[Tuple[Tuple[int, ...], str], ...]] = {}


def arg_layout(w: Workload, case: Case) -> Tuple[Tuple[Tuple[int, ...], str], ...]:
    """``(shape, dtype)`` of each argument ``make_args`` gives ``case`` (logical shape and dtype for
    packed sub-byte arrays, as harness.execute.inputs.device_array makes them): what a CUDA-source
    variant's function takes. Drawn once per workload, parameters and dtype in a process (the
    shapes do not depend on the seed)."""
    key = (case.workload, json.dumps(case.param_dict, sort_keys=True), case.dtype)
    if key not in _LAYOUTS:
        arrays = w.make_args(case.param_dict, case.dtype, np.random.default_rng(0))
        layout = []
        for i, a in enumerate(arrays):
            logical = w.logical_shape(i, a, case.dtype)
            layout.append((tuple(a.shape), str(a.dtype)) if logical is None else (logical, case.dtype))
        _LAYOUTS[key] = tuple(layout)
    return _LAYOUTS[key]


def is_callable(case: Case) -> bool:
    """Whether ``case`` is a callable variant's (run by the user's function: nothing to build); False
    for a workload or variant that is not registered here (building it reports that)."""
    if case.peer:
        return False
    try:
        variant = get_workload(case.workload).variant(case.variant)
    except KeyError:
        return False
    return getattr(variant, "kind", "schedule") == "callable"  # an older kernels/ has no kinds


def lower_case(case: Case, arch: Optional[str] = None) -> FuncSpec:
    """Lower and generate code for a case (no native compiler). A CUDA-source variant's spec is its
    own source and launch (kernels.workloads.CudaKernel.spec); a callable variant has none."""
    w = get_workload(case.workload)
    name = f"{case.workload}_{case.variant}"
    if is_callable(case):
        raise CaseBuildError(f"{case.key}: a callable variant runs the user's function: nothing to build")
    try:
        s, args = w.build(case.variant, case.param_dict, case.dtype, case.knob_dict)
        if isinstance(s, CudaKernel):
            if case.target != "cuda":
                raise CaseBuildError(f"{case.key}: a CUDA-source variant builds for the cuda target only")
            return s.spec(arg_layout(w, case), arch or "", name=name)
        return build_spec(s, args, _target_string(case, arch), name=name)
    except TVMError as exc:
        raise CaseBuildError(f"{type(exc).__name__}: {exc}") from None
    except VariantSpecError as exc:
        raise CaseBuildError(f"{case.key}: {exc}") from None


def _check_cubin(spec: FuncSpec, binary: bytes) -> None:
    """Every kernel of ``spec`` keeps its name in the cubin (``extern "C"``): the runtime loads it by
    that name, and a C++ kernel's name is mangled (a CUDA-source variant's mistake, found before
    any GPU is involved)."""
    for k in spec.kernels:
        if isinstance(k, KernelSpec) and b"\0" + k.name.encode() + b"\0" not in binary:
            raise CaseBuildError(f'{spec.name}: the cubin has no kernel named {k.name}: declare it '
                                 'extern "C" __global__ (C++ mangles the names of other kernels)')


def counted_compile(compile_fn: Callable[[], T]) -> Tuple[T, int]:
    """``(compile_fn(), nvcc calls it made)``, under :data:`COMPILE_LOCK`."""
    with COMPILE_LOCK:
        before = nvcc.STATS["nvcc_calls"]
        out = compile_fn()
        return out, nvcc.STATS["nvcc_calls"] - before


def build_artifact(case: Case, arch: str = "") -> Artifact:
    """Build ``case`` without a device: lowering, code generation and the native compiler.

    Parameters
    ----------
    case : Case
    arch : str
        The CUDA architecture to build for (e.g. ``"sm_90"``); required for ``cuda`` cases.

    Raises
    ------
    CaseBuildError
        The case cannot be lowered or compiled (the message carries the compiler's output).
    """
    started = time.time()
    t0 = time.perf_counter()
    spec = lower_case(case, arch or None)
    binary: Optional[bytes] = None
    library = ""
    calls = 0
    try:
        if case.target == "cuda":
            if not arch:
                raise CaseBuildError(f"{case.key}: a CUDA build ahead needs the architecture")
            binary, calls = counted_compile(lambda: nvcc.compile_cuda(spec.source, target="cubin",
                                                                      arch=spec.arch))
            _check_cubin(spec, binary)
        elif case.target == "c":
            # imported when used, as kernels.runtime.build_module does
            from kernels.runtime.c import compile_c

            path, _ = counted_compile(lambda: compile_c(spec.source, openmp=spec.uses_openmp))
            library = str(path)
    except TVMError as exc:
        raise CaseBuildError(str(exc)) from None
    return Artifact(case.key, case.target, spec.arch if case.target == "cuda" else "", spec.source, binary,
                    time.perf_counter() - t0, calls > 0, spec=spec, library=library, started=started,
                    finished=time.time())


def load_module(case: Case, artifact: Optional[Artifact] = None):
    """The runnable module of a case; uses ``artifact``'s spec and binary when given (no lowering
    and no compiler call)."""
    return load_module_counted(case, artifact)[0]


def load_module_counted(case: Case, artifact: Optional[Artifact] = None) -> Tuple[object, int]:
    """``(module, nvcc calls made here)`` of :func:`load_module`. Only a case that is compiled here
    (no usable artifact) waits for :data:`COMPILE_LOCK`: loading a binary built ahead never waits for
    a build thread's compiler."""
    arch = artifact.arch if artifact is not None else None
    spec = artifact.spec if artifact is not None and artifact.spec is not None else lower_case(case, arch)
    try:
        if case.target == "cuda" and artifact is not None and artifact.binary is not None:
            # imported when used, as kernels.runtime.build_module does: loading the submodule rebinds
            # the name kernels.runtime.cuda (the device function) to the module
            from kernels.runtime.cuda import CUDAModule

            if spec.source != artifact.source:
                raise CaseBuildError(f"{case.key}: the artifact's source differs from this worker's "
                                     "lowering (different kbench versions on driver and worker?)")
            return CUDAModule(spec, binary=artifact.binary), 0
        library = Path(artifact.library) if artifact is not None and artifact.library else None
        if case.target == "c" and library is not None and library.exists():
            from kernels.runtime.c import CModule  # imported when used (see above)

            return CModule(spec, library=library), 0
        if case.target != "cuda":  # the C compiler or the OpenCL driver: no nvcc call to count
            return build_module(spec), 0
        module, calls = counted_compile(lambda: build_module(spec))
        _check_cubin(spec, module.binary)
        return module, calls
    except TVMError as exc:
        raise CaseBuildError(f"{type(exc).__name__}: {exc}") from None
