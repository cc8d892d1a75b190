"""A suite from file to store: plan its cases, dispatch them, store every result as it arrives, and
summarise (docs/ARCHITECTURE.md, "A case from suite to report" and "A run's lifecycle"). ``kbench
run``, ``kbench ab`` and ``kbench calibrate`` all run suites through :func:`run_suite`;
:func:`rerun_keys` is how they time AMBIGUOUS cases once more (harness.judge.remeasure_ambiguous).

A run's lifecycle is the same for every executor and store::

    (plan) --empty--> UsageError, nothing stored
       |
       v
    running --every planned case has a stored result--> done
       |--SIGINT / SIGTERM / SIGHUP--> interrupted   (exit 130 / 143 / 129; --resume continues it)
       |--store error, worker import error, a case without a result--> failed  (exit 4 / 70)
       ^
       +-- kbench run --resume RUN (the same suite, its sha256; one process at a time: the lease)

The process that runs a run holds its lease in the store (harness.store, schema version 7) and renews
it from a heartbeat thread; signal handlers are installed for the length of :func:`run_suite` (after
the executor started: Ray installs its own).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import kernels as tvm

from . import plan as planmod
from .config import apply_runtime_defaults, settings
from .env import fingerprint, git_commit
from .errors import ExitCode, Interrupted, KbenchError, StoreError, UsageError, compose_exit_code
from .execute import Executor, executor_for
from .execute.peers import applies_to
from .model import Case, MeasureConfig, Result
from .store import LEASE_TTL_S, Store, cpu_device
from .suite import load_suite

log = logging.getLogger(__name__)

#: the events :func:`run_suite` reports to ``on_event(kind, payload)``: "planned" (the RunSummary,
#: before any case runs), "result" (each Result as it arrives; interleaved sides in its ``sides``) and
#: "waiting" (another process holds the store's write lock; the payload says what waits for it)
EVENTS = ("planned", "result", "waiting")

#: the signals that interrupt a run (exit 128 + the signal: 130, 143, 129)
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

OnEvent = Callable[[str, object], None]
#: what ``side_specs_for(cases)`` returns: per case key, {side: another source tree's frozen build}
SideSpecsFor = Callable[[list[Case]], dict[str, dict]]


class RunFailed(KbenchError):
    """The run could not go on and is stored ``failed``: the executor ended without a result for some
    planned cases (a bug of kbench: exit 70), or the run lost its lease."""

    exit_code = ExitCode.INTERNAL


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
    # where the time went (seconds): "executor" (starting or joining Ray), "store_lock" (waiting for
    # another process's write lock on the store), "plan" (planning, the other tree's builds for kbench
    # ab), "first_result" (dispatch start to the first result), "runners_ready" / "runner_prepare" (GPU
    # runners: see RayExecutor.last_stats), "close" (ending the executor: the embedded Ray's shutdown)
    phases: dict[str, float] = field(default_factory=dict)
    # the configuration each tuned case runs with (harness.plan.pick_tuned); "untuned" ones have none
    # stored for their device and run the first configuration of their space
    tuned_picks: list[planmod.TunedPick] = field(default_factory=list)
    status: str = "running"  # the run's status when run_suite returned: "done"
    # every stored outcome of the run (of all its sides) when it ended, this call's and earlier ones'
    # (a resumed run keeps the crashed and timed-out cases of earlier attempts unless --retry-failed)
    stored: Counter = field(default_factory=Counter)
    resumed: bool = False

    @property
    def exit_code(self) -> ExitCode:
        """0, or 2 when a case of the run (as stored, earlier attempts included) failed."""
        return compose_exit_code(outcomes=(self.stored or self.counts).elements())

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


class _Abort(BaseException):  # noqa: N818 (carries a StoreError past the executors' `except Exception`)
    """A store error while recording a result: a ``BaseException`` so that no executor takes it for
    the case's own failure (it is the store's, never a case's); run_suite re-raises ``error``."""

    def __init__(self, error: KbenchError):
        super().__init__(str(error))
        self.error = error


class SignalHandlers:
    """Handlers of SIGINT, SIGTERM and SIGHUP for the length of a run (``kbench ab`` holds them around
    its whole flow, run_suite's own nested inside): the first signal raises
    :class:`~harness.errors.Interrupted` in the main thread; later ones are only noted, so the run's
    end (its status, the executor's shutdown) is not cut short. :meth:`install` may be called again
    (after Ray's start, which installs a SIGTERM handler of its own); :meth:`restore` puts back the
    handlers found first.

    A signal that arrives while Ray's code runs (e.g. inside ``ray.wait``, compiled code that cannot
    pass an exception raised by a handler on: it fails with a SystemError) is held back and raised by
    :meth:`check`, which the Ray executor calls after every wait (``RayExecutor.poll_hook``) and
    run_suite between its steps."""

    def __init__(self) -> None:
        self.saved: dict[int, Any] = {}
        self.received: int | None = None
        self.pending: int | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers (an embedding application's thread)
        for sig in SIGNALS:
            previous = signal.signal(sig, self._handle)
            self.saved.setdefault(sig, previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None or self.pending is not None:
            return
        if frame is not None and _in_ray(frame.f_code.co_filename):
            self.pending = signum
            return
        self.received = signum
        raise Interrupted(signum)

    def check(self) -> None:
        """Raise the signal held back while Ray's code ran, if any."""
        if self.pending is not None and self.received is None:
            self.received = self.pending
            raise Interrupted(self.pending)

    def restore(self) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self.saved = {}


def _ray_dir() -> str | None:
    """The folder of the ``ray`` package (found, not imported), or None without Ray."""
    try:
        spec = importlib.util.find_spec("ray")
    except (ImportError, ValueError):
        return None
    return os.path.dirname(spec.origin) + os.sep if spec is not None and spec.origin else None


_RAY_DIR = _ray_dir()


#: modules that call into Ray's compiled code (a generator's ``next``, ``ray.get``) from their own
#: frames: a signal there is held back too, and the Ray executor's loop raises it after its wait
_RAY_CALLERS = (os.path.join(os.path.dirname(os.path.abspath(__file__)), "execute", "ray_executor.py"),
                os.path.abspath(os.path.join(os.path.dirname(tvm.__file__), "contrib", "ray_cluster.py")))


def _in_ray(filename: str) -> bool:
    """Whether ``filename`` is a module of the ``ray`` package, or one that calls into it."""
    return (_RAY_DIR is not None and filename.startswith(_RAY_DIR)) or filename in _RAY_CALLERS


class _Heartbeat:
    """Renews the leases of a run's runs every quarter of :data:`harness.store.LEASE_TTL_S`, from a
    thread with its own store connection; ``lost`` names a run whose lease another process took."""

    def __init__(self, db: Path | str, holder: str) -> None:
        self.db, self.holder = db, holder
        self.runs: list[int] = []
        self.lost: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kbench-lease", daemon=True)

    def start(self, runs: Collection[int]) -> None:
        self.runs = list(runs)
        self._thread.start()

    def _beat(self) -> None:
        try:
            st = Store.open(self.db, create=False)
        except Exception as exc:  # the run's own writes will report the store's trouble
            log.warning("kbench: lease heartbeat cannot open %s: %s", self.db, exc)
            return
        with st:
            while not self._stop.wait(LEASE_TTL_S / 4):
                for rid in self.runs:
                    try:
                        if not st.renew_lease(rid, self.holder):
                            self.lost = rid
                    except Exception as exc:
                        log.warning("kbench: lease heartbeat of run %s: %s", rid, exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


@contextmanager
def signal_handlers() -> Iterator[SignalHandlers]:
    """:class:`SignalHandlers` installed for the block (what :func:`run_suite` does for a run)."""
    handlers = SignalHandlers()
    handlers.install()
    try:
        yield handlers
    finally:
        handlers.restore()


def _empty_plan_error(suite: Any, request: RunRequest, here: set, cluster: dict) -> UsageError:
    """The usage error of a plan without cases, naming the filter that emptied it."""
    targets = sorted({c.target for c in suite.cases})
    name = f"suite {suite.name} ({request.suite_path})"
    gone = sorted((set(targets) | set(request.targets or ())) - here)
    why = ""
    if gone:
        no_gpu = " (no GPU in the cluster)" if "cuda" in gone and not cluster.get("gpus") else ""
        why = f"; not available here: {', '.join(gone)}{no_gpu}"
    if request.targets:
        return UsageError(f"--targets {','.join(request.targets)} leaves no case of {name} to run: its cases "
                          f"target {', '.join(targets)}{why}; nothing was stored")
    if gone and set(targets) <= set(gone):
        return UsageError(f"no case of {name} can run here: its cases target {', '.join(targets)}{why}; "
                          "nothing was stored")
    return UsageError(f"{name} plans no case to run here (targets {', '.join(targets) or 'none'}{why}); "
                      "nothing was stored")


def _check_same_suite(run: Mapping[str, Any], suite: Any, request: RunRequest, run_id: int) -> None:
    """``--resume`` continues a run only with the suite it was made from (its sha256)."""
    if run.get("kind") not in ("run", "calibration", "remeasure"):
        raise UsageError(f"--resume {run_id}: run {run_id} is a run of kind {run.get('kind')}, "
                         "which --resume cannot continue")
    stored = run.get("suite_sha256")
    if stored and stored != suite.sha256:
        same_name = run.get("suite_name") == suite.name
        what = (f"another version of it (sha256 {suite.sha256[:12]}, the run's is {stored[:12]})" if same_name
                else f"another suite, {suite.name} (sha256 {suite.sha256[:12]})")
        raise UsageError(f"--resume {run_id}: run {run_id} was made from suite {run.get('suite_name')} "
                         f"({run.get('suite_path')}, sha256 {stored[:12]}); {request.suite_path} is {what}; "
                         "resume it with the suite it was made from, or start a new run")


def _interrupted_line(exc: Interrupted, request: RunRequest, where: object, runs: list[int], stored: int,
                      planned: int, interleaved: bool) -> str:
    """The one line of an interrupted run; ``where`` is the store (a URL without its password)."""
    sig = signal.Signals(exc.signum).name
    if not runs:
        return f"interrupted by {sig} before the run was stored; nothing was written"
    if interleaved:
        return (f"runs {', '.join(map(str, runs))} interrupted by {sig} ({stored} of {planned} cases "
                "stored); runs of interleaved sides cannot be resumed: start them again")
    return (f"run {runs[0]} interrupted by {sig} ({stored} of {planned} cases stored); continue it with: "
            f"kbench run {request.suite_path} --resume {runs[0]} --db {where}")


def run_suite(request: RunRequest, *, on_event: OnEvent | None = None, resume: int | None = None,
              parent_run: int | None = None, only_keys: Collection[str] | None = None,
              executor: Executor | None = None, side_specs_for: SideSpecsFor | None = None,
              retry_failed: bool = False) -> RunSummary:
    """Plan ``request``'s suite, run every case (or only ``only_keys``) and store each result as it
    arrives.

    ``resume`` continues a stored run (only the cases it lacks) made from the same suite file content,
    one process at a time; ``retry_failed`` also runs again its cases recorded ``crashed`` or
    ``timeout`` (their results are replaced). ``parent_run`` is stored with the run (a "remeasure" run
    re-times some cases of its parent). ``executor``: an already started executor to reuse (it is not
    closed here); by default one of ``request.executor_kind`` is made and closed at the end.

    The run ends ``done`` only when every planned case has a stored result; see the module docstring
    for ``interrupted`` and ``failed``.

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
        The plan is empty (the message names the filter that emptied it; nothing is stored);
        ``resume`` names no run, a run of interleaved sides, or a run made from another suite (or
        another version of it).
    harness.errors.Interrupted
        SIGINT, SIGTERM or SIGHUP: the run is stored ``interrupted``; the message says how to resume.
    harness.store.RunLeased
        ``resume`` names a run another live process is running or resuming.
    harness.errors.StoreError, RunFailed
        The store failed while the run went on, or the executor ended without a result for some
        planned case: the run is stored ``failed``.
    harness.suite.SuiteError, harness.plan.PlanError, harness.execute.DispatchError
        The suite, its plan on this cluster, or the executor (a worker that cannot import the suite's
        modules fails the run).
    """
    apply_runtime_defaults()  # before Ray or the OpenCL runtime start: workers inherit it

    emit = on_event or (lambda kind, payload: None)
    suite = load_suite(request.suite_path)
    config: MeasureConfig = suite.measure
    if request.measure:
        config = replace(config, **dict(request.measure))
    db, argv, kind = request.db, list(request.argv), request.kind
    holder = uuid.uuid4().hex  # this process's claim on the runs it writes (their leases)
    t0 = time.time()
    phases: dict[str, float] = {}
    with signal_handlers() as handlers, Store.open(db) as st:
        st.on_lock_wait = lambda what: emit("waiting", what)
        own = executor is None
        if own:
            executor = executor_for(suite, request.executor_kind, request.address)
        handlers.install()  # again: starting Ray installs a SIGTERM handler of its own
        outer_hook = getattr(executor, "poll_hook", None)  # a caller's (kbench ab's), put back at the end
        if hasattr(executor, "poll_hook"):  # the Ray executor raises a held-back signal after each wait
            executor.poll_hook = handlers.check
        phases["executor"] = time.time() - t0
        runs: list[int] = []  # the runs this call stores into (one per side), once stored
        heartbeat = _Heartbeat(db, holder)
        summary: RunSummary | None = None
        planned_keys: set[str] = set()
        try:
            handlers.check()
            models = executor.gpu_models()
            cluster = executor.cluster_summary()
            here = _available_targets(cluster.get("gpus", 0))
            avail = here & set(request.targets) if request.targets else here
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
            elif not cases:
                raise _empty_plan_error(suite, request, here, cluster)
            wanted = set(request.targets) if request.targets else {c.target for c in suite.cases}
            skipped = sorted(({c.target for c in suite.cases} & wanted) - here)
            if resume is not None and config.interleave:
                raise UsageError("--resume cannot continue a run of interleaved sides")
            planned_keys = {c.key for c in cases}  # what the run must hold to be done
            if resume is not None:
                run = st.get_run(resume)
                if run is None:
                    raise UsageError(f"--resume {resume}: no such run in {db}")
                _check_same_suite(run, suite, request, resume)
            # before any run is stored: a base tree that cannot build leaves nothing behind
            side_specs = side_specs_for(cases) if side_specs_for is not None and cases else None
            if resume is not None:
                run_id = resume
                cases = planmod.missing(cases, st.resume_run(run_id, holder, retry_failed=retry_failed))
                runs.append(run_id)
            elif not config.interleave:
                run_id = st.begin_run(suite, argv, request.executor_kind, config, git_commit=git_commit(),
                                      kind=kind, parent_run=parent_run, holder=holder)
                runs.append(run_id)
            side_runs: dict[str, int] = {}
            for name in config.side_names:
                side_runs[name] = st.begin_run(
                    suite, argv, request.executor_kind, config, git_commit=git_commit(), kind=kind,
                    parent_run=next(iter(side_runs.values()), parent_run), holder=holder)
                runs.append(side_runs[name])
            if side_runs:
                run_id = next(iter(side_runs.values()))
            heartbeat.start(runs)
            todo_keys = {c.key for c in cases}
            summary = RunSummary(run_id, Path(db), len(cases), skipped_targets=skipped, side_runs=side_runs,
                                 phases=phases, tuned_picks=[p for p in picks if p.case_key in todo_keys],
                                 resumed=resume is not None)
            tuning_refs = {p.case_key: p.as_ref() for p in summary.tuned_picks}
            emit("planned", summary)

            def on_result(r: Result) -> None:
                # interleaved: one result per side (a case that failed as a whole: one for all), all
                # in the group of the first side's run, which harness.stats.frames recognises
                if heartbeat.lost is not None:
                    raise _Abort(RunFailed(f"run {heartbeat.lost} in {st.path}: another process took over "
                                           "its lease (this one's heartbeat had stopped)"))
                if r.case.key in tuning_refs:  # which stored configuration a tuned case ran
                    tuned = tuning_refs[r.case.key]
                    r = replace(r, tuning=tuned, sides=tuple(replace(x, tuning=tuned) for x in r.sides))
                stored = ([replace(r.for_side(name), interleave_group=run_id) for name in side_runs]
                          if side_runs else [r])
                for into, mine in zip(side_runs.values() or (run_id,), stored):
                    try:
                        st.record_result(into, replace(mine, sides=()))
                    except StoreError as exc:  # the store's failure, never the case's
                        raise _Abort(exc) from exc
                    summary.counts[mine.outcome] += 1
                    summary.nvcc_calls += mine.nvcc_calls
                phases.setdefault("first_result", time.time() - t_dispatch)
                emit("result", r)

            workers = {"gpu": int(cluster.get("gpus", 0)) or 1, "cpu": max(1, int(cluster.get("cpus", 1)))}
            if request.executor_kind == "local":
                workers = {"gpu": 1, "cpu": 1}
            batches = planmod.batches(cases, settings().batch_size, workers)
            t_dispatch = time.time()
            phases["store_lock"] = st.lock_wait_s
            phases["plan"] = t_dispatch - t0 - phases["executor"] - phases["store_lock"]
            if not phases["store_lock"]:
                del phases["store_lock"]
            try:
                handlers.check()
                executor.run(batches, config, on_result, side_specs=side_specs)
                handlers.check()
            finally:
                summary.dispatch_s = time.time() - t_dispatch
                phases.update(getattr(executor, "last_stats", None) or {})
            _check_complete(st, runs, planned_keys)
            status = "done"
        except _Abort as abort:
            status = "failed"
            raise abort.error from None
        except (Interrupted, KeyboardInterrupt) as exc:
            status = "interrupted"
            signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
            stored = sum(len(st.done_keys(rid)) for rid in runs[:1]) if runs else 0
            line = _interrupted_line(Interrupted(signum), request, st.path, runs, stored,
                                     len(planned_keys), bool(config.interleave))
            raise Interrupted(signum, line) from None
        except BaseException:
            status = "failed"
            raise
        finally:
            heartbeat.stop()
            if hasattr(executor, "poll_hook"):
                executor.poll_hook = outer_hook
            unfinished = [rid for rid in runs if not _finish(st, rid, status, holder)]
            if own:
                t_close = time.time()
                executor.close()
                phases["close"] = time.time() - t_close
        if unfinished:  # the run went well but its end could not be stored
            raise StoreError(f"run {unfinished[0]} in {st.path}: could not store its end (status {status}); "
                             "see the error above")
        summary.status = status
        for rid in runs:
            summary.stored.update((st.get_run(rid) or {}).get("outcomes", {}))
    summary.seconds = time.time() - t0
    return summary


def _check_complete(st: Store, runs: list[int], planned: set[str]) -> None:
    """A run is done only when it holds a result for every planned case (each side's run). A case
    planned for no GPU model in particular is answered by its result on the model it ran on (its key
    then ends in ``@MODEL``, harness.model.Case.key)."""
    for rid in runs:
        stored = st.done_keys(rid)
        stored |= {key.rsplit("@", 1)[0] for key in stored if "@" in key}
        lacking = sorted(planned - stored)
        if lacking:
            raise RunFailed(f"run {rid}: the executor ended without a result for {len(lacking)} of "
                            f"{len(planned)} planned case(s) (e.g. {lacking[0]}); the run is stored as "
                            f"failed, and `kbench run --resume {rid}` runs what it lacks")


def _finish(st: Store, run_id: int, status: str, holder: str) -> bool:
    """Store the run's end (False when the store cannot take it: it failed itself). Logged, not
    raised: an error that ended the run is already on its way."""
    try:
        st.finish_run(run_id, status, holder)
        return True
    except Exception as exc:
        log.error("kbench: could not store run %s as %s: %s", run_id, status, exc)
        return False


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


__all__ = ["EVENTS", "SIGNALS", "RunFailed", "RunRequest", "RunSummary", "SignalHandlers", "rerun_keys",
           "run_suite", "signal_handlers"]
