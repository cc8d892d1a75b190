"""Devices (``cpu``, ``cuda``, ``opencl``) and the per-device driver state the backends share.

CUDA contexts
-------------
CUDA work runs in the device's *primary* context (``pycuda.driver.Device.retain_primary_context``),
the same context the CUDA runtime API uses, so arrays and kernels here live side by side with
other libraries in the process (PyTorch, CuPy). The context is retained once per device and
thread, and *pushed only around each operation* (allocation, copy, module load, launch, timing,
synchronisation) by :class:`CudaContext`, which is re-entrant: nested uses push once. Between
operations nothing of ours is left current, so we never disturb another library's current
context and pycuda's context stack is empty when the interpreter exits (pycuda aborts the
process when it is not). pycuda binds a context object to the thread that made it; each thread
therefore gets its own handle on the same primary context.

Module object
-------------
This module is also callable: ``kernels.runtime.device("cuda", 0)`` is :func:`device`. That keeps
``kernels.runtime.device.cuda(0)`` (the module) and TVM's ``tvm.device("cuda", 0)`` (re-exported
from ``kernels.runtime``) both working under one name.

OpenCL contexts
---------------
OpenCL devices are numbered by walking the platforms in order and their devices in order
(``opencl(0)`` is the first device of the first platform that has one). Each device gets one
``Context`` and one in-order ``CommandQueue``, made on first use and kept for the process.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from kernels.contrib import nvcc as _nvcc
from kernels.errors import DeviceError

#: the device kinds of the runtime
DEVICE_TYPES = ("cpu", "cuda", "opencl")

#: device kinds TVM knows but this runtime does not serve: they can be named (``tvm.device("vulkan")``,
#: ``tvm.rocm()``) and report ``exist == False``, as an absent device does in TVM
ABSENT_TYPES = ("vulkan", "metal", "vpi", "rocm", "ext_dev", "hexagon", "webgpu", "aocl", "sdaccel")

# names (and TVM's integer codes) accepted for each kind
_TYPE_ALIASES: Dict[Union[str, int], str] = {
    "cpu": "cpu",
    "llvm": "cpu",
    "c": "cpu",
    "stackvm": "cpu",
    "cuda": "cuda",
    "nvptx": "cuda",
    "gpu": "cuda",
    "opencl": "opencl",
    "cl": "opencl",
    "aocl_sw_emu": "aocl",
    1: "cpu",
    2: "cuda",
    4: "opencl",
    5: "aocl",
    7: "vulkan",
    8: "metal",
    9: "vpi",
    10: "rocm",
    12: "ext_dev",
    15: "webgpu",
    16: "hexagon",
}
_TYPE_ALIASES.update({k: k for k in ABSENT_TYPES})
#: TVM's integer code of each kind (``Device.device_type`` in TVM is this number)
TYPE_CODES = {"cpu": 1, "cuda": 2, "opencl": 4, "aocl": 5, "sdaccel": 6, "vulkan": 7, "metal": 8, "vpi": 9,
              "rocm": 10, "ext_dev": 12, "webgpu": 15, "hexagon": 16}

_lock = threading.RLock()


class Device:
    """A device on which arrays live and kernels run, e.g. ``cuda(0)``.

    Parameters
    ----------
    device_type : str
        ``"cpu"``, ``"cuda"`` or ``"opencl"`` (aliases ``"gpu"``, ``"cl"``, ``"llvm"``, ``"c"``
        and TVM's integer codes 1, 2, 4 are accepted).
    index : int
        The device number within its kind.
    """

    __slots__ = ("_type", "_index")

    def __init__(self, device_type: Union[str, int], index: int = 0) -> None:
        key = device_type.lower() if isinstance(device_type, str) else device_type
        if key not in _TYPE_ALIASES:
            raise DeviceError(
                f"unknown device type {device_type!r}; expected one of {', '.join(DEVICE_TYPES)} "
                f"(TVM's other kinds {', '.join(ABSENT_TYPES)} are accepted but never exist here)"
            )
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise DeviceError(f"device index must be a non-negative int, got {index!r}")
        self._type = _TYPE_ALIASES[key]
        self._index = int(index)

    @property
    def device_type(self) -> str:
        """str: ``"cpu"``, ``"cuda"`` or ``"opencl"``."""
        return self._type

    @property
    def index(self) -> int:
        """int: the device number within its kind."""
        return self._index

    @property
    def device_id(self) -> int:
        """int: TVM's name for :attr:`index`."""
        return self._index

    @property
    def exist(self) -> bool:
        """bool: whether the device can be used in this process.

        ``cpu`` always exists; ``opencl(i)`` needs pyopencl and at least ``i + 1`` OpenCL devices;
        ``cuda(i)`` needs pycuda, a working driver (``cuInit``) and at least ``i + 1`` GPUs. The
        kinds of :data:`ABSENT_TYPES` never exist. Asking never raises.
        """
        return unavailable_reason(self) is None

    @property
    def compute_version(self) -> str:
        """str: the CUDA compute capability as ``"major.minor"`` (e.g. ``"9.0"``).

        Raises
        ------
        DeviceError
            For a device that is not CUDA or not present.
        """
        if self._type != "cuda":
            raise DeviceError(f"{self!r} has no CUDA compute version (only cuda devices do)")
        major, minor = _cuda_device(self._index).compute_capability()
        return f"{major}.{minor}"

    @property
    def device_name(self) -> str:
        """str: the driver's name for the device."""
        if self._type == "cuda":
            return str(_cuda_device(self._index).name())
        if self._type == "opencl":
            return str(_opencl_device(self._index).name).strip()
        require(self)
        import platform

        return platform.processor() or platform.machine()

    @property
    def max_threads_per_block(self) -> int:
        """int: the most threads (work-items) in one block (work-group)."""
        if self._type == "cuda":
            return self._cuda_attribute("MAX_THREADS_PER_BLOCK")
        if self._type == "opencl":
            return int(_opencl_device(self._index).max_work_group_size)
        raise DeviceError(f"{self!r} has no thread blocks")

    @property
    def max_shared_memory_per_block(self) -> int:
        """int: bytes of shared (OpenCL: local) memory one block may use.

        For CUDA this is what TVM reports too: the device attribute MAX_SHARED_MEMORY_PER_BLOCK, the
        48 KiB a kernel gets without opting in; kernels that opt in to more dynamic shared memory may
        use up to :attr:`max_shared_memory_per_block_optin`.
        """
        if self._type == "cuda":
            return self._cuda_attribute("MAX_SHARED_MEMORY_PER_BLOCK")
        if self._type == "opencl":
            return int(_opencl_device(self._index).local_mem_size)
        raise DeviceError(f"{self!r} has no shared memory")

    @property
    def max_shared_memory_per_block_optin(self) -> int:
        """int: bytes of shared memory one block may use when its kernel opts in to dynamic shared
        memory beyond 48 KiB (CUDA's MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 227 KiB on an H100); for
        other devices the same as :attr:`max_shared_memory_per_block`."""
        if self._type == "cuda":
            return self._cuda_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        return self.max_shared_memory_per_block

    @property
    def multi_processor_count(self) -> int:
        """int: streaming multiprocessors (CUDA) or compute units (OpenCL)."""
        if self._type == "cuda":
            return self._cuda_attribute("MULTIPROCESSOR_COUNT")
        if self._type == "opencl":
            return int(_opencl_device(self._index).max_compute_units)
        import os

        return os.cpu_count() or 1

    @property
    def warp_size(self) -> int:
        """int: threads per warp (CUDA); 1 for other devices."""
        if self._type == "cuda":
            return self._cuda_attribute("WARP_SIZE")
        return 1

    @property
    def max_threads_per_multi_processor(self) -> int:
        """Threads resident on one multiprocessor at most (CUDA; a GPU's thread slots are this times
        :attr:`multi_processor_count`)."""
        return self._cuda_attribute("MAX_THREADS_PER_MULTIPROCESSOR")

    def _cuda_attribute(self, name: str) -> int:
        drv = cuda_driver()
        dev = _cuda_device(self._index)
        return int(dev.get_attribute(getattr(drv.device_attribute, name)))

    def sync(self) -> None:
        """Wait until all work queued on the device has finished."""
        if self._type == "cuda":
            with cuda_context(self._index):
                cuda_driver().Context.synchronize()
        elif self._type == "opencl":
            opencl_handle(self._index).queue.finish()

    def __repr__(self) -> str:
        return f"{self._type}({self._index})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __hash__(self) -> int:
        return hash((self._type, self._index))


def cpu(index: int = 0) -> Device:
    """Return ``cpu(index)``; every index names the host."""
    return Device("cpu", index)


def cuda(index: int = 0) -> Device:
    """Return the CUDA GPU ``cuda(index)``."""
    return Device("cuda", index)


def opencl(index: int = 0) -> Device:
    """Return the OpenCL device ``opencl(index)`` (platforms in order, their devices flattened)."""
    return Device("opencl", index)


#: TVM aliases
gpu = cuda
cl = opencl


def rocm(index: int = 0) -> Device:
    """TVM's ``tvm.rocm(i)``: a kind this runtime does not serve (``exist`` is False)."""
    return Device("rocm", index)


def metal(index: int = 0) -> Device:
    """TVM's ``tvm.metal(i)``: a kind this runtime does not serve (``exist`` is False)."""
    return Device("metal", index)


def vulkan(index: int = 0) -> Device:
    """TVM's ``tvm.vulkan(i)``: a kind this runtime does not serve (``exist`` is False)."""
    return Device("vulkan", index)


def ext_dev(index: int = 0) -> Device:
    """TVM's ``tvm.ext_dev(i)``: a kind this runtime does not serve (``exist`` is False)."""
    return Device("ext_dev", index)


def hexagon(index: int = 0) -> Device:
    """TVM's ``tvm.hexagon(i)``: a kind this runtime does not serve (``exist`` is False)."""
    return Device("hexagon", index)


def webgpu(index: int = 0) -> Device:
    """TVM's ``tvm.webgpu(i)``: a kind this runtime does not serve (``exist`` is False)."""
    return Device("webgpu", index)


def device(name: Union[str, int], index: int = 0) -> Device:
    """Return the device of kind ``name`` (``"cpu"``, ``"cuda"``, ``"gpu"``, ``"opencl"``, ...).

    Parameters
    ----------
    name : str or int
        A device kind or one of its aliases; a target string such as ``"cuda -arch=sm_80"`` is
        accepted and only its first word is used.
    index : int
        The device number.
    """
    if isinstance(name, str):
        name = name.split()[0] if name.split() else name
    return Device(name, index)


def present_cuda_arch() -> Optional[str]:
    """The architecture of ``cuda(0)`` as ``"sm_XY"``; None where no CUDA GPU can be used here
    (no pycuda, no driver, no GPU). Asking never raises."""
    dev = Device("cuda", 0)
    if not dev.exist:
        return None
    try:
        return "sm_" + dev.compute_version.replace(".", "")
    except Exception:  # a driver that fails after cuInit: treated as no GPU
        return None


def unavailable_reason(dev: Device) -> Optional[str]:
    """Say why ``dev`` cannot be used, or return None when it can."""
    if dev.device_type == "cpu":
        return None
    if dev.device_type in ABSENT_TYPES:
        return (f"{dev.device_type} devices are not supported by kernels (its runtime serves "
                f"{', '.join(DEVICE_TYPES)}; see docs/TVM_COMPAT.md)")
    if dev.device_type == "opencl":
        devices, reason = _opencl_devices()
        if reason is not None:
            return reason
        if dev.index >= len(devices):
            return f"only {len(devices)} OpenCL device(s) found, so there is no opencl({dev.index})"
        return None
    drv, reason = _cuda_init()
    if reason is not None:
        return reason
    count = drv.Device.count()
    if dev.index >= count:
        return f"only {count} CUDA device(s) found, so there is no cuda({dev.index})"
    return None


def require(dev: Device) -> None:
    """Raise :class:`DeviceError` unless ``dev`` can be used."""
    reason = unavailable_reason(dev)
    if reason is not None:
        raise DeviceError(f"device {dev!r} is not available: {reason}")


def enabled(target_name: str) -> bool:
    """Whether the runtime can serve a target in this process.

    Parameters
    ----------
    target_name : str
        ``"c"``/``"llvm"``/``"cpu"`` (a C compiler is found), ``"opencl"`` (pyopencl and an
        OpenCL device), ``"cuda"``/``"gpu"`` (``nvcc`` is found or pycuda is installed). Options
        after the first word (``"cuda -arch=sm_80"``) are ignored.

    Returns
    -------
    bool
    """
    words = str(target_name).split()
    kind = words[0].lower() if words else ""
    if kind in ("c", "llvm", "cpu"):
        from kernels.runtime.config import find_c_compiler

        return find_c_compiler() is not None
    if kind in ("opencl", "cl"):
        return Device("opencl", 0).exist
    if kind in ("cuda", "gpu", "nvptx"):
        from kernels.contrib.nvcc import find_nvcc

        return find_nvcc() is not None or importlib.util.find_spec("pycuda") is not None
    return False


# ---------------------------------------------------------------------------------------------
# CUDA (pycuda) state

_cuda_state: Dict[str, Any] = {}
_cuda_local = threading.local()


def _cuda_init() -> Tuple[Any, Optional[str]]:
    """Import pycuda.driver and run cuInit once; return (driver module, None) or (None, reason)."""
    with _lock:
        if "result" not in _cuda_state:
            try:
                import pycuda.driver as drv
            except Exception as exc:  # ImportError, or a broken build failing to load libcuda
                _cuda_state["result"] = (None, f"pycuda cannot be imported ({exc})")
            else:
                try:
                    drv.init()
                    _cuda_state["result"] = (drv, None)
                except Exception as exc:
                    _cuda_state["result"] = (None, f"the CUDA driver failed to initialise ({exc})")
        return _cuda_state["result"]


def cuda_driver() -> Any:
    """Return ``pycuda.driver`` after ``cuInit``; raise :class:`DeviceError` if that fails."""
    drv, reason = _cuda_init()
    if drv is None:
        raise DeviceError(f"CUDA is not available: {reason}")
    return drv


def _cuda_device(index: int) -> Any:
    require(Device("cuda", index))
    return cuda_driver().Device(index)


class CudaContext:
    """The primary context of one CUDA device, made current by ``with`` (re-entrant).

    One instance exists per device and thread (:func:`cuda_context`). Entering pushes the
    primary context unless this instance already has it pushed; leaving the outermost ``with``
    pops it again, so nothing of ours stays current between operations.
    """

    def __init__(self, index: int) -> None:
        drv = cuda_driver()
        self.index = index
        self._drv = drv
        self.context = _cuda_device(index).retain_primary_context()
        self._depth = 0
        self._side: Optional[Tuple[Any, Any, Any]] = None  # side_streams(), made on first use

    def __enter__(self) -> Any:
        if self._depth == 0:
            self.context.push()
        self._depth += 1
        return self.context

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._drv.Context.pop()

    def side_streams(self) -> Tuple[Any, Any, Any]:
        """Two streams of this context for launches that may run at the same time
        (``KernelSpec.concurrent``) and an event that joins them, made on first use (with the
        context current). They are *blocking* streams: work on them starts after the work queued on
        the null stream before it, and any command queued on the null stream afterwards waits for
        theirs. Recording the event on the null stream after a pair of launches is such a command:
        the next pair (whose streams do not wait for each other) then starts after both."""
        streams = self._side
        if streams is None:
            with self:
                streams = self._side = (self._drv.Stream(), self._drv.Stream(),
                                        self._drv.Event(self._drv.event_flags.DISABLE_TIMING))
        return streams


def cuda_context(index: int) -> CudaContext:
    """Return this thread's :class:`CudaContext` for ``cuda(index)``, making it on first use."""
    contexts = getattr(_cuda_local, "contexts", None)
    if contexts is None:
        contexts = _cuda_local.contexts = {}
    ctx = contexts.get(index)
    if ctx is None:
        ctx = contexts[index] = CudaContext(index)
    return ctx


# ---------------------------------------------------------------------------------------------
# OpenCL (pyopencl) state

_opencl_state: Dict[str, Any] = {}


def _opencl_devices() -> Tuple[List[Any], Optional[str]]:
    """Return (all OpenCL devices, platforms in order and flattened, None) or ([], reason)."""
    with _lock:
        if "devices" not in _opencl_state:
            try:
                import pyopencl
            except Exception as exc:
                _opencl_state["devices"] = ([], f"pyopencl cannot be imported ({exc})")
            else:
                devices: List[Any] = []
                try:
                    platforms = pyopencl.get_platforms()
                except Exception as exc:  # no ICD loader or no platform
                    platforms = []
                    reason: Optional[str] = f"no OpenCL platform ({exc})"
                else:
                    reason = None
                for platform in platforms:
                    try:
                        devices.extend(platform.get_devices())
                    except Exception:  # a platform with no device raises DEVICE_NOT_FOUND
                        continue
                if not devices and reason is None:
                    reason = "no OpenCL device found on any platform"
                _opencl_state["devices"] = (devices, reason)
        return _opencl_state["devices"]


def _opencl_device(index: int) -> Any:
    require(Device("opencl", index))
    return _opencl_devices()[0][index]


@dataclass(frozen=True)
class OpenCLHandle:
    """The pyopencl objects of one OpenCL device: its device, context and in-order queue."""

    device: Any
    context: Any
    queue: Any


def opencl_handle(index: int) -> OpenCLHandle:
    """Return the cached :class:`OpenCLHandle` of ``opencl(index)``, making it on first use."""
    with _lock:
        handles = _opencl_state.setdefault("handles", {})
        handle = handles.get(index)
        if handle is None:
            import pyopencl

            dev = _opencl_device(index)
            context = pyopencl.Context([dev])
            handle = OpenCLHandle(dev, context, pyopencl.CommandQueue(context, dev))
            handles[index] = handle
        return handle


class _CallableModule(types.ModuleType):
    """This module's type: calling the module calls :func:`device`."""

    def __call__(self, name: Union[str, int], index: int = 0) -> Device:
        return device(name, index)


sys.modules[__name__].__class__ = _CallableModule

# the CUDA compiler asks which GPU is present through this (it sits below the runtime)
_nvcc.PRESENT_ARCH[0] = present_cuda_arch
