"""Annotations and buffer properties: storage_align, set_scope, annotate, unannotate."""

from __future__ import annotations

import dataclasses
from typing import Any, Union

from ...errors import ScheduleError
from ..block import Block, BlockToken, ExprMutator, as_annotations, with_loop
from ..expr import Buffer, PrimExpr
from ..region import row_major_strides
from .cache import SCOPES
from .handles import BlockRV, LoopRV
from .state import ScheduleState, alloc_owner, is_output_buffer

ALIGN_KEY = "buffer_dim_align"


def _written(prim: str, st: ScheduleState, blk: Block, index: int) -> Buffer:
    if not isinstance(index, int) or not 0 <= index < len(blk.writes):
        names = ", ".join(x.buffer.name for x in blk.writes) or "none"
        raise ScheduleError(f"{prim}: block {blk.name_hint} writes {len(blk.writes)} buffer(s) ({names}); "
                            f"buffer_index {index!r} is out of range")
    buf = blk.writes[index].buffer
    if is_output_buffer(st.func, buf) or alloc_owner(st.func.body, buf) is None:
        raise ScheduleError(f"{prim}: buffer {buf.name} written by block {blk.name_hint} is a function "
                            f"parameter; {prim} applies to buffers the function allocates (alloc_buffer, "
                            "cache stages)")
    return buf


def storage_align(st: ScheduleState, token: BlockToken, name: str, index: int, axis: int, factor: int,
                  offset: int) -> None:
    """Pad the stride of ``axis`` of the buffer so that ``stride % factor == offset`` (bank conflicts)."""
    r = st.realize(token, "storage_align", name)
    blk = r.block
    buf = _written("storage_align", st, blk, index)
    ndim = len(buf.shape)
    if not isinstance(axis, int) or not -ndim <= axis < ndim:
        raise ScheduleError(f"storage_align: axis {axis!r} is out of range for buffer {buf.name} of {ndim} "
                            f"dimension(s) (block {blk.name_hint})")
    if not isinstance(factor, int) or factor <= 0:
        raise ScheduleError(f"storage_align: factor {factor!r} must be a positive integer (block "
                            f"{blk.name_hint})")
    if not isinstance(offset, int) or not 0 <= offset < factor:
        raise ScheduleError(f"storage_align: offset {offset!r} must be in [0, factor) = [0, {factor}) "
                            f"(block {blk.name_hint})")
    entries = [e for e in (blk.annotation(ALIGN_KEY, ()) or ())
               if not (int(e[0]) == index and int(e[1]) % ndim == axis % ndim)]
    entries.append((index, axis % ndim, factor, offset))
    _set_annotation(st, blk, ALIGN_KEY, tuple(tuple(e) for e in entries))


def _set_annotation(st: ScheduleState, blk: Block, key: str, value: Any) -> None:
    anns = tuple((k, v) for k, v in blk.annotations if k != key) + ((key, value),)
    st.replace(blk, dataclasses.replace(blk, annotations=anns))


def set_scope(st: ScheduleState, token: BlockToken, name: str, index: int, scope: str) -> None:
    """Move the ``index``-th buffer a block writes to another storage scope."""
    r = st.realize(token, "set_scope", name)
    buf = _written("set_scope", st, r.block, index)
    if scope not in SCOPES:
        raise ScheduleError(f"set_scope: unknown storage scope {scope!r}; expected one of "
                            f"{', '.join(SCOPES)}")
    nb = Buffer(buf.name, buf.dtype, buf.shape, scope, row_major_strides(buf.shape))
    st.set_body(ExprMutator(buffer_map={buf: nb})(st.func.body))


def _target(st: ScheduleState, rv, prim: str):
    if isinstance(rv, BlockRV):
        return st.realize(rv.token, prim, rv.name).block
    if isinstance(rv, LoopRV):
        return st.loop(rv.var, prim)
    raise ScheduleError(f"{prim}: expected a block or a loop, got {type(rv).__name__}")


def annotate(st: ScheduleState, rv, key: str, value: Union[str, int, float, bool, list, PrimExpr]) -> None:
    if not isinstance(key, str) or not key:
        raise ScheduleError(f"annotate: the annotation key must be a non-empty string, got {key!r}")
    if not isinstance(value, (str, int, float, bool, list, tuple, PrimExpr)):
        raise ScheduleError(f"annotate: annotation {key!r} has a value of unsupported type "
                            f"{type(value).__name__}")
    node = _target(st, rv, "annotate")
    frozen = as_annotations({key: value})[0][1]
    anns = tuple((k, v) for k, v in node.annotations if k != key) + ((key, frozen),)
    if isinstance(node, Block):
        st.replace(node, dataclasses.replace(node, annotations=anns))
    else:
        st.replace(node, with_loop(node, annotations=anns))


def unannotate(st: ScheduleState, rv, key: str) -> None:
    node = _target(st, rv, "unannotate")
    if not any(k == key for k, _ in node.annotations):
        what = f"block {node.name_hint}" if isinstance(node, Block) else f"loop {node.loop_var.name}"
        raise ScheduleError(f"unannotate: {what} has no annotation {key!r}")
    anns = tuple((k, v) for k, v in node.annotations if k != key)
    if isinstance(node, Block):
        st.replace(node, dataclasses.replace(node, annotations=anns))
    else:
        st.replace(node, with_loop(node, annotations=anns))

