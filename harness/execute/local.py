"""In-process execution: :class:`LocalExecutor` runs the batches in this process, in order, through
:func:`harness.execute.worker.run_cases`, while background threads build every case of the run ahead
(:mod:`harness.execute.ahead`).

There is no isolation: a kernel that hangs hangs the run and one that crashes the process ends it
(resume with ``kbench run --resume``); per-case timeouts are not enforced beyond what the worker itself
does. An exception escaping the worker is recorded as ``crashed`` for the running case and the batch
goes on.
"""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Sequence
from typing import Any

from harness.config import apply_runtime_defaults
from harness.env import fingerprint
from harness.model import Case, MeasureConfig, Result

from . import worker
from .common import Emitter, OnResult, describe, gpu_model_from_name, homogeneous, take

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """Runs every batch in this process, in order, through :func:`harness.execute.worker.run_cases`.

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
        (``side_specs``: see :func:`harness.execute.worker.run_cases`)."""
        emit = Emitter(on_result)
        todo = homogeneous(batches)
        apply_runtime_defaults()
        for mod in self.imports:  # workloads they register are built ahead below
            importlib.import_module(mod)
        # every case of the run is built ahead from the start (one process runs all batches in turn)
        ahead = worker.builds_ahead([c for b in todo for c in b], config, side_specs=side_specs) \
            if sum(len(b) for b in todo) > 1 else None
        try:
            self._run(todo, config, emit, side_specs, ahead)
        finally:
            if ahead is not None:
                ahead.close()

    def _run(self, todo, config: MeasureConfig, emit: Emitter, side_specs: dict | None, ahead) -> None:
        for batch in todo:
            rest = list(batch)
            while rest:
                try:
                    for result in worker.run_cases(list(rest), config, self.imports, side_specs=side_specs,
                                                   ahead=ahead):
                        take(rest, result)
                        emit(result)
                except Exception as exc:
                    if rest:
                        head = rest.pop(0)
                        emit(Result(head, "crashed", message=f"the worker raised {describe(exc)}",
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
        return str(fingerprint("cuda").get("gpu_name") or "")
    except Exception:
        return ""


