"""kbench's kernel compiler core: a TVM-compatible tensor-expression compiler.

Use it as ``import kernels as tvm; from kernels import te``. What of TVM's API is supported, and
what is deliberately not (Relay, TOPI, hybrid script, auto_scheduler...), is listed in
``docs/TVM_COMPAT.md``; importing an out-of-scope module raises an ImportError saying so.
"""

from __future__ import annotations

import sys as _sys

from . import aliases as _aliases
from . import scope as _scope

_scope.install()
_aliases.install()  # TVM 0.2x's module names (tvm.tirx.*, tvm.s_tir.schedule)

from . import (  # noqa: E402
    autotvm,
    container,
    contrib,
    driver,
    error,
    errors,
    ir,
    meta_schedule,
    runtime,
    script,
    target,
    te,
    testing,
    tir,
    transform,
)
# before tirx, which copies kernels.tir's names
from .tir import schedule as _tir_schedule  # noqa: E402,F401  (puts tir.Schedule ... into kernels.tir)
from . import s_tir, tirx  # noqa: E402  (TVM 0.2x's names: docs/TVM_COMPAT.md)
from .build_module import build  # noqa: E402
from .errors import TVMError  # noqa: E402
from .lower import lower  # noqa: E402
from .runtime import (  # noqa: E402
    Device,
    NDArray,
    cl,
    convert,
    cpu,
    cuda,
    device,
    enabled,
    ext_dev,
    get_global_func,
    gpu,
    hexagon,
    load_module,
    metal,
    opencl,
    register_func,
    rocm,
    vulkan,
    webgpu,
)
from .runtime import ndarray as nd  # noqa: E402
from .runtime.module import Module  # noqa: E402
from .tir.function import IRModule  # noqa: E402
from .tirx import compile  # noqa: E402,A004  (TVM 0.2x's tvm.compile)

script.parser.DEFAULT_NAMES["tvm"] = _sys.modules[__name__]  # ``tvm`` in TVMScript

__version__ = "0.1.0"

#: TVM's older name of :func:`device`
context = device

__all__ = [
    "build", "lower", "te", "tir", "ir", "target", "testing", "runtime", "nd", "cpu", "cuda", "gpu",
    "opencl", "cl", "device", "Device", "NDArray", "Module", "TVMError", "errors", "error", "contrib",
    "transform", "register_func", "get_global_func", "convert", "load_module", "rocm", "metal", "vulkan",
    "ext_dev", "hexagon", "webgpu", "context", "script", "IRModule", "tirx", "s_tir", "compile",
]


def __getattr__(name: str):
    """``tvm.relay`` and the other out-of-scope modules raise an error naming the scope rule."""
    msg = _scope.message(name)
    if msg is not None:
        raise AttributeError(msg)
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
