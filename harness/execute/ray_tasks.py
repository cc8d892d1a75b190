"""What runs inside Ray's worker processes for :class:`harness.execute.ray_executor.RayExecutor`, as the
work pool's (:mod:`kernels.contrib.workpool`) payloads: the GPU runner's worker, which keeps one GPU for
the executor's life and runs one case a call, and the CPU items (a CPU case; the CPU-side CUDA build of
a GPU case, GPUs hidden, whose cubin the runner receives).

Nothing of Ray is imported at module level, so that this module loads without Ray.
"""

from __future__ import annotations

import importlib
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

from harness.model import Case, MeasureConfig, Result
from kernels.tuning.ray_workers import RunnerActor
from kernels.workloads import get as get_workload

from . import inputs, peers, worker
from .build import Artifact, build_artifact, is_callable

__all__ = ["CaseRunner", "build_payload", "case_payload", "cpu_item", "data_payload", "peer_libraries"]

log = logging.getLogger(__name__)


def case_payload(case: Case, config: MeasureConfig, imports: tuple[str, ...], artifact: Artifact | None = None,
                 sides: dict | None = None, data: Any = None) -> tuple:
    """What a worker needs to run one case (a CPU item's or a GPU runner's payload); ``data``: the
    Ray object holding the ``("result", ShapeData)`` of the case's shape, made ahead by a CPU item
    (:func:`data_payload`), or None."""
    return ("case", case, config, imports, artifact, sides, data)


def data_payload(case: Case, seed: int, imports: tuple[str, ...]) -> tuple:
    """A CPU item making the inputs and float64 reference of ``case``'s shape (its value: a
    :class:`~harness.execute.inputs.ShapeData`) for the GPU runner that times the shape's cases."""
    return ("data", case, seed, imports)


def build_payload(case: Case, arch: str) -> tuple:
    """A CPU item building one CUDA case for ``arch`` (its value: the Artifact, or None)."""
    return ("build", case, arch)


def _run_one(payload: tuple) -> Result:
    _, case, config, imports, artifact, sides, _data = payload
    artifacts = {case.key: artifact} if artifact is not None else None
    side_specs = {case.key: sides} if sides else None
    return next(iter(worker.run_cases([case], config, imports, artifacts=artifacts, side_specs=side_specs,
                                      build_ahead=False)))


def cpu_item(payload: tuple) -> Any:
    """The body of a CPU item (the work pool hides the GPUs before it runs): a ``case`` payload is run
    (its Result), a ``build`` payload compiled (its Artifact; None when the build failed: the GPU
    worker then rebuilds the case and records the compiler's error)."""
    if payload[0] == "build":
        _, case, arch = payload
        try:
            return build_artifact(case, arch)
        except Exception as exc:
            log.info("kbench: prebuild of %s failed (%s); the GPU worker rebuilds it", case.key, exc)
            return None
    if payload[0] == "data":
        _, case, seed, imports = payload
        worker.import_suite_modules(imports)
        return inputs.shape_data(get_workload(case.workload), case, seed)
    return _run_one(payload)


def _take_data(case: Case, config: MeasureConfig, ref: Any) -> None:
    """Keep the shape data a CPU worker made (``ref``: the object of its ``("result", ShapeData)``) as
    this process's cache entry; on any failure the case makes its data itself."""
    if inputs.cached(inputs.data_key(case.workload, case.params, case.dtype, config.seed)):
        return
    try:
        import ray

        event = ray.get(ref)
        if event[0] == "result" and event[1] is not None:
            inputs.prime(event[1])
    except Exception as exc:
        log.info("kbench: the shape's data made ahead cannot be had (%s: %s); making it here",
                 type(exc).__name__, exc)


class CaseRunner:
    """The worker of a GPU runner (a work-pool runner actor holding one GPU for the executor's life):
    the process's one-time costs (imports, CUDA context, fingerprint, peaks) as it starts, then one case
    a call. An actor keeps the GPU Ray gave it, and the ``CUDA_VISIBLE_DEVICES`` Ray set for it, for its
    whole life; a reused Ray *task* worker may be handed another GPU while its CUDA context stays on
    the first (Ray only rewrites the variable, which CUDA reads once)."""

    def __init__(self, imports: tuple[str, ...] = ()) -> None:
        self.born = time.time()
        try:
            worker.prepare("cuda", imports)
        except Exception as exc:  # the first case reports it
            log.debug("kbench: runner warm-up: %s", exc)
        self.ready = time.time()
        self.libraries: set[str] = set()
        # what the tuning engine's RayRunner asks of a runner it shares (the GPU's architecture)
        self.arch = RunnerActor.cuda_arch()

    def where(self) -> dict:
        """This runner's label (node:pid), when it started and was ready (the driver's timeline) and
        its GPU's CUDA architecture."""
        return {"worker": worker.worker_label(), "runner_born": self.born, "runner_ready": self.ready,
                "cuda_arch": self.arch}

    def needs_prepare(self, payload: tuple) -> bool:
        """Whether the case needs a peer library (torch, cupy: seconds to import) not loaded yet."""
        try:
            worker.import_suite_modules(payload[3])
            return bool(set(peer_libraries([payload[1]])) - self.libraries)
        except Exception:  # the case itself reports what cannot be imported
            return False

    def prepare(self, payload: tuple) -> None:
        """Import the case's peer libraries (timed by the pool's startup clock, not the case's)."""
        for lib in peer_libraries([payload[1]]):
            try:
                importlib.import_module(lib)
            except ImportError as exc:  # the case itself reports it
                log.debug("kbench: runner: import %s: %s", lib, exc)
            self.libraries.add(lib)

    def __call__(self, payload: tuple) -> Result:
        """One case. After a case of a peer library, torch's caching allocator gives back the GPU memory
        it keeps, so that later cases do not find the GPU fuller than a fresh process would."""
        if payload[6] is not None:
            _take_data(payload[1], payload[2], payload[6])
        result = _run_one(payload)
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception as exc:
            log.debug("kbench: torch.cuda.empty_cache: %s", exc)
        return result


def peer_libraries(cases: Iterable[Case]) -> tuple[str, ...]:
    """The libraries (torch, cupy) of the peer cases and callable variants among ``cases``, for a
    runner to import before their first case is timed."""
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
