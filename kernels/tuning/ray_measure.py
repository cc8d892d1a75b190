"""Building and running tuning candidates on a Ray cluster: :class:`RayBuilder` and :class:`RayRunner`,
the cluster counterparts of :class:`~kernels.tuning.measure.LocalBuilder` and
:class:`~kernels.tuning.measure.LocalRunner`, with the same ``build(inputs)`` / ``run(inputs,
build_results)`` protocol (``autotvm.measure_option(builder=RayBuilder(...), runner=RayRunner(...))``,
``meta_schedule.tune_tir(..., builder=..., runner=...)``).

* **Builds on CPU workers.** A batch is cut into chunks (several candidates a task, to amortise a Ray
  task's start) that run as Ray tasks with ``num_cpus=1`` and ``CUDA_VISIBLE_DEVICES=""`` (set through
  the task's runtime environment); nvcc runs there for CUDA. What comes back is data, not a module
  object: the module as bytes (:func:`kernels.runtime.serialize.module_to_bytes`: the description
  with the launch extents plus the cubin, the shared library or the OpenCL source) and the shapes and
  dtypes of its arguments, so that a runner on another node can load it.
* **Runs on one long-lived actor per GPU.** The runner starts one actor per GPU of the nodes holding
  the chosen GPU model (``num_gpus=1, num_cpus=0``; placed by the node label ``gpu-sku``, Ray's
  accelerator-type label or resource, as the harness places its runners:
  :mod:`kernels.contrib.ray_cluster`) and keeps them until it is closed, so the imports and the
  device context are paid once per GPU. The runners of one process share the actors of a GPU model
  (a GPU has one actor, whichever runner asks; a second runner of the model would otherwise wait
  for GPUs the first one holds); :meth:`RayRunner.close` ends them when the last runner is closed.
  A batch is cut into chunks that free actors pull (two chunks queued an actor, so that the GPU
  does not wait for the driver between chunks). Each actor checks a
  candidate against the reference configuration's outputs when asked and times it with the
  runtime's ``time_evaluator``, exactly as the local runner does
  (:func:`kernels.tuning.measure.time_candidate`). The targets ``opencl`` and ``c`` run there as well
  (the actor still holds its GPU), which is how the runner is tested on machines without GPUs.
* **The task travels once.** A candidate's task (an autotvm template with its arguments, or a
  TensorIR task) is pickled once per batch and put in Ray's object store; a worker process rebuilds
  it once and keeps it for later batches. An autotvm template is sent as its function, so it must be
  importable in the workers or defined in ``__main__`` (or sent by value: ``cloudpickle.
  register_pickle_by_value``); ``runtime_env={"env_vars": {"PYTHONPATH": ...}}`` makes a module of
  templates importable there.
* **Failures are results, never exceptions.** Each task and actor call streams its progress (which
  candidate started, each result), so the driver knows which candidate a dead worker was on:

  - a build longer than ``timeout`` is BUILD_TIMEOUT (its worker is killed: ``ray.cancel(force=
    True)``), a build worker that died is RUNTIME_DEVICE (as autotvm reports a build process that
    died); the candidates of its chunk not yet started are built again by a new task;
  - a run longer than ``timeout`` is RUN_TIMEOUT: the actor is killed (``ray.kill``: a GPU kernel
    cannot be interrupted otherwise) and replaced; an actor that dies while running a candidate
    (a crashing kernel, a killed process) gives that candidate RUNTIME_DEVICE and is replaced, up to
    ``max_restarts`` times per GPU, then dropped; the candidates it had not started go to the other
    actors. With no actor left, the remaining candidates are RUNTIME_DEVICE errors.

* **What runs in the workers** (the build task, the runner actor, a task's pickling and rebuilding)
  is :mod:`kernels.tuning.ray_workers`; this module is the driver's side.
* **Starting Ray.** Both attach to this process's Ray connection when there is one, else join
  ``address``, else start the embedded local cluster (dashboard off, token authentication in a
  private temporary folder: :class:`kernels.contrib.ray_cluster.RayCluster`), which the builder and
  the runner of one process share and which is shut down at exit (or by :func:`shutdown`).
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contrib.workpool import FailurePolicy, Item, Outcome, WorkPool, kill_actor
from ..errors import TVMError
from .measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, arg_infos
from .ray_workers import TASK_CACHE_SIZE, RunnerActor, build_item, build_reference, task_bytes

__all__ = ["RayBuilder", "RayRunner", "RayMeasureError", "shutdown"]

logger = logging.getLogger("autotvm")


def _policy() -> FailurePolicy:
    """The failure policy of one build or run call: a candidate blamed without certainty (it was next
    when its worker died) is charged at its second such failure; a candidate set back by failures
    of others is given up after :data:`~kernels.contrib.workpool.MAX_REQUEUES`."""
    return FailurePolicy(strikes=2)


class RayMeasureError(TVMError, ValueError):
    """A Ray builder or runner that cannot work at all: bad arguments, no node with the GPU model
    asked for, Ray missing."""


# ---------------------------------------------------------------------------------------------
# the cluster (one per process, shared by builders and runners)
# ---------------------------------------------------------------------------------------------

_CLUSTER: Any = None
_CLUSTER_LOCK = threading.Lock()


def _cluster(address: str | None, who: str) -> Any:
    """The process's cluster connection: the existing one, ``address`` joined, or the embedded one."""
    global _CLUSTER
    from ..contrib.ray_cluster import RayCluster, RayUnavailableError

    with _CLUSTER_LOCK:
        if _CLUSTER is not None and _CLUSTER.ray.is_initialized():
            if address is not None and _CLUSTER.address not in (None, address):
                raise RayMeasureError(f"{who}: address={address!r}, but this process is connected to "
                                      f"{_CLUSTER.address!r}; one process measures on one cluster")
            return _CLUSTER
        try:
            _CLUSTER = RayCluster(address, purpose=who)
        except RayUnavailableError as exc:
            raise RayMeasureError(str(exc)) from exc
        if _CLUSTER.embedded:
            atexit.register(_CLUSTER.close)
        return _CLUSTER


def shutdown() -> None:
    """End the runner actors of this process and shut down the embedded Ray cluster its builders and
    runners started (a cluster that was joined, or a connection that existed before, is left
    alone)."""
    global _CLUSTER
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        if pool.actors:
            import ray

            for actor in pool.actors:
                kill_actor(ray, actor.handle)
        pool.actors.clear()
    with _CLUSTER_LOCK:
        if _CLUSTER is not None:
            _CLUSTER.close()
            _CLUSTER = None


def _cpu_options(runtime_env: dict | None) -> dict:
    """Ray options of a build task: one CPU, no GPU, the GPUs hidden through the runtime environment."""
    env = copy.deepcopy(runtime_env) if runtime_env else {}
    env.setdefault("env_vars", {})["CUDA_VISIBLE_DEVICES"] = ""
    return {"num_cpus": 1, "num_gpus": 0, "runtime_env": env}


_REMOTES: dict[str, Any] = {}
_REMOTES_LOCK = threading.Lock()


def _remote(name: str) -> Any:
    """The Ray-wrapped form of this module's worker functions and actor (made once per process)."""
    with _REMOTES_LOCK:
        return _REMOTES.get(name) or _make_remote(name)


def _make_remote(name: str) -> Any:
    import ray

    if name == "reference":
        got = ray.remote(max_retries=0, retry_exceptions=False)(build_reference)
    else:
        got = ray.remote(max_restarts=0, max_task_retries=0)(RunnerActor)
    _REMOTES[name] = got
    return got


# ---------------------------------------------------------------------------------------------
# the driver's side: streamed jobs, their progress, timeouts and failures
# ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Job:
    """One submitted chunk: a build task or an actor call, streaming its progress."""

    gen: Any
    todo: list[int]  # positions of the batch without a result, in order
    limit: float  # seconds one candidate may take
    actor: _Actor | None = None
    where: str = ""
    current: int | None = None  # the position running (None: none, or the setup step)
    setup: bool = False  # whether it is known to be in its setup step (not on a candidate)
    started: float | None = None  # when ``current`` (or the setup step) started; None: not yet
    submitted: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class _Pool:
    """The runner actors of one GPU model (and runtime environment) in this process, shared by every
    :class:`RayRunner` of that model: a GPU has one actor, whichever runner asks."""

    key: tuple
    actors: list = field(default_factory=list)  # of _Actor
    dropped: int = 0  # GPUs given up after too many replacements
    build_kwargs: dict | None = None  # what the actors said of their GPUs
    last_failure: str = ""
    users: int = 0  # RayRunners not closed


_POOLS: dict[tuple, _Pool] = {}
_POOLS_LOCK = threading.Lock()


@dataclass(eq=False)
class _Actor:
    """A runner actor of one GPU slot, the jobs queued on it and its replacements so far."""

    handle: Any
    slot: int
    jobs: list[_Job] = field(default_factory=list)
    ready: bool = False
    restarts: int = 0
    info: dict = field(default_factory=dict)


def _charge(job: _Job, head: bool, policy: FailurePolicy) -> tuple[int | None, bool, list[int]]:
    """Whom a job's failure is charged to: ``(position, certain, rest)``. The candidate it had said it
    was running (certain); else, when the job was running (``head``) and not known to be in its setup
    step, the next one in order, whose "start" may not have reached the driver before the process
    died: a second such strike charges it (not certain); else nobody. ``rest``: the positions to run
    again."""
    rest = list(job.todo)
    if job.current is not None:
        rest.remove(job.current)
        return job.current, True, rest
    if head and rest and not job.setup:
        pos = rest[0]
        if policy.strike(pos):
            return pos, False, rest[1:]
    return None, False, rest


def _where_text(info: dict) -> str:
    if not info:
        return ""
    return f" on node {str(info.get('node', '?'))[:12]} (pid {info.get('pid', '?')})"


class _Driver:
    """What the builder and the runner share of their event loops: take a job's progress events
    (which candidate started, each result) and tell when its current step is overdue."""

    def __init__(self, ray: Any, poll_s: float):
        self.ray = ray
        self.poll_s = poll_s

    def advance(self, job: _Job, on_result, on_fail) -> bool:
        """Take every event ``job`` has produced; False when it is finished or failed."""
        ray = self.ray
        while True:
            ready, _ = ray.wait([job.gen], num_returns=1, timeout=0)
            if not ready:
                return True
            try:
                ref = next(job.gen)
            except StopIteration:
                if job.todo:
                    on_fail(job, RuntimeError(f"the worker ended without results for {len(job.todo)} "
                                              "candidate(s)"))
                return False
            try:
                event = ray.get(ref)
            except Exception as exc:
                on_fail(job, exc)
                return False
            kind = event[0]
            if kind == "hello":  # it runs: the setup step's clock starts
                job.where = _where_text(event[1])
                job.current, job.started = None, time.monotonic()
                if job.actor is not None:
                    job.actor.ready, job.actor.info = True, dict(event[1])
            elif kind == "start":
                job.current, job.started = event[1], time.monotonic()
                job.setup = event[1] is None
            elif kind == "result":
                pos = event[1]
                if pos in job.todo:
                    job.todo.remove(pos)
                    on_result(pos, event[2])
                job.current, job.started, job.setup = None, time.monotonic(), False
                if not job.todo:
                    return True  # the generator's end comes with the next look

    def overdue(self, job: _Job, setup_limit: float) -> bool:
        if job.started is None:
            return False
        limit = job.limit if job.current is not None else setup_limit
        return time.monotonic() - job.started > limit


class _TaskRefs:
    """The driver's pickled tasks in the object store, by task object (kept while it lives)."""

    def __init__(self) -> None:
        self._refs: dict[int, tuple[Any, str, Any]] = {}

    def get(self, task: Any) -> tuple[str, list]:
        """``(key, [object reference])`` of ``task``'s pickled bytes."""
        got = self._refs.get(id(task))
        if got is None or got[0] is not task:
            import ray

            data = task_bytes(task)
            key = hashlib.sha256(data).hexdigest()[:32]
            got = self._refs[id(task)] = (task, key, ray.put(data))
            if len(self._refs) > TASK_CACHE_SIZE:
                self._refs.pop(next(iter(self._refs)))
        return got[1], [got[2]]


def _non_negative(value: Any, name: str, who: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise RayMeasureError(f"{who}: {name} must be a number, got {value!r}") from None
    if not v >= 0:
        raise RayMeasureError(f"{who}: {name} must be >= 0, got {value!r}")
    return v


def _positive(value: Any, name: str, who: str, integer: bool = False) -> Any:
    try:
        v = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise RayMeasureError(f"{who}: {name} must be a number, got {value!r}") from None
    if (integer and v < 1) or (not integer and not v > 0):
        raise RayMeasureError(f"{who}: {name} must be {'>= 1' if integer else '> 0'}, got {value!r}")
    return v


class RayBuilder:
    """Build candidates as Ray tasks on the cluster's CPU workers (see the module docstring).

    Parameters
    ----------
    timeout : float
        Seconds one candidate's build may take; longer is BUILD_TIMEOUT (its worker is killed).
    n_parallel : int, optional
        Build tasks at once (default: the CPUs of the cluster's alive nodes). The tuners also take
        it as their batch size, as autotvm's do.
    address : str, optional
        A Ray cluster to join when this process is not connected to one yet (None: start the embedded
        local cluster).
    runtime_env : dict, optional
        The build tasks' Ray runtime environment (e.g. ``{"env_vars": {"PYTHONPATH": ...}}`` where
        the templates' module lives); ``CUDA_VISIBLE_DEVICES`` is always set empty.
    poll_s : float
        The longest the driver waits for progress before it checks timeouts.
    """

    def __init__(self, timeout: float = 10.0, n_parallel: int | None = None, address: str | None = None,
                 runtime_env: dict | None = None, poll_s: float = 0.1):
        who = "RayBuilder"
        self.timeout = _positive(timeout, "timeout", who)
        self.poll_s = _positive(poll_s, "poll_s", who)
        if n_parallel is not None:
            n_parallel = _positive(n_parallel, "n_parallel", who, integer=True)
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise RayMeasureError(f"{who}: runtime_env must be a dict, got {type(runtime_env).__name__}")
        self.cluster = _cluster(address, who)
        self.ray = self.cluster.ray
        if n_parallel is None:
            n_parallel = max(1, int(sum(n.cpus for n in self.cluster.nodes())))
        self.n_parallel = n_parallel
        # a build that kills its worker is not retried: the candidate is an error
        self._pool = WorkPool(self.cluster, cpu_fn=build_item, poll_s=self.poll_s, runtime_env=runtime_env,
                              cpu_slots=self.n_parallel, policy=FailurePolicy(strikes=1))
        self._calls = 0  # build() calls so far (items are keyed (call, position))
        self._tasks = _TaskRefs()
        self.cuda_arch: str | None = None

    def set_build_kwargs(self, kwargs: dict) -> None:
        """Take what the runner says about its GPUs (``{"cuda_arch": "sm_80"}``: CUDA targets naming
        no architecture are built for that one; the build workers see no GPU to ask)."""
        self.cuda_arch = kwargs.get("cuda_arch") or None

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build ``inputs``; one :class:`BuildResult` each, in their order (errors included)."""
        inputs = list(inputs)
        out: list[BuildResult | None] = [None] * len(inputs)
        sent: dict[int, Any] = {}  # id(task) -> (key, holder), or the error sending it
        items = []
        for pos, inp in enumerate(inputs):
            index = getattr(inp.config, "index", None)
            if not isinstance(index, int) or not 0 <= index < len(inp.task.config_space):
                out[pos] = BuildResult(error_no=MeasureErrorNo.INSTANTIATION_ERROR,
                                       error=f"configuration {inp.config} is not a point of the task's space")
                continue
            if id(inp.task) not in sent:
                try:
                    sent[id(inp.task)] = self._tasks.get(inp.task)
                except Exception as exc:  # e.g. a template holding something that cannot be pickled
                    sent[id(inp.task)] = ("the task cannot be sent to the build workers: "
                                          f"{type(exc).__name__}: {_short(exc)}")
            got = sent[id(inp.task)]
            if isinstance(got, str):
                out[pos] = BuildResult(error_no=MeasureErrorNo.INSTANTIATION_ERROR, error=got)
                continue
            key, holder = got
            items.append(Item((self._calls, pos), (key, holder, index, self.cuda_arch), (False, ""),
                              self.timeout))
        self._calls += 1
        if items:
            self._pool.submit(items)
            for outcome in self._pool.results():
                out[outcome.key[1]] = self._result(outcome)
        return out  # type: ignore[return-value]

    def _result(self, o: Outcome) -> BuildResult:
        if o.status == "ok":
            return o.value
        where = _where_text({"node": o.node, "pid": o.pid}) if o.node else ""
        if o.status == "timeout":
            return BuildResult(error_no=MeasureErrorNo.BUILD_TIMEOUT, time_cost=self.timeout,
                               error=f"build took longer than {self.timeout:g} s{where}; its worker was killed")
        if o.error:
            msg = f"the build worker died{where} while building this candidate: {o.error}"
        else:
            msg = f"its build task failed before building it: {o.message}"
        return BuildResult(error_no=MeasureErrorNo.RUNTIME_DEVICE, error=msg)


def _short(exc: BaseException, limit: int = 400) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + " ..."


class RayRunner:
    """Run built candidates on one long-lived Ray actor per GPU (see the module docstring).

    Parameters
    ----------
    number, repeat, min_repeat_ms : int, int, float
        As :class:`~kernels.tuning.measure.LocalRunner`: launches per repeat, costs per candidate, the
        least duration of a repeat in milliseconds (``number`` doubles until it is reached).
    timeout : float
        Seconds a candidate may take to load and run; longer is RUN_TIMEOUT (the actor is killed and
        replaced).
    gpu_model : str, optional
        Run on the GPUs of this model only (node label ``gpu-sku``, Ray's accelerator type). None: the
        cluster's GPUs when they are all of one model (an error naming the models when not).
    check_correctness : bool
        Compare every candidate's outputs with those of the task's configuration 0 (built once per
        task by a Ray task, run once per actor); a mismatch is WRONG_ANSWER.
    address : str, optional
        A Ray cluster to join when this process is not connected to one yet.
    n_parallel : int, optional
        At most this many actors (default: one per GPU of the model).
    max_restarts : int
        How often the actor of one GPU is replaced after it died or was killed for a timeout, before
        that GPU is dropped.
    cooldown_interval : float
        Seconds each actor pauses after a candidate.
    runtime_env : dict, optional
        The actors' (and the reference builds') Ray runtime environment.
    poll_s : float
        The longest the driver waits for progress before it checks timeouts.
    startup_timeout : float
        Seconds an actor may take to start (placement, imports) and to compute a task's reference
        outputs before it counts as failed.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0, timeout: float = 10,
                 gpu_model: str | None = None, check_correctness: bool = False, address: str | None = None,
                 n_parallel: int | None = None, max_restarts: int = 2, cooldown_interval: float = 0.0,
                 runtime_env: dict | None = None, poll_s: float = 0.1, startup_timeout: float = 120.0):
        who = "RayRunner"
        self.number = _positive(number, "number", who, integer=True)
        self.repeat = _positive(repeat, "repeat", who, integer=True)
        self.timeout = _positive(timeout, "timeout", who)
        self.poll_s = _positive(poll_s, "poll_s", who)
        self.startup_timeout = _positive(startup_timeout, "startup_timeout", who)
        self.min_repeat_ms = _non_negative(min_repeat_ms, "min_repeat_ms", who)
        self.cooldown_interval = _non_negative(cooldown_interval, "cooldown_interval", who)
        self.max_restarts = int(_non_negative(max_restarts, "max_restarts", who))
        self.check_correctness = bool(check_correctness)
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise RayMeasureError(f"{who}: runtime_env must be a dict, got {type(runtime_env).__name__}")
        self.runtime_env = copy.deepcopy(runtime_env) if runtime_env else None
        self.cluster = _cluster(address, who)
        self.ray = self.cluster.ray
        self.gpu_model = self._choose_model(gpu_model)
        nodes = self.cluster.nodes()
        self._placement = self.cluster.placement((True, self.gpu_model), nodes)
        if self._placement is None:
            models = ", ".join(self.cluster.gpu_models()) or "none"
            raise RayMeasureError(f"{who}: no node of the Ray cluster has a GPU of model {self.gpu_model!r}; "
                                  f"GPU models in the cluster: {models}")
        n = self.cluster.capacity((True, self.gpu_model), nodes)
        if n_parallel is not None:
            n = min(n, _positive(n_parallel, "n_parallel", who, integer=True))
        self.n_parallel = n
        self._tasks = _TaskRefs()
        self._references: dict[str, Any] = {}  # task key -> object reference of its reference build
        key = (self.gpu_model, repr(sorted((self.runtime_env or {}).items())))
        with _POOLS_LOCK:
            self._pool = _POOLS.setdefault(key, _Pool(key))
            self._pool.users += 1
        self._closed = False

    @property
    def _actors(self) -> list:
        return self._pool.actors

    @property
    def _how(self) -> tuple:
        return (self.number, self.repeat, self.min_repeat_ms, self.timeout, self.cooldown_interval)

    def _choose_model(self, gpu_model: str | None) -> str:
        if gpu_model is not None:
            if not isinstance(gpu_model, str):
                raise RayMeasureError(f"RayRunner: gpu_model must be a string, got "
                                      f"{type(gpu_model).__name__}")
            return gpu_model
        nodes = [n for n in self.cluster.nodes() if n.gpus > 0]
        if not nodes:
            raise RayMeasureError("RayRunner: the Ray cluster has no GPU node (the runner's actors each hold "
                                  "one GPU)")
        models = sorted({n.gpu_model for n in nodes})
        if len(models) > 1:
            names = ", ".join(m or "(unnamed)" for m in models)
            raise RayMeasureError(f"RayRunner: the cluster's GPUs are of several models ({names}); times "
                                  "of different models are not comparable: choose one with gpu_model=")
        return models[0]

    # -- actors -----------------------------------------------------------------------------------

    def _new_actor(self, slot: int, restarts: int) -> _Actor:
        opts = dict(self._placement)
        if self.runtime_env:
            opts["runtime_env"] = copy.deepcopy(self.runtime_env)
        handle = _remote("actor").options(**opts).remote()
        return _Actor(handle, slot, restarts=restarts)

    def _ensure_actors(self) -> None:
        """Start the actors of the pool up to ``n_parallel`` GPUs (once); the first time, wait for them
        and learn their GPUs' architecture (while they are idle, so that asking does not queue behind
        a chunk)."""
        pool = self._pool
        if self._closed:
            raise RayMeasureError("RayRunner: the runner was closed")
        have = len(pool.actors) + pool.dropped
        if have < self.n_parallel:
            pool.actors.extend(self._new_actor(k, 0) for k in range(have, self.n_parallel))
        if pool.build_kwargs is not None:
            return
        from ..target import arch_of_model

        arch = None
        try:
            infos = self.ray.get([a.handle.where.remote() for a in self._actors],
                                 timeout=self.startup_timeout)
            for actor, info in zip(self._actors, infos):
                actor.info, actor.ready = dict(info), True
            arch = next((i["cuda_arch"] for i in infos if i.get("cuda_arch")), None)
        except Exception as exc:
            logger.warning("RayRunner: the runner actors did not start within %g s (%s: %s)",
                           self.startup_timeout, type(exc).__name__, _short(exc, 200))
        arch = arch or (arch_of_model(self.gpu_model) if self.gpu_model else None)
        pool.build_kwargs = {"cuda_arch": arch} if arch else {}

    def _kill(self, actor: _Actor) -> None:
        kill_actor(self.ray, actor.handle)

    def _replace(self, actor: _Actor, why: str) -> list[_Job]:
        """End ``actor`` (and return its other queued jobs, whose candidates did not start); start a
        replacement while its GPU has restarts left."""
        self._pool.last_failure = f"the runner{_where_text(actor.info)} {why}"
        self._kill(actor)
        if actor in self._actors:
            self._actors.remove(actor)
            if actor.restarts < self.max_restarts:
                logger.info("RayRunner: runner%s %s; starting a replacement (%d of %d)",
                            _where_text(actor.info), why, actor.restarts + 1, self.max_restarts)
                self._actors.append(self._new_actor(actor.slot, actor.restarts + 1))
            else:
                self._pool.dropped += 1
                logger.warning("RayRunner: runner%s %s; it has been replaced %d time(s): its GPU is "
                               "dropped", _where_text(actor.info), why, actor.restarts)
        others, actor.jobs = actor.jobs, []
        return others

    def get_build_kwargs(self) -> dict:
        """What builders should know of this runner's GPUs: ``{"cuda_arch": ...}``, the architecture
        the actors' GPU reports (starting the actors), else that of the GPU model
        (:func:`kernels.target.arch_of_model`); empty when neither is known."""
        self._ensure_actors()
        return dict(self._pool.build_kwargs or {})

    def workers(self) -> list[dict]:
        """Where the runner's actors are (starting them): node id, process id, GPU ids and CUDA
        architecture of each."""
        self._ensure_actors()
        return self.ray.get([a.handle.where.remote() for a in self._actors], timeout=self.startup_timeout)

    def close(self) -> None:
        """Stop using the actors; when no other runner of this process uses them (the same GPU model),
        end them: their GPUs go back to the cluster."""
        if self._closed:
            return
        self._closed = True
        with _POOLS_LOCK:
            pool = self._pool
            pool.users -= 1
            if pool.users > 0:
                return
            if _POOLS.get(pool.key) is pool:
                del _POOLS[pool.key]
        for actor in pool.actors:
            self._kill(actor)
        pool.actors.clear()

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ----------------------------------------------------------------------------------

    def _reference(self, key: str, holder: list) -> Any:
        ref = self._references.get(key)
        if ref is None:
            ref = self._references[key] = _remote("reference").options(
                **_cpu_options(self.runtime_env)).remote(key, holder,
                                                         self.get_build_kwargs().get("cuda_arch"))
        return ref

    def run(self, inputs: Sequence[MeasureInput],
            build_results: Sequence[BuildResult]) -> list[MeasureResult]:
        """Check and time the built candidates; one :class:`MeasureResult` each, in input order."""
        inputs, build_results = list(inputs), list(build_results)
        if len(inputs) != len(build_results):
            raise RayMeasureError(f"RayRunner.run: {len(inputs)} inputs but {len(build_results)} build "
                                  "results")
        out: list[MeasureResult | None] = [None] * len(inputs)
        sendable: dict[int, BuildResult] = {}
        for pos, built in enumerate(build_results):
            if built is None or not built.ok:
                error = getattr(built, "error", "") or "nothing was built"
                error_no = getattr(built, "error_no", 0) or MeasureErrorNo.UNKNOWN_ERROR
                spent = getattr(built, "time_cost", 0.0)
                out[pos] = MeasureResult((error,), int(error_no), spent, time.time())
                continue
            try:
                sendable[pos] = _transportable(built)
            except Exception as exc:
                msg = f"the built module cannot be sent to a runner: {type(exc).__name__}: {exc}"
                error_no = int(MeasureErrorNo.COMPILE_HOST)
                out[pos] = MeasureResult((msg,), error_no, built.time_cost, time.time())
        if sendable:
            self._run(inputs, sendable, out)
        return out  # type: ignore[return-value]

    def _run(self, inputs: list[MeasureInput], builds: dict[int, BuildResult], out: list) -> None:
        self._ensure_actors()
        driver = _Driver(self.ray, self.poll_s)
        pending: deque[int] = deque(builds)
        policy = _policy()
        limit = self.timeout + 1.0  # the actor's own check is ``timeout``; this catches hangs
        chunk = max(1, math.ceil(len(pending) / (2 * max(1, len(self._actors)))))

        def finish(pos: int, costs: tuple, error_no: int, seconds: float) -> None:
            spent = builds[pos].time_cost + seconds
            out[pos] = MeasureResult(tuple(costs), int(error_no), spent, time.time())

        def on_result(pos: int, payload: tuple) -> None:
            finish(pos, *payload)

        def requeue(positions: Sequence[int], why: str) -> None:
            for pos in reversed(list(positions)):
                if not policy.requeue(pos):
                    msg = f"its runner failed {policy.setbacks(pos)} times before running it; last: {why}"
                    finish(pos, (msg,), MeasureErrorNo.RUNTIME_DEVICE, 0.0)
                else:
                    pending.appendleft(pos)

        def on_fail(job: _Job, exc: BaseException) -> None:
            running = job.actor is not None and bool(job.actor.jobs) and job.actor.jobs[0] is job
            head, certain, rest = _charge(job, running, policy)
            if head is not None:
                when = "while running this candidate" if certain else "twice when this candidate was next"
                msg = f"the runner process died{job.where} {when}: {type(exc).__name__}: {_short(exc)}"
                finish(head, (msg,), MeasureErrorNo.RUNTIME_DEVICE, 0.0)
            if job.actor is not None:
                why = f"died ({type(exc).__name__}: {_short(exc, 200)})"
                for other in self._replace(job.actor, why):
                    if other is not job:
                        requeue(other.todo, f"{type(exc).__name__}")
                        if other in active:
                            active.remove(other)
            requeue(rest, f"{type(exc).__name__}: {_short(exc, 200)}")

        def on_timeout(job: _Job) -> None:
            rest = list(job.todo)
            if job.current is not None:
                msg = f"running took longer than {self.timeout:g} s{job.where}; the runner was killed"
                finish(job.current, (msg,), MeasureErrorNo.RUN_TIMEOUT, self.timeout)
                rest.remove(job.current)
            why = "timed out" if job.current is not None else "did not start or prepare in time"
            for other in self._replace(job.actor, why):
                if other is not job:
                    requeue(other.todo, why)
                    if other in active:
                        active.remove(other)
            requeue(rest, why)

        def dispatch() -> None:
            for actor in sorted(self._actors, key=lambda a: len(a.jobs)):
                while pending and len(actor.jobs) < 2:
                    positions = [pending.popleft() for _ in range(min(chunk, len(pending)))]
                    target = str(inputs[positions[0]].target)
                    same = [p for p in positions if str(inputs[p].target) == target
                            and inputs[p].task is inputs[positions[0]].task]
                    for p in reversed([p for p in positions if p not in same]):
                        pending.appendleft(p)
                    ref_key, ref_holder = None, []
                    if self.check_correctness:
                        try:
                            key, holder = self._tasks.get(inputs[same[0]].task)
                            ref_key, ref_holder = key, [self._reference(key, holder)]
                        except Exception as exc:
                            logger.warning("RayRunner: the task cannot be sent for its reference build (%s: "
                                           "%s); outputs are not checked", type(exc).__name__, _short(exc))
                    items = [(p, builds[p]) for p in same]
                    call = actor.handle.run.options(num_returns="streaming")
                    gen = call.remote(target, items, ref_key, ref_holder, self._how)
                    job = _Job(gen, list(same), limit, actor=actor)
                    actor.jobs.append(job)
                    active.append(job)

        active: list[_Job] = []
        try:
            while True:
                if pending and not self._actors:
                    why = ("no runner is left: every actor died or timed out and was replaced "
                           f"{self.max_restarts} time(s); the last failure: {self._pool.last_failure}")
                    while pending:
                        pos = pending.popleft()
                        msg = why
                        if policy.attempts(pos):  # it may have been the one running when the last died
                            msg = ("the runner process died when this candidate was next to run (it may "
                                   f"have been running); {why}")
                        finish(pos, (msg,), MeasureErrorNo.RUNTIME_DEVICE, 0.0)
                dispatch()
                if not active:
                    break
                self.ray.wait([j.gen for j in active], num_returns=1, timeout=self.poll_s)
                for job in list(active):
                    if job not in active:
                        continue  # dropped while handling another job's failure
                    alive = driver.advance(job, on_result, on_fail)
                    if job not in active:
                        continue
                    if not alive or not job.todo:
                        active.remove(job)
                        if job.actor is not None and job in job.actor.jobs:
                            job.actor.jobs.remove(job)
                        continue
                    if self._overdue(job, driver):
                        active.remove(job)
                        on_timeout(job)
        except BaseException:
            for job in active:
                if job.actor is not None:
                    self._replace(job.actor, "was interrupted")
            raise

    def _overdue(self, job: _Job, driver: _Driver) -> bool:
        if driver.overdue(job, self.startup_timeout):
            return True
        # an actor that never said hello (cannot be placed, cannot start)
        actor = job.actor
        return (actor is not None and not actor.ready and bool(actor.jobs) and job is actor.jobs[0]
                and time.monotonic() - job.submitted > self.startup_timeout)


def _transportable(built: BuildResult) -> BuildResult:
    """``built`` as it can travel to an actor: the module as bytes, the arguments as shapes and dtypes."""
    from ..runtime.serialize import module_to_bytes

    artifact = built.artifact if built.artifact is not None else module_to_bytes(built.module)
    return BuildResult(args=arg_infos(built.args), time_cost=built.time_cost, artifact=artifact)
