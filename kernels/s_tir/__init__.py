"""``tvm.s_tir``: TVM 0.2x's home of TensorIR schedules, over :mod:`kernels.tir.schedule`.

``tvm.s_tir.Schedule is tvm.tir.Schedule`` (with ``get_sblock``, TVM 0.2x's name of ``get_block``),
``SBlockRV`` is ``BlockRV``; ``import kernels.s_tir.schedule`` gives :mod:`kernels.tir.schedule`
itself (:mod:`kernels.aliases`); :mod:`kernels.s_tir.meta_schedule` has TVM 0.2x's ``tune_tir`` and
``compile_tir``. docs/TVM_COMPAT.md has the table of both generations' names.
"""

from __future__ import annotations

from ..tir import schedule
from ..tir.schedule import BlockRV, Instruction, LoopRV, Schedule, ScheduleError, Trace
from . import meta_schedule

#: TVM 0.2x's name of a block handle
SBlockRV = BlockRV

__all__ = ["Schedule", "ScheduleError", "Trace", "Instruction", "SBlockRV", "BlockRV", "LoopRV", "schedule",
           "meta_schedule"]
