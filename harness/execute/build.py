"""Case -> source -> binary through the compiler core.

CUDA binaries come from a content-addressed cache keyed by (source, arch, nvcc version, flags) —
kernels.contrib.nvcc keeps it — so an unchanged rerun calls nvcc zero times. ``build_artifact``
runs on CPU workers (no GPU needed) and returns the cubin bytes; ``load_module`` turns a case (and
optionally such an artifact) into a callable module on the worker that runs it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from kernels.build_module import build_spec
from kernels.contrib import nvcc
from kernels.errors import TVMError
from kernels.runtime import build_module
from kernels.runtime.spec import FuncSpec
from kernels.workloads import get as get_workload

from harness.model import Case


class CaseBuildError(Exception):
    """The case could not be lowered or compiled; the message carries the compiler output."""


@dataclass(frozen=True)
class Artifact:
    case_key: str
    target: str
    arch: str
    source: str
    binary: Optional[bytes]
    build_s: float
    nvcc_called: bool


def _target_string(case: Case, arch: Optional[str]) -> str:
    if case.target == "cuda" and arch:
        return f"cuda -arch={arch}"
    return case.target


def lower_case(case: Case, arch: Optional[str] = None) -> FuncSpec:
    """Lower and generate code for a case (no native compiler)."""
    w = get_workload(case.workload)
    try:
        s, args = w.build(case.variant, case.param_dict, case.dtype, case.knob_dict)
        return build_spec(s, args, _target_string(case, arch), name=f"{case.workload}_{case.variant}")
    except TVMError as exc:
        raise CaseBuildError(f"{type(exc).__name__}: {exc}") from None


def build_artifact(case: Case, arch: str) -> Artifact:
    """CPU-side build of a CUDA case for ``arch`` (e.g. "sm_90"): lowering, codegen and nvcc."""
    t0 = time.perf_counter()
    spec = lower_case(case, arch)
    before = nvcc.STATS["nvcc_calls"]
    try:
        binary = nvcc.compile_cuda(spec.source, target="cubin", arch=spec.arch)
    except TVMError as exc:
        raise CaseBuildError(str(exc)) from None
    return Artifact(case.key, case.target, spec.arch, spec.source, binary, time.perf_counter() - t0,
                    nvcc.STATS["nvcc_calls"] > before)


def load_module(case: Case, artifact: Optional[Artifact] = None):
    """The runnable module of a case; uses ``artifact``'s cubin when given (no nvcc call)."""
    arch = artifact.arch if artifact is not None else None
    spec = lower_case(case, arch)
    try:
        if case.target == "cuda" and artifact is not None and artifact.binary is not None:
            # imported when used, as kernels.runtime.build_module does: loading the submodule rebinds
            # the name kernels.runtime.cuda (the device function) to the module
            from kernels.runtime.cuda import CUDAModule

            if spec.source != artifact.source:
                raise CaseBuildError(f"{case.key}: the artifact's source differs from this worker's "
                                     "lowering (different kbench versions on driver and worker?)")
            return CUDAModule(spec, binary=artifact.binary)
        return build_module(spec)
    except TVMError as exc:
        raise CaseBuildError(f"{type(exc).__name__}: {exc}") from None
