"""What a tuning session measures with: the engine's builder and runner, chosen by executor.

- ``local``: :class:`kernels.tuning.LocalBuilder` (threads in this process) and
  :class:`CheckedRunner`, a :class:`kernels.tuning.LocalRunner` that first checks each candidate's
  outputs against the workload's float64 reference on the case's seeded inputs, within the case's
  tolerances (harness.execute.check, as `kbench run` checks), and times only the correct ones; a
  wrong candidate is recorded as WRONG_ANSWER with the worst element named. Both run in the
  LocalRunner's warm measuring child process: a candidate that segfaults or faults the GPU is
  RUNTIME_DEVICE, one that hangs RUN_TIMEOUT, and the session goes on.
- ``ray``: ``kernels.tuning.ray_measure.RayBuilder`` (builds on CPU workers) and ``RayRunner``
  (checks and times on the GPU workers of one GPU model, calling :func:`check_and_time` as its
  ``measure_fn``), imported when used.

One clock: either way a candidate is timed as ``kbench run`` times a case (``RunnerSettings.clock``
"harness", the default): the same timer (:func:`harness.execute.worker.timer_for`), cache flush,
warm-up and stopping rule (the suite's ``[measure]``, with a shorter cap and fewer samples:
:meth:`RunnerSettings.measure_config`), and its cost is the samples' median. So the best a session
stores is the configuration ``kbench run`` finds fastest, and its cost is what the run will report
(within the noise of two measurements). ``clock="time_evaluator"`` keeps autotvm's way (means of
back-to-back launches, caches warm) to compare with; the session records which clock it used.
"""

from __future__ import annotations

import functools
import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import kernels as tvm
from harness.errors import ConfigError, InvalidSetting
from harness import measure
from harness.execute.check import check_outputs
from harness.execute.inputs import case_data
from harness.execute.worker import MEASURE_LIMIT_SHARE, import_suite_modules, timer_for
from harness.model import Case, MeasureConfig, check_measure_settings
from kernels import workloads
from kernels.tuning import (
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    measure_option,
)
from kernels.tuning.measure import BuildResult, MeasureOption, RunJob, run_job

__all__ = ["CLOCKS", "CheckedRunner", "RunnerSettings", "check_and_time", "measure_checked",
           "measure_option_for", "ray_measure_fn"]


#: the clocks a tuning session can measure with (RunnerSettings.clock; stored with the session)
CLOCKS = ("harness", "time_evaluator")


@dataclass(frozen=True)
class RunnerSettings:
    """How each candidate is timed.

    ``clock="harness"`` (default): with ``kbench run``'s timer and loop (:func:`measure_checked`:
    the timer :func:`harness.execute.worker.timer_for` picks for the case's target, the cache flushed
    before every cold sample, warm-up, the suite's stopping rule), made cheaper by :meth:`measure_config`:
    at most ``max_time_s`` seconds and ``min_time_s`` of measured time, at least ``min_samples``
    samples (each no more than the suite asks), a CI target of at least ``max_rel_ci``. A candidate's
    cost is the median of its samples, as ``kbench run`` reports a case.

    ``clock="time_evaluator"``: the runtime's ``time_evaluator`` as autotvm's runners time
    (:func:`kernels.tuning.measure.run_job`): ``number`` launches per repeat (their mean is one cost),
    ``repeat`` costs per candidate, ``number`` raised until a repeat takes ``min_repeat_ms`` (None:
    100 ms for cuda, where single launches take microseconds, else 0); no flush, no warm-up. Kept
    to compare with: it favours candidates that run well from a warm cache.

    Both: ``timeout_s`` per candidate for building and for running (None: the case's timeout);
    ``seed`` of the checked inputs."""

    number: int = 4
    repeat: int = 3
    min_repeat_ms: float | None = None
    timeout_s: float | None = None
    seed: int = 0
    clock: str = "harness"
    max_time_s: float = 1.0
    min_time_s: float = 0.1
    min_samples: int = 5
    max_rel_ci: float = 0.02

    def __post_init__(self) -> None:
        # checked where the settings are made, whoever makes them (the command line, the API)
        for name, ok, what in (("number", lambda v: _integral(v) and v >= 1, "an integer of at least 1"),
                               ("repeat", lambda v: _integral(v) and v >= 1, "an integer of at least 1"),
                               ("min_repeat_ms", lambda v: v is None or (_finite(v) and v >= 0),
                                "a non-negative number (or None)"),
                               ("timeout_s", lambda v: v is None or (_finite(v) and v > 0),
                                "a positive number of seconds (or None: the case's timeout)"),
                               ("seed", lambda v: _integral(v) and v >= 0, "a non-negative integer"),
                               ("clock", lambda v: v in CLOCKS, f"one of {', '.join(CLOCKS)}")):
            value = getattr(self, name)
            if not ok(value):
                raise InvalidSetting((name,), f"{name} must be {what}, got {value!r}", owner="RunnerSettings")
        # the harness clock's settings obey MeasureConfig's rules (harness.model.MEASURE_RULES)
        try:
            check_measure_settings({k: getattr(self, k) for k in TUNING_MEASURE_FIELDS})
        except InvalidSetting as exc:
            raise InvalidSetting(exc.settings, exc.detail, owner="RunnerSettings") from None

    def for_case(self, case: Case) -> RunnerSettings:
        """These settings with the defaults that depend on the case filled in."""
        return replace(self, min_repeat_ms=(100.0 if case.target == "cuda" else 0.0)
                       if self.min_repeat_ms is None else self.min_repeat_ms,
                       timeout_s=case.timeout_s if self.timeout_s is None else self.timeout_s)

    def measure_config(self, base: MeasureConfig) -> MeasureConfig:
        """The MeasureConfig a candidate is timed with on the harness clock: ``base`` (the suite's
        ``[measure]``: mode, stopping criterion, clock floor, warm-up, seed kept) no dearer than these
        settings: ``max_time_s``, ``min_time_s`` and ``min_samples`` at most these, ``max_rel_ci``
        at least this; never interleaved sides or injected work."""
        return replace(base, max_time_s=min(base.max_time_s, self.max_time_s),
                       min_time_s=min(base.min_time_s, self.min_time_s),
                       min_samples=min(base.min_samples, self.min_samples),
                       max_rel_ci=max(base.max_rel_ci, self.max_rel_ci), slowdown=0.0, interleave=())

    def clock_config(self, base: MeasureConfig | None = None) -> MeasureConfig | None:
        """What :func:`check_and_time` is given for these settings' clock: :meth:`measure_config` of
        ``base`` (None: MeasureConfig's defaults) on the harness clock, None on ``time_evaluator``."""
        if self.clock != "harness":
            return None
        return self.measure_config(base if base is not None else MeasureConfig())


#: the RunnerSettings fields that are MeasureConfig settings (checked by MeasureConfig's rules)
TUNING_MEASURE_FIELDS = ("max_time_s", "min_time_s", "min_samples", "max_rel_ci")


def _integral(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _finite(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _device(target: str) -> Any:
    kind = str(target).split()[0]
    return {"c": tvm.cpu, "llvm": tvm.cpu, "opencl": tvm.opencl, "cuda": tvm.cuda}[kind](0)


class CheckedRunner(LocalRunner):
    """A :class:`~kernels.tuning.LocalRunner` whose correctness check and clock are the harness's: each
    built candidate runs once on the case's inputs (outputs poisoned) and is compared with the
    workload's float64 reference within ``case.rtol`` / ``case.atol``; correct candidates are then
    timed on ``settings.clock`` (the harness's timer and loop by default, see :class:`RunnerSettings`).
    Both happen in the LocalRunner's measuring child process (:func:`check_and_time`), which imports
    the suite's modules as it starts: a candidate that segfaults, hangs or faults the GPU is recorded
    and the session goes on in a fresh child.

    Parameters
    ----------
    case : Case
        The tuned case (its workload, shape, dtype and tolerances).
    settings : RunnerSettings
        Clock, timing and seed.
    imports : sequence of str
        Modules the measuring process imports (the suite's ``imports``: they may register the
        case's workload).
    isolate : bool
        False measures in this process, for debugging only (see :class:`~kernels.tuning.LocalRunner`).
    measure : MeasureConfig, optional
        The suite's ``[measure]`` (its mode, stopping rule, clock floor), made cheaper by
        :meth:`RunnerSettings.measure_config`; None: MeasureConfig's defaults.
    """

    def __init__(self, case: Case, settings: RunnerSettings, imports: Sequence[str] = (),
                 isolate: bool = True, measure: MeasureConfig | None = None):
        settings = settings.for_case(case)
        super().__init__(number=settings.number, repeat=settings.repeat,
                         min_repeat_ms=settings.min_repeat_ms, timeout=settings.timeout_s, isolate=isolate)
        self.case = case
        self.seed = settings.seed
        self.imports = tuple(imports)
        self.config = settings.clock_config(measure)

    def _child_imports(self) -> tuple[str, ...]:
        return ("harness.tune.runner", *self.imports)

    def _job(self, inp: MeasureInput, built: BuildResult) -> tuple[Any, tuple]:
        return check_and_time, (self.case, self.seed, self._run_job(inp, built), self.config)


def _checked(case: Case, seed: int, job: RunJob) -> tuple[Any, ...]:
    """Load ``job``'s candidate and check it against the workload's float64 reference on the case's
    inputs (seeded by ``seed``): ``(module, device arrays, device)``, or ``((message,), error_no)``."""
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
    return module, nd, dev


def measure_checked(case: Case, seed: int, job: RunJob, config: MeasureConfig,
                    imports: Sequence[str] = ()) -> tuple[Any, int]:
    """Check one candidate of ``case`` (:func:`_checked`), then time it as ``kbench run`` times a case:
    the timer :func:`harness.execute.worker.timer_for` picks for the case's target, on the arguments
    just checked, in :func:`harness.measure.measure`'s loop under ``config`` (warm-up, cache flush
    before every cold sample, the stopping rule), measuring at most
    :data:`~harness.execute.worker.MEASURE_LIMIT_SHARE` of what ``job.timeout`` leaves. ``imports``:
    the suite's modules, imported first (a Ray worker has not). ``(Timing, NO_ERROR)``, or
    ``((message,), error_no)``."""
    t0 = time.perf_counter()
    import_suite_modules(imports)
    got = _checked(case, seed, job)
    if len(got) == 2:
        return got
    module, nd, dev = got
    try:
        limit_s = max(0.0, MEASURE_LIMIT_SHARE * (job.timeout - (time.perf_counter() - t0)))
        timing = measure.measure(timer_for(case.target, dev), measure.module_launcher(module, nd), config,
                                 limit_s=limit_s)
    except Exception as exc:  # the candidate fails while timed: recorded, never raised
        return (f"{type(exc).__name__}: {exc}",), int(MeasureErrorNo.RUNTIME_DEVICE)
    if not (timing.samples and timing.median > 0):
        return (f"no sample kept ({timing.discarded} discarded below the clock floor)",), \
            int(MeasureErrorNo.RUNTIME_DEVICE)
    return timing, int(MeasureErrorNo.NO_ERROR)


def check_and_time(case: Case, seed: int, job: RunJob, config: MeasureConfig | None = None,
                   imports: Sequence[str] = ()) -> tuple[tuple[Any, ...], int]:
    """What the measuring process runs for one candidate of ``case``: load it, check it against the
    workload's float64 reference on the case's inputs (seeded by ``seed``), then time it: with
    ``config``, on the harness's clock (:func:`measure_checked`; the cost is the samples' median,
    the number ``kbench run`` reports, once: a tuner averages a candidate's costs, and the mean of
    cold samples would weigh the outliers the median leaves out); without, with ``time_evaluator``
    (:func:`kernels.tuning.measure.run_job`). ``(costs, error_no)``. Also the Ray runner's
    ``measure_fn`` (:func:`measure_option_for`), called with ``job`` as its last argument."""
    if config is not None:
        timing, error_no = measure_checked(case, seed, job, config, imports)
        if error_no != MeasureErrorNo.NO_ERROR:
            return timing, error_no
        return (float(timing.median),), error_no
    import_suite_modules(imports)
    got = _checked(case, seed, job)
    if len(got) == 2:
        return got
    return run_job(replace(job, module=got[0]))


def measure_option_for(executor: str, case: Case, settings: RunnerSettings, *, gpu_model: str = "",
                       address: str | None = None, imports: Sequence[str] = (),
                       measure: MeasureConfig | None = None, pool: Any = None) -> MeasureOption:
    """The builder and runner of a session of ``case`` on ``executor`` ("local" or "ray"; the Ray
    runner is placed on GPUs of ``gpu_model``). Cases of the c and opencl targets are measured on
    this host whatever the executor (their device key is this host's CPU), in the local runner's
    measuring child process, which imports ``imports`` (the suite's modules). Either runner checks
    each candidate with the harness's float64 check and times it on ``settings.clock``; ``measure``
    is the suite's ``[measure]`` the harness clock's settings are cut down from
    (:meth:`RunnerSettings.measure_config`). On Ray, :func:`check_and_time` is the runner's
    ``measure_fn``, run by the GPU workers; ``pool`` (the Ray executor's work pool) gives the runner
    that executor's runners, one per GPU for the tuning and the run after it.

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
                              runner=CheckedRunner(case, settings, imports, measure=measure))
    try:
        # imported when used: it needs Ray and a cluster, which the local executor does without
        from harness.execute.ray_executor import CANDIDATE_WORKER
        from kernels.tuning.ray_measure import RayBuilder, RayRunner
    except ImportError as exc:
        raise ConfigError(f"--executor ray: the Ray builder and runner (kernels.tuning.ray_measure) cannot "
                          f"be imported: {exc}; use --executor local") from None
    builder = RayBuilder(timeout=settings.timeout_s, n_parallel=None, address=address)
    runner = RayRunner(number=settings.number, repeat=settings.repeat, min_repeat_ms=settings.min_repeat_ms,
                       timeout=settings.timeout_s, gpu_model=gpu_model or None,
                       measure_fn=ray_measure_fn(case, settings, imports, measure), pool=pool,
                       worker=CANDIDATE_WORKER if pool is not None else None)
    return measure_option(builder=builder, runner=runner)


def ray_measure_fn(case: Case, settings: RunnerSettings, imports: Sequence[str] = (),
                   measure: MeasureConfig | None = None) -> functools.partial:
    """What a Ray runner's GPU worker calls for each candidate of ``case`` (``RayRunner(measure_fn=...)``):
    :func:`check_and_time` with the case, the seed, the harness clock's MeasureConfig (none on the
    ``time_evaluator`` clock) and the suite's modules, the candidate's ``RunJob`` last. A partial of
    a module-level function: it travels to the workers by reference (pickled by name)."""
    return functools.partial(check_and_time, case, settings.seed, config=settings.clock_config(measure),
                             imports=tuple(imports))
