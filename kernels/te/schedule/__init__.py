"""Schedules of tensor expressions (TVM's ``te.schedule``).

- :mod:`.schedule`: :class:`Schedule` (one :class:`Stage` per operation) and the schedule primitives;
- :mod:`.relations`: how a stage's axes derive from one another (:class:`Split`, :class:`Fuse`...)
  and the ranges and values passed along them (:func:`pass_down_domain`, :func:`pass_up_index`);
- :mod:`.compat`: TVM's free functions: :func:`create_schedule`, :func:`InferBound`,
  :func:`ScheduleOps`, the ``AutoInline*`` helpers, and :data:`LOWERING`, where ``kernels.lower``
  registers what InferBound and ScheduleOps call.

The names below are ``te.schedule``'s (``tvm.te.schedule.InferBound``...).
"""

from ..tensor import IterVar
from .compat import (LOWERING, AutoInlineBroadcast, AutoInlineElemWise, AutoInlineInjective, InferBound,
                     ScheduleOps, create_schedule)
from .relations import (Fuse, IterVarAttr, Rebase, Singleton, Split, iter_flags, pass_down_domain,
                        pass_up_index, thread_dominated)
from .schedule import AttachType, Group, Schedule, Stage, check_attachment_rules, resolve_group_attachments

__all__ = ["Schedule", "Stage", "Group", "AttachType", "IterVar", "IterVarAttr", "Split", "Fuse", "Rebase",
           "Singleton", "thread_dominated", "pass_down_domain", "pass_up_index", "iter_flags",
           "check_attachment_rules", "resolve_group_attachments", "LOWERING", "InferBound", "ScheduleOps",
           "AutoInlineElemWise", "AutoInlineBroadcast", "AutoInlineInjective", "create_schedule"]
