"""TensorIR scheduling: ``tvm.tir.Schedule`` over blocks and loops, its checks and its trace."""

from __future__ import annotations

from ...errors import ScheduleError
from .handles import BlockRV, ExprRV, LoopRV
from .schedule import Schedule
from .sref import BlockScope, Dependency, DepKind, StmtSRef
from .sref import ModuleState as ScheduleState
from .trace import Instruction, InstructionKind, Trace

__all__ = ["Schedule", "BlockRV", "LoopRV", "ExprRV", "ScheduleError", "Trace", "Instruction",
           "InstructionKind", "ScheduleState", "StmtSRef", "BlockScope", "Dependency", "DepKind"]

# tvm.tir.Schedule and friends: the IR package does not import its scheduler (a floor above it), the
# scheduler registers its classes there
from ... import tir as _tir  # noqa: E402

for _name in ("BlockRV", "ExprRV", "LoopRV", "Schedule", "ScheduleError", "ScheduleState", "StmtSRef",
              "Trace"):
    setattr(_tir, _name, globals()[_name])
