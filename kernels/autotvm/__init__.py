"""``tvm.autotvm``: schedule templates with knobs and their tuning, on kbench's tuning engine
(:mod:`kernels.tuning`).

Templates: ``@autotvm.template(name)``, ``autotvm.get_config()``, ``cfg.define_knob`` /
``define_split``, ``autotvm.task.create(name, args=..., target=...)`` (``config_space``, ``workload``,
``flop``, ``instantiate``), ``autotvm.ApplyConfig``. Tuning: ``autotvm.measure_option(builder="local",
runner=autotvm.LocalRunner(number=..., repeat=...))``, ``autotvm.tuner.{GridSearchTuner,
RandomTuner, XGBTuner}(task).tune(n_trial, measure_option, early_stopping, callbacks)``,
``autotvm.callback.{log_to_file, progress_bar}``, ``autotvm.apply_history_best(log)`` (a context
manager with ``.query(target, workload)``) and ``autotvm.record`` (``load_from_file``, ``pick_best``).
``autotvm.RayBuilder`` / ``autotvm.RayRunner`` build and time on a Ray cluster
(:mod:`kernels.tuning.ray_measure`: CPU build tasks, one runner actor per GPU of a chosen model):
``measure_option(builder=RayBuilder(timeout=10), runner=RayRunner(number=4, gpu_model="H100"))``.
"""

from __future__ import annotations

from ..tuning import callback, record
from ..tuning.measure import (LocalBuilder, LocalRunner, MeasureErrorNo, MeasureInput, MeasureResult,
                              measure_option)
from ..tuning.ray_measure import RayBuilder, RayRunner
from ..tuning.record import ApplyHistoryBest, apply_history_best
from ..tuning.space import ConfigEntity, ConfigSpace, FallbackConfigEntity
from ..tuning.task import ApplyConfig, DispatchContext, FallbackContext, get_config, template
from . import task, tuner

__all__ = ["template", "get_config", "task", "tuner", "callback", "record", "ConfigSpace", "ConfigEntity",
           "FallbackConfigEntity", "ApplyConfig", "DispatchContext", "FallbackContext", "LocalBuilder",
           "LocalRunner", "RayBuilder", "RayRunner", "MeasureErrorNo", "MeasureInput", "MeasureResult",
           "measure_option",
           "ApplyHistoryBest", "apply_history_best"]
