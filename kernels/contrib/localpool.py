"""The work pool without Ray: the items, outcomes, failure policy and cancellation of
:mod:`kernels.contrib.workpool` on this machine, for ``kbench run --executor local`` and the tuning
engine's ``LocalRunner`` (hence ``kbench tune --executor local``).

Its one runner is a warm child process (:class:`kernels.contrib.isolate.IsolatedWorker`) that builds
the client's worker once per child, with the worker protocol of the Ray pool's runner actors
(``runner_factory()``; ``needs_prepare`` / ``prepare`` timed by ``startup_timeout``), and runs the
runner items one at a time in submission order, in the consumer's thread while it iterates
:meth:`LocalPool.results`; CPU items run in this process's threads. Nothing of Ray is imported.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from kernels.contrib.workpool import FailurePolicy, Item, Outcome, PoolError

__all__ = ["Calls", "LocalPool"]

log = logging.getLogger(__name__)


#: in a LocalPool's child: the workers its factories built, by factory name
_CHILD_WORKERS: dict = {}


def _child_worker(name: Hashable, factory: Callable[[], Callable[[Any], Any]]) -> Callable[[Any], Any]:
    work = _CHILD_WORKERS.get(name)
    if work is None:
        work = _CHILD_WORKERS[name] = factory()
    return work


def _child_setup(name: Hashable, factory: Callable[[], Callable[[Any], Any]], payload: Any) -> None:
    """In a LocalPool's child: build the named worker (the first time) and run its ``prepare(payload)``
    when its ``needs_prepare(payload)`` says so."""
    work = _child_worker(name, factory)
    needs = getattr(work, "needs_prepare", None)
    if needs is not None and needs(payload):
        work.prepare(payload)


def _child_run(name: Hashable, factory: Callable[[], Callable[[Any], Any]], payload: Any) -> Any:
    """In a LocalPool's child: one runner item."""
    return _child_worker(name, factory)(payload)


class Calls:
    """The default worker of a :class:`LocalPool`'s runner: a payload ``(fn, args)`` runs as
    ``fn(*args)`` (``fn`` importable by module and name in the child)."""

    def __call__(self, payload: tuple) -> Any:
        fn, args = payload
        return fn(*args)


class LocalPool:
    """The work pool on this machine, without Ray (see the module docstring):
    :class:`~kernels.contrib.workpool.Item` in, one :class:`~kernels.contrib.workpool.Outcome` per item
    out, one :class:`~kernels.contrib.workpool.FailurePolicy`.

    * **Runner items** (``slot[0]`` True: on this machine every item that must be isolated, whatever
      its target) run one at a time, in submission order, in one warm child process that builds the
      worker named by :attr:`Item.worker` once per child (``runner_factory``: a callable, or a dict of
      named ones; default :class:`Calls`). A worker's ``needs_prepare(payload)`` / ``prepare(payload)``
      step runs before the item, timed by ``startup_timeout`` and not by the item's ``timeout_s``.
    * **Failures.** An item that runs past its ``timeout_s`` is ``timeout`` at once (its child's process
      group is killed, a fresh child runs the next item). One whose child died (a segfault, an abort),
      left the device unusable or raised is a strike (:meth:`FailurePolicy.strike`): it runs again (in
      a fresh child where the old one is gone) until its strikes are used up, then it is ``crashed``
      with what happened. An item whose payload cannot be pickled for the child is ``crashed`` at
      once (``cause`` "unsendable", the message names what could not be sent). A prepare step that fails or overruns sets the item back unblamed
      (:meth:`FailurePolicy.requeue`). A child that cannot start at all is a failure no item causes:
      :meth:`results` cancels the rest and raises :class:`PoolError`.
    * **CPU items** (``slot[0]`` False) run ``cpu_fn(payload)`` in this process's threads, at most
      ``cpu_slots`` at once; an exception is a strike. A thread cannot be killed: their ``timeout_s``
      is not enforced.
    * **Cancellation.** :meth:`cancel` (from any thread) kills the child's process group, and every
      item without an outcome is ``cancelled``. Exactly one outcome per item.

    Parameters
    ----------
    runner_factory : callable or dict, optional
        Called once in each child (per name); returns the function that runs one payload.
    cpu_fn : callable, optional
        Runs one CPU item's payload in a thread of this process.
    policy : FailurePolicy, optional
    env : dict, optional
        Environment changes for the child (e.g. ``{"CUDA_VISIBLE_DEVICES": "1"}``).
    imports : sequence of str
        Modules the child imports as it starts (those registering workloads, the factories' modules).
    startup_timeout : float
        Seconds a child may take to start, and a worker's prepare step to run.
    cpu_slots : int, optional
        The most CPU items at once (default: this machine's CPUs).
    name : str
        The child's name in messages.
    """

    def __init__(self, runner_factory: Callable[[], Callable[[Any], Any]] | dict | None = None,
                 cpu_fn: Callable[[Any], Any] | None = None, *, policy: FailurePolicy | None = None,
                 env: dict | None = None, imports: Iterable[str] = (), startup_timeout: float = 300.0,
                 cpu_slots: int | None = None, name: str = "the work pool's local runner"):
        from kernels.contrib.isolate import IsolatedWorker

        if startup_timeout <= 0:
            raise ValueError(f"startup_timeout must be positive, got {startup_timeout}")
        factories = runner_factory if isinstance(runner_factory, dict) else {None: runner_factory or Calls}
        self.factories = {k: (v or Calls) for k, v in factories.items()}
        self.cpu_fn = cpu_fn
        self.policy = policy if policy is not None else FailurePolicy()
        self.startup_timeout = float(startup_timeout)
        self.cpu_slots = int(cpu_slots or os.cpu_count() or 1)
        self.name = name
        self.child = IsolatedWorker(env=env, imports=("kernels.contrib.localpool", *imports),
                                    start_timeout=self.startup_timeout, name=name)
        self._lock = threading.Lock()
        self._queue: deque[Item] = deque()
        self._cpu: dict = {}  # Future -> (Item, wall start)
        self._threads: Any = None
        self._out: deque[Outcome] = deque()
        self._done: set = set()
        self._keys: set = set()
        self._runs: dict = {}
        self._running: Item | None = None
        self._cancelled = False
        self._fatal_message = ""

    # -- the client's side --------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """How many children were started so far (a worker's state lives in one child)."""
        return self.child.generation

    def start(self) -> None:
        """Start the child now (it warms up while the caller does other work)."""
        self.child.start()

    def submit(self, items: Iterable[Item]) -> None:
        """Queue ``items`` (keys unique for the pool's life); CPU items start at once."""
        items = list(items)
        with self._lock:
            if self._cancelled:
                raise PoolError("the pool was cancelled")
            for item in items:
                if item.key in self._keys:
                    raise ValueError(f"an item with key {item.key!r} was submitted before")
                if item.worker not in self.factories:
                    raise ValueError(f"item {item.key!r} names the worker {item.worker!r}; the pool has "
                                     f"{sorted(map(repr, self.factories))}")
                if not item.slot[0] and self.cpu_fn is None:
                    raise ValueError(f"item {item.key!r} is a CPU item and the pool has no cpu_fn")
                self._keys.add(item.key)
            for item in items:
                if item.slot[0]:
                    self._queue.append(item)
                else:
                    self._start_cpu(item)

    def results(self) -> Iterator[Outcome]:
        """One outcome per submitted item, as each completes; runner items run in this thread while
        it iterates. Raises :class:`PoolError` after a failure no item causes."""
        from concurrent.futures import FIRST_COMPLETED, wait

        while True:
            while self._out:
                yield self._out.popleft()
            if self._cancelled:
                self._cancel_all()
                if not self._out:
                    break
                continue
            self._collect_cpu()
            if self._out:
                continue
            if self._queue:
                self._run_next()
            elif self._cpu:
                wait(list(self._cpu), timeout=0.5, return_when=FIRST_COMPLETED)
            else:
                break
        if self._fatal_message:
            raise PoolError(self._fatal_message)

    def run(self, items: Iterable[Item], on_outcome: Callable[[Outcome], None]) -> None:
        """Submit ``items`` and call ``on_outcome`` for each outcome as it completes."""
        self.submit(items)
        for outcome in self.results():
            on_outcome(outcome)

    def cancel(self) -> None:
        """Stop: the running item's child is killed, and every item without an outcome is
        ``cancelled`` (reported by :meth:`results`). From any thread."""
        self._cancelled = True
        self.child.kill()

    def stats(self) -> dict[str, Any]:
        """Where the items are: ``queued`` (runner items waiting), ``running`` (0 or 1), ``cpu`` (CPU
        items in threads), ``done``."""
        return {"queued": len(self._queue), "running": int(self._running is not None),
                "cpu": len(self._cpu), "done": len(self._done)}

    def close(self) -> None:
        """End the child and the threads (items without an outcome are dropped)."""
        self.child.close()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runner items -------------------------------------------------------------------------------

    def _where(self, pid: int | None) -> tuple[str, str]:
        host = socket.gethostname()
        return f"{host}:{pid or '?'}", host

    def _run_next(self) -> None:
        from kernels.contrib.isolate import IsolateStartError

        item = self._queue.popleft()
        factory = self.factories[item.worker]
        self._running = item
        try:
            try:
                setup = self.child.call(_child_setup, item.worker, factory, item.payload,
                                        timeout=self.startup_timeout)
            except IsolateStartError as exc:
                self._cannot_start(item, exc)
                return
            except TypeError as exc:  # the payload or the factory cannot be pickled: nothing was sent
                self._finish(item, "crashed", message=str(exc), cause="unsendable", error=str(exc))
                return
            if self._cancelled:
                self._queue.appendleft(item)
                return
            if not setup.ok:
                why = f"the worker's setup step: {setup.status}: {setup.error}"
                if self.policy.requeue(item.key):
                    log.info("workpool: %s; %s set back", why, item.key)
                    self._queue.appendleft(item)
                else:
                    self._give_up(item, "crashed", f"set back too often by failures of its worker; last: {why}")
                return
            self._runs[item.key] = self._runs.get(item.key, 0) + 1
            started = time.time()
            try:
                out = self.child.call(_child_run, item.worker, factory, item.payload, timeout=item.timeout_s)
            except IsolateStartError as exc:
                self._cannot_start(item, exc)
                return
            where, host = self._where(out.pid)
            if self._cancelled:
                self._finish(item, "cancelled", message="the pool was cancelled while it ran", started=started,
                             where=where, host=host, pid=out.pid)
            elif out.status == "ok":
                self._finish(item, "ok", out.value, started=started, where=where, host=host, pid=out.pid)
            elif out.status == "timeout":
                self._finish(item, "timeout", message=f"no result after {item.timeout_s:g} s on {where}; its "
                             "worker process was killed and a fresh one runs the next item", started=started,
                             where=where, host=host, pid=out.pid, cause="timeout", error=out.error)
            else:  # crashed, fatal (the device left unusable) or raised: a strike
                what = {"crashed": "the worker process died running it",
                        "fatal": "it left the worker's device unusable",
                        "raised": "the worker raised"}[out.status]
                error = out.error if out.status != "raised" else f"{out.error}\n{out.traceback}".strip()
                if self.policy.strike(item.key):
                    self._finish(item, "crashed", message=f"{what} ({self.policy.attempts(item.key)} attempts) "
                                 f"on {where}: {error}", started=started, where=where, host=host, pid=out.pid,
                                 cause=out.status, error=error)
                else:
                    log.info("workpool: %s on %s running %s (%s); run again (%d of %d)", what, where, item.key,
                             out.error, self.policy.attempts(item.key), self.policy.strikes)
                    self._queue.appendleft(item)
        finally:
            self._running = None

    def _cannot_start(self, item: Item, exc: Exception) -> None:
        """No child could start for ``item``: a failure no item causes (the pool ends with a
        :class:`PoolError`), unless :meth:`cancel` killed the child while it started."""
        self._queue.appendleft(item)
        if not self._cancelled:
            self._fatal_message = str(exc)
            self._cancelled = True

    def _finish(self, item: Item, status: str, value: Any = None, *, message: str = "", started: float = 0.0,
                where: str = "", host: str = "", pid: int | None = None, cause: str = "", error: str = "") -> None:
        with self._lock:
            if item.key in self._done:
                return
            self._done.add(item.key)
        self._out.append(Outcome(item.key, status, value, where, host, message, self.policy.attempts(item.key),
                                 started, time.time(), self._runs.get(item.key, 0), error, int(pid or 0), cause))

    def _give_up(self, item: Item, status: str, message: str) -> None:
        self._finish(item, status, message=message)

    # -- CPU items ----------------------------------------------------------------------------------

    def _start_cpu(self, item: Item) -> None:
        from concurrent.futures import ThreadPoolExecutor

        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=self.cpu_slots, thread_name_prefix="workpool-cpu")
        self._runs[item.key] = self._runs.get(item.key, 0) + 1
        self._cpu[self._threads.submit(self.cpu_fn, item.payload)] = (item, time.time())

    def _collect_cpu(self) -> None:
        for future in [f for f in self._cpu if f.done()]:
            item, started = self._cpu.pop(future)
            where, host = self._where(os.getpid())
            exc = future.exception()
            if exc is None:
                self._finish(item, "ok", future.result(), started=started, where=where, host=host)
                continue
            error = f"{type(exc).__name__}: {exc}"
            if self.policy.strike(item.key):
                self._finish(item, "crashed", message=f"it raised ({self.policy.attempts(item.key)} attempts): "
                             f"{error}", started=started, where=where, host=host, cause="raised", error=error)
            else:
                self._start_cpu(item)

    def _cancel_all(self) -> None:
        for future, (item, _) in list(self._cpu.items()):
            future.cancel()
            self._finish(item, "cancelled", message="the pool was cancelled while it ran")
        self._cpu.clear()
        while self._queue:
            self._give_up(self._queue.popleft(), "cancelled", "the pool was cancelled before it ran")
