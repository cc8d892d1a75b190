"""The runtime: devices, arrays, built modules and the ``c``, ``opencl`` and ``cuda`` backends.

:func:`build_module` turns a :class:`~kernels.runtime.spec.FuncSpec` from code generation into a
callable :class:`~kernels.runtime.module.Module`. Backends import their driver libraries (pyopencl,
pycuda) lazily, so this package imports without them.

``kernels.runtime.device`` is the *module* :mod:`kernels.runtime.device` (so that
``kernels.runtime.device.cuda(0)`` works); the function ``device(name, index)`` lives in it.
"""

from __future__ import annotations

from typing import Optional, Sequence

from kernels.errors import BuildError

# the backends whose module names are also device functions (``cuda(0)``, ``opencl(0)``): loaded
# before those functions are bound below, so that importing ``kernels.runtime.cuda`` later (e.g.
# ``from kernels.runtime.cuda import CUDAModule``) finds it loaded and leaves ``kernels.runtime.cuda``
# the function (each imports pycuda / pyopencl only when used)
from kernels.runtime import cuda as _cuda_backend  # noqa: F401  (isort: skip)
from kernels.runtime import opencl as _opencl_backend  # noqa: F401  (isort: skip)
from kernels.runtime import device, ndarray
from kernels.runtime.container import Array, Map, String, convert
from kernels.runtime.device import (
    Device,
    cl,
    cpu,
    cuda,
    enabled,
    ext_dev,
    gpu,
    hexagon,
    metal,
    opencl,
    rocm,
    vulkan,
    webgpu,
)
from kernels.runtime.module import DeviceModule, Function, Module
from kernels.runtime.ndarray import NDArray, array, empty
from kernels.runtime.packed import (
    PackedFunc,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from kernels.runtime.serialize import load_module
from kernels.runtime.spec import FuncSpec
from kernels.runtime.timing import BenchmarkResult

__all__ = [
    "Array",
    "Map",
    "PackedFunc",
    "String",
    "convert",
    "ext_dev",
    "get_global_func",
    "hexagon",
    "list_global_func_names",
    "load_module",
    "metal",
    "register_func",
    "remove_global_func",
    "rocm",
    "vulkan",
    "webgpu",
    "BenchmarkResult",
    "Device",
    "DeviceModule",
    "Function",
    "Module",
    "NDArray",
    "array",
    "build_module",
    "cl",
    "cpu",
    "cuda",
    "device",
    "empty",
    "enabled",
    "gpu",
    "ndarray",
    "opencl",
]


def build_module(spec: FuncSpec, options: Optional[Sequence[str]] = None) -> Module:
    """Compile ``spec`` for its target and return the callable module.

    Parameters
    ----------
    spec : FuncSpec
        The source and launch description; ``spec.target`` is ``"c"``, ``"opencl"`` or
        ``"cuda"``.
    options : sequence of str, optional
        Extra compiler options: C compiler flags (``c``), OpenCL build options (``opencl``) or
        nvcc options (``cuda``).

    Returns
    -------
    Module

    Raises
    ------
    BuildError
        For an unknown target or when the native compiler rejects the source.
    """
    extra = list(options or ())
    if spec.target == "c":
        from kernels.runtime.c import CModule

        return CModule(spec, flags=extra)
    if spec.target == "opencl":
        from kernels.runtime.opencl import OpenCLModule

        return OpenCLModule(spec, build_options=tuple(extra))
    if spec.target == "cuda":
        from kernels.runtime.cuda import CUDAModule

        return CUDAModule(spec, options=extra)
    raise BuildError(f"{spec.name}: unknown target {spec.target!r}; expected one of c, opencl, cuda")


#: TVM 0.2x's name of :class:`NDArray`
Tensor = NDArray


def tensor(arr, device: Optional[Device] = None, mem_scope: Optional[str] = None) -> NDArray:
    """``tvm.runtime.tensor(arr, dev)``: TVM 0.2x's name of :func:`array` (a copy of ``arr`` on
    ``device``, ``cpu(0)`` by default).

    Parameters
    ----------
    arr : array_like or NDArray
        The data; its dtype is kept.
    device : Device, optional
        Where to put the copy.
    mem_scope : str, optional
        Only ``None`` or ``"global"`` (device memory).

    Returns
    -------
    NDArray
    """
    if mem_scope not in (None, "global"):
        raise BuildError(f"tvm.runtime.tensor: mem_scope={mem_scope!r} is not supported; only global memory")
    return array(arr, device)


__all__ += ["Tensor", "tensor"]
