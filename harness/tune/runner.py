"""What a tuning session measures with: the engine's builder and runner, chosen by executor.

- ``local``: :class:`kernels.tuning.LocalBuilder` (threads in this process) and
  :class:`CheckedRunner`, a :class:`kernels.tuning.LocalRunner` that first checks each candidate's
  outputs against the workload's float64 reference on the case's seeded inputs, within the case's
  tolerances (harness.execute.check, as `kbench run` checks), and times only the correct ones; a
  wrong candidate is recorded as WRONG_ANSWER with the worst element named.
- ``ray``: ``kernels.tuning.ray_measure.RayBuilder`` (builds on CPU workers) and ``RayRunner``
  (checks and times on the GPU workers of one GPU model), imported when used.
"""

from __future__ import annotations

import math
import numbers
import time
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
    MeasureResult,
    measure_option,
)
from kernels.tuning.measure import BuildResult, MeasureOption

__all__ = ["CheckedRunner", "RunnerSettings", "measure_option_for"]


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
    LocalRunner times them.

    Parameters
    ----------
    case : Case
        The tuned case (its workload, shape, dtype and tolerances).
    settings : RunnerSettings
        Timing and seed.
    """

    def __init__(self, case: Case, settings: RunnerSettings):
        settings = settings.for_case(case)
        super().__init__(number=settings.number, repeat=settings.repeat,
                         min_repeat_ms=settings.min_repeat_ms, timeout=settings.timeout_s)
        self.case = case
        self.seed = settings.seed

    def _check(self, built: BuildResult, target: Any) -> tuple[int, str] | None:
        """None when the candidate's outputs match the reference, else (error number, message)."""
        w = workloads.get(self.case.workload)
        data = case_data(w, self.case, self.seed)
        try:
            dev = _device(target)
            nd = [tvm.nd.array(a, dev) for a in data.args]
            built.module(*nd)
            dev.sync()
            got = [nd[i].numpy() for i in w.outputs]
        except Exception as exc:  # the candidate cannot run: recorded, never raised
            return int(MeasureErrorNo.RUNTIME_DEVICE), f"{type(exc).__name__}: {exc}"
        ok, message = check_outputs(got, data.reference, self.case.rtol, self.case.atol)
        return None if ok else (int(MeasureErrorNo.WRONG_ANSWER), message)

    def run(self, inputs: Sequence[MeasureInput],
            build_results: Sequence[BuildResult]) -> list[MeasureResult]:
        out: list[MeasureResult | None] = [None] * len(inputs)
        for i, (inp, built) in enumerate(zip(inputs, build_results)):
            if built.module is None:
                continue  # the LocalRunner reports the build's error
            t0 = time.perf_counter()
            bad = self._check(built, inp.target)
            if bad is not None:
                spent = built.time_cost + time.perf_counter() - t0
                out[i] = MeasureResult((bad[1],), bad[0], spent, time.time())
        rest = [i for i, r in enumerate(out) if r is None]
        for i, r in zip(rest, super().run([inputs[i] for i in rest], [build_results[i] for i in rest])):
            out[i] = r
        return [r for r in out if r is not None]


def measure_option_for(executor: str, case: Case, settings: RunnerSettings, *, gpu_model: str = "",
                       address: str | None = None) -> MeasureOption:
    """The builder and runner of a session of ``case`` on ``executor`` ("local" or "ray"; the Ray
    runner is placed on GPUs of ``gpu_model``). Cases of the c and opencl targets are measured in
    this process whatever the executor: their device key is this host's CPU.

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
                              runner=CheckedRunner(case, settings))
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
