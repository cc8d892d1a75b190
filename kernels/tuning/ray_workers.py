"""What runs inside Ray's worker processes for :mod:`kernels.tuning.ray_measure`: a candidate's build
(:func:`build_item`, a work-pool CPU item; the module sent back as bytes), the reference build, and
:class:`RunnerActor`, the worker a work-pool runner holding one GPU builds once and that checks and
times the candidates sent to it (the runtime's ``time_evaluator``, or the runner's
``measure_fn``). Also both ends of a task's journey: :func:`task_bytes` (the driver
pickles a task once) and :func:`restore_task` (a worker rebuilds it once and keeps it). Progress
(which candidate started) is the work pool's (:mod:`kernels.contrib.workpool`). Nothing here imports
Ray at module level.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from typing import Any

from .measure import (
    _REFERENCES,
    BuildResult,
    LocalBuilder,
    MeasureErrorNo,
    MeasureInput,
    RunJob,
    arg_infos,
    reference_outputs,
    run_job,
    with_cuda_arch,
)

__all__ = ["RunnerActor", "build_item", "build_reference", "restore_task", "task_bytes"]

logger = logging.getLogger("autotvm")

#: the most tasks one worker process keeps rebuilt (least recently used first out)
TASK_CACHE_SIZE = 32




def task_bytes(task: Any) -> bytes:
    """The task pickled for the workers: an autotvm template as (name, function, arguments, target),
    any other task (a TensorIR task) as the object."""
    from ray import cloudpickle

    from .task import Task

    if isinstance(task, Task):
        payload = {"kind": "template", "name": task.name, "fcompute": task.func.fcompute,
                   "args": task.args, "target": str(task.target), "target_host": task.target_host}
    else:
        payload = {"kind": "object", "task": task}
    return cloudpickle.dumps(payload)


def task_from_bytes(blob: bytes) -> Any:
    """The task :func:`task_bytes` pickled, rebuilt in this process (an autotvm template registered
    again under its name when this process does not know it)."""
    from ray import cloudpickle

    payload = cloudpickle.loads(blob)
    if payload["kind"] != "template":
        return payload["task"]
    from .task import TEMPLATES, Task, template

    known = TEMPLATES.get(payload["name"])
    if known is None or getattr(known, "fcompute", None) is not payload["fcompute"]:
        template(payload["name"], payload["fcompute"])
    return Task(payload["name"], payload["args"], payload["target"], payload["target_host"])


_WORKER_TASKS: OrderedDict = OrderedDict()  # in a worker: task key -> rebuilt task


def restore_task(key: str, holder: list) -> Any:
    """The task of ``key`` in this worker process (rebuilt from ``holder[0]``, an object reference
    to its pickled bytes, the first time)."""
    got = _WORKER_TASKS.get(key)
    if got is not None:
        _WORKER_TASKS.move_to_end(key)
        return got
    import ray

    got = task_from_bytes(ray.get(holder[0]))
    _WORKER_TASKS[key] = got
    while len(_WORKER_TASKS) > TASK_CACHE_SIZE:
        _WORKER_TASKS.popitem(last=False)
    return got


def _where() -> dict:
    import ray

    return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


def _build_for_transport(task: Any, index: int, cuda_arch: str | None = None) -> BuildResult:
    """Build configuration ``index`` of ``task`` here (a CUDA target naming no architecture for
    ``cuda_arch``); the module as bytes, its arguments as shapes and dtypes."""
    from ..runtime.serialize import module_to_bytes

    t0 = time.perf_counter()
    config = task.config_space.get(index)
    built = LocalBuilder.build_one(MeasureInput(with_cuda_arch(task.target, cuda_arch), task, config))
    if built.module is None:
        return built
    try:
        artifact = module_to_bytes(built.module)
    except Exception as exc:
        return BuildResult(error_no=MeasureErrorNo.COMPILE_HOST, time_cost=time.perf_counter() - t0,
                           error=f"the built module cannot be sent to a runner: {type(exc).__name__}: {exc}")
    return BuildResult(args=arg_infos(built.args), time_cost=time.perf_counter() - t0, artifact=artifact)


def build_item(payload: tuple) -> BuildResult:
    """One candidate built in a work-pool CPU task (GPUs hidden): ``payload`` is (task key, holder,
    configuration index, CUDA architecture or None)."""
    key, holder, index, cuda_arch = payload
    try:
        task = restore_task(key, holder)
    except Exception as exc:
        msg = (f"the build worker cannot rebuild the task ({type(exc).__name__}: {exc}); is the module "
               "defining its template importable on the Ray workers (runtime_env PYTHONPATH)?")
        return BuildResult(error_no=MeasureErrorNo.INSTANTIATION_ERROR, error=msg)
    return _build_for_transport(task, index, cuda_arch)


def build_reference(key: str, holder: list, cuda_arch: str | None) -> BuildResult:
    """A task building the reference configuration (index 0) of a task, for checking outputs."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    return _build_for_transport(restore_task(key, holder), 0, cuda_arch)


class RunnerActor:
    """The worker of a runner holding one GPU for a :class:`RayRunner`'s life: built once in each
    work-pool runner actor (:class:`kernels.contrib.workpool.PoolRunner`), it checks and times one
    candidate a call."""

    def __init__(self) -> None:
        import kernels.build_module  # noqa: F401  (the imports once, before the first batch: all of kernels)

        self.references: dict[str, Any] = {}
        import ray

        self.info = {**_where(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                     "cuda_arch": self.cuda_arch()}

    def where(self) -> dict:
        """The node, process id, GPU ids and CUDA architecture (None: no CUDA device) of this runner."""
        return dict(self.info)

    @staticmethod
    def cuda_arch() -> str | None:
        """The CUDA architecture of this runner's GPU (``"sm_90"``), None without a CUDA device."""
        try:
            from ..contrib.nvcc import normalize_arch
            from ..runtime.device import Device

            dev = Device("cuda", 0)
            return normalize_arch(dev.compute_version) if dev.exist else None
        except Exception:
            return None

    def needs_prepare(self, payload: tuple) -> bool:
        """Whether a candidate (``payload``: target, built, reference key, reference holder, how)
        needs its task's reference outputs computed here first."""
        ref_key = payload[2]
        return ref_key is not None and ref_key not in self.references

    def prepare(self, payload: tuple) -> None:
        """Compute the reference outputs of the candidate's task (once per task in this process)."""
        target, _, ref_key, ref_holder, _ = payload
        self.references[ref_key] = self._reference(ref_holder[0], target)

    def __call__(self, payload: tuple) -> tuple:
        """Check and time one candidate: ``payload`` is (target, built, reference key or None,
        reference holder, how); how = (number, repeat, min_repeat_ms, timeout, cooldown_interval,
        measure_fn) of the runner asking (the actors of a GPU model serve every runner of the
        driver's process). The candidate becomes a :class:`~kernels.tuning.measure.RunJob` and goes
        to ``measure_fn`` (None: :func:`~kernels.tuning.measure.run_job`, the runtime's
        ``time_evaluator``), with the reference outputs known here under its ``reference_key``.
        Returns (costs, error_no, seconds)."""
        target, built, ref_key, _, how = payload
        number, repeat, min_repeat_ms, timeout, cooldown_interval, measure_fn = how
        reference = self.references.get(ref_key) if ref_key is not None else None
        if reference is not None:  # where run_job (and a measure_fn calling it) finds them
            _REFERENCES[ref_key] = reference
        job = RunJob(target, tuple(built.args), built.artifact, number, repeat, min_repeat_ms, timeout,
                     ref_key if reference is not None else None)
        t0 = time.perf_counter()
        try:
            costs, error_no = (measure_fn or run_job)(job)
        except Exception as exc:  # a client's measure_fn that raises: the candidate's error
            costs, error_no = (f"{type(exc).__name__}: {exc}",), int(MeasureErrorNo.RUNTIME_DEVICE)
        seconds = time.perf_counter() - t0
        if cooldown_interval:
            time.sleep(cooldown_interval)
        return tuple(costs), int(error_no), seconds

    @staticmethod
    def _reference(ref: Any, target: str) -> Any:
        import ray

        try:
            built = ray.get(ref)
            if not built.ok:
                logger.warning("the reference configuration did not build (%s); outputs are not checked",
                               built.error)
                return None
            return reference_outputs(built.load(), built.args, target)
        except Exception as exc:
            logger.warning("the reference configuration did not run (%s: %s); outputs are not checked",
                           type(exc).__name__, exc)
            return None
