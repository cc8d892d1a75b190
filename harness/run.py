"""A suite from file to store: plan its cases, dispatch them, store every result as it arrives, and
summarise (docs/ARCHITECTURE.md, "A case from suite to report"). ``kbench run``, ``kbench ab`` and
``kbench calibrate`` all run suites through :func:`run_suite`; :func:`rerun_keys` is how they time
AMBIGUOUS cases once more (harness.judge.remeasure_ambiguous).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import kernels as tvm

from . import plan as planmod
from .config import apply_runtime_defaults, settings
from .env import fingerprint, git_commit
from .errors import ExitCode, UsageError
from .execute import Executor, make_executor
from .execute.peers import applies_to
from .model import Case, MeasureConfig, Result
from .store import Store, cpu_device
from .suite import load_suite

#: the events :func:`run_suite` reports to ``on_event(kind, payload)``: "planned" (the RunSummary,
#: before any case runs) and "result" (each Result as it arrives; interleaved sides in its ``sides``)
EVENTS = ("planned", "result")

OnEvent = Callable[[str, object], None]
#: what ``side_specs_for(cases)`` returns: per case key, {side: another source tree's frozen build}
SideSpecsFor = Callable[[list[Case]], dict[str, dict]]


@dataclass(frozen=True)
class RunRequest:
    """What to run and how: a suite file, the store, where the cases run and how they are measured.

    ``measure`` replaces fields of the suite's :class:`~harness.model.MeasureConfig` (e.g.
    ``{"max_time_s": 2.0}``, or ``{"interleave": (Side(...), ...)}`` for sides timed together).
    ``kind`` labels the stored runs (harness.store: "calibration" and "ab" runs are never baselines
    nor history). ``with_peers=False`` leaves out the suite's library peers.
    """

    suite_path: str
    db: Path
    executor_kind: str = "ray"
    address: str | None = None
    targets: tuple[str, ...] | None = None
    argv: tuple[str, ...] = ()
    measure: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "run"
    compare_gpus: bool = False
    with_peers: bool = True


@dataclass
class RunSummary:
    run_id: int
    db: Path
    planned: int
    counts: Counter = field(default_factory=Counter)
    skipped_targets: list[str] = field(default_factory=list)
    nvcc_calls: int = 0
    seconds: float = 0.0
    dispatch_s: float = 0.0  # from the first task submitted to the last result
    side_runs: dict[str, int] = field(default_factory=dict)  # interleaved side -> its run (else empty)
    # where the time went (seconds): "executor" (starting or joining Ray), "plan" (planning, the
    # other tree's builds for kbench ab), "first_result" (dispatch start to the first result),
    # "runners_ready" / "runner_prepare" (GPU runners: see RayExecutor.last_stats), "close" (ending
    # the executor: the embedded Ray's shutdown)
    phases: dict[str, float] = field(default_factory=dict)
    # the configuration each tuned case runs with (harness.plan.pick_tuned); "untuned" ones have none
    # stored for their device and run the first configuration of their space
    tuned_picks: list[planmod.TunedPick] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        bad = sum(self.counts[o] for o in ("wrong", "timeout", "crashed", "build_error"))
        return ExitCode.WRONG if bad else ExitCode.OK

    @property
    def runs_by_side(self) -> dict[str, int]:
        """Each side's run; ``{"": run_id}`` for a run without interleaved sides."""
        return dict(self.side_runs) or {"": self.run_id}


def _available_targets(gpus: float) -> set:
    out = {"c"}
    try:
        if tvm.opencl(0).exist:
            out.add("opencl")
    except Exception:
        pass
    if gpus > 0:
        out.add("cuda")
    return out


def run_suite(request: RunRequest, *, on_event: OnEvent | None = None, resume: int | None = None,
              parent_run: int | None = None, only_keys: Collection[str] | None = None,
              executor: Executor | None = None, side_specs_for: SideSpecsFor | None = None) -> RunSummary:
    """Plan ``request``'s suite, run every case (or only ``only_keys``) and store each result as it
    arrives.

    ``resume`` continues a stored run (only the cases it lacks); ``parent_run`` is stored with the
    run (a "remeasure" run re-times some cases of its parent). ``executor``: an already started
    executor to reuse (it is not closed here); by default one of ``request.executor_kind`` is made
    and closed at the end.

    With interleaved sides (``request.measure["interleave"]``, harness.model.Side; see
    harness.measure.loop.measure_interleaved) one run is stored per side, the later ones with the
    first as ``parent_run``; ``RunSummary.side_runs`` maps each side to its run and ``run_id`` is the
    first side's. Every side's result of a case carries the first side's run as its
    ``interleave_group``. A case that fails as a whole (timeout, crash) is recorded with its outcome
    in every side's run; ``RunSummary.counts`` counts each side's result.

    ``side_specs_for(cases)``, called once the cases are planned, returns per case key the sides built
    by another source tree (``kbench ab``, harness.execute.portable), which the workers run instead of
    this checkout's build.

    Raises
    ------
    harness.errors.UsageError
        ``resume`` names no run, or a run of interleaved sides.
    harness.suite.SuiteError, harness.plan.PlanError, harness.execute.DispatchError
        The suite, its plan on this cluster, or the executor.
    """
    apply_runtime_defaults()  # before Ray or the OpenCL runtime start: workers inherit it

    emit = on_event or (lambda kind, payload: None)
    suite = load_suite(request.suite_path)
    config: MeasureConfig = suite.measure
    if request.measure:
        config = replace(config, **dict(request.measure))
    db, argv, kind = request.db, list(request.argv), request.kind
    t0 = time.time()
    phases: dict[str, float] = {}
    with Store.open(db) as st:
        own = executor is None
        if own:
            executor = make_executor(request.executor_kind, address=request.address,
                                     imports=tuple(suite.imports), module_folders=suite.import_folders)
        phases["executor"] = time.time() - t0
        try:
            models = executor.gpu_models()
            cluster = executor.cluster_summary()
            avail = _available_targets(cluster.get("gpus", 0))
            if request.targets:
                avail &= set(request.targets)
            cases = [c for c in planmod.plan(suite, models, compare_all=request.compare_gpus)
                     if c.target in avail]
            picks: list[planmod.TunedPick] = []
            if suite.tuned_cases:
                cases, picks = planmod.pick_tuned(cases, suite, models, cpu_device(fingerprint("cpu")),
                                                  st.best_in_space)
            if request.with_peers:
                cases += planmod.peer_cases(cases, suite.peers, applies_to)
            if only_keys is not None:
                cases = [c for c in cases if c.key in only_keys]
            skipped = sorted({c.target for c in suite.cases} - avail)
            # before any run is stored: a base tree that cannot build leaves nothing behind
            side_specs = side_specs_for(cases) if side_specs_for is not None and cases else None
            if resume is not None and config.interleave:
                raise UsageError("--resume cannot continue a run of interleaved sides")
            if resume is not None:
                if st.get_run(resume) is None:
                    raise UsageError(f"--resume {resume}: no such run in {db}")
                run_id = resume
                cases = planmod.missing(cases, st.resume_run(run_id))
            elif not config.interleave:
                run_id = st.begin_run(suite, argv, request.executor_kind, config, git_commit=git_commit(),
                                      kind=kind, parent_run=parent_run)
            side_runs: dict[str, int] = {}
            for name in config.side_names:
                side_runs[name] = st.begin_run(
                    suite, argv, request.executor_kind, config, git_commit=git_commit(), kind=kind,
                    parent_run=next(iter(side_runs.values()), parent_run))
            if side_runs:
                run_id = next(iter(side_runs.values()))
            planned_keys = {c.key for c in cases}
            summary = RunSummary(run_id, Path(db), len(cases), skipped_targets=skipped, side_runs=side_runs,
                                 phases=phases, tuned_picks=[p for p in picks if p.case_key in planned_keys])
            tuning_extra = {p.case_key: p.as_extra() for p in summary.tuned_picks}
            emit("planned", summary)

            def on_result(r: Result) -> None:
                # interleaved: one result per side (a case that failed as a whole: one for all), all
                # in the group of the first side's run, which harness.stats.frames recognises
                if r.case.key in tuning_extra:  # which stored configuration a tuned case ran
                    tuned = (("tuning", tuning_extra[r.case.key]),)
                    r = replace(r, extra=r.extra + tuned,
                                sides=tuple(replace(x, extra=x.extra + tuned) for x in r.sides))
                stored = ([replace(r.for_side(name), interleave_group=run_id) for name in side_runs]
                          if side_runs else [r])
                for into, mine in zip(side_runs.values() or (run_id,), stored):
                    st.record_result(into, replace(mine, sides=()))
                    summary.counts[mine.outcome] += 1
                    summary.nvcc_calls += mine.nvcc_calls
                phases.setdefault("first_result", time.time() - t_dispatch)
                emit("result", r)

            workers = {"gpu": int(cluster.get("gpus", 0)) or 1, "cpu": max(1, int(cluster.get("cpus", 1)))}
            if request.executor_kind == "local":
                workers = {"gpu": 1, "cpu": 1}
            batches = planmod.batches(cases, settings().batch_size, workers)
            status = "done"
            t_dispatch = time.time()
            phases["plan"] = t_dispatch - t0 - phases["executor"]
            try:
                executor.run(batches, config, on_result, side_specs=side_specs)
            except KeyboardInterrupt:
                status = "interrupted"
                raise
            finally:
                summary.dispatch_s = time.time() - t_dispatch
                phases.update(getattr(executor, "last_stats", None) or {})
                for rid in side_runs.values() or (run_id,):
                    st.finish_run(rid, status)
        finally:
            if own:
                t_close = time.time()
                executor.close()
                phases["close"] = time.time() - t_close
    summary.seconds = time.time() - t0
    return summary


def rerun_keys(request: RunRequest, *, parent_run: int | None = None, on_event: OnEvent | None = None,
               executor: Executor | None = None,
               side_specs_for: SideSpecsFor | None = None) -> Callable[[set[str]], dict[str, list[int]]]:
    """How ``request``'s AMBIGUOUS cases are timed once more (the ``again`` of
    harness.judge.remeasure_ambiguous): the suite run again for those case keys only, on the same
    executor and sides, as a re-measure of ``parent_run``. An ordinary run's re-measure is stored with
    kind "remeasure"; calibration and ab runs keep their kind (which keeps them out of history).
    Returns each side's new run (side "" for a run without sides)."""
    again = replace(request, kind="remeasure" if request.kind == "run" else request.kind)

    def rerun(keys: set[str]) -> dict[str, list[int]]:
        summary = run_suite(again, on_event=on_event, parent_run=parent_run, only_keys=keys,
                            executor=executor, side_specs_for=side_specs_for)
        return {side: [rid] for side, rid in summary.runs_by_side.items()}

    return rerun


__all__ = ["EVENTS", "RunRequest", "RunSummary", "rerun_keys", "run_suite"]
