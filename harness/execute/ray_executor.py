"""Running batches on Ray: :class:`RayExecutor`, a client of the work pool
(:class:`kernels.contrib.workpool.WorkPool`, which does all of the scheduling: runners, timeouts,
retries, requeueing, cancellation) on the cluster of :mod:`harness.execute.cluster`; what runs in the
workers is :mod:`harness.execute.ray_tasks`.

* **One item per case.** Every case is one work-pool item whose value is its
  :class:`~harness.model.Result`, passed on as it arrives. The pool's failure policy is the
  executor's: the case a worker was running when it crashed is charged (``max_retries`` retries, then
  ``crashed`` with the error), a case running past its ``timeout_s`` is ``timeout`` (its worker is
  killed), the cases queued behind them run again unblamed, a lost node is not charged; results are
  handed on once per case key.
* **GPU cases run on runners, one worker process per GPU**, that live as long as the executor
  (:class:`~harness.execute.ray_tasks.CaseRunner` in a work-pool runner actor, ``num_gpus=1,
  num_cpus=0``): the imports, the CUDA context and the peaks are paid once per GPU for every
  :meth:`RayExecutor.run` of the executor (``kbench calibrate``'s rounds, ``kbench tune --then-run``),
  and a free GPU pulls the next case of its placement from one queue (two cases in flight a runner, so
  that the GPU does not wait for the driver), preferring the cases of a shape it ran before (its
  worker caches the shape's inputs and float64 reference) unless it would idle. They start as :meth:`RayExecutor.run` starts, while the
  CPU workers build. A runner waiting for a GPU that an idle runner of another placement holds (one
  GPU reachable by a label and by an accelerator type) makes that one end.
* **CPU cases** run as Ray tasks with ``CUDA_VISIBLE_DEVICES=""``, a batch's cases one after the other
  (the batches side by side), in worker processes Ray reuses.
* **CUDA builds on CPU workers.** With ``prebuild`` (default), each CUDA case of a GPU model whose
  architecture is known (:data:`kernels.target.GPU_ARCHS`) is compiled first by a CPU item (GPUs
  hidden; :func:`harness.execute.build.build_artifact`); its GPU item is queued with the cubin as the
  build finishes, so the GPUs time from the first build on while the rest compile. A case whose
  prebuild fails is rebuilt on the GPU worker, which records the ``build_error`` with the compiler
  output.
* **Data ahead** (``data_ahead``, default). A shape's inputs and float64 reference (seconds of numpy
  for a large matmul) are made by a CPU item before its GPU cases are queued, two shapes a GPU ahead;
  the item's result stays in Ray's object store, and the runner that times the shape's cases takes the
  arrays from there (:func:`harness.execute.inputs.prime`) instead of making them while its GPU
  waits. A shape's data goes when all of its cases have an outcome; a data item that fails leaves the
  runner to make them.
* **Placement** (:meth:`harness.execute.cluster.RayCluster.placement`). A placement no alive node can
  satisfy is a :class:`~harness.execute.common.DispatchError` before anything is submitted; cases
  whose placement goes away mid-run (its last node left) are recorded ``crashed`` after
  ``unplaceable_s``.
* **Failures no case causes** (the runtime environment cannot be set up, a module of ``imports`` is
  missing on the workers) stop the run with a :class:`~harness.execute.common.DispatchError`.
* **The embedded cluster.** ``address=None`` starts a local Ray for the executor's lifetime: no
  dashboard, logs and sockets in a private temporary folder (mode 0700), token authentication with a
  random token in a 0600 file there, no wait for a worker process per CPU at start (see
  :class:`kernels.contrib.ray_cluster.RayCluster`). :meth:`RayExecutor.close` ends the runners, shuts
  Ray down and removes the folder. An ``address`` joins an existing cluster.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from harness.model import Case, MeasureConfig, Result
from kernels.contrib.workpool import MAX_NODE_LOSSES, FailurePolicy, Item, Outcome, PoolError, WorkPool
from kernels.target import arch_of_model
from kernels.tuning.ray_workers import RunnerActor

from .build import is_callable
from .cluster import RayCluster, shipped_modules
from .common import DispatchError, Emitter, OnResult, clean_message, describe, homogeneous, slot_of
from .ray_tasks import CaseRunner, build_payload, case_payload, cpu_item, data_payload

__all__ = ["CANDIDATE_WORKER", "CASE_WORKER", "MAX_NODE_LOSSES", "RayExecutor"]

log = logging.getLogger(__name__)

#: a runner waiting this long for a GPU makes idle runners of other placements end (see the module doc)
LEND_IDLE_S = 1.0
#: the names of the runners' two workers in the pool (Item.worker)
CASE_WORKER, CANDIDATE_WORKER = "case", "candidate"


class RayExecutor:
    """Runs batches on Ray through one work pool: CPU cases as tasks, GPU cases on one runner actor per
    GPU for the executor's life (see the module docstring for placement, timeouts and retries).

    Parameters
    ----------
    address : str or None
        A Ray cluster to join (``"auto"``, ``"HOST:PORT"``, ``"ray://..."``); None starts an embedded
        local Ray (dashboard off, token authentication, private temp folder) until :meth:`close`.
        When this process is already connected to Ray, that connection is used and left open.
    max_retries : int
        How often a case whose worker crashed is run again before it is recorded ``crashed``.
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
        Compile CUDA cases of known GPU models on CPU workers before their GPU item is queued.
    unplaceable_s : float
        How long cases whose placement no alive node offers any more wait for one before they are
        recorded ``crashed``.
    init_kwargs : dict or None
        Extra ``ray.init`` arguments for the embedded cluster (e.g. ``num_cpus``).
    in_flight : int
        Cases handed to one GPU runner at once (the next waits in the actor, not in the driver).
    data_ahead : bool
        Make each shape's inputs and float64 reference on a CPU worker before its GPU cases are
        queued (two shapes a GPU ahead); the runner takes them from Ray's object store.
    """

    kind = "ray"

    def __init__(self, address: str | None = None, *, max_retries: int = 2, poll_s: float = 0.2,
                 imports: Sequence[str] = (), runtime_env: dict | None = None, prebuild: bool = True,
                 unplaceable_s: float = 60.0, init_kwargs: dict | None = None,
                 module_folders: Sequence[str] = (), in_flight: int = 2, data_ahead: bool = True):
        if max_retries < 0:
            raise DispatchError(f"the Ray executor's max_retries must be >= 0, got {max_retries}")
        self.cluster = RayCluster(address, runtime_env=runtime_env, init_kwargs=init_kwargs,
                                  py_modules=shipped_modules(imports, module_folders))
        self._ray = self.cluster.ray
        self.max_retries = int(max_retries)
        self.poll_s = float(poll_s)
        self.imports = tuple(imports)
        self.prebuild = prebuild
        self.data_ahead = bool(data_ahead)
        self.unplaceable_s = float(unplaceable_s)
        strikes = self.max_retries + 1
        # a case behind one that crashes is set back once per crash of it: never given up for that
        policy = FailurePolicy(strikes=strikes, node_losses=MAX_NODE_LOSSES, requeues=2 * strikes + 1)
        # the runners' workers: cases (built as a runner starts) and the tuning engine's candidates
        # (kernels.tuning.ray_measure.RayRunner(pool=...): kbench tune --then-run tunes and runs on
        # the same runners)
        workers = {CASE_WORKER: functools.partial(CaseRunner, self.imports), CANDIDATE_WORKER: RunnerActor}
        self.pool = WorkPool(self.cluster, workers, cpu_item,
                             policy=policy, in_flight=in_flight, poll_s=self.poll_s, fatal=self._systemic,
                             unplaceable_s=self.unplaceable_s, lend_idle_s=LEND_IDLE_S)
        self._runs = 0
        # of the last run(): "runners_ready" (seconds from its start until every GPU runner was
        # ready; 0 when they were ready before) and "runner_prepare" (the longest a runner took to
        # import and measure its peaks)
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
            self.pool.close()
        self.cluster.close()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ----------------------------------------------------------------------------------

    def run(self, batches: Sequence[Sequence[Case]], config: MeasureConfig, on_result: OnResult,
            side_specs: dict | None = None) -> None:
        """Run every case of ``batches``, handing each result to ``on_result`` as it arrives (once per
        case key). ``side_specs``: per case key, sides built by another source tree (kbench ab),
        carried with the case to :func:`harness.execute.worker.run_cases`.

        Raises
        ------
        DispatchError
            Some cases need a placement no alive node offers (nothing is submitted then), or the workers
            cannot start at all (runtime environment, a module of ``imports`` missing): what still
            runs is cancelled.
        """
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
        self._runs += 1
        ahead = 0
        if self.data_ahead:  # two shapes a GPU, so that the next shape's data is there when a GPU is free
            gpus = sum(self.cluster.capacity(s, nodes) for s in {slot_of(b[0]) for b in todo if slot_of(b[0])[0]})
            ahead = max(2, 2 * gpus)
        run = _Run(self._runs, config, self.imports, Emitter(on_result), side_specs or {}, ahead)
        items: list[Item] = []
        gpu_slots = []
        for batch in todo:
            slot = slot_of(batch[0])
            if not slot[0]:  # a CPU batch: its cases one after the other
                chain = deque(batch)
                items.append(run.case_item(chain.popleft()))
                run.chains[batch[0].key] = chain
                continue
            gpu_slots.append(slot)
            arch = arch_of_model(slot[1]) if self.prebuild else ""
            for case in batch:
                prebuilt = arch and case.target == "cuda" and not is_callable(case) and case.key not in run.sides
                items += run.gpu_case(case, arch if prebuilt else "")
        items += run.next_shapes()
        t_start = time.time()
        pool = self.pool
        pool.poll_hook = self.poll_hook
        for slot in dict.fromkeys(gpu_slots):  # imports, CUDA context, peaks while the CPUs build
            pool.start_runners(slot)
        pool.submit(items)
        try:
            for outcome in pool.results():
                pool.submit(run.take(outcome))
        except PoolError as exc:
            raise DispatchError(str(exc)) from None
        finally:
            pool.poll_hook = None
            infos = [i for slot in dict.fromkeys(gpu_slots) for i in pool.runner_info(slot) if "runner_ready" in i]
            if infos:  # wall clocks of the runners' hosts (on one host: this one's)
                self.last_stats = {
                    "runners_ready": max(0.0, max(i["runner_ready"] for i in infos) - t_start),
                    "runner_prepare": max(i["runner_ready"] - i["runner_born"] for i in infos)}

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


class _Run:
    """One :meth:`RayExecutor.run`: its items' keys (unique for the pool's life: the run's number, the
    kind, the case key or shape), its CPU batches' remaining cases, the GPU cases waiting for their
    build or their shape's data, and what each outcome becomes."""

    def __init__(self, number: int, config: MeasureConfig, imports: tuple[str, ...], emit: Emitter,
                 sides: dict, ahead: int = 0) -> None:
        self.number, self.config, self.imports, self.emit, self.sides = number, config, imports, emit, sides
        self.cases: dict[str, Case] = {}
        self.chains: dict[str, deque] = {}  # first case key of a CPU batch -> the cases after it
        self.chain_of: dict[str, str] = {}  # case key -> its CPU batch's first case key
        # GPU cases not queued yet: case key -> [built (bool), artifact, shape (None: no data ahead)]
        self.pending: dict[str, list] = {}
        self.ahead = ahead  # the most shapes whose data is made or held at once (0: none ahead)
        self.shape_cases: dict[tuple, list[str]] = {}  # shape -> its GPU cases (data ahead)
        self.shape_refs: dict[tuple, Any] = {}  # shape -> its data's object (None: the runner makes it)
        self.shape_left: dict[tuple, int] = {}  # shape -> its cases without an outcome
        self.shapes_todo: deque = deque()  # shapes whose data item is not submitted yet
        self.shape_ids: dict[int, tuple] = {}
        self.open_shapes = 0

    @staticmethod
    def shape_of(case: Case) -> tuple:
        return (case.workload, case.params, case.dtype)

    def case_item(self, case: Case, artifact: Any = None, data: Any = None) -> Item:
        self.cases[case.key] = case
        if not slot_of(case)[0]:
            self.chain_of.setdefault(case.key, case.key)
        # a shape's cases to one GPU worker where possible: it caches the inputs and float64 reference
        return Item((self.number, "case", case.key),
                    case_payload(case, self.config, self.imports, artifact, self.sides.get(case.key), data),
                    slot_of(case), case.timeout_s, group=self.shape_of(case))

    def gpu_case(self, case: Case, arch: str) -> list[Item]:
        """A GPU case: its build item (``arch``: prebuilt), its shape noted for a data item (data
        ahead), or, with neither, its item at once."""
        self.cases[case.key] = case
        shape = self.shape_of(case) if self.ahead else None
        if shape is not None:
            if shape not in self.shape_cases:
                self.shape_cases[shape] = []
                self.shape_left[shape] = 0
                self.shapes_todo.append(shape)
            self.shape_cases[shape].append(case.key)
            self.shape_left[shape] += 1
        self.pending[case.key] = [not arch, None, shape]
        if arch:
            return [Item((self.number, "build", case.key), build_payload(case, arch), (False, ""), case.timeout_s)]
        return self._ready(case.key)

    def next_shapes(self) -> list[Item]:
        """Data items for the next shapes, while fewer than ``ahead`` shapes are open."""
        items = []
        while self.shapes_todo and self.open_shapes < self.ahead:
            shape = self.shapes_todo.popleft()
            self.open_shapes += 1
            first = self.cases[self.shape_cases[shape][0]]
            timeout = max(self.cases[k].timeout_s for k in self.shape_cases[shape])
            sid = len(self.shape_ids)
            self.shape_ids[sid] = shape
            items.append(Item((self.number, "data", sid),
                              data_payload(first, self.config.seed, self.imports), (False, ""), timeout,
                              keep_ref=True))
        return items

    def _ready(self, key: str) -> list[Item]:
        """The item of a GPU case whose build and shape data are in (else nothing yet)."""
        built, artifact, shape = self.pending[key]
        if not built or (shape is not None and shape not in self.shape_refs):
            return []
        del self.pending[key]
        data = self.shape_refs.get(shape) if shape is not None else None
        return [self.case_item(self.cases[key], artifact, data)]

    def _case_done(self, case: Case) -> list[Item]:
        """A GPU case has its outcome: its shape's data goes once every case of the shape has one."""
        shape = self.shape_of(case) if self.ahead else None
        if shape is None or shape not in self.shape_left:
            return []
        self.shape_left[shape] -= 1
        if self.shape_left[shape] > 0:
            return []
        self.shape_refs.pop(shape, None)  # the object store lets the arrays go
        self.open_shapes -= 1
        return self.next_shapes()

    def take(self, o: Outcome) -> list[Item]:
        """Pass an outcome on; returns the items it makes ready (a prebuilt case, a shape's cases, a
        CPU batch's next case, the next shapes' data)."""
        _, kind, key = o.key
        if kind == "data":  # the shape's cases follow with it (None: their runner makes the data)
            shape = self.shape_ids[key]
            self.shape_refs[shape] = o.value if o.status == "ok" else None
            return [item for k in self.shape_cases[shape] if k in self.pending for item in self._ready(k)]
        case = self.cases[key]
        if kind == "build":  # the GPU item follows, with the cubin (None: the GPU worker builds it)
            self.pending[key][:2] = [True, o.value if o.status == "ok" else None]
            return self._ready(key)
        if o.status == "cancelled":
            return []
        where = f" on {o.worker}" if o.worker else ""
        if o.status == "ok":
            self.emit(o.value)
        elif o.status == "timeout":
            elapsed = max(0.0, o.finished - o.started) if o.started else 0.0
            self.emit(Result(case, "timeout", worker=o.worker, message=(
                f"no result after {elapsed:.1f} s{where} (timeout {case.timeout_s:g} s); its worker was "
                "killed (the task cancelled) and the cases queued behind it rescheduled")))
        elif o.error:
            self.emit(Result(case, "crashed", worker=o.worker, message=clean_message(
                f"the worker crashed{where} running this case ({o.attempts} attempts): {o.error}")))
        else:
            self.emit(Result(case, "crashed", worker=o.worker, message=clean_message(o.message)))
        if slot_of(case)[0]:
            return self._case_done(case)
        head = self.chain_of.get(key)
        chain = self.chains.get(head) if head is not None else None
        if not chain:
            return []
        nxt = chain.popleft()
        self.chain_of[nxt.key] = head
        return [self.case_item(nxt)]
