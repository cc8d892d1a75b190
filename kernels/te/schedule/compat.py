"""The free functions of TVM's ``te.schedule``: :func:`create_schedule`, the schedule passes
:func:`InferBound` and :func:`ScheduleOps`, and the ``AutoInline*`` helpers.

InferBound and ScheduleOps call the lowering, which is built on top of te: ``kernels.lower``
registers what they call in :data:`LOWERING` when it is loaded, as TVM registers its schedule passes.
"""

from __future__ import annotations

from typing import Dict

from ...errors import ScheduleError
from ...tir.expr import ProducerLoad
from ..scan import ScanOp
from ..tensor import ComputeOp, Operation, PlaceholderOp, Tensor
from .schedule import Schedule

__all__ = ["LOWERING", "InferBound", "ScheduleOps", "AutoInlineElemWise", "AutoInlineBroadcast",
           "AutoInlineInjective", "create_schedule"]

#: what InferBound and ScheduleOps call of the lowering (``infer_bound``, ``check_attachments``,
#: ``inline_bodies``, ``schedule_to_stmt``): lowering is built on top of te, so kernels.lower registers
#: them here when it is loaded, as TVM registers its schedule passes
LOWERING: Dict[str, object] = {}


def _lowering(*names: str) -> tuple:
    missing = [n for n in names if n not in LOWERING]
    if missing:
        raise ScheduleError(f"the lowering is not loaded (import kernels.lower): {', '.join(missing)}")
    return tuple(LOWERING[n] for n in names)


def InferBound(sch: Schedule):  # noqa: N802 - TVM's name
    """The range of every iteration variable of every stage (``tvm.te.schedule.InferBound``).

    Returns a :class:`~kernels.container.Map` from IterVar to Range: the root axes of stages
    computed at another stage cover the region their readers need there; split and fused axes
    follow from their parents.
    """
    from ...container import Map

    infer_bound, check_attachments, inline_bodies = _lowering("infer_bound", "check_attachments",
                                                              "inline_bodies")

    if not isinstance(sch, Schedule):
        raise ScheduleError(f"InferBound expects a schedule, got {sch!r}")
    check_attachments(sch)
    return Map(infer_bound(sch, inline_bodies(sch)).dom)


def ScheduleOps(sch: Schedule, bounds=None, debug_keep_trivial_loop: bool = False):  # noqa: N802
    """The schedule's loop nests as one statement, before storage flattening (TVM's
    ``tvm.te.schedule.ScheduleOps``): every computed stage is realized where it is computed.
    ``bounds`` (from InferBound) is accepted for compatibility; bounds are inferred again."""
    infer_bound, check_attachments, inline_bodies, schedule_to_stmt = _lowering(
        "infer_bound", "check_attachments", "inline_bodies", "schedule_to_stmt")

    if not isinstance(sch, Schedule):
        raise ScheduleError(f"ScheduleOps expects a schedule, got {sch!r}")
    check_attachments(sch)
    bodies = inline_bodies(sch)
    return schedule_to_stmt(sch, infer_bound(sch, bodies), bodies, [])


def _is_injective(op) -> bool:
    return isinstance(op, ComputeOp) and not isinstance(op, ScanOp) and not op.reduce_axis


def _loads_of(op) -> list:
    from ...tir.functor import collect

    return [n for b in op.body for n in collect(b, lambda x: isinstance(x, ProducerLoad))]


def _is_elemwise(op) -> bool:
    """Every input is read at exactly the op's own indices."""
    axis = [iv.var for iv in op.axis]
    for ld in _loads_of(op):
        if len(ld.indices) != len(axis) or any(i is not v for i, v in zip(ld.indices, axis)):
            return False
    return True


def _is_broadcast(op) -> bool:
    """Every input is read at a subsequence of the op's indices (tag "broadcast" also counts)."""
    if op.tag == "broadcast":
        return True
    axis = [iv.var for iv in op.axis]
    for ld in _loads_of(op):
        pos = 0
        for i in ld.indices:
            while pos < len(axis) and axis[pos] is not i:
                pos += 1
            if pos == len(axis):
                return False
            pos += 1
    return True


def _auto_inline(sch: Schedule, accept) -> None:
    for st in sch.stages:
        if not st.is_output and _is_injective(st.op) and st.attach_type == "root" and accept(st.op):
            st.compute_inline()


def AutoInlineElemWise(sch: Schedule) -> None:  # noqa: N802 - TVM's names
    """Inline every non-output stage that reads its inputs at exactly its own indices."""
    _auto_inline(sch, _is_elemwise)


def AutoInlineBroadcast(sch: Schedule) -> None:  # noqa: N802
    """Inline every non-output stage that reads its inputs at subsets of its indices."""
    _auto_inline(sch, lambda op: _is_elemwise(op) or _is_broadcast(op))


def AutoInlineInjective(sch: Schedule) -> None:  # noqa: N802
    """Inline every non-output stage without a reduction."""
    _auto_inline(sch, lambda op: True)


def create_schedule(ops) -> Schedule:
    """Create the default schedule (every stage at root, loops in declaration order)."""
    if isinstance(ops, (Operation, Tensor)):
        ops = [ops]
    out = []
    for o in ops:
        if isinstance(o, Tensor):
            o = o.op
        if not isinstance(o, Operation):
            raise ScheduleError(f"create_schedule expects operations (T.op), got {o!r}")
        if isinstance(o, PlaceholderOp):
            raise ScheduleError(f"create_schedule: {o.name} is a placeholder; schedule a computed tensor")
        out.append(o)
    return Schedule(out)
