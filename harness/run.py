"""``kbench run``: plan a suite, dispatch it, store every result as it arrives, summarise."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Collection, Dict, List, Optional, Sequence

from .env import git_commit
from .errors import ExitCode, UsageError
from .model import Case, MeasureConfig, Result


@dataclass
class RunSummary:
    run_id: int
    db: Path
    planned: int
    counts: Counter = field(default_factory=Counter)
    skipped_targets: List[str] = field(default_factory=list)
    nvcc_calls: int = 0
    seconds: float = 0.0
    dispatch_s: float = 0.0  # from the first task submitted to the last result
    side_runs: Dict[str, int] = field(default_factory=dict)  # interleaved side -> its run (else empty)
    # where the time went (seconds): "executor" (starting or joining Ray), "plan" (planning, the
    # other tree's builds for kbench ab), "first_result" (dispatch start to the first result),
    # "runners_ready" / "runner_prepare" (GPU runners: see RayExecutor.last_stats), "close" (ending
    # the executor: the embedded Ray's shutdown)
    phases: Dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> ExitCode:
        bad = sum(self.counts[o] for o in ("wrong", "timeout", "crashed", "build_error"))
        return ExitCode.WRONG if bad else ExitCode.OK


def _available_targets(gpus: float) -> set:
    import kernels as tvm

    out = {"c"}
    try:
        if tvm.opencl(0).exist:
            out.add("opencl")
    except Exception:
        pass
    if gpus > 0:
        out.add("cuda")
    return out


def run_suite(suite_path: str, db: Path, executor_kind: str = "ray", address: Optional[str] = None,
              resume: Optional[int] = None, compare_gpus: bool = False,
              targets: Optional[Sequence[str]] = None,
              argv: Sequence[str] = (), on_event: Optional[Callable[[str, object], None]] = None,
              measure_overrides: Optional[dict] = None, *, kind: str = "run",
              parent_run: Optional[int] = None,
              only_keys: Optional[Collection[str]] = None, executor=None, with_peers: bool = True,
              side_specs_for: Optional[Callable[[List[Case]], Dict[str, dict]]] = None) -> RunSummary:
    """Plan ``suite_path``, run every case (or only ``only_keys``) and store each result as it arrives.

    ``kind``/``parent_run`` label the stored run (see harness.store: "calibration" runs are never
    baselines; a "remeasure" run re-times some cases of ``parent_run``). ``executor``: an already
    started executor to reuse (it is not closed here); by default one of ``executor_kind`` is made
    and closed at the end.

    With interleaved sides (``measure_overrides={"interleave": ((name, slowdown), ...)}``, see
    harness.measure.measure_interleaved) one run is stored per side, the later ones with the first
    as ``parent_run``; ``RunSummary.side_runs`` maps each side to its run and ``run_id`` is the
    first side's. A case that fails as a whole (timeout, crash) is recorded with its outcome in every
    side's run; ``RunSummary.counts`` counts each side's result.

    ``with_peers=False`` leaves out the suite's peer cases. ``side_specs_for(cases)``, called once the
    cases are planned, returns per case key the sides built by another source tree (``kbench ab``,
    harness.execute.portable), which the workers run instead of this checkout's build."""
    from .execute import make_executor
    from . import plan as planmod
    from . import store as storemod
    from .config import apply_runtime_defaults
    from .suite import load_suite

    apply_runtime_defaults()  # before Ray or the OpenCL runtime start: workers inherit it

    emit = on_event or (lambda kind, payload: None)
    suite = load_suite(suite_path)
    config: MeasureConfig = suite.measure
    if measure_overrides:
        config = replace(config, **measure_overrides)
    t0 = time.time()
    phases: Dict[str, float] = {}
    with storemod.Store.open(db) as st:
        own = executor is None
        if own:
            executor = make_executor(executor_kind, address=address, imports=tuple(suite.imports))
        phases["executor"] = time.time() - t0
        try:
            models = executor.gpu_models()
            cluster = executor.cluster_summary()
            avail = _available_targets(cluster.get("gpus", 0))
            if targets:
                avail &= set(targets)
            cases = [c for c in planmod.plan(suite, models, compare_all=compare_gpus) if c.target in avail]
            if with_peers:
                cases += planmod.peer_cases(cases, suite.peers)
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
                run_id = st.begin_run(suite, list(argv), executor_kind, config,
                                      git_commit=git_commit(),
                                      kind=kind, parent_run=parent_run)
            side_runs: Dict[str, int] = {}
            for name, _slow in config.interleave:
                side_runs[str(name)] = st.begin_run(
                    suite, list(argv), executor_kind, config, git_commit=git_commit(), kind=kind,
                    parent_run=next(iter(side_runs.values()), parent_run))
            if side_runs:
                run_id = next(iter(side_runs.values()))
            summary = RunSummary(run_id, Path(db), len(cases), skipped_targets=skipped, side_runs=side_runs,
                                 phases=phases)
            emit("planned", summary)

            def record(into: int, r: Result, side: str = "") -> None:
                extra = dict(r.extra)
                env = extra.pop("env", None)  # the worker's fingerprint (its GPU, not the driver's)
                extra.pop("interleaved", None)
                timing = r.timing
                if side and timing is not None:
                    # harness.stats.frames recognises sides timed together by this group (the first run)
                    marks = (("interleave_group", run_id), ("interleave_side", side))
                    timing = replace(timing, telemetry=tuple(sorted(timing.telemetry + marks)))
                st.record_result(into, replace(r, extra=tuple(extra.items()), timing=timing), env)

            def on_result(r: Result) -> None:
                if side_runs:
                    # one result per side; a case that failed as a whole has one for all sides
                    per_side = dict(dict(r.extra).get("interleaved", ()))
                    for name, rid in side_runs.items():
                        mine = per_side.get(name, r)
                        record(rid, mine, name)
                        summary.counts[mine.outcome] += 1
                else:
                    record(run_id, r)
                    summary.counts[r.outcome] += 1
                summary.nvcc_calls += dict(r.extra).get("nvcc_calls", 0)
                phases.setdefault("first_result", time.time() - t_dispatch)
                emit("result", r)

            from .config import settings

            workers = {"gpu": int(cluster.get("gpus", 0)) or 1, "cpu": max(1, int(cluster.get("cpus", 1)))}
            if executor_kind == "local":
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
