"""``tvm.autotvm``: schedule templates with knobs, on kbench's tuning engine (kernels.tuning).

``@autotvm.template(name)``, ``autotvm.get_config()``, ``cfg.define_knob`` / ``define_split``,
``autotvm.task.create(name, args=..., target=...)`` (``config_space``, ``workload``, ``flop``,
``instantiate``) and ``autotvm.ApplyConfig``.
"""

from __future__ import annotations

from ..tuning.space import ConfigEntity, ConfigSpace, FallbackConfigEntity
from ..tuning.task import ApplyConfig, DispatchContext, FallbackContext, get_config, template
from . import task

__all__ = ["template", "get_config", "task", "ConfigSpace", "ConfigEntity", "FallbackConfigEntity",
           "ApplyConfig", "DispatchContext", "FallbackContext"]
