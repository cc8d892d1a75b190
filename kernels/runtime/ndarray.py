"""n-dimensional arrays on a device (TVM's ``tvm.nd``): :class:`NDArray`, :func:`array`, :func:`empty`.

The backing store is a C-contiguous numpy array on the CPU, a ``pyopencl.Buffer`` for OpenCL
devices and a ``pycuda.driver.DeviceAllocation`` for CUDA devices. Arrays are always copied in
(never aliased), so a later change to the source numpy array does not show through.

Sub-byte types ``int4``, ``uint4`` and ``int1`` are stored packed, 8 (resp. 32) elements per
32-bit word with element 0 in the highest bits, as the tensor-core tutorials pack them; such
arrays are made with :func:`empty` (their logical shape) and filled with :meth:`NDArray.copyfrom`
from the packed ``int32``/``uint32`` words, and :meth:`NDArray.numpy` returns those words.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from kernels.errors import ArgumentError, DeviceError
from kernels.runtime.device import Device, cpu, cuda_context, cuda_driver, opencl_handle, require

__all__ = ["NDArray", "array", "empty", "SUPPORTED_DTYPES", "PACKED_PER_WORD", "normalize_dtype"]

#: dtypes an NDArray may hold (besides the packed sub-byte types)
SUPPORTED_DTYPES = (
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
)

# packed sub-byte types: bits per element, numpy dtype of the 32-bit storage words
_PACKED = {"int4": (4, "int32"), "uint4": (4, "uint32"), "int1": (1, "uint32")}
#: packed sub-byte dtype -> elements a 32-bit word holds
PACKED_PER_WORD = {name: 32 // bits for name, (bits, _) in _PACKED.items()}

ShapeLike = Union[int, Sequence[int]]


def normalize_dtype(dtype: Any) -> str:
    """Return the dtype's canonical name (``"float32"``, ``"bool"``, ``"int4"``, ...).

    Raises
    ------
    ArgumentError
        When the type is not one the runtime supports.
    """
    if isinstance(dtype, str) and dtype in _PACKED:
        return dtype
    vec = _vector(dtype)
    if vec is not None:
        return f"{normalize_dtype(vec[0])}x{vec[1]}"
    try:
        name = np.dtype(dtype).name
    except TypeError as exc:
        raise ArgumentError(f"unknown dtype {dtype!r}") from exc
    if name not in SUPPORTED_DTYPES:
        raise ArgumentError(
            f"unsupported dtype {name}; supported: {', '.join(SUPPORTED_DTYPES + tuple(_PACKED))}"
        )
    return name


def _normalize_shape(shape: ShapeLike) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"shape must be a sequence of ints, got {shape!r}") from exc
    if any(d < 0 for d in dims):
        raise ArgumentError(f"shape {dims} has a negative dimension")
    return dims


def _vector(dtype: Any) -> Optional[Tuple[str, int]]:
    """``("float32", 4)`` for the vector type ``"float32x4"``, else None."""
    if not isinstance(dtype, str):
        return None
    m = re.fullmatch(r"([a-z]+\d*)x(\d+)", dtype.strip())
    if m is None or int(m.group(2)) < 2 or m.group(1) not in SUPPORTED_DTYPES:
        return None
    return m.group(1), int(m.group(2))


def _storage(shape: Tuple[int, ...], dtype: str) -> Tuple[Tuple[int, ...], np.dtype]:
    """Shape and numpy dtype of the store holding a ``shape`` array of ``dtype`` (a vector type such as
    ``float32x4`` is stored as its lanes: numpy shape ``shape + (4,)``, as TVM's ``numpy()`` gives)."""
    vec = _vector(dtype)
    if vec is not None:
        return shape + (vec[1],), np.dtype(vec[0])
    if dtype not in _PACKED:
        return shape, np.dtype(dtype)
    bits, word = _PACKED[dtype]
    if not shape or (shape[-1] * bits) % 32:
        raise ArgumentError(
            f"a {dtype} array packs {32 // bits} elements per 32-bit word, so its last dimension "
            f"must be a multiple of {32 // bits}; got shape {shape}"
        )
    return shape[:-1] + (shape[-1] * bits // 32,), np.dtype(word)


class NDArray:
    """An n-dimensional array on a :class:`~kernels.runtime.device.Device`.

    Made by :func:`array` or :func:`empty`, not directly.

    Attributes
    ----------
    shape : tuple of int
        The (logical) shape.
    dtype : str
        The element type's name, e.g. ``"float32"``.
    device : Device
        Where the data lives (``ctx`` is an alias).
    handle : object
        The backing store: ``numpy.ndarray`` (cpu), ``pyopencl.Buffer`` (opencl) or
        ``pycuda.driver.DeviceAllocation`` (cuda).
    """

    __slots__ = ("_shape", "_dtype", "_device", "_handle", "__weakref__")

    def __init__(self, shape: Tuple[int, ...], dtype: str, device: Device, handle: Any) -> None:
        self._shape = shape
        self._dtype = dtype
        self._device = device
        self._handle = handle

    @property
    def shape(self) -> Tuple[int, ...]:
        """tuple of int: the shape."""
        return self._shape

    @property
    def dtype(self) -> str:
        """str: the element type's name."""
        return self._dtype

    @property
    def device(self) -> Device:
        """Device: where the array lives."""
        return self._device

    @property
    def ctx(self) -> Device:
        """Device: TVM's older name for :attr:`device`."""
        return self._device

    @property
    def handle(self) -> Any:
        """The backing store (numpy array, pyopencl Buffer or pycuda DeviceAllocation)."""
        return self._handle

    @property
    def ndim(self) -> int:
        """int: the number of dimensions."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """int: the number of elements."""
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """int: bytes of the backing store."""
        shape, dtype = _storage(self._shape, self._dtype)
        return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize

    def numpy(self) -> np.ndarray:
        """Copy the array to a new numpy array (packed words for ``int4``/``uint4``/``int1``).

        Returns
        -------
        numpy.ndarray
            A C-contiguous copy.
        """
        shape, dtype = _storage(self._shape, self._dtype)
        if self._device.device_type == "cpu":
            return self._handle.copy()
        host = np.empty(shape, dtype)
        if host.nbytes == 0:
            return host
        if self._device.device_type == "opencl":
            import pyopencl

            pyopencl.enqueue_copy(opencl_handle(self._device.index).queue, host, self._handle)
        else:
            with cuda_context(self._device.index):
                cuda_driver().memcpy_dtoh(host, self._handle)
        return host

    def asnumpy(self) -> np.ndarray:
        """Alias of :meth:`numpy` (TVM's older name)."""
        return self.numpy()

    def copyfrom(self, source: Union["NDArray", np.ndarray, Sequence[Any]]) -> "NDArray":
        """Overwrite the contents with ``source``, converted to this array's dtype.

        Parameters
        ----------
        source : NDArray or array_like
            Data of the same shape (for packed types: the packed words' shape).

        Returns
        -------
        NDArray
            ``self``.

        Raises
        ------
        ArgumentError
            When the shapes differ.
        """
        shape, dtype = _storage(self._shape, self._dtype)
        host = source.numpy() if isinstance(source, NDArray) else np.asarray(source)
        if tuple(host.shape) != shape:
            what = "packed shape" if self._dtype in _PACKED else "shape"
            raise ArgumentError(
                f"copyfrom: source shape {tuple(host.shape)} does not match the array's {what} {shape}"
            )
        if self._dtype in _PACKED and host.dtype.kind in "iu" and host.dtype.itemsize == 4:
            host = np.ascontiguousarray(host).view(dtype)
        else:
            host = np.ascontiguousarray(host, dtype=dtype)
        _upload(self._device, self._handle, host)
        return self

    def copyto(self, target: Union[Device, "NDArray"]) -> "NDArray":
        """Copy into ``target`` (an NDArray) or onto a new array on ``target`` (a Device)."""
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        out = empty(self._shape, self._dtype, target)
        return out.copyfrom(self.numpy())

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        host = self.numpy()
        return host if dtype is None else host.astype(dtype)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d NDArray")
        return self._shape[0]

    def __repr__(self) -> str:
        head = f"<kernels.nd.NDArray shape={self._shape}, {self._dtype}, {self._device!r}>"
        try:
            body = repr(self.numpy())
        except Exception as exc:  # a device gone away must not break repr
            body = f"<contents unavailable: {exc}>"
        return f"{head}\n{body}"


def _allocate(device: Device, nbytes: int) -> Any:
    """Allocate ``nbytes`` (at least one byte, drivers reject empty buffers) on ``device``."""
    size = max(int(nbytes), 1)
    if device.device_type == "opencl":
        import pyopencl

        return pyopencl.Buffer(opencl_handle(device.index).context, pyopencl.mem_flags.READ_WRITE, size)
    with cuda_context(device.index):
        return cuda_driver().mem_alloc(size)


def _upload(device: Device, handle: Any, host: np.ndarray) -> None:
    """Copy the C-contiguous ``host`` array into the store ``handle``."""
    if device.device_type == "cpu":
        handle[...] = host
        return
    if host.nbytes == 0:
        return
    if device.device_type == "opencl":
        import pyopencl

        pyopencl.enqueue_copy(opencl_handle(device.index).queue, handle, host)
    else:
        with cuda_context(device.index):
            cuda_driver().memcpy_htod(handle, host)


def empty(shape: ShapeLike, dtype: Any = "float32", device: Optional[Device] = None,
          mem_scope: Optional[str] = None) -> NDArray:
    """Make an uninitialised array (TVM's ``tvm.nd.empty``).

    Parameters
    ----------
    shape : int or sequence of int
        The shape (the logical one for packed sub-byte types).
    dtype : str or numpy dtype
        The element type.
    device : Device, optional
        Where to allocate it; ``cpu(0)`` by default.
    mem_scope : str, optional
        Only ``None`` or ``"global"`` (device memory) are supported.

    Returns
    -------
    NDArray

    Raises
    ------
    ArgumentError
        For a bad shape or an unsupported dtype.
    DeviceError
        When the device is not available.
    """
    if mem_scope not in (None, "global"):
        raise ArgumentError(f"empty: memory scope {mem_scope!r} is not supported; arrays live in the "
                            "device's global memory")
    device = cpu(0) if device is None else _as_device(device)
    dims = _normalize_shape(shape)
    name = normalize_dtype(dtype)
    store_shape, store_dtype = _storage(dims, name)
    if device.device_type == "cpu":
        return NDArray(dims, name, device, np.empty(store_shape, store_dtype))
    require(device)
    nbytes = int(np.prod(store_shape, dtype=np.int64)) * store_dtype.itemsize
    return NDArray(dims, name, device, _allocate(device, nbytes))


def array(
    arr: Union[NDArray, np.ndarray, Sequence[Any], float, int],
    device: Optional[Device] = None,
    ctx: Optional[Device] = None,
) -> NDArray:
    """Copy array-like data onto a device (``tvm.nd.array(a, dev)`` or ``tvm.nd.array(a, ctx=dev)``).

    Parameters
    ----------
    arr : NDArray or array_like
        The data; its dtype is kept (it must be one of :data:`SUPPORTED_DTYPES`).
    device : Device, optional
        Where to put the copy; ``cpu(0)`` by default.
    ctx : Device, optional
        TVM's older keyword for ``device``.

    Returns
    -------
    NDArray
        A C-contiguous copy of ``arr`` on the device.
    """
    if device is not None and ctx is not None and _as_device(device) != _as_device(ctx):
        raise ArgumentError(f"array: device={device!r} and ctx={ctx!r} disagree; pass only one")
    target = device if device is not None else ctx
    target = cpu(0) if target is None else _as_device(target)
    if isinstance(arr, NDArray):
        if arr.dtype in _PACKED:
            return arr.copyto(target)
        host = arr.numpy()
    else:
        host = np.asarray(arr)
    name = normalize_dtype(host.dtype)
    out = empty(host.shape, name, target)
    out.copyfrom(host)
    return out


def from_numpy_nocopy(host: np.ndarray) -> NDArray:
    """Wrap a C-contiguous numpy array as a cpu NDArray sharing its memory (used by the C target)."""
    return NDArray(tuple(host.shape), normalize_dtype(host.dtype), cpu(0), host)


def _as_device(dev: Any) -> Device:
    if isinstance(dev, Device):
        return dev
    if isinstance(dev, str):
        return Device(dev, 0)
    raise DeviceError(f"expected a Device such as kernels.cpu(0), got {dev!r}")
