"""Builds ahead: a worker compiles the cases of its batch in a background thread while it checks and
times the earlier ones, so that the device never waits for a compiler.

:class:`BuildAhead` submits every case of a batch (in order) to a small thread pool as the batch
starts; :meth:`BuildAhead.take` hands a case's :class:`~harness.execute.build.Artifact` to the worker
when the case's turn comes, waiting only if its build is still running (that wait is the case's
``build_wait`` phase; the rest of its build time was overlapped with other work). Lowering is
Python (it holds the GIL in turns with the measuring loop), the compilers (nvcc, cc) are
subprocesses that run beside it.

Host-timed targets (``c``, and ``opencl`` on a CPU device such as PoCL) are timed on the same
processor the compilers run on, so a case of those targets is timed only once every build of the
batch is done (:meth:`BuildAhead.quiet`): their builds overlap the inputs, references and checks,
never the timing. CUDA is timed with device events and is timed while later builds run.

A build that fails here is built again by the worker (which reports the ``build_error`` with the
compiler's output, exactly as without builds ahead).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Dict, Optional, Sequence

from harness.model import Case

from .build import Artifact, build_artifact, is_callable

__all__ = ["BuildAhead", "HOST_TIMED", "default_threads"]

log = logging.getLogger(__name__)

#: targets whose cases are timed on the host processor (never while a build runs)
HOST_TIMED = frozenset({"c", "opencl"})


def default_threads() -> int:
    """Build threads of a worker: one per 4 cores beyond the one that measures, 1 to 4 (one on a
    machine of 2 cores, whose other core is the measuring process's)."""
    cores = os.cpu_count() or 1
    return max(1, min(4, (cores - 1) // 4 or 1))


class BuildAhead:
    """The builds of a batch's cases, started at once in background threads.

    Parameters
    ----------
    cases : sequence of Case
        The batch, in the order it runs; peer cases and cases in ``skip`` are not built here.
    cuda_arch : str
        The architecture CUDA cases are built for (this worker's GPU), e.g. ``"sm_90"``; without it
        CUDA cases are left to the worker.
    skip : collection of str
        Case keys built elsewhere (Ray's CPU builds) or by another source tree (``kbench ab``).
    threads : int, optional
        Build threads (default :func:`default_threads`).
    """

    def __init__(self, cases: Sequence[Case], cuda_arch: str = "", skip: Sequence[str] = (),
                 threads: Optional[int] = None):
        skipped = set(skip)
        todo = [c for c in cases if not c.peer and c.key not in skipped
                and (c.target != "cuda" or cuda_arch) and not is_callable(c)]
        self.created = time.time()
        self._futures: Dict[str, Future] = {}
        self._pool: Optional[ThreadPoolExecutor] = None
        if todo:
            self._pool = ThreadPoolExecutor(max_workers=threads or default_threads(),
                                            thread_name_prefix="kbench-build")
            for case in todo:
                if case.key not in self._futures:
                    arch = cuda_arch if case.target == "cuda" else ""
                    self._futures[case.key] = self._pool.submit(build_artifact, case, arch)

    def __contains__(self, key: str) -> bool:
        return key in self._futures

    def take(self, case: Case) -> tuple[Optional[Artifact], float]:
        """``(artifact, seconds waited)`` of ``case``: its build ahead, waiting for it if it still
        runs; ``(None, seconds)`` when it failed or was not built here (the worker builds it)."""
        fut = self._futures.pop(case.key, None)
        if fut is None:
            return None, 0.0
        t0 = time.perf_counter()
        try:
            artifact = fut.result()
        except Exception as exc:  # the worker builds it again and reports the error
            log.debug("kbench: build ahead of %s failed: %s", case.key, exc)
            artifact = None
        return artifact, time.perf_counter() - t0

    def quiet(self) -> float:
        """Wait until no build runs or waits (before timing a host-timed case); the seconds waited."""
        pending = [f for f in self._futures.values() if not f.done()]
        if not pending:
            return 0.0
        t0 = time.perf_counter()
        wait_futures(pending)
        return time.perf_counter() - t0

    def close(self) -> None:
        """Drop the builds not taken (a batch cut short) and end the threads."""
        for fut in self._futures.values():
            fut.cancel()
        self._futures.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> BuildAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
