"""Statements that exist only between schedule lowering and storage flattening."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from ..tir.expr import Buffer, PrimExpr, Var
from ..tir.stmt import Stmt


@dataclass(frozen=True, eq=False, repr=False)
class ProducerStore(Stmt):
    """``T[indices] = value`` on a TE tensor."""

    producer: Any  # te.Tensor
    value: PrimExpr
    indices: Tuple[PrimExpr, ...]


@dataclass(frozen=True, eq=False, repr=False)
class ProducerRealize(Stmt):
    """Storage for the outputs of ``stage`` over ``[mins, mins + extents)``."""

    stage: Any
    tensors: Tuple[Any, ...]
    mins: Tuple[PrimExpr, ...]
    extents: Tuple[PrimExpr, ...]
    scope: str
    body: Stmt
    #: ``(index, count)``: the storage holds ``count`` copies and this thread group uses copy ``index``
    #: (warp memory emulated in shared memory, one copy per threadIdx.y/z value)
    thread_slice: Optional[Tuple[PrimExpr, int]] = None


@dataclass(frozen=True, eq=False, repr=False)
class AttachMarker(Stmt):
    """Where stages computed at ``(stage, ivar)`` go; replaced by their pipelines."""

    stage: Any
    ivar: Any


@dataclass(frozen=True, eq=False, repr=False)
class ThreadAllReduce(Stmt):
    """Reduce ``values`` over the threads in ``reduce_threads`` within each group of the other
    ``group_threads``; every thread of a group ends with the result in ``out_buffers[k][0]``.

    ``reduce_threads``/``group_threads`` are tuples of (var, tag, constant extent).
    """

    combiner: Any
    values: Tuple[PrimExpr, ...]
    condition: PrimExpr
    reduce_threads: Tuple[Tuple[Var, str, int], ...]
    group_threads: Tuple[Tuple[Var, str, int], ...]
    out_buffers: Tuple[Buffer, ...]
