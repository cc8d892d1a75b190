"""Storage flattening: realized tensors become flat buffers; ``T[i, j]`` becomes ``T[i * s + j]``."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..errors import LoweringError
from ..tir.expr import Buffer, BufferLoad, IntImm, PrimExpr, ProducerLoad, const
from ..tir.functor import rewrite
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, BufferStore, Stmt
from .te_stmt import ProducerRealize, ProducerStore


def row_major_strides(shape, align: Dict[int, Tuple[int, int]] | None = None) -> Tuple[PrimExpr, ...]:
    """Strides of a row-major layout; ``align[d] = (factor, offset)`` pads dimension d's stride."""
    align = align or {}
    strides: List[PrimExpr] = [const(1)] * len(shape)
    acc: PrimExpr = const(1)
    for d in range(len(shape) - 1, -1, -1):
        if d in align:
            factor, offset = align[d]
            a = simplify(acc)
            if not isinstance(a, IntImm):
                raise LoweringError(f"storage_align needs a constant stride, got {a}")
            v = a.value
            v = v + ((offset - v) % factor)
            acc = const(v)
        strides[d] = simplify(acc)
        acc = simplify(acc * shape[d])
    return tuple(strides)


def _key(tensor):
    return (id(tensor.op), tensor.value_index)


class _Flattener:
    def __init__(self, arg_buffers: Dict[tuple, Buffer], alias):
        self.map: Dict[tuple, Tuple[Buffer, Tuple[PrimExpr, ...], Tuple[PrimExpr, ...], PrimExpr]] = {}
        self.alias = alias  # (op id, output) -> the key of the buffer it is stored in
        for k, b in arg_buffers.items():
            self.map[k] = (b, tuple(const(0) for _ in b.shape), b.strides, const(0))

    def key(self, tensor) -> tuple:
        k = (id(tensor.op), tensor.value_index)
        return self.alias.get(k, k)

    def lookup(self, tensor):
        k = self.key(tensor)
        got = self.map.get(k)
        if got is None:
            raise LoweringError(f"tensor {tensor.name} is read but neither an argument nor computed by "
                                "the schedule; add it to the argument list")
        return got

    def index(self, tensor, indices) -> PrimExpr:
        buf, mins, strides, flat = self.lookup(tensor)
        for i, m, s in zip(indices, mins, strides):
            flat = flat + (i - m) * s
        return buf, simplify(flat)

    def visit(self, s: Stmt) -> Stmt:
        return rewrite(s, lambda n: None, self._pre)

    def _pre(self, n):
        if hasattr(n, "flatten_with"):  # statements binding buffers of their own (extern ops)
            return n.flatten_with(self)
        if isinstance(n, ProducerRealize):
            created = []
            for t in n.tensors:
                strides = row_major_strides(n.extents, n.stage.align)
                size = simplify(strides[0] * n.extents[0]) if n.extents else const(1)
                base: PrimExpr = const(0)
                if n.thread_slice is not None:
                    index, count = n.thread_slice
                    base = simplify(index * size)
                    size = simplify(size * count)
                buf = Buffer(t.name, t.dtype, tuple(n.extents), n.scope, strides)
                self.map[self.key(t)] = (buf, n.mins, strides, base)
                created.append((buf, size))
            body = self.visit(n.body)
            for buf, size in reversed(created):
                body = Allocate(buf, size, body)
            return body
        if isinstance(n, ProducerStore):
            buf, idx = self.index(n.producer, [self.visit(i) for i in n.indices])
            return BufferStore(buf, self.visit(n.value), (idx,))
        if isinstance(n, ProducerLoad):
            buf, idx = self.index(n.producer, [self.visit(i) for i in n.indices])
            return BufferLoad(buf, (idx,))
        return None


def storage_flatten(stmt: Stmt, arg_buffers: Dict[tuple, Buffer], alias) -> Stmt:
    """Replace realizes by allocations and tensor accesses by flat buffer accesses."""
    return _Flattener(arg_buffers, alias).visit(stmt)
