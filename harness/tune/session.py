"""A suite's tuned cases tuned and stored: ``kbench tune``'s flow.

For every tuned case of the suite (``tuned = true`` variants: harness.suite) on every device it can
run on here (each GPU model of the cluster for cuda, ``--gpu-model`` keeping one; the host's CPU
for c and opencl), :func:`tune_suite` opens a tuning session in the store, starts the chosen tuner
(grid, random or xgb: kernels.tuning) on the task of harness.tune.task with the builder and runner of
harness.tune.runner, and stores every trial as its batch is measured (the best configuration per
tuning key and device follows in the same transaction). Trials stored by earlier sessions on the
same device count as history: the tuner starts from their best, the cost model learns from them and
they are not measured again, so a second ``kbench tune`` explores further instead of repeating.
Only trials of the session's clock count (harness.tune.runner.CLOCKS, stored with each session):
costs of two clocks are not compared.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import apply_runtime_defaults
from harness.env import fingerprint, git_commit
from harness.errors import ConfigError, InvalidSetting, UsageError
from harness.execute import executor_for
from harness.model import Case
from harness.store import Store, cpu_device
from harness.suite import Suite, load_suite
from kernels import workloads
from harness.suite.values import TARGETS
from kernels.tuning import (
    GridSearchTuner,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    RandomTuner,
    Tuner,
    XGBTuner,
)

from .direct import configurations, measure_configuration, untried
from .runner import RunnerSettings, measure_option_for
from .task import TaskError, config_of, make_task

__all__ = ["TUNERS", "SessionSummary", "TuneRequest", "TuneSummary", "tune_suite"]

#: the tuners ``--tuner`` names
TUNERS = ("xgb", "random", "grid")

#: events of :func:`tune_suite` for ``on_event(kind, payload)``: "planned" (the TuneSummary before any
#: session), "session" (a SessionSummary as it starts), "trials" ((SessionSummary, [trial dicts]) after
#: every measured batch), "done" (the SessionSummary as it ends)
EVENTS = ("planned", "session", "trials", "done")

OnEvent = Callable[[str, object], None]


@dataclass(frozen=True)
class TuneRequest:
    """What ``kbench tune`` was asked: the suite, the store, the tuner and its trials, where to run,
    which GPU model (``""``: every model of the cluster), which targets (None: all), timing."""

    suite_path: str
    db: Path | str
    tuner: str = "xgb"
    n_trial: int = 64
    executor_kind: str = "local"
    address: str | None = None
    gpu_model: str = ""
    targets: tuple[str, ...] | None = None
    settings: RunnerSettings = RunnerSettings()
    seed: int | None = None
    argv: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # checked where the request is made, before any store is opened or anything starts
        if self.tuner not in TUNERS:
            raise InvalidSetting(("tuner",), f"tuner {self.tuner!r} is not one of {', '.join(TUNERS)}",
                                 owner="TuneRequest")
        if isinstance(self.n_trial, bool) or not isinstance(self.n_trial, int) or self.n_trial < 1:
            raise InvalidSetting(("n_trial",), f"n_trial must be an integer of at least 1, got "
                                 f"{self.n_trial!r}", owner="TuneRequest")
        if self.executor_kind not in ("local", "ray"):
            raise InvalidSetting(("executor_kind",), f"executor {self.executor_kind!r} is not local or ray",
                                 owner="TuneRequest")
        for t in self.targets or ():
            if t not in TARGETS:
                raise InvalidSetting(("targets",), f"unknown target {t!r} (targets: {', '.join(TARGETS)})",
                                     owner="TuneRequest")


@dataclass
class SessionSummary:
    """One tuned case on one device: its session id, trials measured (``counts`` by error name),
    history it started from, and the best configuration stored for it after the session."""

    case: Case
    device: str
    session_id: int | None = None
    planned: int = 0
    history: int = 0
    measured: int = 0
    counts: Counter = field(default_factory=Counter)
    session_best_s: float | None = None
    best: dict[str, Any] | None = None
    note: str = ""


@dataclass
class TuneSummary:
    suite: Suite
    sessions: list[SessionSummary] = field(default_factory=list)
    skipped_targets: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def planned(self) -> int:
        return sum(s.planned for s in self.sessions)


def _make_tuner(name: str, task: Any, seed: int | None, n_trial: int) -> Tuner:
    """The tuner ``name`` on ``task``. The xgb tuner measures batches of a quarter of the trials (8 to
    64): its model is refit after each batch, so a session of 64 trials learns three times."""
    if name == "grid":
        return GridSearchTuner(task)
    if name == "random":
        return RandomTuner(task, seed=seed)
    if name == "xgb":
        # loop features kept on disk: a later session of the same space extracts none of them again
        return XGBTuner(task, plan_size=max(8, min(64, n_trial // 4)), seed=seed, feature_cache=True)
    raise UsageError(f"--tuner {name!r}: use one of {', '.join(TUNERS)}")


def _error_name(error_no: int) -> str:
    try:
        return MeasureErrorNo(int(error_no)).name
    except ValueError:
        return f"ERROR_{int(error_no)}"


def _available(target: str, gpus: float) -> bool:
    if target == "c":
        return True
    if target == "cuda":
        return gpus > 0
    import kernels as tvm  # the OpenCL runtime starts only when a suite asks for it

    try:
        return bool(tvm.opencl(0).exist)
    except Exception:
        return False


def plan_sessions(suite: Suite, gpu_models: Sequence[str], gpu_model: str, cpu: str,
                  targets: Sequence[str] | None, gpus: float) -> tuple[list[tuple[Case, str]], list[str]]:
    """(tuned case with its GPU model, device) per session in suite order, and the targets skipped.

    Raises
    ------
    ConfigError
        The suite has no tuned variant, ``gpu_model`` is not in the cluster, or nothing is left to
        tune on this cluster.
    """
    tuned = suite.tuned_cases
    if not tuned:
        raise ConfigError(f"{suite.path}: suite {suite.name!r} has no tuned variant: mark one "
                          "`{ name = ..., tuned = true, knobs = { knob = [values...] } }` to tune it")
    models = list(dict.fromkeys(m for m in gpu_models if m))
    if gpu_model:
        by_name = {m.casefold(): m for m in models}
        if gpu_model.casefold() not in by_name:
            raise ConfigError(f"--gpu-model {gpu_model!r} is not in the cluster; cluster GPU models: "
                              f"{', '.join(models) or 'none'}")
        models = [by_name[gpu_model.casefold()]]
    out: list[tuple[Case, str]] = []
    skipped: set[str] = set()
    for case in tuned:
        if targets is not None and case.target not in targets:
            continue
        if not _available(case.target, gpus):
            skipped.add(case.target)
            continue
        if case.target != "cuda":
            out.append((case, cpu))
            continue
        wanted = {g.casefold() for g in suite.gpu_models_for(case.workload)}
        for m in models:
            if not wanted or m.casefold() in wanted:
                out.append((dataclasses.replace(case, gpu_model=m), m))
    if not out:
        raise ConfigError(f"{suite.path}: no tuned case of suite {suite.name!r} can run here"
                          + (f" (targets not available: {', '.join(sorted(skipped))})" if skipped else ""))
    return out, sorted(skipped)


def tune_suite(request: TuneRequest, *, on_event: OnEvent | None = None, executor: Any = None) -> TuneSummary:
    """Tune every tuned case of ``request``'s suite on every device it can run on here and store the
    sessions, trials and best configurations (see the module docstring).

    ``executor``: an already started executor of ``request.executor_kind`` to plan on and, for
    ``ray``, whose cluster the builders and runners use (``kbench tune --then-run`` then runs the suite
    on it: one cluster start for both); it is not closed here. By default one is made and closed.

    Raises
    ------
    harness.errors.UsageError
        A bad tuner or trial count.
    harness.errors.ConfigError
        See :func:`plan_sessions`; the suite (harness.suite.SuiteError); the executor.
    """
    if request.tuner not in TUNERS:
        raise UsageError(f"--tuner {request.tuner!r}: use one of {', '.join(TUNERS)}")
    if request.n_trial < 1:
        raise UsageError(f"--trials must be at least 1, got {request.n_trial}")
    apply_runtime_defaults()
    emit = on_event or (lambda kind, payload: None)
    t0 = time.time()
    suite = load_suite(request.suite_path)
    own = executor is None
    if own:
        executor = executor_for(suite, request.executor_kind, request.address)
    try:
        cluster = executor.cluster_summary()
        plan, skipped = plan_sessions(suite, executor.gpu_models(), request.gpu_model,
                                      cpu_device(fingerprint("cpu")), request.targets,
                                      float(cluster.get("gpus", 0)))
        summary = TuneSummary(suite, [SessionSummary(c, d) for c, d in plan], skipped)
        with Store.open(request.db) as st:
            emit("planned", summary)
            for s in summary.sessions:
                # the Ray executor's work pool: its runners time the candidates (and, with --then-run,
                # the run's cases after them)
                _tune_one(st, suite, request, s, emit, getattr(executor, "pool", None))
    finally:
        if own:
            executor.close()
    summary.seconds = time.time() - t0
    return summary


def _tune_one(st: Store, suite: Suite, request: TuneRequest, s: SessionSummary, emit: OnEvent,
              pool: Any = None) -> None:
    """One session: history from the store, the tuner's trials stored batch by batch."""
    case, space = s.case, suite.space_for(s.case)
    kind = workloads.get(case.workload).variant(case.variant).kind
    if kind != "schedule":  # CUDA source or a callable: no template of the engine instantiates it
        _tune_directly(st, suite, request, s, emit, kind)
        return
    try:
        task = make_task(case, space, case.gpu_model)
    except TaskError as exc:  # no point of the space builds: the suite's knob lists are at fault
        raise ConfigError(f"{suite.path}: {case.tuning_key}: {exc}") from None
    tuner = _make_tuner(request.tuner, task, request.seed, request.n_trial)
    inputs, results = [], []
    for t in st.tuning_trials(case.tuning_key, device=s.device):
        if (t["clock"] or "time_evaluator") != request.settings.clock:  # costs of another clock
            continue  # do not compare (NULL: a session from before the clock was recorded)
        config = config_of(task, t["knobs"])
        if config is None or config.index in tuner.visited:
            continue
        inputs.append(MeasureInput(task.target, task, config))
        results.append(MeasureResult(tuple(t["costs"]), int(t["error_no"]), float(t["all_cost_s"]),
                                     float(t["timestamp"])))
    tuner.load_history(inputs, results)
    s.history = len(inputs)
    s.planned = min(request.n_trial, len(task.config_space) - len(tuner.visited))
    if s.planned <= 0:
        s.note = f"every one of the {len(task.config_space)} configurations is measured on this device"
        s.best = st.best_in_space(case.tuning_key, s.device, space)
        emit("session", s)
        emit("done", s)
        return
    # before the session is stored: a builder or runner that cannot be made leaves nothing behind
    option = measure_option_for(request.executor_kind, case, request.settings, gpu_model=case.gpu_model,
                                address=request.address, imports=tuple(suite.imports), measure=suite.measure,
                                pool=pool)
    s.session_id = st.begin_tuning_session(
        case, device=s.device, tuner=request.tuner, n_trial=s.planned, executor=request.executor_kind,
        space=space, suite=suite, argv=request.argv, git_commit=git_commit(), clock=request.settings.clock)
    emit("session", s)

    def store_batch(_tuner: Tuner, batch: Sequence[MeasureInput], measured: Sequence[MeasureResult]) -> None:
        rows = [_record_trial(st, s, inp.config.index, inp.config.to_values(), res, task.flop)
                for inp, res in zip(batch, measured)]
        emit("trials", (s, rows))

    status = "failed"
    try:
        tuner.tune(n_trial=s.planned, measure_option=option, callbacks=[store_batch])
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        st.finish_tuning_session(s.session_id, status)
        s.best = st.best_in_space(case.tuning_key, s.device, space)
        emit("done", s)


def _record_trial(st: Store, s: SessionSummary, index: int, knobs: Any, res: MeasureResult,
                  flop: float) -> dict:
    """Store one measured configuration as the session's next trial, count it in ``s`` and return the
    row the progress display shows."""
    st.record_trial(s.session_id, s.measured, config_index=index, knobs=knobs, costs=res.costs,
                    error_no=res.error_no, all_cost_s=res.all_cost, timestamp=res.timestamp, flop=flop)
    s.counts["ok" if res.ok else _error_name(res.error_no)] += 1
    if res.ok and (s.session_best_s is None or res.mean < s.session_best_s):
        s.session_best_s = res.mean
    row = {"trial": s.measured, "knobs": knobs, "ok": res.ok, "cost_s": res.mean if res.ok else None,
           "error_no": int(res.error_no), "error": "" if res.ok else str(res.costs[0])}
    s.measured += 1
    return row


def _tune_directly(st: Store, suite: Suite, request: TuneRequest, s: SessionSummary, emit: OnEvent,
                   kind: str) -> None:
    """A session of a variant that is not a schedule (harness.tune.direct): the configurations not
    measured on this device yet, in grid order (whatever ``--tuner`` says), each checked and timed in
    this process as ``kbench run`` does, stored trial by trial."""
    case, space = s.case, suite.space_for(s.case)
    if request.executor_kind != "local" and case.target == "cuda":
        raise ConfigError(f"{suite.path}: {case.tuning_key}: a {kind} variant is tuned in this process (each "
                          "configuration checked and timed as `kbench run` does): use --executor local")
    tried = [t["knobs"] for t in st.tuning_trials(case.tuning_key, device=s.device)]
    todo = list(untried(space, tried))
    s.history = len(configurations(space)) - len(todo)
    s.planned = min(request.n_trial, len(todo))
    if s.planned <= 0:
        s.note = f"every one of the {len(configurations(space))} configurations is measured on this device"
        s.best = st.best_in_space(case.tuning_key, s.device, space)
        emit("session", s)
        emit("done", s)
        return
    s.session_id = st.begin_tuning_session(
        case, device=s.device, tuner="grid", n_trial=s.planned, executor=request.executor_kind,
        space=space, suite=suite, argv=request.argv, git_commit=git_commit(), clock="harness")
    emit("session", s)
    flop = float(workloads.get(case.workload).flops(case.param_dict))
    status = "failed"
    try:
        for index, knobs in todo[:s.planned]:
            res = measure_configuration(case, knobs, suite.measure)
            emit("trials", (s, [_record_trial(st, s, index, knobs, res, flop)]))
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        st.finish_tuning_session(s.session_id, status)
        s.best = st.best_in_space(case.tuning_key, s.device, space)
        emit("done", s)
