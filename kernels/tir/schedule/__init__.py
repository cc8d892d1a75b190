"""TensorIR scheduling: ``tvm.tir.Schedule`` over blocks and loops, its checks and its trace."""

from __future__ import annotations

from ...errors import ScheduleError
from .schedule import BlockRV, LoopRV, Schedule
from .trace import Instruction, Trace

__all__ = ["Schedule", "BlockRV", "LoopRV", "ScheduleError", "Trace", "Instruction"]
