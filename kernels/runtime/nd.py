"""TVM's ``tvm.nd`` namespace: :func:`array`, :func:`empty` and :class:`NDArray`."""

from kernels.runtime.ndarray import NDArray, array, empty

__all__ = ["NDArray", "array", "empty"]
