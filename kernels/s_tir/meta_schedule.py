"""``tvm.s_tir.meta_schedule``: TVM 0.2x's spelling of :mod:`kernels.meta_schedule`.

``tune_tir(mod, target, work_dir, max_trials_global, *, num_trials_per_iter=64, ...)`` tunes on the
same engine as :func:`kernels.meta_schedule.tune_tir` (the same design space, search, records in
``work_dir/tuning_records.json``) and returns a :class:`Database` of those records, as TVM 0.2x does;
``compile_tir(database, mod, target)`` gives the schedule of the fastest record of ``mod`` on
``target``. Options kbench's engine has no counterpart for (another cost model, task scheduler or
database kind) are refused with an error naming the argument; builders and runners may be the
engine's objects (e.g. the Ray ones) or ``"local"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..errors import TVMError
from ..meta_schedule import TuneConfig, target_of_tag
from ..meta_schedule import tune_tir as _tune

__all__ = ["Database", "JSONDatabase", "TuneConfig", "compile_tir", "tune_tir"]

RECORDS = "tuning_records.json"

#: TVM 0.2x's search strategy names -> the engine's
_STRATEGIES = {"evolutionary": "evolutionary", "replay-trace": "replay_trace", "replay_trace": "replay_trace"}


class Database:
    """The tuning records of a work folder (``work_dir/tuning_records.json``, JSON lines).

    Parameters
    ----------
    work_dir : str or Path
        The folder :func:`tune_tir` wrote its records to.
    """

    def __init__(self, work_dir: Any):
        self.work_dir = Path(work_dir)
        self.path = self.work_dir / RECORDS

    def __len__(self) -> int:
        if not self.path.exists():
            return 0
        return sum(1 for line in self.path.read_text().splitlines() if line.strip())

    def query_schedule(self, mod: Any, target: Any, workload_name: str = "main"):
        """The schedule of the fastest successful record of ``mod`` (the same function text) on
        ``target``, or None when the records hold none."""
        from ..tuning.record import load_from_file
        from ..tuning.tir_task import TIRTask

        task = TIRTask(mod, target_of_tag(target), workload_name)
        if not self.path.exists():
            return None
        best, best_cost = None, float("inf")
        for inp, res in load_from_file(self.path):
            if tuple(inp.task.workload) != tuple(task.workload) or str(inp.target) != str(task.target):
                continue
            if not res.ok or not res.costs:
                continue
            cost = sum(float(c) for c in res.costs) / len(res.costs)
            if cost < best_cost:
                best, best_cost = inp.config, cost
        if best is None:
            return None
        return task.schedule(task.config_space.get(best.index))

    def query_ir_module(self, mod: Any, target: Any, workload_name: str = "main"):
        """The module of :meth:`query_schedule`'s schedule, or None."""
        sch = self.query_schedule(mod, target, workload_name)
        return None if sch is None else sch.mod


#: TVM's name of the JSON-file database
JSONDatabase = Database


def _only(name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise TVMError(f"tune_tir: {name}={value!r} is not supported by kbench's tuning engine; "
                       f"use {' or '.join(repr(a) for a in allowed)} (docs/TVM_COMPAT.md)")


def tune_tir(mod: Any, target: Any, work_dir: str, max_trials_global: int, *,
             max_trials_per_task: Optional[int] = None, num_trials_per_iter: int = 64,
             builder: Any = "local", runner: Any = "local", database: Any = "json", cost_model: Any = "xgb",
             measure_callbacks: Any = "default", task_scheduler: Any = "gradient",
             space: Any = "post-order-apply", strategy: str = "evolutionary",
             num_tuning_cores: Any = "physical", seed: Optional[int] = None,
             module_equality: str = "structural", special_space: Any = None,
             post_optimization: Any = False) -> Database:
    """Tune the TensorIR ``mod`` for ``target`` (TVM 0.2x's signature) and return the database of
    its records.

    Parameters
    ----------
    mod : IRModule or PrimFunc
        The function to tune (one compute block: :mod:`kernels.tuning.tir_task`).
    target : str or Target
        ``"cuda"``, ``"opencl"``, ``"c"``, a Target or a tag such as ``"nvidia/nvidia-h100"``.
    work_dir : str
        Where the records go (``tuning_records.json``); records already there are reused.
    max_trials_global : int
        Candidates to measure in all.
    max_trials_per_task, num_trials_per_iter, seed
        As in TVM: a cap per task (one task here), the batch size, the search's seed.
    builder, runner : "local" or the engine's builder / runner objects
        How candidates are built and timed (``autotvm.RayBuilder()``, ``autotvm.RayRunner(...)``).
    strategy : {"evolutionary", "replay-trace"}
        Cost-model-guided evolution, or random sampling of the space.
    database, cost_model, measure_callbacks, task_scheduler, space, num_tuning_cores,
    module_equality, special_space, post_optimization
        Accepted at TVM's defaults only (kbench's engine has one of each); another value is an error
        naming the argument.

    Returns
    -------
    Database
        The records of ``work_dir``; :func:`compile_tir` picks the best schedule from it.
    """
    _only("database", database, ("json",))
    _only("cost_model", cost_model, ("xgb",))
    _only("measure_callbacks", measure_callbacks, ("default",))
    _only("task_scheduler", task_scheduler, ("gradient", "round-robin"))
    _only("space", space, ("post-order-apply",))
    _only("module_equality", module_equality, ("structural",))
    _only("special_space", special_space, (None,))
    _only("post_optimization", post_optimization, (False, None))
    if strategy not in _STRATEGIES:
        raise TVMError(f"tune_tir: strategy={strategy!r} is not one of {', '.join(_STRATEGIES)}")
    if not isinstance(num_tuning_cores, int) and num_tuning_cores not in ("physical", "logical"):
        raise TVMError(f"tune_tir: num_tuning_cores={num_tuning_cores!r} must be 'physical', 'logical' or "
                       "an integer")
    if isinstance(max_trials_global, bool) or not isinstance(max_trials_global, int):
        raise TVMError(f"tune_tir: max_trials_global must be an integer, got {max_trials_global!r}")
    if work_dir is None:
        raise TVMError("tune_tir: work_dir is required (the records go there)")
    config = TuneConfig(max_trials_global=max_trials_global, num_trials_per_iter=num_trials_per_iter,
                        max_trials_per_task=max_trials_per_task, strategy=_STRATEGIES[strategy])
    _tune(mod, target, config, str(work_dir), task_name="main", seed=seed,
          builder=None if isinstance(builder, str) and builder == "local" else builder,
          runner=None if isinstance(runner, str) and runner == "local" else runner)
    return Database(work_dir)


def compile_tir(database: Database, mod: Any, target: Any):
    """The schedule of the fastest record of ``mod`` on ``target`` in ``database`` (TVM 0.2x's
    ``compile_tir``); ``sch.mod`` is the module to build.

    Raises
    ------
    TVMError
        The database holds no successful record of ``mod`` on ``target``.
    """
    if not isinstance(database, Database):
        raise TVMError(f"compile_tir: expected the Database tune_tir returned, got {type(database).__name__}")
    sch = database.query_schedule(mod, target, "main")
    if sch is None:
        raise TVMError(f"compile_tir: {database.path} holds no successful record of this function on "
                       f"{target}; run tune_tir(mod, target, work_dir={str(database.work_dir)!r}, ...) first")
    return sch
