"""Executors: run batches of cases on Ray (the default) or in-process, handing each result to the
caller as soon as it is known (the caller writes it to the store at once).

Both executors take batches (lists of cases; :func:`harness.plan.batches` makes them) and call
``on_result`` exactly once per distinct case key. A batch that mixes placements (CPU and GPU cases,
or two GPU models) is split into consecutive runs of one placement; a case key seen before in the
same call is skipped.

Ray (:class:`RayExecutor`)
--------------------------
* **One streaming call per batch.** Each batch runs as a Ray *streaming generator*
  (``num_returns="streaming"``) that calls :func:`harness.worker.run_cases` and yields a start marker
  (node id, worker label) and then one :class:`~harness.model.Result` per case. The driver waits on
  all generators with ``ray.wait`` and passes each result on as it arrives.
* **GPU batches run on runners, one worker process per GPU.** A GPU batch runs on a *runner*, a Ray
  actor (:class:`_GpuRunner`, ``num_gpus=1, num_cpus=0``) that holds its GPU and runs batch after
  batch, so the imports (kernels, pycuda, torch), the CUDA context and the peaks are paid once per
  GPU, not once per batch. GPU batches wait in a queue per placement in the driver; a free runner
  takes the next one, and up to one runner per GPU of the nodes that placement selects is started
  when none is free (so a free GPU pulls work: :func:`harness.plan.batches` cuts more batches than
  GPUs). A free runner waits for more batches of its placement (the rest of a failed batch comes
  back to the queue), except while another runner waits for a GPU: then the free runners of
  placements with nothing queued are ended, so that their GPUs go to it. All runners end when
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
* **Placement.** A case needs a GPU when its target is ``cuda`` or it names a ``gpu_model``. GPU
  runners ask for ``num_gpus=1, num_cpus=0`` and are pinned to their model by the node label
  ``gpu-sku`` (``label_selector``), else Ray's own label ``ray.io/accelerator-type``, else the
  ``accelerator_type:<model>`` resource; ``gpu_model == ""`` takes any GPU. CPU cases (``c``,
  ``opencl``) ask for ``num_cpus=1, num_gpus=0`` and run with ``CUDA_VISIBLE_DEVICES=""``. A
  placement no alive node can satisfy is a :class:`DispatchError` before anything is submitted;
  one that becomes unsatisfiable mid-run (its last node left) is recorded ``crashed`` for the
  cases still waiting after ``unplaceable_s``.
* **CUDA builds on CPU workers.** With ``prebuild`` (default), the CUDA cases of each GPU batch whose
  model has a known architecture (:data:`kernels.target.GPU_ARCHS`) are compiled by a CPU task (GPUs hidden)
  through :func:`harness.build.build_artifact`, submitted with the run; the runner receives the cubins
  and does not call nvcc. A case whose prebuild fails is simply rebuilt on the GPU worker, which
  records the ``build_error`` with the compiler output.
* **Timeouts.** The driver notes when each batch's current case started: when the batch's start
  marker arrived (it runs; a batch waiting in a queue has no clock), then whenever the previous
  result arrived. A case running longer than its ``timeout_s`` has its worker process killed
  (``ray.kill`` of the runner, or ``ray.cancel(force=True)`` of a CPU task), is recorded ``timeout``,
  and the rest of its batch is submitted again (GPU: at the head of the queue, for a fresh runner).
* **Crashes and retries.** Ray's own task retries are off (``max_retries=0``) so that no case is
  ever re-run behind the driver's back. When a task fails (the worker died, e.g. a segfaulting or
  SIGKILLed kernel, or an exception escaped the worker), the failure is charged to the case that was
  running (the first one without a result) and the unfinished rest of the batch is resubmitted (a
  runner that failed is ended: only healthy runners take more batches); a case charged more than
  ``max_retries`` times is recorded ``crashed`` with the error and the batch goes on without it. A
  failure because the task's node died or left the cluster is not charged to the case (up to
  :data:`MAX_NODE_LOSSES` times per case): the rest is simply rescheduled. Failures no case causes
  (the runtime environment cannot be set up, a module of ``imports`` is missing on the workers) stop
  the run with a :class:`DispatchError` instead.
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
  the usual ``RAY_AUTH_TOKEN``/``RAY_AUTH_TOKEN_PATH``/``~/.ray/auth_token``).

Local (:class:`LocalExecutor`)
------------------------------
Runs the batches in this process, in order, through the same :func:`harness.worker.run_cases`. There
is no isolation: a kernel that hangs hangs the run and one that crashes the process ends it (resume
with ``kbench run --resume``); per-case timeouts are not enforced beyond what the worker itself does.
An exception escaping the worker is recorded as ``crashed`` for the running case and the batch goes on.

Environment variables: this module sets (never reads for its own settings) ``RAY_AUTH_MODE``,
``RAY_AUTH_TOKEN_PATH`` and ``RAY_prestart_worker_first_driver`` around the embedded cluster's
lifetime and ``CUDA_VISIBLE_DEVICES`` in CPU workers; the harness's own settings live in
:mod:`harness.config`.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernels.target import GPU_ARCHS, arch_of_model

from .errors import ConfigError
from .model import Case, MeasureConfig, Result

log = logging.getLogger(__name__)

OnResult = Callable[[Result], None]

#: the node label naming a node's GPU model (set by whoever starts the node: ``--labels gpu-sku=H100``)
GPU_LABEL = "gpu-sku"
#: the label Ray itself sets on GPU nodes (Ray's accelerator-type name, e.g. "H100", "A100")
RAY_ACCELERATOR_LABEL = "ray.io/accelerator-type"
#: the resource Ray itself sets on GPU nodes
ACCELERATOR_RESOURCE_PREFIX = "accelerator_type:"
#: how often one case may lose its node (not charged as a crash) before that counts as a crash
MAX_NODE_LOSSES = 5


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MAX_MESSAGE = 4000


class DispatchError(ConfigError):
    """A configuration problem of the executor: an unknown executor kind, Ray missing, or cases no
    node of the cluster can run (e.g. a GPU model the cluster lacks)."""


# ---------------------------------------------------------------------------------------------
# helpers shared by both executors
# ---------------------------------------------------------------------------------------------


def needs_gpu(case: Case) -> bool:
    """True when the case must run on a GPU worker: a ``cuda`` target or a named ``gpu_model``."""
    return case.target == "cuda" or bool(case.gpu_model)


def _slot(case: Case) -> tuple[bool, str]:
    """What kind of worker slot the case needs: (needs a GPU, GPU model or "")."""
    return (True, case.gpu_model) if needs_gpu(case) else (False, "")


def _homogeneous(batches: Sequence[Sequence[Case]]) -> list[list[Case]]:
    """Split batches into consecutive runs of one slot; drop case keys already seen."""
    seen: set = set()
    out: list[list[Case]] = []
    for batch in batches:
        run: list[Case] = []
        for case in batch:
            if case.key in seen:
                continue
            seen.add(case.key)
            if run and _slot(run[-1]) != _slot(case):
                out.append(run)
                run = []
            run.append(case)
        if run:
            out.append(run)
    return out


def _clean(text: str) -> str:
    text = _ANSI.sub("", text).strip()
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " ..."


def _describe(exc: BaseException) -> str:
    return _clean(f"{type(exc).__name__}: {exc}")


def gpu_model_from_name(name: str) -> str:
    """A GPU model as Ray spells accelerator types, from a device name: "NVIDIA H100 80GB HBM3" ->
    "H100", "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA GeForce RTX 4090" -> "GeForce-RTX-4090"."""
    cleaned = re.sub(r"^(NVIDIA\s+)?(Tesla\s+)?", "", name.strip())
    first = cleaned.split(" ")[0] if cleaned else ""
    head = first.split("-")[0]
    if re.fullmatch(r"[A-Z]+[0-9]+[A-Z]*", head):
        return head
    return cleaned.replace(" ", "-")


class _Emitter:
    """Calls ``on_result`` at most once per case key."""

    def __init__(self, on_result: OnResult):
        self.on_result = on_result
        self.done: set = set()

    def __call__(self, result: Result) -> bool:
        key = result.case.key
        if key in self.done:
            return False
        self.done.add(key)
        self.on_result(result)
        return True


# ---------------------------------------------------------------------------------------------
# local executor
# ---------------------------------------------------------------------------------------------


class LocalExecutor:
    """Runs every batch in this process, in order, through :func:`harness.worker.run_cases`.

    No isolation: a hanging kernel hangs the run, a crashing one ends the process, and per-case
    timeouts are not enforced beyond what the worker does. An exception escaping the worker is
    recorded as ``crashed`` for the case that was running and the batch continues after it.

    Parameters
    ----------
    imports : tuple of str
        Modules the worker imports before running (e.g. modules registering extra workloads).
    """

    kind = "local"

    def __init__(self, imports: Sequence[str] = ()):
        self.imports = tuple(imports)

    def run(self, batches: Sequence[Sequence[Case]], config: MeasureConfig, on_result: OnResult,
            side_specs: dict | None = None) -> None:
        """Run ``batches`` and call ``on_result`` once per case, as each result is known
        (``side_specs``: see :func:`harness.worker.run_cases`)."""
        from . import worker

        emit = _Emitter(on_result)
        for batch in _homogeneous(batches):
            rest = list(batch)
            while rest:
                try:
                    for result in worker.run_cases(list(rest), config, self.imports, side_specs=side_specs):
                        _take(rest, result)
                        emit(result)
                except Exception as exc:
                    if rest:
                        head = rest.pop(0)
                        emit(Result(head, "crashed", message=f"the worker raised {_describe(exc)}",
                                    worker=worker.worker_label()))
                    continue
                for case in rest:  # the worker ended without these: never leave a case unreported
                    emit(Result(case, "crashed", message="the worker returned no result for this case",
                                worker=worker.worker_label()))
                rest = []

    def gpu_models(self) -> list[str]:
        """The model of this machine's GPU (``[]`` without one)."""
        name = _local_gpu_name()
        return [gpu_model_from_name(name)] if name else []

    def cluster_summary(self) -> dict[str, Any]:
        """This machine as a one-node "cluster" (same shape as :meth:`RayExecutor.cluster_summary`)."""
        import socket

        models = self.gpu_models()
        node = {"node_id": "local", "host": socket.gethostname(), "alive": True,
                "cpus": float(os.cpu_count() or 1), "gpus": float(len(models)),
                "gpu_model": models[0] if models else "", "labels": {}}
        return {"executor": "local", "address": None, "embedded": True, "auth": "n/a",
                "nodes": [node], "cpus": node["cpus"], "gpus": node["gpus"], "gpu_models": models}

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _local_gpu_name() -> str:
    try:
        from .env import fingerprint

        return str(fingerprint("cuda").get("gpu_name") or "")
    except Exception:
        return ""


def _take(rest: list[Case], result: Result) -> None:
    """Remove the case ``result`` answers from ``rest`` (normally its head)."""
    key = result.case.key
    if rest and rest[0].key == key:
        rest.pop(0)
        return
    for i, case in enumerate(rest):
        if case.key == key:
            del rest[i]
            return


# ---------------------------------------------------------------------------------------------
# what runs in Ray workers
# ---------------------------------------------------------------------------------------------


def _run_batch_task(cases: list[Case], config: MeasureConfig, imports: tuple[str, ...], hide_gpus: bool,
                    artifacts: dict | None = None,
                    side_specs: dict | None = None) -> Iterator[tuple[str, Any]]:
    """The body of one batch task (a Ray streaming generator): a start marker, then one
    ``("result", Result)`` per case in order."""
    if hide_gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import ray

    from . import worker

    yield ("start", {"node": ray.get_runtime_context().get_node_id(), "worker": worker.worker_label()})
    for result in worker.run_cases(cases, config, imports, artifacts=artifacts or None,
                                   side_specs=side_specs):
        yield ("result", result)


class _GpuRunner:
    """A GPU worker process kept for a whole run: a Ray actor holding one GPU (``num_gpus=1``) that runs
    batch after batch, so the imports, the CUDA context, the fingerprint and the peaks are paid once per
    GPU. An actor keeps the GPU Ray gave it, and the ``CUDA_VISIBLE_DEVICES`` Ray set for it, for its
    whole life; a reused *task* worker would not (see the module docstring)."""

    def __init__(self, imports: tuple[str, ...] = (), peer_libraries: tuple[str, ...] = ()) -> None:
        # the process's one-time costs now, while the CPU workers still build the first batch:
        # imports, CUDA context, fingerprint, peaks, peer libraries (harness.worker.prepare)
        self.born = time.time()
        try:
            from . import worker

            worker.prepare("cuda", imports, peer_libraries)
        except Exception as exc:  # the first batch reports it
            log.debug("kbench: runner warm-up: %s", exc)
        self.ready = time.time()

    def run(self, cases: list[Case], config: MeasureConfig, imports: tuple[str, ...],
            artifacts: dict | None = None, side_specs: dict | None = None) -> Iterator[tuple[str, Any]]:
        """One batch, as :func:`_run_batch_task` (called as a streaming generator). Afterwards torch's
        caching allocator (peer cases) gives the GPU memory it keeps back, so that later batches of
        this process do not find the GPU fuller than a fresh process would."""
        for kind, payload in _run_batch_task(cases, config, imports, False, artifacts, side_specs):
            if kind == "start":  # when this process started and was ready (the driver's timeline)
                payload = {**payload, "runner_born": self.born, "runner_ready": self.ready}
            yield kind, payload
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception as exc:
            log.debug("kbench: torch.cuda.empty_cache: %s", exc)


def _peer_libraries(cases) -> tuple[str, ...]:
    """The libraries (torch, cupy) of the peer cases among ``cases``, for a runner to import early."""
    from .worker import PEER_PREFIX

    names = {c.variant[len(PEER_PREFIX):] for c in cases if c.variant.startswith(PEER_PREFIX)}
    if not names:
        return ()
    from . import peers

    libs = []
    for name in sorted(names):
        try:
            libs.append(peers.get(name).library)
        except Exception:  # an unknown peer is the case's own error to report
            continue
    return tuple(dict.fromkeys(libs))


def _build_task(cases: list[Case], arch: str) -> dict:
    """CPU-side CUDA builds (GPUs hidden): {case key: Artifact} for the cases that built. A case that
    fails here is rebuilt, and its build error recorded, by the GPU worker."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from .build import build_artifact

    out = {}
    for case in cases:
        try:
            out[case.key] = build_artifact(case, arch)
        except Exception as exc:
            log.info("kbench: prebuild of %s failed (%s); the GPU worker rebuilds it", case.key, exc)
    return out


# ---------------------------------------------------------------------------------------------
# Ray executor
# ---------------------------------------------------------------------------------------------


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise DispatchError("the ray executor needs Ray: pip install 'kbench[ray]' "
                            "(or run with --executor local)") from exc
    return ray


def _task_option_names() -> set:
    """The option names Ray's ``.options()`` accepts for tasks (to see whether ``label_selector`` exists)."""
    for mod in ("ray._common.ray_option_utils", "ray._private.ray_option_utils"):
        try:
            module = __import__(mod, fromlist=["task_options"])
            return set(module.task_options)
        except (ImportError, AttributeError):
            continue
    return set()


@dataclass
class _Node:
    node_id: str
    host: str
    alive: bool
    cpus: float
    gpus: float
    labels: dict[str, str]
    resources: dict[str, float]

    @property
    def gpu_model(self) -> str:
        if self.gpus <= 0:
            return ""
        model = self.labels.get(GPU_LABEL) or self.labels.get(RAY_ACCELERATOR_LABEL)
        if model:
            return model
        for name in self.resources:
            if name.startswith(ACCELERATOR_RESOURCE_PREFIX):
                return name[len(ACCELERATOR_RESOURCE_PREFIX):]
        return ""


@dataclass(eq=False)
class _Task:
    """One submitted batch task and what the driver knows about it."""

    gen: Any  # ray.ObjectRefGenerator
    rest: list[Case]  # cases of the batch without a result yet, in order
    slot: tuple[bool, str]
    submitted: float
    node: str = ""
    worker: str = ""
    case_started: float | None = None  # when the current head case started (None: not started)
    unplaceable_since: float | None = None
    build_ref: Any = None
    runner: _Runner | None = None  # the GPU runner running it (None: a CPU task)


@dataclass(eq=False)
class _Runner:
    """One GPU runner actor (:class:`_GpuRunner`) of a slot and whether it is running a batch."""

    actor: Any
    slot: tuple[bool, str]
    busy: bool = False
    started: bool = False  # it has started a batch (so it holds a GPU)


@dataclass
class _Queued:
    """A GPU batch waiting for a free runner of its slot."""

    cases: list[Case]
    build_ref: Any = None


@dataclass
class _RunState:
    emit: _Emitter
    config: MeasureConfig
    failures: Counter = field(default_factory=Counter)  # case key -> crashes charged to it
    node_losses: Counter = field(default_factory=Counter)
    placements: dict[tuple[bool, str], dict] = field(default_factory=dict)  # slot -> last Ray options used
    queues: dict[tuple[bool, str], deque] = field(default_factory=dict)  # GPU slot -> deque of _Queued
    queue_unplaceable_since: dict[tuple[bool, str], float] = field(default_factory=dict)
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
                 unplaceable_s: float = 60.0, init_kwargs: dict | None = None):
        ray = _import_ray()
        self._ray = ray
        self.address = address
        self.max_retries = int(max_retries)
        self.poll_s = float(poll_s)
        self.imports = tuple(imports)
        self.runtime_env = copy.deepcopy(runtime_env) if runtime_env else None
        self.prebuild = prebuild
        self.unplaceable_s = float(unplaceable_s)
        self.embedded = False
        self.auth = "unknown"
        self._owns_connection = False
        self._tmp: str | None = None
        self._saved_env: dict[str, str | None] = {}
        self._closed = False
        if ray.is_initialized():
            log.info("kbench: using this process's existing Ray connection")
        elif address is None:
            self._start_embedded(init_kwargs or {})
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            self._owns_connection = True
        self._labels_ok = "label_selector" in _task_option_names()
        # CPU work runs as tasks; their worker processes are reused (max_calls is 0, unlimited: Ray sets 1
        # only for functions whose @ray.remote itself asks for GPUs). GPU batches run on runner actors.
        streaming = ray.remote(num_returns="streaming", max_retries=0, retry_exceptions=False, max_calls=0)
        self._task = streaming(_run_batch_task)
        self._build = ray.remote(max_retries=0, retry_exceptions=False, max_calls=0)(_build_task)
        self._runner_cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(_GpuRunner)
        self._runners: dict[tuple[bool, str], list[_Runner]] = {}  # GPU slot -> its runners in this run
        # of the last run(): "runners_ready" (seconds from its start until every GPU runner was
        # ready) and "runner_prepare" (the longest a runner took to import and measure its peaks)
        self.last_stats: dict[str, float] = {}

    # -- lifetime ---------------------------------------------------------------------------------

    def _set_env(self, values: dict[str, str | None]) -> None:
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _restore_env(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env = {}

    def _start_embedded(self, init_kwargs: dict) -> None:
        ray = self._ray
        self._tmp = tempfile.mkdtemp(prefix="kbench-ray-")  # mode 0700
        token_path = os.path.join(self._tmp, "auth_token")
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        auth = _token_auth_api()
        # the embedded Ray starts worker processes on demand (see the module docstring)
        self._set_env({"RAY_prestart_worker_first_driver": "0"})
        if auth is not None:
            self._set_env({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path,
                           "RAY_AUTH_TOKEN": None})
            _refresh_auth_config(auth)
        else:
            log.warning("kbench: Ray %s has no token authentication; the embedded cluster runs without it",
                        ray.__version__)
        kwargs = {"address": "local", "include_dashboard": False, "_temp_dir": os.path.join(self._tmp, "ray"),
                  "log_to_driver": False, "logging_level": logging.WARNING}
        kwargs.update(init_kwargs)
        try:
            ray.init(**kwargs)
        except BaseException:
            self._restore_env()
            if auth is not None:
                _refresh_auth_config(auth)
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self._owns_connection = True
        self.embedded = True
        if auth is not None:
            self.auth = "token" if auth["get_mode"]() == auth["TOKEN"] else "none"
        else:
            self.auth = "none"

    def close(self) -> None:
        """Disconnect (and for the embedded cluster: shut it down and remove its temp folder)."""
        if self._closed:
            return
        self._closed = True
        if self._ray.is_initialized():
            for pool in list(self._runners.values()):
                for runner in list(pool):
                    self._retire(runner)
        if self._owns_connection and self._ray.is_initialized():
            self._ray.shutdown()
        if self._saved_env:
            self._restore_env()
            auth = _token_auth_api()
            if auth is not None:
                _refresh_auth_config(auth)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cluster ----------------------------------------------------------------------------------

    def _nodes(self, alive_only: bool = True) -> list[_Node]:
        out = []
        for n in self._ray.nodes():
            alive = bool(n.get("Alive"))
            if alive_only and not alive:
                continue
            res = dict(n.get("Resources") or {})
            host = str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress", ""))
            out.append(_Node(n["NodeID"], host,
                             alive, float(res.get("CPU", 0)), float(res.get("GPU", 0)),
                             dict(n.get("Labels") or {}), res))
        return out

    def gpu_models(self) -> list[str]:
        """The GPU models of the cluster's alive nodes (label ``gpu-sku``, else Ray's accelerator type),
        sorted; GPU nodes without a model name are not listed (cuda cases with no model use them)."""
        return sorted({n.gpu_model for n in self._nodes() if n.gpu_model})

    def cluster_summary(self) -> dict[str, Any]:
        """The cluster for the CLI: nodes (id, host, alive, CPUs, GPUs, GPU model, labels), totals,
        GPU models, whether the cluster is the embedded one and its authentication mode."""
        nodes = self._nodes(alive_only=False)
        alive = [n for n in nodes if n.alive]
        return {
            "executor": "ray", "address": self.address, "embedded": self.embedded, "auth": self.auth,
            "ray_version": self._ray.__version__,
            "nodes": [{"node_id": n.node_id, "host": n.host, "alive": n.alive, "cpus": n.cpus, "gpus": n.gpus,
                       "gpu_model": n.gpu_model,
                       "labels": {k: v for k, v in n.labels.items() if k != "ray.io/node-id"}}
                      for n in nodes],
            "cpus": sum(n.cpus for n in alive), "gpus": sum(n.gpus for n in alive),
            "gpu_models": sorted({n.gpu_model for n in alive if n.gpu_model}),
        }

    def _placement(self, slot: tuple[bool, str], nodes: list[_Node]) -> dict | None:
        """Ray options placing a task of ``slot`` on ``nodes`` (None: no node can take it)."""
        gpu, model = slot
        if not gpu:
            if not any(n.cpus > 0 for n in nodes):
                return None
            return {"num_cpus": 1, "num_gpus": 0, **self._cpu_runtime_env()}
        opts: dict[str, Any] = {"num_cpus": 0, "num_gpus": 1}
        if self.runtime_env:
            opts["runtime_env"] = copy.deepcopy(self.runtime_env)
        gpu_nodes = [n for n in nodes if n.gpus > 0]
        if not model:
            return opts if gpu_nodes else None
        if self._labels_ok:
            for label in (GPU_LABEL, RAY_ACCELERATOR_LABEL):
                if any(n.labels.get(label) == model for n in gpu_nodes):
                    return dict(opts, label_selector={label: model})
        if any(n.resources.get(ACCELERATOR_RESOURCE_PREFIX + model, 0) > 0 for n in gpu_nodes):
            return dict(opts, accelerator_type=model)
        return None

    @staticmethod
    def _slot_text(slot: tuple[bool, str]) -> str:
        gpu, model = slot
        return f"a {model} GPU" if model else ("a GPU" if gpu else "a CPU")

    def _capacity(self, slot: tuple[bool, str], nodes: list[_Node]) -> int:
        """How many runners of the GPU ``slot`` can hold a GPU at once: the GPUs of the alive nodes its
        placement selects (0: no node can take it)."""
        opts = self._placement(slot, nodes)
        if opts is None:
            return 0
        selector = opts.get("label_selector") or {}
        accelerator = opts.get("accelerator_type")

        def fits(n: _Node) -> bool:
            if selector:
                return all(n.labels.get(k) == v for k, v in selector.items())
            if accelerator:
                return n.resources.get(ACCELERATOR_RESOURCE_PREFIX + accelerator, 0) > 0
            return True

        return max(1, int(sum(n.gpus for n in nodes if n.gpus > 0 and fits(n))))

    # -- running ----------------------------------------------------------------------------------

    def _options(self, slot: tuple[bool, str], state: _RunState, nodes: list[_Node] | None) -> dict:
        opts = self._placement(slot, nodes if nodes is not None else self._nodes())
        if opts is None:  # no node for it right now: place it as at the start, the unplaceable check decides
            opts = state.placements[slot]
        state.placements[slot] = opts
        return opts

    def _submit(self, cases: list[Case], state: _RunState, nodes: list[_Node] | None = None,
                prebuild: bool = False, front: bool = False) -> list[_Task]:
        """Hand a batch on: a CPU batch becomes a task at once (returned); a GPU batch joins its slot's
        queue (``front``: ahead of the others, for the rest of an interrupted batch) until
        :meth:`_pump` gives it to a free runner."""
        slot = _slot(cases[0])
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

    def _cpu_runtime_env(self) -> dict:
        """Ray options for CPU work (case batches, builds): the user's runtime environment with the GPUs
        hidden, or none at all. Without one, the task runs in one of Ray's already started worker
        processes (a runtime environment of its own would make Ray start new ones, a second or more
        each); the task body then hides the GPUs itself before anything touches CUDA
        (:func:`_run_batch_task`, :func:`_build_task`), and these processes only ever run CPU work
        (GPU work runs on runner actors, whose processes are their own)."""
        if not self.runtime_env:
            return {}
        env = copy.deepcopy(self.runtime_env)
        env.setdefault("env_vars", {})["CUDA_VISIBLE_DEVICES"] = ""
        return {"runtime_env": env}

    def _submit_build(self, cases: list[Case], model: str):
        arch = arch_of_model(model)
        todo = [c for c in cases if c.target == "cuda"]
        if not arch or not todo:
            return None
        return self._build.options(num_cpus=1, num_gpus=0, **self._cpu_runtime_env()).remote(todo, arch)

    def _pump(self, state: _RunState) -> list[_Task]:
        """Give queued GPU batches to free runners of their slot, starting runners (up to the slot's GPU
        count) when none is free. Free runners stay for later batches (a failed batch's rest comes back
        to the queue), except while a runner waits for a GPU: then the free runners of slots with
        nothing queued are ended, so that their GPUs go to it. Returns the batches started."""
        started: list[_Task] = []
        nodes: list[_Node] | None = None
        for slot, queue in state.queues.items():
            pool = self._runners.setdefault(slot, [])
            while queue:
                runner = next((r for r in pool if not r.busy), None)
                if runner is None:
                    if nodes is None:
                        nodes = self._nodes()
                    if len(pool) >= self._capacity(slot, nodes):
                        break
                    actor = self._runner_cls.options(**self._options(slot, state, nodes)).remote(
                        self.imports, _peer_libraries(c for q in queue for c in q.cases))
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
        try:
            self._ray.kill(runner.actor, no_restart=True)
        except Exception as exc:
            log.debug("kbench: kill runner: %s", exc)

    def run(self, batches: Sequence[Sequence[Case]], config: MeasureConfig, on_result: OnResult,
            side_specs: dict | None = None) -> None:
        """Submit every batch, then hand each result to ``on_result`` as it arrives (once per case key).
        ``side_specs``: per case key, sides built by another source tree (kbench ab), carried with
        each batch to :func:`harness.worker.run_cases`.

        Raises
        ------
        DispatchError
            Some cases need a placement no alive node offers (nothing is submitted then), or the workers
            cannot start at all (runtime environment, a module of ``imports`` missing): the tasks still
            running are cancelled.
        """
        ray = self._ray
        self.last_stats = {}
        todo = _homogeneous(batches)
        if not todo:
            return
        nodes = self._nodes()
        missing = sorted({self._slot_text(_slot(b[0])) for b in todo
                          if self._placement(_slot(b[0]), nodes) is None})
        if missing:
            models = sorted({n.gpu_model for n in nodes if n.gpu_model})
            raise DispatchError(f"no node of the Ray cluster can run cases needing {', '.join(missing)}; "
                                f"GPU models in the cluster: {', '.join(models) or 'none'}")
        state = _RunState(_Emitter(on_result), config, side_specs=side_specs)
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
        try:
            self._ray.cancel(t.gen, force=force)
        except Exception as exc:
            log.debug("kbench: cancel: %s", exc)

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
                _take(t.rest, payload)
                state.emit(payload)
                t.case_started = now

    def _node_lost(self, t: _Task, exc: BaseException) -> bool:
        ray_exc = self._ray.exceptions
        if isinstance(exc, ray_exc.NodeDiedError):
            return True
        if isinstance(exc, ray_exc.ActorDiedError) and "node has died" in str(exc):
            return True
        if not t.node:
            return False
        try:
            return t.node not in {n.node_id for n in self._nodes()}
        except Exception:
            return False

    def _systemic(self, exc: BaseException) -> str:
        """A failure that no case causes and every task would hit (a runtime environment that cannot be
        set up, a module of ``imports`` the workers cannot import): its message, else ""."""
        ray_exc = self._ray.exceptions
        if isinstance(exc, ray_exc.RuntimeEnvSetupError):
            return f"the Ray workers' runtime environment could not be set up: {_describe(exc)}"
        cause = getattr(exc, "cause", None) or exc
        if isinstance(cause, ImportError) and cause.name and any(
                cause.name == m or m.startswith(cause.name + ".") for m in self.imports):
            return (f"the Ray workers cannot import {cause.name} (imports={list(self.imports)}; is it on "
                    f"their PYTHONPATH?): {_describe(cause)}")
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
        if self._node_lost(t, exc) and state.node_losses[head.key] < MAX_NODE_LOSSES:
            state.node_losses[head.key] += 1
            log.info("kbench: node lost%s (%s); rescheduling %d case(s)", where, type(exc).__name__,
                     len(t.rest))
            return self._submit(t.rest, state, front=True)
        state.failures[head.key] += 1
        n = state.failures[head.key]
        rest = t.rest
        if n > self.max_retries:
            state.emit(Result(head, "crashed", worker=t.worker, message=_clean(
                f"the worker crashed{where} running this case ({n} attempts): {_describe(exc)}")))
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

    def _unplaceable(self, slot: tuple[bool, str], cases: Sequence[Case]) -> list[Result]:
        return [Result(case, "crashed", message=(
            f"no alive node of the Ray cluster can run it (needs {self._slot_text(slot)}) "
            f"for {self.unplaceable_s:g} s")) for case in cases]

    def _check_unplaceable(self, active: list[_Task], state: _RunState) -> list[_Task]:
        waiting = [t for t in active if t.case_started is None]
        if not waiting and not state.queued():
            return active
        nodes = self._nodes()
        keep: list[_Task] = []
        now = time.monotonic()
        for t in active:
            if t.case_started is not None or self._placement(t.slot, nodes) is not None:
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
            if not queue or self._placement(slot, nodes) is not None:
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


# ---------------------------------------------------------------------------------------------
# Ray token authentication (Ray >= 2.5x): which mode this process's Ray config is in
# ---------------------------------------------------------------------------------------------


def _token_auth_api() -> dict | None:
    """Ray's token-authentication hooks, or None on a Ray without token authentication."""
    try:
        from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, Config, get_authentication_mode
    except ImportError:
        return None
    return {"TOKEN": AuthenticationMode.TOKEN, "get_mode": get_authentication_mode, "Config": Config,
            "loader": AuthenticationTokenLoader}


def _refresh_auth_config(auth: dict) -> None:
    """Make this process's Ray config re-read RAY_AUTH_MODE / the token after they changed."""
    auth["Config"].initialize("")
    auth["loader"].instance().reset_cache()


# ---------------------------------------------------------------------------------------------


def make_executor(kind: str = "ray", address: str | None = None, **kw: Any):
    """The executor for ``--executor KIND``: ``"ray"`` (:class:`RayExecutor`; ``address`` joins a
    cluster, None starts the embedded one) or ``"local"`` (:class:`LocalExecutor`, in-process)."""
    if kind == "ray":
        return RayExecutor(address, **kw)
    if kind == "local":
        if address is not None:
            raise DispatchError("--address needs the ray executor (it joins a Ray cluster)")
        unknown = set(kw) - {"imports"}
        if unknown:
            raise DispatchError(f"the local executor takes no {', '.join(sorted(unknown))}")
        return LocalExecutor(**kw)
    raise DispatchError(f"unknown executor {kind!r}; executors: ray, local")


__all__ = [
    "GPU_ARCHS",
    "GPU_LABEL",
    "DispatchError",
    "LocalExecutor",
    "RayExecutor",
    "arch_of_model",
    "gpu_model_from_name",
    "make_executor",
    "needs_gpu",
]
