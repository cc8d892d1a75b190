"""One work pool on a Ray cluster: the scheduling that running a suite and tuning share, and the only
place that kills Ray workers, cancels Ray tasks or decides when a failed item is given up.

* **Items.** A :class:`Item` is one unit of work: a key, a payload, a slot (``(needs_gpu,
  gpu_model)``: :data:`kernels.contrib.ray_cluster.Slot`) and the longest it may run. Items are run
  once each; what comes back is one :class:`Outcome` per item, streamed as items complete
  (:meth:`WorkPool.results`, an iterator; or :meth:`WorkPool.run` with a callback).
* **One runner per GPU.** GPU items run on runner actors (``num_gpus=1, num_cpus=0``) placed by GPU
  model (:meth:`RayCluster.placement`: node label ``gpu-sku``, else Ray's accelerator type), up to
  one per GPU the placement selects. A runner builds the client's worker once
  (``runner_factory()``, a callable that runs one payload) and keeps it for its life, so imports
  and the device context are paid once per GPU. A runner takes items only once it said it is ready,
  so a runner that cannot be placed (its node left) holds no item back.
* **CPU items** run as Ray tasks (``num_cpus=1, num_gpus=0``) with ``CUDA_VISIBLE_DEVICES=""`` set
  before the payload runs (``cpu_fn(payload)``), at most one per CPU of the alive nodes at once.
* **Back-pressure.** At most ``in_flight`` items are handed to one runner at a time (the next ones
  wait in the actor's queue, so the GPU does not wait for the driver); the rest wait in the
  driver's queue, in submission order, for the first runner of their slot with room.
* **One failure policy** (:class:`FailurePolicy`). The item a runner was running when it crashed,
  hung past its ``timeout_s`` or its node was lost is *blamed*; the runner is killed and replaced;
  the items queued behind it are requeued at the head of the queue without blame. A hang is a
  ``timeout`` outcome at once (the item is not run again); a crash is a strike, and an item with
  ``strikes`` strikes is given up (``crashed``, with the last error); a lost node is not a strike
  (up to ``node_losses`` times per item).
* **Cancellation.** :meth:`WorkPool.cancel` (from any thread, or from the consumer of
  :meth:`WorkPool.results`) stops dispatching, kills the runners and cancels the tasks with work in
  flight, and reports every item without an outcome as ``cancelled``.
* **Exactly once.** An item has one outcome: a result arriving from a runner the pool already gave
  up on is dropped.
* **Failures no item causes.** A client's ``fatal`` classifier names the failures every item would hit
  (a runtime environment that cannot be set up, a module the workers cannot import): the first one
  cancels the pool and :meth:`WorkPool.results` raises :class:`PoolError` with its message.
* **Placement that goes away.** Items of a slot no alive node can take wait ``unplaceable_s`` for a
  node to come (back), then are given up (``crashed``). With ``lend_idle_s``, a runner that has waited
  that long for its GPU makes the idle runners of slots with nothing to do end, so that one GPU
  reachable through two placements (a label and an accelerator type) serves both in turn.
* **Long-lived.** A pool outlives one batch of items: submit more after :meth:`WorkPool.results` ran
  dry and the same runners take them (keys stay unique for the pool's life).

**Without Ray** (:class:`kernels.contrib.localpool.LocalPool`: ``kbench run --executor local``, the
tuning engine's ``LocalRunner``): the same items, outcomes, failure policy, cancellation and
exactly-once rule on this machine. Its one runner is a warm child process (:class:`kernels.contrib.isolate.IsolatedWorker`)
that builds the client's worker once per child, with the same worker protocol as a runner actor
(``runner_factory()``; ``needs_prepare`` / ``prepare`` timed by ``startup_timeout``), and runs the
runner items one at a time in submission order; CPU items run in this process's threads.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kernels.contrib.ray_cluster import RayCluster, Slot

__all__ = ["MAX_NODE_LOSSES", "MAX_REQUEUES", "FailurePolicy", "Item", "Outcome", "PoolError", "WorkPool",
           "cancel_task", "is_node_loss", "kill_actor"]

log = logging.getLogger(__name__)

#: how often one item may lose its node (not charged as a crash) before that counts as a crash
MAX_NODE_LOSSES = 5
#: how often an item may be set back by failures it did not cause before it is given up itself
MAX_REQUEUES = 3


class PoolError(RuntimeError):
    """A failure no item causes (the client's ``fatal`` classifier said so): the pool was cancelled."""


# ---------------------------------------------------------------------------------------------
# the failure policy and Ray's kill / cancel (used by every client of Ray in the project)
# ---------------------------------------------------------------------------------------------


@dataclass
class FailurePolicy:
    """When an item that keeps failing is given up.

    Parameters
    ----------
    strikes : int
        Crashes charged to one item before it is given up (a crash while running it is one strike).
    node_losses : int
        Node losses while running one item that are not charged to it (its runner's node died or
        left the cluster); more count as crashes.
    requeues : int
        How often an item may be set back by failures it did not cause (it waited behind an item
        that crashed) before it is given up itself.
    replacements : int or None
        How often the runner of one GPU is replaced after it failed before that GPU is dropped
        (None: always replaced).
    """

    strikes: int = 3
    node_losses: int = MAX_NODE_LOSSES
    requeues: int = MAX_REQUEUES
    replacements: int | None = None
    _strikes: dict = field(default_factory=dict, repr=False)
    _losses: dict = field(default_factory=dict, repr=False)
    _requeues: dict = field(default_factory=dict, repr=False)

    def strike(self, key: Hashable) -> bool:
        """Charge a crash to ``key``; True when it has used up its strikes (give it up)."""
        self._strikes[key] = self._strikes.get(key, 0) + 1
        return self._strikes[key] >= self.strikes

    def node_lost(self, key: Hashable) -> bool:
        """A node was lost while running ``key``; True when that is free (not a strike)."""
        self._losses[key] = self._losses.get(key, 0) + 1
        return self._losses[key] <= self.node_losses

    def requeue(self, key: Hashable) -> bool:
        """``key`` was set back by another item's failure; True when it may wait again."""
        self._requeues[key] = self._requeues.get(key, 0) + 1
        return self._requeues[key] <= self.requeues

    def attempts(self, key: Hashable) -> int:
        """The crashes charged to ``key`` so far."""
        return self._strikes.get(key, 0)

    def setbacks(self, key: Hashable) -> int:
        """How often ``key`` was set back by failures it did not cause so far."""
        return self._requeues.get(key, 0)


def kill_actor(ray: Any, handle: Any) -> None:
    """Kill a Ray actor's process (a GPU kernel cannot be interrupted otherwise); never raises."""
    try:
        ray.kill(handle, no_restart=True)
    except Exception as exc:
        log.debug("workpool: kill: %s", exc)


def cancel_task(ray: Any, ref: Any, force: bool = True) -> None:
    """Cancel a Ray task (``force``: kill its worker process); never raises."""
    try:
        ray.cancel(ref, force=force)
    except Exception as exc:
        log.debug("workpool: cancel: %s", exc)


def is_node_loss(ray: Any, exc: BaseException, node: str, cluster: RayCluster | None = None) -> bool:
    """Whether ``exc`` (a failed task or actor call that ran on ``node``) is a lost node rather than a
    crash of the work: the node died, or it is no longer an alive node of ``cluster``."""
    ray_exc = ray.exceptions
    if isinstance(exc, ray_exc.NodeDiedError):
        return True
    if isinstance(exc, ray_exc.ActorDiedError) and "node has died" in str(exc):
        return True
    if not node or cluster is None:
        return False
    try:
        return node not in {n.node_id for n in cluster.nodes()}
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
# what runs in the workers (nothing of Ray at module level)
# ---------------------------------------------------------------------------------------------


def _where() -> dict:
    import os

    import ray

    return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


class PoolRunner:
    """A runner actor holding one GPU: builds the client's worker once, then runs item after item.
    ``runner_factory`` may be a dict of named factories (clients sharing the runners: the harness's
    cases and the tuning engine's candidates): the first is built as the runner starts, the others
    when an item first names them (:attr:`Item.worker`), in that item's setup step."""

    def __init__(self, runner_factory: Callable[[], Callable[[Any], Any]] | dict) -> None:
        self.factories = dict(runner_factory) if isinstance(runner_factory, dict) else {None: runner_factory}
        first = next(iter(self.factories))
        self.work = self.factories[first]()
        self.workers = {first: self.work}
        where = getattr(self.work, "where", None)
        self.info = {**_where(), **(where() if where is not None else {})}

    def hello(self) -> dict:
        """Where this runner is (node, process id, and what the worker's ``where()`` adds); answers
        once the worker is built."""
        return dict(self.info)

    def run(self, key: Any, payload: Any, worker: Any = None) -> Iterator[tuple]:
        """One item (a streaming generator): ``("setup", where)`` while the named ``worker`` is built
        (the first time) and the worker's ``prepare(payload)`` runs when its ``needs_prepare(payload)``
        says so (steps timed by the pool's ``startup_timeout``), then ``("start", where)`` and
        ``("result", value)``."""
        work = self.workers.get(worker) if worker is not None else self.work
        if work is None:
            yield ("setup", self.info)
            work = self.workers[worker] = self.factories[worker]()
        needs = getattr(work, "needs_prepare", None)
        if needs is not None and needs(payload):
            yield ("setup", self.info)
            work.prepare(payload)
        yield ("start", self.info)
        yield ("result", work(payload))


def _cpu_item(cpu_fn: Callable[[Any], Any], key: Any, payload: Any) -> Iterator[tuple]:
    """One CPU item (a streaming task), the GPUs hidden before anything runs."""
    import os

    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    yield ("start", _where())
    yield ("result", cpu_fn(payload))


# ---------------------------------------------------------------------------------------------
# the driver's side
# ---------------------------------------------------------------------------------------------


@dataclass
class Item:
    """One unit of work: ``key`` (unique in a pool), ``payload`` (what the worker gets), ``slot``
    (``(needs_gpu, gpu_model)``), ``timeout_s`` (the longest one run of it may take), ``group``
    (GPU items: an affinity, e.g. the shape whose inputs and reference a worker caches), ``worker``
    (which named factory of the runners runs it) and ``keep_ref`` (the outcome's ``value`` is the Ray
    object reference of the ``("result", value)`` event, left unfetched: large values the client only
    passes on)."""

    key: Hashable
    payload: Any
    slot: Slot = (True, "")
    timeout_s: float = 60.0
    group: Hashable | None = None  # GPU items of one group go to the runner that ran the group before
    worker: Hashable | None = None  # GPU items: which of the pool's named factories runs it (None: the first)
    keep_ref: bool = False  # the outcome's value is the Ray object holding ("result", value), not fetched


@dataclass
class Outcome:
    """What became of an item: ``status`` is ``ok`` (``value`` is the worker's return value),
    ``timeout``, ``crashed`` or ``cancelled`` (``message`` says why); ``worker`` names the process
    (``node:pid``) that gave it (``pid`` alone too), ``attempts`` the crashes charged to it, ``runs``
    how often it was handed to a worker, ``error`` the exception of the crash that ended it (and
    ``cause``, on :class:`~kernels.contrib.localpool.LocalPool`, what the child did: ``crashed``, ``fatal`` -- the device left
    unusable --, ``raised`` or ``timeout``)."""

    key: Hashable
    status: str
    value: Any = None
    worker: str = ""
    node: str = ""
    message: str = ""
    attempts: int = 0
    started: float = 0.0  # time.time() when its last run started (0: never)
    finished: float = 0.0
    runs: int = 0
    error: str = ""  # a crash: the exception that ended its last run
    pid: int = 0
    cause: str = ""  # kernels.contrib.localpool.LocalPool: what ended its last run in the child ("crashed", "fatal",
    # "raised", "timeout"; "unsendable": its payload could not be sent there)


@dataclass(eq=False)
class _Runner:
    handle: Any
    slot: Slot
    ready_ref: Any
    ready: bool = False
    info: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)  # of _Call, in the actor's order
    restarts: int = 0  # the runners of its GPU before it
    born: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class _Call:
    item: Item
    gen: Any
    runner: _Runner | None  # None: a CPU task
    started: float | None = None  # monotonic, when its "start" (or "setup") arrived
    setup: bool = False  # in the worker's setup step
    wall_start: float = 0.0
    info: dict = field(default_factory=dict)


class WorkPool:
    """Schedules items on a Ray cluster: GPU items on one runner actor per GPU, CPU items as tasks
    (see the module docstring).

    Parameters
    ----------
    cluster : RayCluster
        The connection and what its nodes offer (placement, capacity).
    runner_factory : callable or dict, optional
        Called once in each GPU runner; returns the function that runs one GPU item's payload. A dict
        of named factories serves several clients on the same runners (an item names its factory:
        :attr:`Item.worker`; None runs the first).
    cpu_fn : callable, optional
        Runs one CPU item's payload (in a task whose GPUs are hidden).
    policy : FailurePolicy, optional
        When failing items are given up (default: :class:`FailurePolicy()`).
    in_flight : int
        The most items handed to one runner at once.
    poll_s : float
        The longest the driver waits for progress before it checks timeouts.
    startup_timeout : float
        Seconds a runner may take to become ready while items of its slot wait and no runner of it
        is ready; then one waiting item is blamed (a runner that cannot start).
    runtime_env : dict, optional
        A Ray runtime environment for the runners and the CPU tasks (the CPU tasks' has
        ``CUDA_VISIBLE_DEVICES=""`` added); default: the cluster's.
    cpu_slots : int, optional
        The most CPU items at once (default: the CPUs of the alive nodes).
    max_runners : int, optional
        The most runners of one slot (default: one per GPU its placement selects).
    fatal : callable, optional
        ``fatal(exc)`` of a failed item or a runner that could not start: a message when the failure
        is one no item causes (then :meth:`results` cancels everything and raises :class:`PoolError`),
        else "".
    unplaceable_s : float
        How long items whose slot no alive node can take wait for one before they are given up.
    lend_idle_s : float, optional
        A runner waiting this long for its GPU ends the idle runners of slots with nothing queued
        (None: never).
    """

    def __init__(self, cluster: RayCluster, runner_factory: Callable[[], Callable[[Any], Any]] | None = None,
                 cpu_fn: Callable[[Any], Any] | None = None, *, policy: FailurePolicy | None = None,
                 in_flight: int = 1, poll_s: float = 0.1, startup_timeout: float = 120.0,
                 runtime_env: dict | None = None, cpu_slots: int | None = None,
                 max_runners: int | None = None, fatal: Callable[[BaseException], str] | None = None,
                 unplaceable_s: float = 0.0, lend_idle_s: float | None = None):
        if in_flight < 1:
            raise ValueError(f"in_flight must be >= 1, got {in_flight}")
        self.cluster = cluster
        self.ray = ray = cluster.ray
        self.policy = policy or FailurePolicy()
        self.in_flight = int(in_flight)
        self.poll_s = float(poll_s)
        self.startup_timeout = float(startup_timeout)
        self._factory = runner_factory
        self._runner_cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(PoolRunner)
        self._cpu_fn = cpu_fn
        self._cpu_slots = cpu_slots
        self._env = copy.deepcopy(runtime_env) if runtime_env else None
        self._cpu_task = ray.remote(num_returns="streaming", max_retries=0, retry_exceptions=False)(_cpu_item)
        self._queue: deque[Item] = deque()
        self._runners: dict[Slot, list[_Runner]] = {}
        self._calls: list[_Call] = []
        self._done: set = set()
        self._out: deque[Outcome] = deque()
        self._cancelled = threading.Event()
        self._waiting_since: dict[Slot, float] = {}
        self._runs: dict = {}  # key -> how often it was handed to a worker
        self._max_runners = max_runners
        self._owner: dict[tuple, _Runner] = {}  # (slot, group) -> the runner that took the group
        self._dropped: dict[Slot, int] = {}  # GPUs given up after too many replacements
        self._last_failure: dict[Slot, str] = {}
        self.runners_started = 0
        self._fatal = fatal
        self._fatal_message = ""
        self.unplaceable_s = float(unplaceable_s)
        self._unplaceable_since: dict[Slot, float] = {}
        self.lend_idle_s = lend_idle_s
        #: called after every wait for progress (a client raises a signal held back while Ray's
        #: compiled code ran there: an exception raised in a signal handler cannot pass through it)
        self.poll_hook: Callable[[], None] | None = None

    # -- the client's side ------------------------------------------------------------------------

    def submit(self, items: Iterable[Item]) -> None:
        """Queue ``items`` (in order) for the next :meth:`results`. A key has one outcome in a pool's
        life: submitting a key that already has one is a ValueError."""
        for item in items:
            if item.key in self._done:
                raise ValueError(f"item {item.key!r} already has an outcome in this pool")
            if item.slot[0] and self._factory is None:
                raise ValueError("a GPU item needs a pool with a runner_factory")
            if item.slot[0] and item.worker is not None and (
                    not isinstance(self._factory, dict) or item.worker not in self._factory):
                raise ValueError(f"item {item.key!r} names worker {item.worker!r}, which this pool's "
                                 "runner_factory does not have")
            if not item.slot[0] and self._cpu_fn is None:
                raise ValueError("a CPU item needs a pool with a cpu_fn")
            self._queue.append(item)

    def cancel(self) -> None:
        """Stop dispatching and kill what runs; the items without an outcome come out ``cancelled``.
        The pool stays usable: items submitted afterwards run (on fresh runners)."""
        self._cancelled.set()

    def start_runners(self, slot: Slot, wait_s: float | None = None) -> int:
        """Start the runners of ``slot`` (one per GPU its placement selects) ahead of the items; with
        ``wait_s``, wait that long for them to be ready. Returns how many are ready."""
        self._grow(slot, self.cluster.nodes())
        runners = self._runners.get(slot, [])
        if wait_s is not None and runners:
            try:
                infos = self.ray.get([r.ready_ref for r in runners], timeout=wait_s)
                for runner, info in zip(runners, infos):
                    runner.ready, runner.info = True, dict(info)
            except Exception as exc:
                log.info("workpool: runners not all ready after %g s: %s", wait_s, exc)
        return sum(r.ready for r in runners)

    def runner_info(self, slot: Slot) -> list[dict]:
        """Where the ready runners of ``slot`` are: node, process id and what their worker's
        ``where()`` adds."""
        return [dict(r.info) for r in self._runners.get(slot, []) if r.ready]

    def stats(self) -> dict[str, Any]:
        """Where the items are now: ``queued`` (waiting in the driver), ``in_flight`` (handed to a
        worker), ``runners`` (per runner that is ready, the items it holds) and ``starting`` (runners
        not ready yet)."""
        runners = [r for rs in self._runners.values() for r in rs]
        return {"queued": len(self._queue), "in_flight": len(self._calls),
                "runners": [len(r.calls) for r in runners if r.ready],
                "starting": sum(not r.ready for r in runners)}

    def run(self, items: Iterable[Item], on_outcome: Callable[[Outcome], None]) -> None:
        """Submit ``items`` and hand each outcome to ``on_outcome`` as it arrives."""
        self.submit(items)
        for outcome in self.results():
            on_outcome(outcome)

    def results(self) -> Iterator[Outcome]:
        """The outcomes of the submitted items as they complete, until every item has one."""
        try:
            while self._queue or self._calls or self._out:
                if self._fatal_message:
                    message, self._fatal_message = self._fatal_message, ""
                    self._cancel_all()
                    self._out.clear()
                    raise PoolError(message)
                if self._cancelled.is_set():
                    self._cancel_all()
                    self._cancelled.clear()  # what is submitted later runs again
                else:
                    self._dispatch()
                    self._wait()
                while self._out:
                    yield self._out.popleft()
        except BaseException:
            self._cancel_all()
            raise

    def close(self) -> None:
        """End every runner (their GPUs go back to the cluster)."""
        for runners in list(self._runners.values()):
            for runner in list(runners):
                self._retire(runner)

    def __enter__(self) -> WorkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scheduling -------------------------------------------------------------------------------

    def _grow(self, slot: Slot, nodes: list) -> None:
        runners = self._runners.setdefault(slot, [])
        want = self.cluster.capacity(slot, nodes)
        if self._max_runners:
            want = min(want, self._max_runners)
        want -= self._dropped.get(slot, 0)
        while len(runners) < want and self._start_runner(slot, 0, nodes):
            pass

    def _start_runner(self, slot: Slot, restarts: int, nodes: list | None = None) -> bool:
        opts = self.cluster.placement(slot, nodes if nodes is not None else self.cluster.nodes())
        if opts is None:
            return False
        if self._env is not None:
            opts = dict(opts, runtime_env=copy.deepcopy(self._env))
        handle = self._runner_cls.options(**opts).remote(self._factory)
        self._runners.setdefault(slot, []).append(_Runner(handle, slot, handle.hello.remote(),
                                                          restarts=restarts))
        self.runners_started += 1
        return True

    def _replace(self, runner: _Runner, why: str) -> None:
        """End a runner that failed; start its GPU's next one unless it used up its replacements."""
        self._retire(runner)
        info = runner.info
        where = f" on node {str(info.get('node', '?'))[:12]} (pid {info.get('pid', '?')})" if info else ""
        self._last_failure[runner.slot] = f"the runner{where} {why}"
        limit = self.policy.replacements
        if limit is None or runner.restarts < limit:
            log.info("workpool: runner%s %s; starting a replacement", where, why)
            self._start_runner(runner.slot, runner.restarts + 1)
        else:
            self._dropped[runner.slot] = self._dropped.get(runner.slot, 0) + 1
            log.warning("workpool: runner%s %s; replaced %d time(s): its GPU is dropped", where, why,
                        runner.restarts)

    def _cpu_env(self) -> dict:
        if self._env is None:
            return self.cluster.cpu_runtime_env()
        env = copy.deepcopy(self._env)
        env.setdefault("env_vars", {})["CUDA_VISIBLE_DEVICES"] = ""
        return {"runtime_env": env}

    def _dispatch(self) -> None:
        if not self._queue:
            return
        nodes = None
        cpu_busy = sum(1 for c in self._calls if c.runner is None)
        cpu_cap: int | None = None
        kept: deque[Item] = deque()
        while self._queue:
            item = self._queue.popleft()
            if not item.slot[0]:
                if cpu_cap is None and self._cpu_slots:
                    cpu_cap = self._cpu_slots
                if cpu_cap is None:
                    nodes = nodes if nodes is not None else self.cluster.nodes()
                    cpu_cap = max(1, int(sum(n.cpus for n in nodes)))
                if cpu_busy >= cpu_cap:
                    kept.append(item)
                    continue
                opts = {"num_cpus": 1, "num_gpus": 0, **self._cpu_env()}
                gen = self._cpu_task.options(**opts).remote(self._cpu_fn, item.key, item.payload)
                self._calls.append(_Call(item, gen, None))
                self._runs[item.key] = self._runs.get(item.key, 0) + 1
                cpu_busy += 1
                continue
            runners = self._runners.get(item.slot)
            if not runners:
                nodes = nodes if nodes is not None else self.cluster.nodes()
                self._grow(item.slot, nodes)
                runners = self._runners[item.slot]
            if not runners and not self._dropped.get(item.slot):
                nodes = nodes if nodes is not None else self.cluster.nodes()
                if self.cluster.placement(item.slot, nodes) is None:
                    since = self._unplaceable_since.setdefault(item.slot, time.monotonic())
                    waited = time.monotonic() - since
                    if waited < self.unplaceable_s:
                        kept.append(item)
                        continue
                    self._give_up(item, "crashed", "no alive node of the Ray cluster can run it (needs "
                                                   f"{RayCluster.slot_text(item.slot)})"
                                                   + (f" for {waited:.0f} s" if self.unplaceable_s else ""))
                    continue
                self._unplaceable_since.pop(item.slot, None)
            if not runners and self._dropped.get(item.slot):
                self._give_up(item, "crashed", (
                    "no runner is left: every runner died or timed out and was replaced "
                    f"{self.policy.replacements} time(s); the last failure: "
                    f"{self._last_failure.get(item.slot)}"))
                continue
            runner = self._pick(item, [r for r in runners if r.ready and len(r.calls) < self.in_flight])
            if runner is None:
                kept.append(item)
                continue
            self._hand(item, runner)
        self._queue = self._steal(kept)

    def _pick(self, item: Item, free: list[_Runner]) -> _Runner | None:
        """The runner for a GPU item among the ``free`` ones: its group's runner while that one is
        alive (None while it is busy: the item waits for it), else the least loaded one, which then
        takes the group."""
        if not free:
            return None
        if item.group is None:
            return min(free, key=lambda r: len(r.calls))
        owner = self._owner.get((item.slot, item.group))
        if owner is not None and owner in self._runners.get(item.slot, ()):
            return owner if owner in free else None
        runner = min(free, key=lambda r: len(r.calls))
        self._owner[(item.slot, item.group)] = runner
        return runner

    def _steal(self, kept: deque[Item]) -> deque[Item]:
        """A ready runner with nothing to do takes the first waiting item of its slot whatever its
        group (no GPU idles while its slot has work)."""
        for runners in list(self._runners.values()):
            for runner in runners:
                if not runner.ready or runner.calls:
                    continue
                item = next((i for i in kept if i.slot == runner.slot), None)
                if item is not None:
                    kept.remove(item)
                    self._hand(item, runner)
        return kept

    def _hand(self, item: Item, runner: _Runner) -> None:
        gen = runner.handle.run.options(num_returns="streaming").remote(item.key, item.payload, item.worker)
        call = _Call(item, gen, runner)
        runner.calls.append(call)
        self._calls.append(call)
        self._runs[item.key] = self._runs.get(item.key, 0) + 1

    def _wait(self) -> None:
        """Wait for progress (at most ``poll_s``), take it, then check hangs and runners that never
        start. A signal hook of the client belongs right after the ``ray.wait`` here."""
        ray = self.ray
        pending_ready = [r.ready_ref for rs in self._runners.values() for r in rs if not r.ready]
        refs = [c.gen for c in self._calls] + pending_ready
        if refs:
            ray.wait(refs, num_returns=1, timeout=self.poll_s, fetch_local=True)
        else:
            time.sleep(self.poll_s)
        if self.poll_hook is not None:
            self.poll_hook()
        self._take_ready()
        for call in list(self._calls):
            self._advance(call)
        now = time.monotonic()
        for call in list(self._calls):
            limit = self.startup_timeout if call.setup else call.item.timeout_s
            if call in self._calls and call.started is not None and now - call.started > limit:
                self._timed_out(call)
        self._check_startup(now)
        if self.lend_idle_s is not None:
            self._lend_idle(now)

    def _lend_idle(self, now: float) -> None:
        """A runner waiting for its GPU past ``lend_idle_s`` while items of its slot wait: the idle
        runners of slots with nothing queued end (their GPU may be the one it waits for)."""
        queued = {i.slot for i in self._queue}
        waiting = [r for rs in self._runners.values() for r in rs
                   if not r.ready and r.slot in queued and now - r.born > self.lend_idle_s]
        if not waiting:
            return
        for slot, runners in list(self._runners.items()):
            if slot in queued:
                continue
            for runner in [r for r in runners if r.ready and not r.calls]:
                log.info("workpool: an idle runner of %s ends: a runner of %s waits for a GPU",
                         RayCluster.slot_text(slot), RayCluster.slot_text(waiting[0].slot))
                self._retire(runner)

    def _take_ready(self) -> None:
        for runners in list(self._runners.values()):
            for runner in list(runners):
                if runner.ready:
                    continue
                ready, _ = self.ray.wait([runner.ready_ref], timeout=0)
                if not ready:
                    continue
                try:
                    runner.info, runner.ready = dict(self.ray.get(runner.ready_ref)), True
                except Exception as exc:  # it could not start: end it, a fresh one is started on demand
                    log.info("workpool: a runner did not start: %s", exc)
                    self._retire(runner)
                    self._classify(exc)

    def _advance(self, call: _Call) -> None:
        ray = self.ray
        while call in self._calls:
            ready, _ = ray.wait([call.gen], timeout=0)
            if not ready:
                return
            try:
                ref = next(call.gen)
            except StopIteration:
                self._end(call)
                if call.item.key not in self._done:
                    self._failed(call, RuntimeError("the worker ended without a result"))
                return
            if call.item.keep_ref and call.started is not None and not call.setup:
                # the event after "start" is the result: left in the object store for the client (who
                # hands it on, e.g. to a runner); a failed run raises where it is fetched
                self._finish(call, "ok", value=ref)
                self._end(call)
                return
            try:
                event = ray.get(ref)
            except Exception as exc:
                self._failed(call, exc)
                return
            if event[0] in ("start", "setup"):
                call.started, call.wall_start, call.info = time.monotonic(), time.time(), dict(event[1])
                call.setup = event[0] == "setup"
            else:
                self._finish(call, "ok", value=event[1])
                self._end(call)

    def _end(self, call: _Call) -> None:
        if call in self._calls:
            self._calls.remove(call)
        if call.runner is not None and call in call.runner.calls:
            call.runner.calls.remove(call)

    def _finish(self, call: _Call, status: str, value: Any = None, message: str = "",
                error: str = "") -> None:
        key = call.item.key
        if key in self._done:
            return
        self._done.add(key)
        info = call.info or (call.runner.info if call.runner else {})
        worker = f"{str(info.get('node', '?'))[:12]}:{info.get('pid', '?')}" if info else ""
        self._out.append(Outcome(key, status, value, worker, str(info.get("node", "")), message,
                                 self.policy.attempts(key), call.wall_start, time.time(),
                                 self._runs.get(key, 0), error, int(info.get("pid", 0) or 0)))

    def _give_up(self, item: Item, status: str, message: str) -> None:
        if item.key in self._done:
            return
        self._done.add(item.key)
        self._out.append(Outcome(item.key, status, message=message, attempts=self.policy.attempts(item.key),
                                 finished=time.time(), runs=self._runs.get(item.key, 0)))

    def _requeue(self, calls: list[_Call], why: str) -> None:
        for call in reversed(calls):
            self._end(call)
            if call.item.key in self._done:
                continue
            if self.policy.requeue(call.item.key):
                self._queue.appendleft(call.item)
            else:
                self._give_up(call.item, "crashed", f"set back too often by failures of others; last: {why}")

    def _failed(self, call: _Call, exc: BaseException) -> None:
        """Blame the running item (a runner's first call: it runs its calls in order), replace its
        runner, requeue the items behind it. An item in its setup step is requeued unblamed."""
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        if self._classify(exc):
            return
        behind: list[_Call] = []
        if call.runner is not None:
            calls = list(call.runner.calls) or [call]
            call, behind = calls[0], calls[1:]
            self._replace(call.runner, f"died ({why})")
        self._end(call)
        item = call.item
        if call.setup:
            behind.insert(0, call)
        elif item.key not in self._done:
            node = call.info.get("node", "") or (call.runner.info.get("node", "") if call.runner else "")
            if is_node_loss(self.ray, exc, node, self.cluster) and self.policy.node_lost(item.key):
                log.info("workpool: node lost running %s; requeued", item.key)
                self._queue.appendleft(item)
            elif self.policy.strike(item.key):
                self._finish(call, "crashed", error=why, message=(
                    f"the worker died running it ({self.policy.attempts(item.key)} attempts): {why}"))
            else:
                self._queue.appendleft(item)
        self._requeue(behind, why)

    def _classify(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a failure no item causes (the client's ``fatal`` says): then the pool
        stops at the next turn of :meth:`results`."""
        if self._fatal is None or self._fatal_message:
            return bool(self._fatal_message)
        self._fatal_message = self._fatal(exc) or ""
        return bool(self._fatal_message)

    def _timed_out(self, call: _Call) -> None:
        """Kill the worker of an item that overran: the item is ``timeout`` (in its setup step:
        requeued unblamed), the items behind it are requeued."""
        self._end(call)
        behind: list[_Call] = []
        if call.runner is not None:
            behind = list(call.runner.calls)
            self._replace(call.runner, "did not prepare in time" if call.setup else "timed out")
        else:
            cancel_task(self.ray, call.gen, force=True)
        if call.setup:
            self._requeue([call] + behind, "a runner did not prepare in time")
            return
        self._finish(call, "timeout", message=(
            f"no result after {call.item.timeout_s:g} s; its worker was killed"))
        self._requeue(behind, "the item before it timed out")

    def _check_startup(self, now: float) -> None:
        """Items whose slot has no ready runner for ``startup_timeout``: the first one is blamed."""
        waiting = {i.slot for i in self._queue if i.slot[0]}
        for slot in list(self._waiting_since):
            if slot not in waiting or any(r.ready for r in self._runners.get(slot, [])):
                self._waiting_since.pop(slot)
        for slot in waiting:
            if any(r.ready for r in self._runners.get(slot, [])):
                continue
            since = self._waiting_since.setdefault(slot, now)
            if now - since > self.startup_timeout:
                self._waiting_since.pop(slot)
                item = next(i for i in self._queue if i.slot == slot)
                self._queue.remove(item)
                self._give_up(item, "crashed", f"no runner for {RayCluster.slot_text(slot)} became ready "
                                               f"within {self.startup_timeout:g} s")
                for runner in list(self._runners.get(slot, [])):
                    self._retire(runner)

    def _retire(self, runner: _Runner) -> None:
        runners = self._runners.get(runner.slot, [])
        if runner in runners:
            runners.remove(runner)
        kill_actor(self.ray, runner.handle)

    def _cancel_all(self) -> None:
        for call in list(self._calls):
            if call.runner is None:
                cancel_task(self.ray, call.gen, force=True)
            self._end(call)
            self._give_up(call.item, "cancelled", "the pool was cancelled while it ran")
        self.close()
        while self._queue:
            self._give_up(self._queue.popleft(), "cancelled", "the pool was cancelled before it ran")
