"""The ``opencl`` backend: OpenCL C built with pyopencl, run on any OpenCL device (PoCL in CI).

The program is built once per device and module and its ``Kernel`` objects are kept (PoCL
compiles work-group functions lazily, on a kernel's first launch, so keeping them matters). When
an OpenCL device exists at build time the program is built on ``opencl(0)`` right away, so source
errors surface from ``build_module``; otherwise building waits for the first call.

Launches use ``global = grid * block`` and ``local = block``, always three-dimensional (x, y, z
are dimensions 0, 1, 2); shape variables are passed as ``int`` (numpy.int32), scalar arguments
as the numpy type of their dtype, buffers and workspaces as ``cl.Buffer``.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from kernels.errors import ArgumentError, BuildError, DeviceError
from kernels.runtime.device import Device, opencl_handle
from kernels.runtime.launch import Launch, launch_dims
from kernels.runtime.module import DeviceModule, Module
from kernels.runtime.ndarray import NDArray
from kernels.runtime.spec import FuncSpec


class OpenCLModule(Module):
    """A module of the ``opencl`` target.

    Parameters
    ----------
    spec : FuncSpec
        An ``opencl`` spec.
    build_options : tuple of str
        Options for the OpenCL compiler (``clBuildProgram``).
    """

    def __init__(self, spec: FuncSpec, build_options: Tuple[str, ...] = ()) -> None:
        super().__init__(spec, "opencl")
        self.build_options = tuple(build_options)
        self.imported_modules = [DeviceModule("opencl", spec.source, spec=spec)]
        self._programs: Dict[int, Tuple[Any, List[Any]]] = {}
        if Device("opencl", 0).exist:
            self._kernels(0)

    def _kernels(self, index: int) -> List[Any]:
        """Build the program for ``opencl(index)`` once; return its kernels in spec order."""
        cached = self._programs.get(index)
        if cached is not None:
            return cached[1]
        import pyopencl as cl

        handle = opencl_handle(index)
        try:
            program = cl.Program(handle.context, self.spec.source).build(options=list(self.build_options))
        except cl.Error as exc:
            raise BuildError(
                f"{self.spec.name}: OpenCL build failed on {Device('opencl', index)!r} "
                f"({handle.device.name.strip()}):\n{_build_log(exc, handle)}"
            ) from None
        kernels = []
        for kernel in self.native_kernels:
            try:
                kernels.append(cl.Kernel(program, kernel.name))
            except cl.Error as exc:
                raise BuildError(
                    f"{self.spec.name}: the OpenCL program has no kernel {kernel.name} ({exc})"
                ) from None
        self._programs[index] = (program, kernels)
        return kernels

    def _allocate_workspace(self, device: Device, dtype: np.dtype, count: int) -> Any:
        import pyopencl as cl

        context = opencl_handle(device.index).context
        return cl.Buffer(context, cl.mem_flags.READ_WRITE, max(count * dtype.itemsize, 1))

    def _native_launchers(self, device: Device, env: Dict[str, int], buffers: Dict[str, Any]
                          ) -> List[Optional[Launch]]:
        import pyopencl as cl

        queue = opencl_handle(device.index).queue
        out: List[Optional[Launch]] = []
        for spec_kernel, kernel in zip(self.native_kernels, self._kernels(device.index)):
            dims = launch_dims(spec_kernel, env)
            if dims is None:  # an empty launch: nothing to run
                out.append(None)
                continue
            grid, block = dims
            global_size = tuple(g * b for g, b in zip(grid, block))
            values = [
                self._param_value(p, env) if self._param_is_value(p) else buffers[p]
                for p in spec_kernel.params
            ]

            def launch(name=spec_kernel.name, kernel=kernel, values=values, global_size=global_size,
                       local_size=block) -> None:
                try:
                    kernel.set_args(*values)
                    cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
                except cl.Error as exc:
                    raise DeviceError(
                        f"OpenCL launch of kernel {name} (global {global_size}, local {local_size}) "
                        f"on {device!r} failed: {exc}"
                    ) from None

            out.append(launch)
        return out

    def _array_view(self, device: Device, handle: Any, dtype: np.dtype, shape: Tuple[int, ...],
                    strides: Tuple[int, ...], offset: int, where: str) -> NDArray:
        if strides and tuple(strides) != _compact(shape):
            raise ArgumentError(f"{where}: an OpenCL array must be compact; strides {strides} for shape "
                                f"{shape} cannot be passed")
        return NDArray(tuple(shape), dtype.name, device, self._sub_buffer(handle, dtype, offset,
                                                                          int(np.prod(shape)), where))

    def _pointer(self, device: Device, handle: Any, dtype: np.dtype, offset: int, where: str) -> Any:
        return self._sub_buffer(handle, dtype, offset, 0, where)

    @staticmethod
    def _sub_buffer(handle: Any, dtype: np.dtype, offset: int, count: int, where: str) -> Any:
        if offset == 0:
            return handle
        import pyopencl as cl

        try:
            return handle.get_sub_region(offset * dtype.itemsize, max(count, 1) * dtype.itemsize)
        except cl.Error as exc:
            raise ArgumentError(f"{where}: cannot view an OpenCL buffer from element {offset} ({exc}); "
                                "OpenCL sub-buffers must start at the device's base-address "
                                "alignment") from None

    def _synchronize(self, device: Device) -> None:
        opencl_handle(device.index).queue.finish()

    def _time_launches(self, device: Device, launch: Launch, count: int) -> float:
        queue = opencl_handle(device.index).queue
        queue.finish()
        start = time.perf_counter()
        for _ in range(count):
            launch()
        queue.finish()
        return time.perf_counter() - start


def _build_log(exc: Exception, handle: Any) -> str:
    """The compiler's log from a failed build (pyopencl puts it into the exception text)."""
    text = str(exc).strip()
    return text or "(the OpenCL compiler gave no log)"


def _compact(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))
