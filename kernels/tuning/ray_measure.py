"""Building and running tuning candidates on a Ray cluster: :class:`RayBuilder` and :class:`RayRunner`,
the cluster counterparts of :class:`~kernels.tuning.measure.LocalBuilder` and
:class:`~kernels.tuning.measure.LocalRunner`, with the same ``build(inputs)`` / ``run(inputs,
build_results)`` protocol (``autotvm.measure_option(builder=RayBuilder(...), runner=RayRunner(...))``,
``meta_schedule.tune_tir(..., builder=..., runner=...)``).

Both are clients of the work pool (:class:`kernels.contrib.workpool.WorkPool`), which schedules,
kills, cancels and gives up; this module turns candidates into pool items and outcomes into results.

* **Builds on CPU workers.** Each candidate is a CPU item of the builder's pool: a Ray task with
  ``num_cpus=1`` and ``CUDA_VISIBLE_DEVICES=""``, at most ``n_parallel`` at once; nvcc runs there for
  CUDA. What comes back is data, not a module object: the module as bytes
  (:func:`kernels.runtime.serialize.module_to_bytes`: the description with the launch extents plus
  the cubin, the shared library or the OpenCL source) and the shapes and dtypes of its arguments, so
  that a runner on another node can load it.
* **Runs on one long-lived runner per GPU.** The runner's pool starts one runner actor per GPU of
  the nodes holding the chosen GPU model (``num_gpus=1, num_cpus=0``; placed by the node label
  ``gpu-sku``, Ray's accelerator-type label or resource, as the harness places its runners:
  :mod:`kernels.contrib.ray_cluster`) and keeps them until it is closed, so the imports and the
  device context are paid once per GPU. The RayRunners of one process share the pool of a GPU model
  (a GPU has one runner, whichever RayRunner asks; a second one of the model would otherwise wait
  for GPUs the first one holds); :meth:`RayRunner.close` ends them when the last one is closed.
  Each candidate is an item; two are in flight a runner, so that the GPU does not wait for the
  driver between them. Each runner (:class:`~kernels.tuning.ray_workers.RunnerActor`) checks a
  candidate against the reference configuration's outputs when asked (computed once per task and
  runner, a setup step timed by ``startup_timeout``) and times it with the runtime's
  ``time_evaluator``, exactly as the local runner does (:func:`kernels.tuning.measure.run_job`), or
  calls the runner's ``measure_fn`` instead (a client's own check and clock: ``kbench tune`` times
  with the harness's timers this way). The targets ``opencl`` and ``c`` run there as well
  (the runner still holds its GPU), which is how the runner is tested on machines without GPUs.
* **The task travels once.** A candidate's task (an autotvm template with its arguments, or a
  TensorIR task) is pickled once per batch and put in Ray's object store; a worker process rebuilds
  it once and keeps it for later batches. An autotvm template is sent as its function, so it must be
  importable in the workers or defined in ``__main__`` (or sent by value: ``cloudpickle.
  register_pickle_by_value``); ``runtime_env={"env_vars": {"PYTHONPATH": ...}}`` makes a module of
  templates importable there.
* **Failures are results, never exceptions** (the pool's :class:`~kernels.contrib.workpool.
  FailurePolicy`, the candidate that was running is blamed at once):

  - a build longer than ``timeout`` is BUILD_TIMEOUT (its worker is killed), a build worker that
    died is RUNTIME_DEVICE (as autotvm reports a build process that died);
  - a run longer than ``timeout`` is RUN_TIMEOUT: the runner is killed (a GPU kernel cannot be
    interrupted otherwise) and replaced; a runner that dies while running a candidate (a crashing
    kernel, a killed process) gives that candidate RUNTIME_DEVICE and is replaced, up to
    ``max_restarts`` times per GPU, then dropped; the candidate queued behind it goes back to the
    queue. With no runner left, the remaining candidates are RUNTIME_DEVICE errors.

* **What runs in the workers** (a candidate's build, the runner's worker, a task's pickling and
  rebuilding)
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
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Hashable

from ..contrib.workpool import FailurePolicy, Item, Outcome, WorkPool
from ..errors import TVMError
from .measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, RunJob, arg_infos
from .ray_workers import TASK_CACHE_SIZE, RunnerActor, build_item, build_reference, task_bytes

__all__ = ["RayBuilder", "RayRunner", "RayMeasureError", "shutdown"]

logger = logging.getLogger("autotvm")


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
        shared = list(_POOLS.values())
        _POOLS.clear()
    for one in shared:
        one.pool.close()
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

    got = ray.remote(max_retries=0, retry_exceptions=False)(build_reference)
    _REMOTES[name] = got
    return got


# ---------------------------------------------------------------------------------------------
# the driver's side: the runners' shared work pools
# ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Shared:
    """The work pool of one GPU model (and runtime environment) in this process, shared by every
    :class:`RayRunner` of that model: a GPU has one runner, whichever RayRunner asks."""

    pool: WorkPool
    users: int = 0  # RayRunners not closed
    build_kwargs: dict | None = None  # what the runners said of their GPUs


_POOLS: dict[tuple, _Shared] = {}
_POOLS_LOCK = threading.Lock()
_KEYS = itertools.count()  # item keys, unique in the process


def _where_text(info: dict) -> str:
    if not info:
        return ""
    return f" on node {str(info.get('node', '?'))[:12]} (pid {info.get('pid', '?')})"


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
            msg = f"build took longer than {self.timeout:g} s{where}; its worker was killed"
            return BuildResult(error_no=MeasureErrorNo.BUILD_TIMEOUT, time_cost=self.timeout, error=msg)
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
    measure_fn : callable, optional
        What the runner's worker calls to check and time each candidate: ``measure_fn(job) ->
        (costs, error_no)`` with the candidate as a :class:`~kernels.tuning.measure.RunJob` (its
        module as bytes, its arguments' shapes and dtypes, the target, ``number``, ``repeat``,
        ``min_repeat_ms``, ``timeout`` and, with ``check_correctness``, the key of the reference
        outputs), as :func:`~kernels.tuning.measure.run_job` (the default: the runtime's
        ``time_evaluator``) is called. It travels to the workers with every candidate, so it must be
        picklable: a module-level function importable there, or a ``functools.partial`` of one
        (``kbench tune`` passes ``harness.tune.runner.check_and_time`` with its case: the harness's
        float64 check and clock).
    pool : WorkPool, optional
        A work pool of the client's whose runners also hold this runner's worker (a named factory
        ``worker`` of the pool making :class:`~kernels.tuning.ray_workers.RunnerActor`): the
        candidates run on those runners (``kbench tune`` on its executor's pool, so that tuning and
        the run after it share one runner per GPU); the pool stays open when this runner closes.
    worker : hashable, optional
        The name of that factory in ``pool``.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0, timeout: float = 10,
                 gpu_model: str | None = None, check_correctness: bool = False, address: str | None = None,
                 n_parallel: int | None = None, max_restarts: int = 2, cooldown_interval: float = 0.0,
                 runtime_env: dict | None = None, poll_s: float = 0.1, startup_timeout: float = 120.0,
                 measure_fn: Callable[[RunJob], tuple] | None = None, pool: WorkPool | None = None,
                 worker: Hashable | None = None):
        who = "RayRunner"
        if pool is not None and worker is None:
            raise RayMeasureError(f"{who}: a pool needs the name of its factory of this runner's worker (worker=)")
        if measure_fn is not None and not callable(measure_fn):
            raise RayMeasureError(f"{who}: measure_fn must be callable, got {type(measure_fn).__name__}")
        self.measure_fn = measure_fn
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
        self.cluster = pool.cluster if pool is not None else _cluster(address, who)
        self.ray = self.cluster.ray
        self.worker = worker
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
        self._slot = (True, self.gpu_model)
        self._key = key
        self._closed = False
        if pool is not None:  # the client's: not shared through _POOLS, left open by close()
            self._shared, self._own_pool = _Shared(pool, users=1), False
            return
        self._own_pool = True
        with _POOLS_LOCK:
            shared = _POOLS.get(key)
            if shared is None:
                # a candidate that kills its runner is an error at once; its GPU's runner is replaced
                # up to max_restarts times; two candidates in flight a runner, so that the GPU does
                # not wait for the driver between them
                policy = FailurePolicy(strikes=1, replacements=self.max_restarts)
                shared = _POOLS[key] = _Shared(WorkPool(
                    self.cluster, RunnerActor, policy=policy, in_flight=2, poll_s=self.poll_s,
                    startup_timeout=self.startup_timeout, runtime_env=self.runtime_env, max_runners=n))
            shared.users += 1
        self._shared = shared

    @property
    def _how(self) -> tuple:
        return (self.number, self.repeat, self.min_repeat_ms, self.timeout, self.cooldown_interval,
                self.measure_fn)

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

    # -- runners ----------------------------------------------------------------------------------

    def _ensure_actors(self, wait: bool = True) -> list[dict]:
        """Start the runners (one per GPU of the model, up to ``n_parallel``) and, with ``wait``, wait
        for them; the first time, learn their GPUs' architecture. Returns where the ready ones are.
        A runner's GPU that reports another architecture than the one its model names (what the
        builds were told before the runners were ready) is logged: candidates of a CUDA target
        naming no architecture were built for the model's, and fail on these GPUs if it differs."""
        if self._closed:
            raise RayMeasureError("RayRunner: the runner was closed")
        shared = self._shared
        pool = shared.pool
        if not wait:
            pool.start_runners(self._slot)
            return pool.runner_info(self._slot)
        if pool.start_runners(self._slot, wait_s=self.startup_timeout) == 0:
            logger.warning("RayRunner: the runners did not start within %g s", self.startup_timeout)
        infos = pool.runner_info(self._slot)
        reported = next((i["cuda_arch"] for i in infos if i.get("cuda_arch")), None)
        if shared.build_kwargs is None:
            arch = reported or self._model_arch()
            shared.build_kwargs = {"cuda_arch": arch} if arch else {}
        elif reported and shared.build_kwargs.get("cuda_arch") not in (None, reported):
            logger.warning("RayRunner: the GPUs of model %r report %s, not %s as their model names; "
                           "candidates of targets naming no architecture were built for %s",
                           self.gpu_model, reported, shared.build_kwargs["cuda_arch"],
                           shared.build_kwargs["cuda_arch"])
        return infos

    def _model_arch(self) -> str | None:
        from ..target import arch_of_model

        return arch_of_model(self.gpu_model) if self.gpu_model else None

    def get_build_kwargs(self) -> dict:
        """What builders should know of this runner's GPUs: ``{"cuda_arch": ...}``. Where the GPU
        model names an architecture (:func:`kernels.target.arch_of_model`) that one, at once: the
        runners start meanwhile and the first builds do not wait for them; else the architecture the
        runners' GPU reports (waiting for them); empty when neither is known."""
        shared = self._shared
        if shared.build_kwargs is None:
            arch = self._model_arch()
            if arch:
                self._ensure_actors(wait=False)
                shared.build_kwargs = {"cuda_arch": arch}
            else:
                self._ensure_actors()
        return dict(shared.build_kwargs or {})

    def workers(self) -> list[dict]:
        """Where the runner's actors are (starting them): node id, process id, GPU ids and CUDA
        architecture of each."""
        return self._ensure_actors()

    def close(self) -> None:
        """Stop using the actors; when no other runner of this process uses them (the same GPU model),
        end them: their GPUs go back to the cluster."""
        if self._closed:
            return
        self._closed = True
        if not self._own_pool:
            return
        with _POOLS_LOCK:
            shared = self._shared
            shared.users -= 1
            if shared.users > 0:
                return
            if _POOLS.get(self._key) is shared:
                del _POOLS[self._key]
        shared.pool.close()

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
        items = []
        for pos, built in builds.items():
            inp = inputs[pos]
            ref_key, ref_holder = None, []
            if self.check_correctness:
                try:
                    key, holder = self._tasks.get(inp.task)
                    ref_key, ref_holder = key, [self._reference(key, holder)]
                except Exception as exc:
                    logger.warning("RayRunner: the task cannot be sent for its reference build (%s: %s); "
                                   "outputs are not checked", type(exc).__name__, _short(exc))
            payload = (str(inp.target), built, ref_key, ref_holder, self._how)
            # the runner's own check is ``timeout``; the pool's, a second later, catches hangs
            items.append(Item((next(_KEYS), pos), payload, self._slot, self.timeout + 1.0, worker=self.worker))
        pool = self._shared.pool
        pool.submit(items)
        for o in pool.results():
            pos = o.key[1]
            spent = builds[pos].time_cost
            where = _where_text({"node": o.node, "pid": o.pid}) if o.node else ""
            if o.status == "ok":
                costs, error_no, seconds = o.value
            elif o.status == "timeout":
                costs = (f"running took longer than {self.timeout:g} s{where}; the runner was killed",)
                error_no, seconds = MeasureErrorNo.RUN_TIMEOUT, self.timeout
            elif o.error:
                costs = (f"the runner process died{where} while running this candidate: {o.error}",)
                error_no, seconds = MeasureErrorNo.RUNTIME_DEVICE, 0.0
            else:
                costs, error_no, seconds = (o.message,), MeasureErrorNo.RUNTIME_DEVICE, 0.0
            out[pos] = MeasureResult(tuple(costs), int(error_no), spent + seconds, time.time())


def _transportable(built: BuildResult) -> BuildResult:
    """``built`` as it can travel to an actor: the module as bytes, the arguments as shapes and dtypes."""
    from ..runtime.serialize import module_to_bytes

    artifact = built.artifact if built.artifact is not None else module_to_bytes(built.module)
    return BuildResult(args=arg_infos(built.args), time_cost=built.time_cost, artifact=artifact)
