"""Test-wide hooks (docs/ARCHITECTURE.md, "Tests"): the folder of a test says what kind of test it is;
its markers say what it needs, and a test is skipped where that is missing:

- ``gpu``: an NVIDIA GPU that pycuda can use;
- ``opencl``: an OpenCL device (PoCL on the CPU in CI);
- ``nvcc``: the CUDA compiler (building needs no GPU);
- ``slow``: about ten seconds or more (never skipped; ``-m "not slow"`` leaves them out).

The harness's tests carry their markers in their files. The compiler's test files are not edited for
this: :data:`MARKERS_BY_FILE` gives them theirs by file name (``path`` or ``path::test``), and in
tests/cpu/ a test whose name or parameters name the OpenCL target gets ``opencl``.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: markers of the compiler's test files, by file name (``tests/x.py``) or test (``tests/x.py::name``)
MARKERS_BY_FILE: dict[str, tuple[str, ...]] = {
    "tests/cpu/test_nvcc_archs.py": ("nvcc",),
    "tests/cpu/test_runtime_backends.py::test_compile_cuda_cubin": ("nvcc",),
    "tests/cpu/test_runtime_backends.py::test_compile_cuda_ptx_and_fatbin": ("nvcc",),
    "tests/cpu/test_tutorials.py::test_intrin_math_tutorial_unchanged": ("nvcc",),
    "tests/null/test_runtime_args.py::test_cuda_module_builds_but_needs_a_gpu": ("nvcc",),
    "tests/cpu/test_codegen_vector_dtypes.py::test_cuda_source_of_vector_elements": ("nvcc",),
}


@functools.lru_cache(maxsize=1)
def cuda_gpu_usable() -> bool:
    """True when pycuda imports, the CUDA driver initialises and it reports at least one device."""
    try:
        import pycuda.driver as drv
    except ImportError:  # pycuda not installed, or libcuda missing
        return False
    try:
        drv.init()
        return drv.Device.count() > 0
    except drv.Error:  # no usable driver or device
        return False


@functools.lru_cache(maxsize=1)
def opencl_usable() -> bool:
    """True when the compiler's runtime finds an OpenCL device."""
    try:
        import kernels

        return bool(kernels.opencl(0).exist)
    except Exception:  # pyopencl missing or no platform
        return False


@functools.lru_cache(maxsize=1)
def nvcc_found() -> bool:
    from kernels.contrib import nvcc

    return nvcc.find_nvcc() is not None


#: what each marker needs, and the skip reason when it is missing
NEEDS = {
    "gpu": (cuda_gpu_usable, "no CUDA GPU"),
    "opencl": (opencl_usable, "no OpenCL device (install pyopencl and PoCL)"),
    "nvcc": (nvcc_found, "nvcc not found"),
}


def _file_markers(item: pytest.Item) -> tuple[str, ...]:
    rel = Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    marks = MARKERS_BY_FILE.get(rel, ()) + MARKERS_BY_FILE.get(f"{rel}::{name}", ())
    if rel.startswith("tests/cpu/") and "opencl" in item.name.lower():
        marks += ("opencl",)
    return marks


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker in _file_markers(item):
            if item.get_closest_marker(marker) is None:
                item.add_marker(getattr(pytest.mark, marker))
    for marker, (usable, reason) in NEEDS.items():
        needing = [item for item in items if item.get_closest_marker(marker) is not None]
        if needing and not usable():
            skip = pytest.mark.skip(reason=reason)
            for item in needing:
                item.add_marker(skip)


#: a file that gets a line as each test starts (``KBENCH_TEST_TRAIL``; CI sets it): when the test session
#: ends without pytest's summary, its last line names the test that was running (scripts/ci_diagnose.sh)
#: the processes that run the tests write it (pytest-xdist's controller only relays their reports)
_TRAIL = os.environ.get("KBENCH_TEST_TRAIL", "")
_WRITES_TRAIL = [False]


def pytest_configure(config: pytest.Config) -> None:
    distributed = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    _WRITES_TRAIL[0] = bool(_TRAIL) and not distributed


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    if not _WRITES_TRAIL[0]:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    try:
        with open(_TRAIL, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {worker} pid {os.getpid()} {nodeid}\n")
    except OSError:  # a trail that cannot be written is no reason to stop the tests
        pass
