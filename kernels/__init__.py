"""kbench's kernel compiler core: a TVM-compatible tensor-expression compiler.

Use it as ``import kernels as tvm; from kernels import te``.
"""

from __future__ import annotations

from . import contrib, errors, ir, runtime, script, target, te, testing, tir
from .build_module import build
from .errors import TVMError
from .lower import lower
from .runtime import (
    Device,
    NDArray,
    cl,
    cpu,
    cuda,
    device,
    enabled,
    gpu,
    opencl,
)
from .runtime import ndarray as nd
from .runtime.module import Module
from .tir.function import IRModule

__version__ = "0.1.0"

__all__ = [
    "build", "lower", "te", "tir", "ir", "target", "testing", "runtime", "nd", "cpu", "cuda", "gpu",
    "opencl", "cl", "device", "Device", "NDArray", "Module", "TVMError", "errors", "contrib", "script",
    "IRModule",
]
