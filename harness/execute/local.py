"""Execution on this machine: :class:`LocalExecutor` runs each case as one item of the work pool
without Ray (:class:`kernels.contrib.localpool.LocalPool`: a warm child process, the pool's failure
policy), while background threads of this process build every case of the run ahead
(:mod:`harness.execute.ahead`) and hand each its build as the case is submitted.

Isolation, as the Ray executor gives it: a case runs at most its ``timeout_s`` (from the moment it is
handed to the child) and is then recorded ``timeout``; its child is killed with its process group
and a fresh one runs the rest of the batch. A case whose child dies (a segfault, an abort) or leaves
its CUDA context unusable is retried in a fresh child up to ``max_retries`` times, then recorded
``crashed`` with what happened; the run goes on. The child is started once per executor (and after
each such loss), imports the suite's modules and pays each target's one-time costs (fingerprint,
peaks: :func:`harness.execute.worker.prepare`) before its first case of that target, outside the
case's timeout.

``isolate=False`` (``kbench run --executor inproc``) runs the cases in this process instead, for
debugging only: no timeout is enforced, a crashing kernel ends kbench, a hanging one hangs it.

Whatever ``on_result`` raises (the store refusing a result, a lost database) propagates to the caller
at once: it is never charged to a case.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import socket
from collections.abc import Sequence
from typing import Any

from harness.config import apply_runtime_defaults
from harness.env import fingerprint
from harness.model import Case, MeasureConfig, Result
from kernels.contrib.localpool import LocalPool
from kernels.contrib.workpool import FailurePolicy, Item, Outcome, PoolError

from . import worker
from .ahead import HOST_TIMED, BuildAhead
from .build import Artifact
from .common import (
    DispatchError,
    Emitter,
    OnResult,
    clean_message,
    describe,
    gpu_model_from_name,
    homogeneous,
    take,
)

__all__ = ["LocalExecutor", "PREPARE_TIMEOUT_S"]

log = logging.getLogger(__name__)

#: seconds a fresh child may take for a target's one-time costs (imports, CUDA context, peaks)
PREPARE_TIMEOUT_S = 300.0


class LocalExecutor:
    """Runs every batch on this machine, in order, each case in a warm child process (see the module
    docstring), or with ``isolate=False`` in this process (debugging only).

    Parameters
    ----------
    imports : tuple of str
        Modules this process and the child import before running (e.g. modules registering workloads).
    isolate : bool
        True (``--executor local``): cases run in the child, with timeouts and crash recording. False
        (``--executor inproc``): in this process, unprotected.
    max_retries : int
        How often a case whose child died is run again in a fresh child before it is recorded
        ``crashed`` (as the Ray executor's ``max_retries``).
    env : dict, optional
        Environment changes for the child (e.g. ``{"CUDA_VISIBLE_DEVICES": "1"}``).
    """

    def __init__(self, imports: Sequence[str] = (), *, isolate: bool = True, max_retries: int = 2,
                 env: dict | None = None):
        if max_retries < 0:
            raise DispatchError(f"the local executor's max_retries must be >= 0, got {max_retries}")
        self.imports = tuple(imports)
        self.isolate = bool(isolate)
        self.kind = "local" if self.isolate else "inproc"
        self.max_retries = int(max_retries)
        self.env = dict(env or {})
        self._lpool: LocalPool | None = None
        self._seq = 0  # items' keys: unique for the pool's life

    def run(self, batches: Sequence[Sequence[Case]], config: MeasureConfig, on_result: OnResult,
            side_specs: dict | None = None) -> None:
        """Run ``batches`` and call ``on_result`` once per case, as each result is known
        (``side_specs``: see :func:`harness.execute.worker.run_cases`).

        Raises
        ------
        DispatchError
            The child process cannot start (a module of ``imports`` cannot be imported there).
        Exception
            Whatever ``on_result`` raises, at once (the case whose result it was is not re-run).
        """
        emit = Emitter(on_result)
        todo = homogeneous(batches)
        apply_runtime_defaults()  # before the child starts: it inherits the environment
        for mod in self.imports:  # workloads they register are built ahead below
            importlib.import_module(mod)
        # every case of the run is built ahead from the start (one process runs all batches in turn)
        ahead = worker.builds_ahead([c for b in todo for c in b], config, side_specs=side_specs) \
            if sum(len(b) for b in todo) > 1 else None
        try:
            if self.isolate:
                self._run_isolated(todo, config, emit, side_specs or {}, ahead)
            else:
                self._run_inproc(todo, config, emit, side_specs, ahead)
        finally:
            if ahead is not None:
                ahead.close()

    # -- in a child process: the work pool without Ray -------------------------------------------

    def _pool(self) -> LocalPool:
        if self._lpool is None:
            self._lpool = LocalPool(functools.partial(LocalCaseWorker, self.imports), env=self.env,
                                    imports=("harness.execute.local", *self.imports),
                                    policy=FailurePolicy(strikes=self.max_retries + 1),
                                    startup_timeout=PREPARE_TIMEOUT_S, name="kbench's local worker")
        return self._lpool

    def _run_isolated(self, todo: list[list[Case]], config: MeasureConfig, emit: Emitter,
                      side_specs: dict, ahead: BuildAhead | None) -> None:
        """Each case one item of the pool, submitted once its build is in (the builds ahead feed the
        cases in order; the pool retries a case whose child died, up to ``max_retries`` times)."""
        pool = self._pool()
        pool.start()  # the child warms up while the first build finishes
        for batch in todo:
            for case in batch:
                artifact, wait_s = ahead.take(case) if ahead is not None else (None, 0.0)
                # host-timed targets are timed with no build running (harness.execute.ahead)
                quiet_s = ahead.quiet() if ahead is not None and case.target in HOST_TIMED else 0.0
                self._seq += 1
                payload = (case, config, artifact, wait_s, quiet_s, side_specs.get(case.key))
                pool.submit([Item((self._seq, case.key), payload, (True, ""), case.timeout_s)])
                try:
                    outcomes = list(pool.results())
                except PoolError as exc:
                    raise DispatchError(f"the local worker process cannot start (imports={list(self.imports)}): "
                                        f"{exc}") from None
                for out in outcomes:
                    emit(_result(case, out))  # outside any handler: a store error is never charged to a case

    # -- in this process (debugging) --------------------------------------------------------------

    def _run_inproc(self, todo, config: MeasureConfig, emit: Emitter, side_specs: dict | None,
                    ahead) -> None:
        for batch in todo:
            rest = list(batch)
            while rest:
                results = worker.run_cases(list(rest), config, self.imports, side_specs=side_specs,
                                           ahead=ahead)
                failed = False
                while True:
                    try:
                        result = next(results)
                    except StopIteration:
                        break
                    except Exception as exc:  # the worker itself failed: charged to the running case
                        if rest:
                            head = rest.pop(0)
                            emit(Result(head, "crashed", message=f"the worker raised {describe(exc)}",
                                        worker=worker.worker_label()))
                        failed = True
                        break
                    take(rest, result)
                    emit(result)  # outside the handler above: a store error propagates
                if failed:
                    continue
                for case in rest:  # the worker ended without these: never leave a case unreported
                    emit(Result(case, "crashed", message="the worker returned no result for this case",
                                worker=worker.worker_label()))
                rest = []

    # -- the executor protocol --------------------------------------------------------------------

    def gpu_models(self) -> list[str]:
        """The model of this machine's GPU (``[]`` without one)."""
        name = _local_gpu_name()
        return [gpu_model_from_name(name)] if name else []

    def cluster_summary(self) -> dict[str, Any]:
        """This machine as a one-node "cluster" (same shape as :meth:`RayExecutor.cluster_summary`)."""
        models = self.gpu_models()
        node = {"node_id": "local", "host": socket.gethostname(), "alive": True,
                "cpus": float(os.cpu_count() or 1), "gpus": float(len(models)),
                "gpu_model": models[0] if models else "", "labels": {}}
        return {"executor": self.kind, "address": None, "embedded": True, "auth": "n/a",
                "nodes": [node], "cpus": node["cpus"], "gpus": node["gpus"], "gpu_models": models}

    def close(self) -> None:
        """End the child process."""
        if self._lpool is not None:
            self._lpool.close()
            self._lpool = None

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalCaseWorker:
    """The local pool's worker in the child (the work-pool worker protocol, as the Ray executor's
    :class:`~harness.execute.ray_tasks.CaseRunner`): a target's one-time costs and the peer libraries
    of a case are its prepare step (timed by :data:`PREPARE_TIMEOUT_S`, outside the case's timeout),
    then one case a call. Payload: ``(case, config, artifact, wait_s, quiet_s, side_spec)``."""

    def __init__(self, imports: tuple[str, ...] = ()) -> None:
        self.imports = tuple(imports)
        self.prepared: set[str] = set()  # targets and libraries whose costs this child paid

    def _needs(self, case: Case) -> set[str]:
        # imported when used: ray_tasks loads without Ray, and only peer cases need its helper
        from .ray_tasks import peer_libraries

        return ({case.target} | set(peer_libraries([case]))) - self.prepared

    def needs_prepare(self, payload: tuple) -> bool:
        try:
            return bool(self._needs(payload[0]))
        except Exception:  # the case itself reports what cannot be imported
            return False

    def prepare(self, payload: tuple) -> None:
        case = payload[0]
        needs = self._needs(case)
        try:
            worker.prepare(case.target, self.imports, tuple(sorted(needs - {case.target})))
        except Exception as exc:  # a failure here is left for the case to report
            log.info("kbench: the local worker's warm-up for %s: %s: %s", case.target, type(exc).__name__, exc)
        self.prepared |= needs

    def __call__(self, payload: tuple) -> Result:
        return run_case_in_child(*payload)


def _result(case: Case, out: Outcome) -> Result:
    """The Result of a case from its pool outcome."""
    where = out.worker or socket.gethostname()
    if out.status == "ok":
        return out.value
    if out.status == "timeout":
        return Result(case, "timeout", worker=where, message=(
            f"no result after {max(0.0, out.finished - out.started):.1f} s on {where} (timeout "
            f"{case.timeout_s:g} s); the worker process was killed and the rest of its batch runs in a fresh one"))
    if out.status == "cancelled":
        return Result(case, "crashed", worker=where, message=f"not run: {out.message}")
    return Result(case, "crashed", worker=where, message=clean_message(out.message))


class _Prebuilt:
    """In the child: the one build ahead of the case it runs, as :class:`~harness.execute.ahead.BuildAhead`
    hands it (the parent's build threads made it; ``wait_s`` and ``quiet_s`` are what the parent waited
    for it and for the other builds, reported in the case's phases)."""

    def __init__(self, key: str, artifact: Artifact | None, wait_s: float, quiet_s: float):
        self.key, self.artifact, self.wait_s, self.quiet_s = key, artifact, wait_s, quiet_s

    def __contains__(self, key: str) -> bool:
        return key == self.key and self.artifact is not None

    def take(self, case: Case) -> tuple[Artifact | None, float]:
        artifact, self.artifact = self.artifact, None
        return artifact, self.wait_s

    def quiet(self) -> float:
        return self.quiet_s


def run_case_in_child(case: Case, config: MeasureConfig, artifact: Artifact | None, wait_s: float,
                      quiet_s: float, side_spec: dict | None) -> Result:
    """What the child runs for one case: :func:`harness.execute.worker.run_case` with the parent's
    build of it (None: the child builds it) and the parent's waits for builds."""
    prebuilt = _Prebuilt(case.key, artifact, wait_s, quiet_s)
    return worker.run_case(case, config, None, side_spec, ahead=prebuilt)


def _local_gpu_name() -> str:
    try:
        return str(fingerprint("cuda").get("gpu_name") or "")
    except Exception:
        return ""
