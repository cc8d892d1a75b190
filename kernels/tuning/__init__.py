"""The one tuning engine under autotvm and meta_schedule: configuration spaces and tasks
(:mod:`.space`, :mod:`.task`), building and running candidates (:mod:`.measure` in this process,
:mod:`.ray_measure` on a Ray cluster), search strategies
with a cost model (:mod:`.tuner`), records and the best configuration per workload
(:mod:`.record`) and tuner callbacks (:mod:`.callback`)."""

from __future__ import annotations

from . import callback, measure, ray_measure, record, space, task, tuner
from .measure import (LocalBuilder, LocalRunner, MeasureErrorNo, MeasureInput, MeasureResult,
                      measure_option)
from .ray_measure import RayBuilder, RayRunner
from .record import ApplyHistoryBest, apply_history_best
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity
from .task import ApplyConfig, DispatchContext, FallbackContext, Task, create, get_config, template
from .tuner import GridSearchTuner, ModelTuner, RandomTuner, Tuner, XGBTuner

__all__ = ["callback", "measure", "ray_measure", "record", "space", "task", "tuner", "LocalBuilder",
           "LocalRunner", "RayBuilder", "RayRunner",
           "MeasureErrorNo", "MeasureInput", "MeasureResult", "measure_option", "ApplyHistoryBest",
           "apply_history_best", "ConfigEntity", "ConfigSpace", "FallbackConfigEntity", "ApplyConfig",
           "DispatchContext", "FallbackContext", "Task", "create", "get_config", "template",
           "GridSearchTuner", "ModelTuner", "RandomTuner", "Tuner", "XGBTuner"]
