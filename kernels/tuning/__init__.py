"""The one tuning engine under autotvm and meta_schedule: configuration spaces, tasks, and (see the
modules added with it) builders, runners, cost models and the record database."""

from __future__ import annotations

from . import space, task
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity
from .task import ApplyConfig, DispatchContext, FallbackContext, Task, create, get_config, template

__all__ = ["space", "task", "ConfigEntity", "ConfigSpace", "FallbackConfigEntity", "ApplyConfig",
           "DispatchContext", "FallbackContext", "Task", "create", "get_config", "template"]
