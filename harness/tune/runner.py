"""What a tuning session measures with: the engine's builder and runner, chosen by executor.

- ``local``: :class:`kernels.tuning.LocalBuilder` (threads in this process) and
  :class:`CheckedRunner`, a :class:`kernels.tuning.LocalRunner` that first checks each candidate's
  outputs against the workload's float64 reference on the case's seeded inputs, within the case's
  tolerances (harness.execute.check, as `kbench run` checks), and times only the correct ones; a
  wrong candidate is recorded as WRONG_ANSWER with the worst element named. Both run in the
  LocalRunner's warm measuring child process: a candidate that segfaults or faults the GPU is
  RUNTIME_DEVICE, one that hangs RUN_TIMEOUT, and the session goes on.
- ``ray``: ``kernels.tuning.ray_measure.RayBuilder`` (builds on CPU workers) and ``RayRunner``
  (checks and times on the GPU workers of one GPU model), imported when used.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import kernels as tvm
from harness.errors import ConfigError, InvalidSetting
from harness.execute.check import check_outputs
from harness.execute.inputs import case_data
from harness.model import Case
from kernels import workloads
from kernels.tuning import (
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    measure_option,
)
from kernels.tuning.measure import BuildResult, MeasureOption, RunJob, run_job

__all__ = ["CheckedRunner", "RunnerSettings", "check_and_time", "measure_option_for"]


@dataclass(frozen=True)
class RunnerSettings:
    """How each candidate is timed: ``number`` launches per repeat (their mean is one cost),
    ``repeat`` costs per candidate, ``number`` raised until a repeat takes ``min_repeat_ms`` (None:
    100 ms for cuda, where single launches take microseconds, else 0); ``timeout_s`` per candidate
    for building and for running (None: the case's timeout); ``seed`` of the checked inputs."""

    number: int = 4
    repeat: int = 3
    min_repeat_ms: float | None = None
    timeout_s: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        # checked where the settings are made, whoever makes them (the command line, the API)
        for name, ok, what in (("number", lambda v: _integral(v) and v >= 1, "an integer of at least 1"),
                               ("repeat", lambda v: _integral(v) and v >= 1, "an integer of at least 1"),
                               ("min_repeat_ms", lambda v: v is None or (_finite(v) and v >= 0),
                                "a non-negative number (or None)"),
                               ("timeout_s", lambda v: v is None or (_finite(v) and v > 0),
                                "a positive number of seconds (or None: the case's timeout)"),
                               ("seed", lambda v: _integral(v) and v >= 0, "a non-negative integer")):
            value = getattr(self, name)
            if not ok(value):
                raise InvalidSetting((name,), f"{name} must be {what}, got {value!r}", owner="RunnerSettings")

    def for_case(self, case: Case) -> RunnerSettings:
        """These settings with the defaults that depend on the case filled in."""
        return replace(self, min_repeat_ms=(100.0 if case.target == "cuda" else 0.0)
                       if self.min_repeat_ms is None else self.min_repeat_ms,
                       timeout_s=case.timeout_s if self.timeout_s is None else self.timeout_s)


def _integral(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _finite(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _device(target: str) -> Any:
    kind = str(target).split()[0]
    return {"c": tvm.cpu, "llvm": tvm.cpu, "opencl": tvm.opencl, "cuda": tvm.cuda}[kind](0)


class CheckedRunner(LocalRunner):
    """A :class:`~kernels.tuning.LocalRunner` whose correctness check is the harness's: each built
    candidate runs once on the case's inputs (outputs poisoned) and is compared with the workload's
    float64 reference within ``case.rtol`` / ``case.atol``; correct candidates are then timed as the
    LocalRunner times them. Both happen in the LocalRunner's measuring child process
    (:func:`check_and_time`), which imports the suite's modules as it starts: a candidate that
    segfaults, hangs or faults the GPU is recorded and the session goes on in a fresh child.

    Parameters
    ----------
    case : Case
        The tuned case (its workload, shape, dtype and tolerances).
    settings : RunnerSettings
        Timing and seed.
    imports : sequence of str
        Modules the measuring process imports (the suite's ``imports``: they may register the
        case's workload).
    isolate : bool
        False measures in this process, for debugging only (see :class:`~kernels.tuning.LocalRunner`).
    """

    def __init__(self, case: Case, settings: RunnerSettings, imports: Sequence[str] = (),
                 isolate: bool = True):
        settings = settings.for_case(case)
        super().__init__(number=settings.number, repeat=settings.repeat,
                         min_repeat_ms=settings.min_repeat_ms, timeout=settings.timeout_s, isolate=isolate)
        self.case = case
        self.seed = settings.seed
        self.imports = tuple(imports)

    def _child_imports(self) -> tuple[str, ...]:
        return ("harness.tune.runner", *self.imports)

    def _job(self, inp: MeasureInput, built: BuildResult) -> tuple[Any, tuple]:
        return check_and_time, (self.case, self.seed, self._run_job(inp, built))


def check_and_time(case: Case, seed: int, job: RunJob) -> tuple[tuple[Any, ...], int]:
    """What the measuring process runs for one candidate of ``case``: load it, check it against the
    workload's float64 reference on the case's inputs (seeded by ``seed``), then time it
    (:func:`kernels.tuning.measure.run_job`); ``(costs, error_no)``."""
    try:
        module = job.load()
    except Exception as exc:
        return (f"loading the module failed: {type(exc).__name__}: {exc}",), \
            int(MeasureErrorNo.RUNTIME_DEVICE)
    w = workloads.get(case.workload)
    data = case_data(w, case, seed)
    try:
        dev = _device(job.target)
        nd = [tvm.nd.array(a, dev) for a in data.args]
        module(*nd)
        dev.sync()
        got = [nd[i].numpy() for i in w.outputs]
    except Exception as exc:  # the candidate cannot run: recorded, never raised
        return (f"{type(exc).__name__}: {exc}",), int(MeasureErrorNo.RUNTIME_DEVICE)
    ok, message = check_outputs(got, data.reference, case.rtol, case.atol)
    if not ok:
        return (message,), int(MeasureErrorNo.WRONG_ANSWER)
    return run_job(replace(job, module=module))


def measure_option_for(executor: str, case: Case, settings: RunnerSettings, *, gpu_model: str = "",
                       address: str | None = None, imports: Sequence[str] = ()) -> MeasureOption:
    """The builder and runner of a session of ``case`` on ``executor`` ("local" or "ray"; the Ray
    runner is placed on GPUs of ``gpu_model``). Cases of the c and opencl targets are measured on
    this host whatever the executor (their device key is this host's CPU), in the local runner's
    measuring child process, which imports ``imports`` (the suite's modules).

    Raises
    ------
    ConfigError
        ``executor`` is unknown, or "ray" without the Ray builder and runner installed.
    """
    if executor not in ("local", "ray"):
        raise ConfigError(f"--executor {executor!r}: use local or ray")
    settings = settings.for_case(case)
    if executor == "local" or case.target != "cuda":
        return measure_option(builder=LocalBuilder(timeout=settings.timeout_s),
                              runner=CheckedRunner(case, settings, imports))
    try:
        # imported when used: it needs Ray and a cluster, which the local executor does without
        from kernels.tuning.ray_measure import RayBuilder, RayRunner
    except ImportError as exc:
        raise ConfigError(f"--executor ray: the Ray builder and runner (kernels.tuning.ray_measure) cannot "
                          f"be imported: {exc}; use --executor local") from None
    builder = RayBuilder(timeout=settings.timeout_s, n_parallel=None, address=address)
    runner = RayRunner(number=settings.number, repeat=settings.repeat, min_repeat_ms=settings.min_repeat_ms,
                       timeout=settings.timeout_s, gpu_model=gpu_model or None, check_correctness=True)
    return measure_option(builder=builder, runner=runner)
