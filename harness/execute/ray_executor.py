"""Running batches on Ray: :class:`RayExecutor`, the driver's scheduling loop (the cluster it runs on
is :mod:`harness.execute.cluster`; what runs in the workers is :mod:`harness.execute.ray_tasks`).

* **One streaming call per batch.** Each batch runs as a Ray *streaming generator*
  (``num_returns="streaming"``) that calls :func:`harness.execute.worker.run_cases` and yields a start
  marker (node id, worker label) and then one :class:`~harness.model.Result` per case. The driver
  waits on all generators with ``ray.wait`` and passes each result on as it arrives.
* **GPU batches run on runners, one worker process per GPU.** A GPU batch runs on a *runner*, a Ray
  actor (:class:`~harness.execute.ray_tasks.GpuRunner`, ``num_gpus=1, num_cpus=0``) that holds its GPU
  and runs batch after batch, so the imports (kernels, pycuda, torch), the CUDA context and the peaks
  are paid once per GPU, not once per batch. GPU batches wait in a queue per placement in the driver;
  a free runner takes the next one, and up to one runner per GPU of the nodes that placement selects
  is started when none is free (so a free GPU pulls work: :func:`harness.plan.batches` cuts more
  batches than GPUs). A free runner waits for more batches of its placement (the rest of a failed
  batch comes back to the queue), except while another runner waits for a GPU: then the free runners
  of placements with nothing queued are ended, so that their GPUs go to it. All runners end when
  :meth:`RayExecutor.run` returns (idle ones kept longer would hold their GPUs against another
  executor or driver). Why not reused *task* workers: Ray reuses a task's worker process for later
  tasks (``max_calls`` is unlimited unless the function's own ``@ray.remote`` asks for GPUs, when Ray
  sets it to 1), but it may hand a reused worker a different GPU than the one its CUDA context was
  made on (it only rewrites ``CUDA_VISIBLE_DEVICES``, which CUDA reads once), so two processes could
  measure on one GPU; an actor keeps its GPU for life. CPU batches run as plain tasks
  (``max_calls=0``: their processes are reused); the task body sets ``CUDA_VISIBLE_DEVICES=""``
  before anything touches CUDA, and these processes never take GPU work. They carry no runtime
  environment of their own (unless the executor was given one), so Ray runs them in the worker
  processes it already started instead of starting new ones.
* **Placement** (:meth:`harness.execute.cluster.RayCluster.placement`). A placement no alive node can
  satisfy is a :class:`~harness.execute.common.DispatchError` before anything is submitted; one that
  becomes unsatisfiable mid-run (its last node left) is recorded ``crashed`` for the cases still
  waiting after ``unplaceable_s``.
* **CUDA builds on CPU workers.** With ``prebuild`` (default), the CUDA cases of each GPU batch whose
  model has a known architecture (:data:`kernels.target.GPU_ARCHS`) are compiled by a CPU task (GPUs
  hidden) through :func:`harness.execute.build.build_artifact`, submitted with the run; the runner
  receives the cubins and does not call nvcc. A case whose prebuild fails is simply rebuilt on the
  GPU worker, which records the ``build_error`` with the compiler output. What a batch still has to
  build (no prebuild: an unknown architecture, a failed prebuild, CPU batches) its worker builds in
  background threads from the batch's start (:mod:`harness.execute.ahead`), so that a case never
  waits for its compiler while the one before it is timed.
* **Timeouts.** The driver notes when each batch's current case started: when the batch's start
  marker arrived (it runs; a batch waiting in a queue has no clock), then whenever the previous
  result arrived. A case running longer than its ``timeout_s`` has its worker process killed (the
  runner actor, or the CPU task force-cancelled: :func:`kernels.contrib.workpool.kill_actor`,
  :func:`~kernels.contrib.workpool.cancel_task`), is recorded ``timeout``, and the rest of its batch
  is submitted again (GPU: at the head of the queue, for a fresh runner).
* **Crashes and retries.** Ray's own task retries are off (``max_retries=0``) so that no case is
  ever re-run behind the driver's back. When a task fails (the worker died, e.g. a segfaulting or
  SIGKILLed kernel, or an exception escaped the worker), the failure is charged to the case that was
  running (the first one without a result) and the unfinished rest of the batch is resubmitted (a
  runner that failed is ended: only healthy runners take more batches); a case charged more than
  ``max_retries`` times is recorded ``crashed`` with the error and the batch goes on without it. A
  failure because the task's node died or left the cluster is not charged to the case (up to
  :data:`MAX_NODE_LOSSES` times per case): the rest is simply rescheduled. The counting is the work
  pool's :class:`~kernels.contrib.workpool.FailurePolicy` (``strikes = max_retries + 1``), shared
  with the tuning engine and the local executor. Failures no case causes
  (the runtime environment cannot be set up, a module of ``imports`` is missing on the workers) stop
  the run with a :class:`~harness.execute.common.DispatchError` instead.
* **Exactly once.** Results are matched to cases by key and ``on_result`` is never called twice for
  one key, whatever retries, cancellations or late results happen. Cases whose result was handed
  on are never resubmitted, so a driver that dies can resume from what the store holds.
* **The embedded cluster.** ``address=None`` starts a local Ray for the executor's lifetime: no
  dashboard, logs and sockets in a private temporary folder (mode 0700), token authentication with
  a random token in a 0600 file there (``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH``, which
  Ray 2.60 reads in the driver and passes to every process it starts; so nothing is written to
  ``~/.ray/auth_token``, where Ray would put a token of its own). On a Ray without token
  authentication the cluster starts without it, with a warning, and
  :meth:`RayExecutor.cluster_summary` says ``auth: none``. Ray's start does not wait for a worker
  process per CPU (``RAY_prestart_worker_first_driver=0``): on a machine of many cores that wait is
  seconds of every run, and a GPU suite's CPU work (its builds) needs a few processes, started on
  demand. :meth:`RayExecutor.close` shuts it down and removes the folder. An ``address`` joins an
  existing cluster (its token, if any, comes from
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.model import Case, MeasureConfig, Result
from kernels.contrib.workpool import (
    MAX_NODE_LOSSES,
    FailurePolicy,
    cancel_task,
    is_node_loss,
    kill_actor,
)
from kernels.target import arch_of_model

from .build import is_callable
from .cluster import Node, RayCluster, shipped_modules
from .common import (
    DispatchError,
    Emitter,
    OnResult,
    Slot,
    clean_message,
    describe,
    homogeneous,
    slot_of,
    take,
)
from .ray_tasks import GpuRunner, build_task, peer_libraries, run_batch_task

__all__ = ["MAX_NODE_LOSSES", "RayExecutor"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Task:
    """One submitted batch task and what the driver knows about it."""

    gen: Any  # ray.ObjectRefGenerator
    rest: list[Case]  # cases of the batch without a result yet, in order
    slot: Slot
    submitted: float
    node: str = ""
    worker: str = ""
    case_started: float | None = None  # when the current head case started (None: not started)
    unplaceable_since: float | None = None
    build_ref: Any = None
    runner: _Runner | None = None  # the GPU runner running it (None: a CPU task)


@dataclass(eq=False)
class _Runner:
    """One GPU runner actor (:class:`GpuRunner`) of a slot and whether it is running a batch."""

    actor: Any
    slot: Slot
    busy: bool = False
    started: bool = False  # it has started a batch (so it holds a GPU)


@dataclass
class _Queued:
    """A GPU batch waiting for a free runner of its slot."""

    cases: list[Case]
    build_ref: Any = None


@dataclass
class _RunState:
    emit: Emitter
    config: MeasureConfig
    policy: FailurePolicy = field(default_factory=FailurePolicy)  # crashes and node losses per case key
    placements: dict[Slot, dict] = field(default_factory=dict)  # slot -> last Ray options used
    queues: dict[Slot, deque] = field(default_factory=dict)  # GPU slot -> deque of _Queued
    queue_unplaceable_since: dict[Slot, float] = field(default_factory=dict)
    side_specs: dict | None = None  # case key -> {side: another tree's frozen build} (kbench ab)
    runners: dict[str, tuple[float, float]] = field(default_factory=dict)  # worker -> (born, ready)

    def queued(self) -> bool:
        return any(self.queues.values())

    def sides_for(self, cases: Sequence[Case]) -> dict | None:
        """The ``side_specs`` entries of ``cases`` (what a batch of them carries), or None."""
        if not self.side_specs:
            return None
        return {c.key: self.side_specs[c.key] for c in cases if c.key in self.side_specs} or None


class RayExecutor:
    """Runs batches on Ray: CPU batches as tasks, GPU batches on one runner actor per GPU for the length
    of a :meth:`run` call (see the module docstring for placement, timeouts and retries).

    Parameters
    ----------
    address : str or None
        A Ray cluster to join (``"auto"``, ``"HOST:PORT"``, ``"ray://..."``); None starts an embedded
        local Ray (dashboard off, token authentication, private temp folder) until :meth:`close`.
        When this process is already connected to Ray, that connection is used and left open.
    max_retries : int
        How often a task that crashed while running a case is retried before that case is recorded
        ``crashed``.
    poll_s : float
        The longest the driver waits for results before checking timeouts.
    imports : tuple of str
        Modules each worker imports before running cases (e.g. modules registering workloads).
    runtime_env : dict or None
        A Ray runtime environment for every task (e.g. ``{"env_vars": {"PYTHONPATH": ...}}``).
    module_folders : tuple of str
        Folders (a suite's ``import_folders``) whose modules of ``imports`` are shipped to every
        worker in the job's ``py_modules`` (:func:`~harness.execute.cluster.shipped_modules`).
    prebuild : bool
        Compile CUDA cases of known GPU models on CPU workers before their GPU task starts.
    unplaceable_s : float
        How long a not yet started task may wait once no alive node can run it before its cases
        are recorded ``crashed``.
    init_kwargs : dict or None
        Extra ``ray.init`` arguments for the embedded cluster (e.g. ``num_cpus``).
    """

    kind = "ray"

    def __init__(self, address: str | None = None, *, max_retries: int = 2, poll_s: float = 0.2,
                 imports: Sequence[str] = (), runtime_env: dict | None = None, prebuild: bool = True,
                 unplaceable_s: float = 60.0, init_kwargs: dict | None = None,
                 module_folders: Sequence[str] = ()):
        self.cluster = RayCluster(address, runtime_env=runtime_env, init_kwargs=init_kwargs,
                                  py_modules=shipped_modules(imports, module_folders))
        ray = self._ray = self.cluster.ray
        self.max_retries = int(max_retries)
        self.poll_s = float(poll_s)
        self.imports = tuple(imports)
        self.prebuild = prebuild
        self.unplaceable_s = float(unplaceable_s)
        # CPU work runs as tasks; their worker processes are reused (max_calls is 0, unlimited: Ray sets 1
        # only for functions whose @ray.remote itself asks for GPUs). GPU batches run on runner actors.
        streaming = ray.remote(num_returns="streaming", max_retries=0, retry_exceptions=False, max_calls=0)
        self._task = streaming(run_batch_task)
        self._build = ray.remote(max_retries=0, retry_exceptions=False, max_calls=0)(build_task)
        self._runner_cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(GpuRunner)
        self._runners: dict[Slot, list[_Runner]] = {}  # GPU slot -> its runners in this run
        # of the last run(): "runners_ready" (seconds from its start until every GPU runner was
        # ready) and "runner_prepare" (the longest a runner took to import and measure its peaks)
        self.last_stats: dict[str, float] = {}
        #: called after every wait for results (harness.run: raises a signal held back while Ray's
        #: compiled code ran, which cannot pass on an exception raised in a signal handler)
        self.poll_hook: Callable[[], None] | None = None

    # -- lifetime and cluster ---------------------------------------------------------------------

    @property
    def address(self) -> str | None:
        """The cluster joined (None: the embedded one, or this process's connection)."""
        return self.cluster.address

    @property
    def embedded(self) -> bool:
        """Whether this executor started the local Ray it runs on."""
        return self.cluster.embedded

    @property
    def auth(self) -> str:
        """The embedded cluster's authentication: "token", "none" (or "unknown" when joined)."""
        return self.cluster.auth

    def gpu_models(self) -> list[str]:
        """The GPU models of the cluster's alive nodes (see :meth:`RayCluster.gpu_models`)."""
        return self.cluster.gpu_models()

    def cluster_summary(self) -> dict[str, Any]:
        """The cluster for the CLI (see :meth:`RayCluster.summary`)."""
        return self.cluster.summary()

    def close(self) -> None:
        """End the runners, then disconnect (the embedded cluster: shut down, folder removed)."""
        if self._ray.is_initialized():
            for pool in list(self._runners.values()):
                for runner in list(pool):
                    self._retire(runner)
        self.cluster.close()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ----------------------------------------------------------------------------------

    def _options(self, slot: Slot, state: _RunState, nodes: list[Node] | None) -> dict:
        opts = self.cluster.placement(slot, nodes if nodes is not None else self.cluster.nodes())
        if opts is None:  # no node for it right now: place it as at the start, the unplaceable check decides
            opts = state.placements[slot]
        state.placements[slot] = opts
        return opts

    def _submit(self, cases: list[Case], state: _RunState, nodes: list[Node] | None = None,
                prebuild: bool = False, front: bool = False) -> list[_Task]:
        """Hand a batch on: a CPU batch becomes a task at once (returned); a GPU batch joins its slot's
        queue (``front``: ahead of the others, for the rest of an interrupted batch) until
        :meth:`_pump` gives it to a free runner."""
        slot = slot_of(cases[0])
        if not slot[0]:
            opts = self._options(slot, state, nodes)
            gen = self._task.options(**opts).remote(cases, state.config, self.imports, True, None,
                                                    state.sides_for(cases))
            return [_Task(gen, list(cases), slot, time.monotonic())]
        build_ref = self._submit_build(cases, slot[1]) if prebuild else None
        queue = state.queues.setdefault(slot, deque())
        item = _Queued(list(cases), build_ref)
        if front:
            queue.appendleft(item)
        else:
            queue.append(item)
        return []

    def _submit_build(self, cases: list[Case], model: str):
        arch = arch_of_model(model)
        todo = [c for c in cases if c.target == "cuda" and not is_callable(c)]
        if not arch or not todo:
            return None
        options = {"num_cpus": 1, "num_gpus": 0, **self.cluster.cpu_runtime_env()}
        return self._build.options(**options).remote(todo, arch)

    def _pump(self, state: _RunState) -> list[_Task]:
        """Give queued GPU batches to free runners of their slot, starting runners (up to the slot's GPU
        count) when none is free. Free runners stay for later batches (a failed batch's rest comes back
        to the queue), except while a runner waits for a GPU: then the free runners of slots with
        nothing queued are ended, so that their GPUs go to it. Returns the batches started."""
        started: list[_Task] = []
        nodes: list[Node] | None = None
        for slot, queue in state.queues.items():
            pool = self._runners.setdefault(slot, [])
            while queue:
                runner = next((r for r in pool if not r.busy), None)
                if runner is None:
                    if nodes is None:
                        nodes = self.cluster.nodes()
                    if len(pool) >= self.cluster.capacity(slot, nodes):
                        break
                    actor = self._runner_cls.options(**self._options(slot, state, nodes)).remote(
                        self.imports, peer_libraries(c for q in queue for c in q.cases))
                    runner = _Runner(actor, slot)
                    pool.append(runner)
                item = queue.popleft()
                runner.busy = True
                gen = runner.actor.run.options(num_returns="streaming").remote(
                    item.cases, state.config, self.imports, item.build_ref, state.sides_for(item.cases))
                started.append(_Task(gen, list(item.cases), slot, time.monotonic(), build_ref=item.build_ref,
                                     runner=runner))
        if any(r.busy and not r.started for pool in self._runners.values() for r in pool):
            for slot, pool in self._runners.items():
                if not state.queues.get(slot):
                    for runner in [r for r in pool if not r.busy]:
                        self._retire(runner)
        return started

    def _retire(self, runner: _Runner) -> None:
        """End a runner (kill its process: it failed, hung, cannot be placed, or its GPU is wanted)."""
        pool = self._runners.get(runner.slot, [])
        if runner in pool:
            pool.remove(runner)
        kill_actor(self._ray, runner.actor)

    def run(self, batches: Sequence[Sequence[Case]], config: MeasureConfig, on_result: OnResult,
            side_specs: dict | None = None) -> None:
        """Submit every batch, then hand each result to ``on_result`` as it arrives (once per case key).
        ``side_specs``: per case key, sides built by another source tree (kbench ab), carried with
        each batch to :func:`harness.execute.worker.run_cases`.

        Raises
        ------
        DispatchError
            Some cases need a placement no alive node offers (nothing is submitted then), or the workers
            cannot start at all (runtime environment, a module of ``imports`` missing): the tasks still
            running are cancelled.
        """
        ray = self._ray
        self.last_stats = {}
        todo = homogeneous(batches)
        if not todo:
            return
        nodes = self.cluster.nodes()
        missing = sorted({self.cluster.slot_text(slot_of(b[0])) for b in todo
                          if self.cluster.placement(slot_of(b[0]), nodes) is None})
        if missing:
            models = sorted({n.gpu_model for n in nodes if n.gpu_model})
            raise DispatchError(f"no node of the Ray cluster can run cases needing {', '.join(missing)}; "
                                f"GPU models in the cluster: {', '.join(models) or 'none'}")
        state = _RunState(Emitter(on_result), config, side_specs=side_specs,
                          policy=FailurePolicy(strikes=self.max_retries + 1, node_losses=MAX_NODE_LOSSES))
        t_start = time.time()
        active = [t for b in todo for t in self._submit(b, state, nodes, prebuild=self.prebuild)]
        active += self._pump(state)
        last_check = time.monotonic()
        try:
            while active or state.queued():
                gens = [t.gen for t in active]
                if gens:
                    ray.wait(gens, num_returns=1, timeout=self.poll_s, fetch_local=True)
                    ready, _ = ray.wait(gens, num_returns=len(gens), timeout=0)
                else:  # only batches no runner can take yet: the unplaceable check decides
                    time.sleep(self.poll_s)
                    ready = []
                if self.poll_hook is not None:
                    self.poll_hook()
                ready_ids = {id(g) for g in ready}
                nxt: list[_Task] = []
                for t in active:
                    if id(t.gen) in ready_ids:
                        nxt.extend(self._advance(t, state))
                    else:
                        nxt.append(t)
                active = [t2 for t in nxt for t2 in self._check_timeout(t, state)]
                if time.monotonic() - last_check >= 2.0:
                    last_check = time.monotonic()
                    active = self._check_unplaceable(active, state)
                active += self._pump(state)
        except BaseException:
            for t in active:
                self._cancel(t, force=True)
            raise
        finally:  # idle runners would hold their GPUs until close(): end them with the run
            for pool in list(self._runners.values()):
                for runner in list(pool):
                    self._retire(runner)
            if state.runners:  # wall clocks of the runners' hosts (on one host: this one's)
                self.last_stats = {
                    "runners_ready": max(ready for _, ready in state.runners.values()) - t_start,
                    "runner_prepare": max(ready - born for born, ready in state.runners.values())}

    def _cancel(self, t: _Task, force: bool) -> None:
        """Stop a task; a GPU runner running it is killed (Ray cannot force-cancel an actor's task)."""
        if t.runner is not None:
            self._retire(t.runner)
            return
        cancel_task(self._ray, t.gen, force=force)

    def _advance(self, t: _Task, state: _RunState) -> list[_Task]:
        """Take every item the task has produced; returns the task(s) to keep watching."""
        ray = self._ray
        while True:
            ready, _ = ray.wait([t.gen], timeout=0)
            if not ready:
                return [t]
            try:
                ref = next(t.gen)
            except StopIteration:
                if not t.rest:
                    if t.runner is not None:
                        t.runner.busy = False  # healthy and done: it takes the next batch of its slot
                    return []
                return self._failed(t, state, RuntimeError(
                    f"the task ended without results for {len(t.rest)} case(s)"))
            try:
                kind, payload = ray.get(ref)
            except Exception as exc:
                return self._failed(t, state, exc)
            now = time.monotonic()
            if kind == "start":
                t.node, t.worker = payload["node"], payload["worker"]
                t.case_started = now
                if "runner_ready" in payload:
                    state.runners[t.worker] = (payload["runner_born"], payload["runner_ready"])
                if t.runner is not None:
                    t.runner.started = True
            elif kind == "result":
                take(t.rest, payload)
                state.emit(payload)
                t.case_started = now

    def _systemic(self, exc: BaseException) -> str:
        """A failure that no case causes and every task would hit (a runtime environment that cannot be
        set up, a module of ``imports`` the workers cannot import): its message, else ""."""
        ray_exc = self._ray.exceptions
        if isinstance(exc, ray_exc.RuntimeEnvSetupError):
            return f"the Ray workers' runtime environment could not be set up: {describe(exc)}"
        cause = getattr(exc, "cause", None) or exc
        if isinstance(cause, ImportError) and cause.name and any(
                cause.name == m or m.startswith(cause.name + ".") for m in self.imports):
            return (f"the Ray workers cannot import {cause.name} (imports={list(self.imports)}; is it on "
                    f"their PYTHONPATH?): {describe(cause)}")
        return ""

    def _failed(self, t: _Task, state: _RunState, exc: BaseException) -> list[_Task]:
        """The task failed: charge its running case, record it ``crashed`` when it used up its retries,
        and resubmit the unfinished rest. A GPU runner that failed is retired (a fresh one takes over)."""
        if t.runner is not None:
            self._retire(t.runner)
        if not t.rest:
            return []
        fatal = self._systemic(exc)
        if fatal:
            raise DispatchError(fatal) from exc
        head = t.rest[0]
        where = f" on {t.worker}" if t.worker else ""
        if is_node_loss(self._ray, exc, t.node, self.cluster) and state.policy.node_lost(head.key):
            log.info("kbench: node lost%s (%s); rescheduling %d case(s)", where, type(exc).__name__,
                     len(t.rest))
            return self._submit(t.rest, state, front=True)
        give_up = state.policy.strike(head.key)
        n = state.policy.attempts(head.key)
        rest = t.rest
        if give_up:
            state.emit(Result(head, "crashed", worker=t.worker, message=clean_message(
                f"the worker crashed{where} running this case ({n} attempts): {describe(exc)}")))
            rest = rest[1:]
        else:
            log.info("kbench: worker crashed%s running %s (%s); retry %d of %d", where, head.key,
                     type(exc).__name__, n, self.max_retries)
        return self._submit(rest, state, front=True) if rest else []

    def _check_timeout(self, t: _Task, state: _RunState) -> list[_Task]:
        if t.case_started is None or not t.rest:
            return [t]
        head = t.rest[0]
        if time.monotonic() - t.case_started <= head.timeout_s:
            return [t]
        kept = self._advance(t, state)  # a result may have arrived since the last look
        if not (len(kept) == 1 and kept[0] is t and t.rest and t.rest[0] is head):
            return kept  # it moved on (or failed and was resubmitted): look again at the next poll
        self._cancel(t, force=True)
        elapsed = time.monotonic() - t.case_started
        where = f" on {t.worker}" if t.worker else ""
        state.emit(Result(head, "timeout", worker=t.worker, message=(
            f"no result after {elapsed:.1f} s{where} (timeout {head.timeout_s:g} s); "
            "the task was cancelled (force) and the rest of its batch rescheduled")))
        rest = t.rest[1:]
        return self._submit(rest, state, front=True) if rest else []

    def _unplaceable(self, slot: Slot, cases: Sequence[Case]) -> list[Result]:
        return [Result(case, "crashed", message=(
            f"no alive node of the Ray cluster can run it (needs {self.cluster.slot_text(slot)}) "
            f"for {self.unplaceable_s:g} s")) for case in cases]

    def _check_unplaceable(self, active: list[_Task], state: _RunState) -> list[_Task]:
        waiting = [t for t in active if t.case_started is None]
        if not waiting and not state.queued():
            return active
        nodes = self.cluster.nodes()
        keep: list[_Task] = []
        now = time.monotonic()
        for t in active:
            if t.case_started is not None or self.cluster.placement(t.slot, nodes) is not None:
                t.unplaceable_since = None
                keep.append(t)
                continue
            t.unplaceable_since = t.unplaceable_since or now
            if now - t.unplaceable_since < self.unplaceable_s:
                keep.append(t)
                continue
            self._cancel(t, force=False)
            for result in self._unplaceable(t.slot, t.rest):
                state.emit(result)
        for slot, queue in state.queues.items():  # GPU batches no runner has taken yet
            if not queue or self.cluster.placement(slot, nodes) is not None:
                state.queue_unplaceable_since.pop(slot, None)
                continue
            since = state.queue_unplaceable_since.setdefault(slot, now)
            if now - since >= self.unplaceable_s:
                for item in queue:
                    for result in self._unplaceable(slot, item.cases):
                        state.emit(result)
                queue.clear()
                state.queue_unplaceable_since.pop(slot, None)
        return keep


