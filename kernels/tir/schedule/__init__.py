"""TensorIR scheduling: ``tvm.tir.Schedule`` over blocks and loops, its checks and its trace."""

from __future__ import annotations

from ...errors import ScheduleError
from .schedule import BlockRV, LoopRV, Schedule
from .trace import Instruction, Trace

__all__ = ["Schedule", "BlockRV", "LoopRV", "ScheduleError", "Trace", "Instruction"]

# tvm.tir.Schedule and friends: the IR package does not import its scheduler (a floor above it), the
# scheduler registers its classes there
from ... import tir as _tir  # noqa: E402

for _name in ("BlockRV", "LoopRV", "Schedule", "Trace"):
    setattr(_tir, _name, globals()[_name])
