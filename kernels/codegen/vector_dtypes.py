"""Buffers of vector types (``te.placeholder((n,), dtype="float32x4")``) as the printers see them.

A buffer whose element is a vector type holds ``lanes`` scalars an element, one element after the
other (what ``NDArray("float32x4")`` stores: numpy shape ``(n, 4)``). Before printing, such a buffer
becomes a buffer of its scalar type and each access of element ``i`` the vector access of the scalars
``Ramp(i * lanes, 1, lanes)``; the printers' vector machinery (lane-by-lane values, vector memory
instructions where alignment allows) does the rest, on every target. The function's argument
descriptions keep the vector type, so calls are checked against it.
"""

from __future__ import annotations

import dataclasses
from typing import Dict

from ..errors import BuildError
from ..tir import dtype as dt
from ..tir.expr import Buffer, BufferLoad, PrimExpr, Ramp, const
from ..tir.functor import rewrite
from ..tir.printer import expr_str
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, BufferStore


def scalarize_vector_buffers(func):
    """``func`` (a lowered function, of TE or TensorIR) with every buffer of a vector type
    (arguments, allocations) replaced by a buffer of its scalar type, and their accesses by vector
    accesses of the scalars."""
    new: Dict[int, Buffer] = {}

    def scalar(b: Buffer) -> Buffer:
        got = new.get(id(b))
        if got is None:
            lanes = dt.lanes(b.dtype)
            shape = tuple(b.shape[:-1]) + (simplify(b.shape[-1] * lanes),) if b.shape else (const(lanes),)
            got = Buffer(b.name, dt.element_of(b.dtype), shape, b.scope, (), b.data)
            new[id(b)] = got
        return got

    def index(b: Buffer, idx: PrimExpr, what: str) -> Ramp:
        lanes = dt.lanes(b.dtype)
        if dt.lanes(idx.dtype) != 1:
            raise BuildError(f"{what} of buffer {b.name} ({b.dtype}) at the vector index {expr_str(idx)}: a "
                             "buffer of a vector type cannot be accessed by a vectorized loop; do not "
                             "vectorize the loop over its elements")
        base = simplify(idx * lanes)
        return Ramp(base, const(1, base.dtype), lanes)

    def post(n):
        if isinstance(n, BufferLoad) and dt.lanes(n.buffer.dtype) > 1:
            if dt.lanes(n.dtype) != dt.lanes(n.buffer.dtype):
                raise BuildError(f"a {n.dtype} load of buffer {n.buffer.name} ({n.buffer.dtype}) is not "
                                 "supported")
            return BufferLoad(scalar(n.buffer), (index(n.buffer, n.indices[0], "a load"),), n.buffer.dtype)
        if isinstance(n, BufferStore) and dt.lanes(n.buffer.dtype) > 1:
            if n.value.dtype != n.buffer.dtype:
                raise BuildError(f"a store of {n.value.dtype} into buffer {n.buffer.name} "
                                 f"({n.buffer.dtype}) is not supported")
            return BufferStore(scalar(n.buffer), n.value, (index(n.buffer, n.indices[0], "a store"),))
        if isinstance(n, Allocate) and dt.lanes(n.buffer.dtype) > 1:
            return dataclasses.replace(n, buffer=scalar(n.buffer),
                                       extent=simplify(n.extent * dt.lanes(n.buffer.dtype)))
        return None

    body = rewrite(func.body, post)
    bufs = tuple(scalar(b) if dt.lanes(b.dtype) > 1 else b for b in func.buffers)
    if body is func.body and all(x is y for x, y in zip(bufs, func.buffers)):
        return func
    if hasattr(func, "buffer_map"):  # a TensorIR function: its buffers are those of its buffer map
        bmap = tuple((v, scalar(b) if dt.lanes(b.dtype) > 1 else b) for v, b in func.buffer_map)
        return dataclasses.replace(func, body=body, buffer_map=bmap)
    return dataclasses.replace(func, body=body, buffers=bufs)
