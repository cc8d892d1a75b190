"""The ``cuda`` backend: CUDA C compiled to a cubin by nvcc at build time, run with pycuda.

Building needs only nvcc. On the first call on a device the cubin is loaded
(``pycuda.driver.module_from_buffer``) into that device's primary context (see
:mod:`kernels.runtime.device`) and each kernel is fetched and prepared once. Launches take
``(grid, block)`` from the spec for the actual shapes; buffers go as device pointers, shape
variables as 32-bit ints. A kernel whose shared arrays exceed 48 KiB (``KernelSpec.dynamic_shared_bytes``)
is opted in to that much dynamic shared memory when it is fetched (after checking the device's opt-in
maximum) and launched with it. Timing uses CUDA events around back-to-back launches.

Launches go on the null stream, one after the other, except a pair whose second kernel is marked
``KernelSpec.concurrent`` (block partitioning's edge blocks, the rest of the first one's grid): the
two go on two blocking side streams of the context, the edge launch first, so the edge blocks run
beside the interior ones instead of on a nearly idle GPU afterwards; an event recorded on the null
stream after them makes every later command wait for both (CUDA's implicit synchronisation of the
legacy null stream with blocking streams), so callers, timers and copies see one launch as before.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from kernels.codegen.cuda import MAX_LOCAL_PER_THREAD
from kernels.contrib.nvcc import DEFAULT_ARCH, compile_cuda, normalize_arch, parse_compute_version
from kernels.errors import ArgumentError, BuildError, DeviceError, DeviceLimitError
from kernels.runtime.device import Device, cuda_context, cuda_driver, present_cuda_arch, require
from kernels.runtime.launch import Launch, launch_dims
from kernels.runtime.module import DeviceModule, Module
from kernels.runtime.ndarray import NDArray
from kernels.runtime.spec import FuncSpec

# CUDA launch limits of every architecture the toolkit builds for (sm_75 and newer)
_MAX_BLOCK = (1024, 1024, 64)
_MAX_THREADS = 1024
_MAX_GRID = (2**31 - 1, 65535, 65535)


def _pairs(steps: List[Optional[tuple]]) -> List[List[tuple]]:
    """The launches in order, a launch marked concurrent (its last item) grouped with the one before
    it; empty launches (None) dropped."""
    groups: List[List[tuple]] = []
    for st in steps:
        if st is None:
            continue
        if st[-1] and groups and len(groups[-1]) == 1 and not groups[-1][0][-1]:
            groups[-1].append(st)
        else:
            groups.append([st])
    return groups


def default_arch() -> str:
    """The architecture to build for: that of ``cuda(0)`` when present, else :data:`DEFAULT_ARCH`."""
    return present_cuda_arch() or DEFAULT_ARCH


class CUDAModule(Module):
    """A module of the ``cuda`` target.

    Parameters
    ----------
    spec : FuncSpec
        A ``cuda`` spec; ``spec.arch`` picks the architecture (default :func:`default_arch`).
    options : sequence of str
        Extra nvcc options.

    Attributes
    ----------
    arch : str
        The architecture the cubin is built for, e.g. ``"sm_90"``.
    binary : bytes
        The cubin.
    """

    def __init__(self, spec: FuncSpec, options: Optional[List[str]] = None,
                 binary: Optional[bytes] = None) -> None:
        super().__init__(spec, "cuda")
        try:
            self.arch = normalize_arch(spec.arch) if spec.arch else default_arch()
        except ValueError as exc:
            raise BuildError(f"{spec.name}: {exc}") from None
        # a cubin built elsewhere (e.g. by a CPU build worker) is used as is
        self.binary = binary if binary is not None else compile_cuda(
            spec.source, target="cubin", arch=self.arch, options=options)
        self.imported_modules = [DeviceModule("cuda", spec.source, binary=self.binary, spec=spec,
                                              arch=self.arch)]
        self._loaded: Dict[int, Tuple[Any, List[Any]]] = {}  # device index -> (module, kernels)

    def save(self, path: Any, fmt: str = "") -> None:
        """Write an object file for ``.o`` (the host stub), else the device code: the cubin
        (``.cubin``), PTX (``.ptx``) or the source."""
        from pathlib import Path

        if (fmt or Path(path).suffix.lstrip(".")) in ("o", "obj"):
            super().save(path, fmt)
        else:
            self.imported_modules[0].save(path, fmt)

    def _check_arch(self, device: Device) -> None:
        """A cubin for sm_XY runs on devices X.Z with Z >= Y ("a" variants only on X.Y)."""
        major, minor = parse_compute_version(self.arch)
        dev_major, dev_minor = parse_compute_version(device.compute_version)
        exact = self.arch.endswith(("a", "f"))
        fits = dev_major == major and (dev_minor == minor if exact else dev_minor >= minor)
        if not fits:
            raise DeviceError(
                f"{self.spec.name}: the module was compiled for {self.arch} but {device!r} has "
                f"compute capability {device.compute_version}; rebuild with "
                f"arch={normalize_arch(device.compute_version)!r}"
            )

    def _functions(self, device: Device) -> List[Any]:
        """Load the cubin on ``device`` once; return its prepared kernels in spec order."""
        loaded = self._loaded.get(device.index)
        if loaded is not None:
            return loaded[1]
        require(device)
        self._check_arch(device)
        drv = cuda_driver()
        functions = []
        with cuda_context(device.index):
            try:
                module = drv.module_from_buffer(self.binary)
            except drv.Error as exc:
                raise DeviceError(
                    f"{self.spec.name}: loading the {self.arch} cubin on {device!r} failed: {exc}"
                ) from None
            for kernel in self.native_kernels:
                try:
                    func = module.get_function(kernel.name)
                except drv.Error as exc:
                    raise BuildError(
                        f"{self.spec.name}: the cubin has no kernel {kernel.name} (is it declared "
                        f'extern "C" __global__?): {exc}'
                    ) from None
                func.prepare("".join(self._param_type(p, 2) if self._param_is_value(p) else "P"
                                     for p in kernel.params))
                _check_local(func, kernel.name, device)
                if kernel.dynamic_shared_bytes:
                    _opt_in_shared(func, kernel.name, kernel.dynamic_shared_bytes, device)
                functions.append(func)
        self._loaded[device.index] = (module, functions)
        return functions

    def _allocate_workspace(self, device: Device, dtype: np.dtype, count: int) -> Any:
        with cuda_context(device.index):
            return cuda_driver().mem_alloc(max(count * dtype.itemsize, 1))

    def _native_launchers(self, device: Device, env: Dict[str, int], buffers: Dict[str, Any]
                          ) -> List[Optional[Launch]]:
        functions = self._functions(device)
        drv = cuda_driver()
        context = cuda_context(device.index)
        steps: List[Optional[Tuple[str, Any, Any, Any, List[Any], int, bool]]] = []
        for kernel, func in zip(self.native_kernels, functions):
            dims = launch_dims(kernel, env)
            if dims is None:  # an empty launch: nothing to run
                steps.append(None)
                continue
            grid, block = dims
            _check_limits(kernel.name, grid, block)
            values = [self._param_value(p, env).item() if self._param_is_value(p) else int(buffers[p])
                      for p in kernel.params]
            steps.append((kernel.name, func, grid, block, values, kernel.dynamic_shared_bytes,
                          kernel.concurrent))
        keep_alive = buffers  # the closures hold the allocations the pointers point into
        side = context.side_streams() if any(st is not None and st[6] for st in steps) else None

        def launch_all(todo) -> None:
            assert keep_alive is not None
            with context:
                for group in todo:
                    # a pair of launches of one grid (KernelSpec.concurrent) go on the two side
                    # streams, the later one (the few, slow edge blocks) first; any other launch on
                    # the null stream
                    for (name, func, grid, block, values, shared, _), stream in zip(
                            reversed(group), side[:2] if len(group) > 1 else (None,)):
                        try:
                            if stream is None:
                                func.prepared_call(grid, block, *values, shared_size=shared)
                            else:
                                func.prepared_async_call(grid, block, stream, *values, shared_size=shared)
                        except drv.Error as exc:
                            raise _launch_failed(name, func, grid, block, device, exc) from None
                    if len(group) > 1:
                        side[2].record()  # a null-stream command: what follows waits for both

        if len(self.native_kernels) == len(self.spec.kernels):
            # no packed call in between: one launch runs every kernel inside one context push
            groups = _pairs(steps)
            return [lambda: launch_all(groups)] + [None] * (len(steps) - 1)
        return [None if st is None else (lambda st=st: launch_all([[st]])) for st in steps]

    def _array_view(self, device: Device, handle: Any, dtype: np.dtype, shape: Tuple[int, ...],
                    strides: Tuple[int, ...], offset: int, where: str) -> NDArray:
        compact, acc = [], 1
        for n in reversed(shape):
            compact.append(acc)
            acc *= n
        if strides and tuple(strides) != tuple(reversed(compact)):
            raise ArgumentError(f"{where}: a CUDA array must be compact; strides {strides} for shape "
                                f"{shape} cannot be passed")
        return NDArray(tuple(shape), dtype.name, device, int(handle) + offset * dtype.itemsize)

    def _pointer(self, device: Device, handle: Any, dtype: np.dtype, offset: int, where: str) -> Any:
        return int(handle) + offset * dtype.itemsize

    def _time_launches(self, device: Device, launch: Launch, count: int) -> float:
        drv = cuda_driver()
        with cuda_context(device.index):
            start, end = drv.Event(), drv.Event()
            start.record()
            for _ in range(count):
                launch()
            end.record()
            end.synchronize()
            return start.time_till(end) / 1e3


def _opt_in_shared(func: Any, name: str, nbytes: int, device: Device) -> None:
    """Let the loaded kernel ``name`` launch with ``nbytes`` of dynamic shared memory (CUDA's opt-in,
    cudaFuncAttributeMaxDynamicSharedMemorySize), after checking that the device allows that much
    (with the kernel's static shared memory) in one block."""
    drv = cuda_driver()
    attr = drv.function_attribute
    limit = device.max_shared_memory_per_block_optin
    static = int(func.get_attribute(attr.SHARED_SIZE_BYTES))
    if static + nbytes > limit:
        extra = f" plus {static} bytes of static shared memory" if static else ""
        raise DeviceLimitError(
            f"kernel {name}: needs {nbytes} bytes of dynamic shared memory{extra} a block, but "
            f"{device!r} ({device.device_name}, compute capability {device.compute_version}) allows at "
            f"most {limit} bytes ({limit // 1024} KiB) a block; rebuild with smaller shared tiles")
    try:
        func.set_attribute(attr.MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
    except (drv.Error, AttributeError) as exc:  # AttributeError: a pycuda without cuFuncSetAttribute
        raise DeviceError(f"kernel {name}: opting in to {nbytes} bytes of dynamic shared memory on "
                          f"{device!r} failed: {exc}") from None


def _local_reserve(func: Any, device: Device) -> Tuple[int, int, int]:
    """A loaded kernel's local memory a thread, the device's thread slots (resident threads an SM times
    SMs) and the bytes the driver reserves for that kernel's launches (one frame a slot)."""
    local = int(func.get_attribute(cuda_driver().function_attribute.LOCAL_SIZE_BYTES))
    slots = device.max_threads_per_multi_processor * device.multi_processor_count
    return local, slots, local * slots


def _check_local(func: Any, name: str, device: Device) -> None:
    """Refuse a loaded kernel whose stack frame (local arrays and spills, as ptxas laid it out) is over
    CUDA's local memory a thread, or whose frames for every thread slot of the device are more than its
    memory: every launch of it would fail ("invalid argument", "out of memory")."""
    local, slots, reserve = _local_reserve(func, device)
    if local > MAX_LOCAL_PER_THREAD:
        raise DeviceLimitError(f"kernel {name}: needs {local:,} bytes of local memory a thread, which "
                               f"exceeds CUDA's limits ({MAX_LOCAL_PER_THREAD // 1024} KiB a thread); give "
                               "each thread a smaller tile")
    total = int(cuda_driver().mem_get_info()[1])
    if reserve > total:
        raise DeviceLimitError(f"kernel {name}: needs {local:,} bytes of local memory a thread, which "
                               f"exceeds CUDA's limits on {device!r}: the driver reserves it for each of the "
                               f"{slots:,} thread slots ({reserve / 1e9:.1f} GB), more than the device's "
                               f"{total / 1e9:.1f} GB; give each thread a smaller tile")


def _launch_failed(name: str, func: Any, grid: tuple, block: tuple, device: Device, exc: Exception
                   ) -> DeviceError:
    """The error of a failed launch, saying so where the kernel's local memory did not fit the free
    device memory (the driver reserves a frame for every thread slot when the kernel is launched)."""
    text = f"CUDA launch of kernel {name} (grid {grid}, block {block}) on {device!r} failed: {exc}"
    try:
        local, slots, reserve = _local_reserve(func, device)
        free = int(cuda_driver().mem_get_info()[0])
    except Exception:  # the context may be unusable after the failure: report the launch's error
        return DeviceError(text)
    if local and reserve > free:
        return DeviceLimitError(
            f"{text}; its {local:,} bytes of local memory a thread, reserved for each of the device's "
            f"{slots:,} thread slots, need {reserve / 1e9:.1f} GB but {free / 1e9:.1f} GB are free: "
            "give each thread a smaller tile")
    return DeviceError(text)


def _check_limits(name: str, grid: tuple, block: tuple) -> None:
    threads = block[0] * block[1] * block[2]
    if threads > _MAX_THREADS or any(b > m for b, m in zip(block, _MAX_BLOCK)):
        raise DeviceLimitError(
            f"kernel {name}: block {block} exceeds CUDA's limits ({_MAX_THREADS} threads, "
            f"at most {_MAX_BLOCK} per axis)"
        )
    if any(g > m for g, m in zip(grid, _MAX_GRID)):
        raise DeviceLimitError(f"kernel {name}: grid {grid} exceeds CUDA's limits {_MAX_GRID}")
