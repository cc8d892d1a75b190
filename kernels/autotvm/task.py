"""``tvm.autotvm.task``: creating tuning tasks from registered templates."""

from __future__ import annotations

from ..tuning.space import ConfigEntity, ConfigSpace
from ..tuning.task import DispatchContext, Task, create, get_config, template

__all__ = ["create", "Task", "template", "get_config", "ConfigSpace", "ConfigEntity", "DispatchContext"]
