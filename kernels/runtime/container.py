"""``tvm.runtime.convert``: Python values to the compiler's objects, as TVM converts them.

* ``int`` -> ``IntImm`` (``int32``, ``int64`` beyond its range), ``bool`` -> ``IntImm("bool")``,
  ``float`` -> ``FloatImm("float32")``, numpy scalars keep their type;
* ``str`` -> :class:`String` (a ``str``);
* lists and tuples -> :class:`Array` of converted items; dicts -> :class:`Map`;
* a callable -> :class:`~kernels.runtime.packed.PackedFunc`;
* expressions, tensors, buffers, statements, NDArrays and None are returned as they are.
"""

from __future__ import annotations

from typing import Any

from kernels.errors import TVMError


class String(str):
    """TVM's runtime string (a ``str``)."""

    __slots__ = ()


class Array(tuple):
    """TVM's immutable array of objects (a ``tuple`` of converted values)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "[" + ", ".join(repr(x) for x in self) + "]"


class Map(dict):
    """TVM's map of objects (a ``dict`` of converted keys and values)."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items()) + "}"


def convert(value: Any, span: Any = None) -> Any:
    """Convert ``value`` to the compiler's objects (see the module docstring).

    Raises
    ------
    TVMError
        For a value with no counterpart (a numpy array: use ``tvm.nd.array``; other objects).
    """
    import numpy as np

    from kernels.runtime.ndarray import NDArray
    from kernels.runtime.packed import PackedFunc
    from kernels.tir.expr import PrimExpr, const

    if value is None or isinstance(value, (PrimExpr, NDArray, PackedFunc, String, Array, Map)):
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        if isinstance(value, np.ndarray):  # pragma: no cover - np.generic is never an ndarray
            raise TVMError("convert: numpy arrays become NDArrays with tvm.nd.array(value)")
        return const(value)
    if isinstance(value, str):
        return String(value)
    if isinstance(value, (list, tuple)):
        return Array(convert(v) for v in value)
    if isinstance(value, dict):
        return Map((convert(k), convert(v)) for k, v in value.items())
    if isinstance(value, np.ndarray):
        raise TVMError("convert: a numpy array has no object form; make an NDArray with tvm.nd.array(value)")
    if _is_ir_object(value):
        return value
    if callable(value):
        return PackedFunc(value)
    raise TVMError(f"convert: don't know how to convert {value!r} ({type(value).__name__}) to an object")


def _is_ir_object(value: Any) -> bool:
    """Tensors, operations, iteration variables, buffers, statements, targets, ranges."""
    from kernels.target import Target
    from kernels.te.tensor import IterVar, Operation, Range, Tensor
    from kernels.tir.expr import Buffer
    from kernels.tir.stmt import Stmt

    return isinstance(value, (Tensor, Operation, IterVar, Range, Buffer, Stmt, Target))
