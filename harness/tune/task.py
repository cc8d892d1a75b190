"""A tuned case as a task of the tuning engine: one template over every workload variant, whose
``define_knob`` calls are the knob lists the suite gives the variant and whose instantiation is
:meth:`kernels.workloads.Workload.build` with the chosen knobs (docs/ARCHITECTURE.md, "Tuning")."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.model import Case
from kernels import workloads
from kernels.errors import TVMError
from kernels.target import arch_of_model
from kernels.tuning import ConfigEntity, ConfigSpace, Task, get_config, template
from kernels.tuning.space import SpaceError
from kernels.tuning.task import TaskError

__all__ = ["TEMPLATE", "TaskError", "config_of", "make_task", "target_of"]

#: the name of the template every tuned case is a task of
TEMPLATE = "kbench/workload_variant"


@template(TEMPLATE)
def _workload_variant(workload: str, variant: str, params_json: str, dtype: str, space_json: str):
    """``(schedule, args)`` of ``workload``/``variant`` at the shape ``params_json`` under the current
    configuration, the knobs and their candidates given as ``space_json`` ([[knob, [values]], ...])."""
    cfg = get_config()
    space = json.loads(space_json)
    knobs: dict[str, Any] = {}
    for name, values in space:
        cfg.define_knob(name, values)
        knobs[name] = cfg[name].val
    w, params = workloads.get(workload), json.loads(params_json)
    if not isinstance(cfg, ConfigSpace):
        return w.build(variant, params, dtype, knobs)
    # defining the space: the engine wants one schedule of the template (for its key and operation
    # count), and the first point may be one that does not build (a tuning space may hold such
    # points; they become failed trials): the first point that builds stands for the space
    first_error = None
    for combo in itertools.product(*(values for _, values in space)):
        try:
            return w.build(variant, params, dtype, dict(zip(knobs, combo)))
        except TVMError as exc:
            first_error = first_error or exc
    raise TaskError(f"{workload}/{variant}: no configuration of the tuning space builds; the first "
                    f"fails with {type(first_error).__name__}: {first_error}")


def target_of(case: Case, gpu_model: str = "") -> str:
    """The target string a case is tuned for: cuda for the architecture of ``gpu_model`` where
    kernels.target knows it (so CPU workers build cubins for the GPU that runs them)."""
    arch = arch_of_model(gpu_model) if case.target == "cuda" and gpu_model else None
    return f"cuda -arch={arch}" if arch else case.target


def make_task(case: Case, space: Sequence[tuple[str, Sequence[Any]]], gpu_model: str = "") -> Task:
    """The tuning task of the tuned ``case`` over ``space`` (``Suite.space_for(case)``).

    Its ``flop`` is the workload's operation count at the case's shape (what GFLOP/s are computed
    from); its workload key names the variant, shape, dtype and space, as records store it.
    """
    space_json = json.dumps([[k, list(v)] for k, v in space])
    task = Task(TEMPLATE, (case.workload, case.variant, json.dumps(case.param_dict, sort_keys=True),
                           case.dtype, space_json), target=target_of(case, gpu_model))
    task.flop = float(workloads.get(case.workload).flops(case.param_dict)) or task.flop
    return task


def config_of(task: Task, knobs: Mapping[str, Any]) -> ConfigEntity | None:
    """The point of ``task``'s space whose knobs are ``knobs`` (a stored trial), or None when the
    space has no such point (its knob lists changed since)."""
    space = task.config_space
    if set(knobs) != set(space.space_map):
        return None
    try:
        return space.get(space.index_of(dict(knobs)))
    except SpaceError:  # a value the knob's list no longer has
        return None
