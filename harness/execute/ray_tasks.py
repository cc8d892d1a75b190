"""What runs inside Ray's worker processes for :class:`harness.execute.ray_executor.RayExecutor`: the
body of a CPU batch task, the GPU runner actor that keeps one GPU for a whole run, and the CPU-side
CUDA builds (GPUs hidden) whose cubins the runners receive.

These functions are made remote by the executor (``ray.remote(...)(fn)``); they import nothing of Ray
at module level so that this module loads without Ray.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from harness.model import Case, MeasureConfig
from kernels.workloads import get as get_workload

from . import peers, worker
from .build import build_artifact, is_callable

__all__ = ["GpuRunner", "build_task", "peer_libraries", "run_batch_task"]

log = logging.getLogger(__name__)


def run_batch_task(cases: list[Case], config: MeasureConfig, imports: tuple[str, ...], hide_gpus: bool,
                    artifacts: dict | None = None,
                    side_specs: dict | None = None) -> Iterator[tuple[str, Any]]:
    """The body of one batch task (a Ray streaming generator): a start marker, then one
    ``("result", Result)`` per case in order."""
    if hide_gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import ray

    yield ("start", {"node": ray.get_runtime_context().get_node_id(), "worker": worker.worker_label()})
    for result in worker.run_cases(cases, config, imports, artifacts=artifacts or None,
                                   side_specs=side_specs):
        yield ("result", result)


class GpuRunner:
    """A GPU worker process kept for a whole run: a Ray actor holding one GPU (``num_gpus=1``) that runs
    batch after batch, so the imports, the CUDA context, the fingerprint and the peaks are paid once per
    GPU. An actor keeps the GPU Ray gave it, and the ``CUDA_VISIBLE_DEVICES`` Ray set for it, for its
    whole life; a reused *task* worker would not (see the module docstring)."""

    def __init__(self, imports: tuple[str, ...] = (), peer_libraries: tuple[str, ...] = ()) -> None:
        # the process's one-time costs now, while the CPU workers still build the first batch:
        # imports, CUDA context, fingerprint, peaks, peer libraries (harness.execute.worker.prepare)
        self.born = time.time()
        try:
            worker.prepare("cuda", imports, peer_libraries)
        except Exception as exc:  # the first batch reports it
            log.debug("kbench: runner warm-up: %s", exc)
        self.ready = time.time()

    def run(self, cases: list[Case], config: MeasureConfig, imports: tuple[str, ...],
            artifacts: dict | None = None, side_specs: dict | None = None) -> Iterator[tuple[str, Any]]:
        """One batch, as :func:`run_batch_task` (called as a streaming generator). Afterwards torch's
        caching allocator (peer cases) gives the GPU memory it keeps back, so that later batches of
        this process do not find the GPU fuller than a fresh process would."""
        for kind, payload in run_batch_task(cases, config, imports, False, artifacts, side_specs):
            if kind == "start":  # when this process started and was ready (the driver's timeline)
                payload = {**payload, "runner_born": self.born, "runner_ready": self.ready}
            yield kind, payload
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception as exc:
            log.debug("kbench: torch.cuda.empty_cache: %s", exc)


def peer_libraries(cases: Iterable[Case]) -> tuple[str, ...]:
    """The libraries (torch, cupy) of the peer cases and callable variants among ``cases``, for a
    runner to import early."""
    cases = list(cases)
    names = {c.peer for c in cases if c.peer}
    libs = []
    for case in cases:
        if is_callable(case):
            libs.append(get_workload(case.workload).variant(case.variant).library)
    if not names:
        return tuple(dict.fromkeys(libs))
    for name in sorted(names):
        try:
            libs.append(peers.get(name).library)
        except Exception:  # an unknown peer is the case's own error to report
            continue
    return tuple(dict.fromkeys(libs))


def build_task(cases: list[Case], arch: str) -> dict:
    """CPU-side CUDA builds (GPUs hidden): {case key: Artifact} for the cases that built. A case that
    fails here is rebuilt, and its build error recorded, by the GPU worker."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    out = {}
    for case in cases:
        try:
            out[case.key] = build_artifact(case, arch)
        except Exception as exc:
            log.info("kbench: prebuild of %s failed (%s); the GPU worker rebuilds it", case.key, exc)
    return out


