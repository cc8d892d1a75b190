"""Extracting the features of a task's candidates: lowering and analysing each configuration
(:func:`candidate_features`), and :class:`FeatureExtractor`, which caches one vector per
configuration index. An extraction that fails gives the zero vector and a logged reason (a search
never stops on it). Two or more missing at once are extracted in worker processes (each lowering is
pure Python), kept for the extractor's life: forked ones, or, in a process connected to Ray (whose
client threads do not survive a fork: ``kbench tune --executor ray``), spawned ones, the task sent
to each once. :meth:`FeatureExtractor.prefetch` extracts a sample of the space in the background,
a few chunks queued at a time, so that a search's own requests do not wait behind it. A forking pool
forks its workers under ``kernels.runtime.cache.FORK_LOCK``, which the compilers' starts hold too:
a worker forked while a builder thread started nvcc kept that program's pipes open, and the build
waited for the worker, which lives as long as the session (every multi-core tuning session hung).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from concurrent.futures import Future, ProcessPoolExecutor, wait
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from ...runtime.cache import FORK_LOCK
from . import disk
from .encode import _check_type, feature_length, feature_vector
from .walk import DeviceLimits, FeatureError, ProgramFeatures, analyze, lower_for_features

__all__ = ["candidate_features", "FeatureExtractor"]

logger = logging.getLogger("autotvm")


def candidate_features(task: Any, config: Any) -> ProgramFeatures:
    """The :class:`ProgramFeatures` of ``task`` under ``config`` (a configuration or its index):
    instantiated and lowered for the task's target (see :func:`lower_for_features`)."""
    from ...lower import is_tensor_ir

    if isinstance(config, (int, np.integer)):
        config = task.config_space.get(int(config))
    target = task.target
    try:
        if target is not None and hasattr(target, "__enter__"):
            with target:
                sch, args = task.instantiate(config)
        else:
            sch, args = task.instantiate(config)
    except Exception as exc:
        raise FeatureError(f"configuration {getattr(config, 'index', config)}: the template refuses it: "
                           f"{type(exc).__name__}: {exc}") from exc
    try:
        func, vthreads = lower_for_features(sch, None if is_tensor_ir(sch) else args, target)
        return analyze(func, vthreads, DeviceLimits.of_target(target))
    except FeatureError:
        raise
    except Exception as exc:
        raise FeatureError(f"configuration {getattr(config, 'index', config)}: lowering for features "
                           f"failed: {type(exc).__name__}: {exc}") from exc


# the task of this process when it is an extraction worker (set by the pool's initializer)
_POOL_TASK: Any = None
_POOL_TYPE = "itervar"


def _pool_extract(indices: List[int]) -> List[Tuple[int, Optional[np.ndarray], str]]:
    """In a worker process: the vectors of ``indices`` (a failed one: None and the reason)."""
    return [_extract_here(_POOL_TASK, i, _POOL_TYPE) for i in indices]


def _forked_init(task: Any, feature_type: str) -> None:
    """A forked extraction worker: the task is the parent's object (fork copies it, no pickling)."""
    global _POOL_TASK, _POOL_TYPE
    _POOL_TASK, _POOL_TYPE = task, feature_type
    _lower_priority()
    _exit_with_parent()


def _exit_with_parent(poll_s: float = 1.0) -> None:
    """In a worker: end this process once its parent is gone (killed, SIGTERM without cleanup). A
    worker blocks on the pool's call queue, whose write end it also holds after a fork, so it would
    otherwise wait for work for ever, an orphan for each session killed mid-search."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(0)
    threading.Thread(target=watch, name="features-parent-watch", daemon=True).start()


#: the niceness of the extraction workers
WORKER_NICE = 10


def _lower_priority(pid: int = 0) -> None:
    """Extraction workers (``pid``; 0: this process) yield the CPU to the compilers and the runners
    of the same machine: a prefetch uses the cores they leave idle. Idempotent."""
    with contextlib.suppress(OSError, AttributeError):
        if os.getpriority(os.PRIO_PROCESS, pid) < WORKER_NICE:
            os.setpriority(os.PRIO_PROCESS, pid, WORKER_NICE)


class FeatureExtractor:
    """Feature vectors of a task's configurations, by index, cached (see the module docstring).

    Parameters
    ----------
    task : Task or TIRTask
        What to instantiate (``config_space``, ``instantiate``, ``target``).
    feature_type : str
        ``"itervar"`` or ``"curve"``.
    n_workers : int, optional
        Worker processes for batches of at least :attr:`pool_min` missing vectors and for
        :meth:`prefetch` (default: the machine's cores but one, at most 16; 1 extracts in this
        process). The workers are forked, or spawned in a process connected to Ray, once, and kept
        for the extractor's life (:meth:`close` ends them).
    disk_cache : bool
        Keep the vectors on disk between sessions (:mod:`kernels.tuning.features.disk`): a later
        extractor of the same task, target, feature type and code starts with them.
    """

    #: fewer missing vectors than this are extracted in this process
    pool_min = 2
    #: chunks of a prefetch in the workers' queue at once: a request of :meth:`get_many` waits
    #: behind at most these
    prefetch_depth = 2

    def __init__(self, task: Any, feature_type: str = "itervar", n_workers: Optional[int] = None,
                 disk_cache: bool = False):
        _check_type(feature_type)
        if not isinstance(disk_cache, bool):
            raise TypeError(f"FeatureExtractor: disk_cache must be True or False, got {disk_cache!r}")
        self.task, self.feature_type = task, feature_type
        if n_workers is None:  # one core stays with the tuner (and with the builder's compilers)
            n_workers = max(1, min(16, (os.cpu_count() or 1) - 1))
        self.n_workers = int(n_workers)
        self.length = feature_length(feature_type)
        self.cache: Dict[int, np.ndarray] = {}
        self.failures: Dict[int, str] = {}
        self.seconds = 0.0  # time get_many waited for extraction (wall), and how many were extracted
        self.extracted = 0
        self._lock = threading.RLock()
        self._pending: Dict[int, Future] = {}  # index -> the future extracting it in the pool
        self._pool: Any = None  # the worker processes; False: none can be had
        self._feeder: Optional[threading.Thread] = None
        self._closed = self._stop_feed = False
        self._reniced: set = set()  # worker processes whose priority was lowered
        self.pool_kind = ""  # how the last batch was extracted: "fork", "spawn" or "here"
        # the file between sessions (None: not kept), and how many vectors came from it
        self.disk_file = disk.file_for(task, feature_type) if disk_cache else None
        self.loaded = 0
        if self.disk_file is not None:
            self.cache, self.failures = disk.load(self.disk_file, self.length)
            self.loaded = len(self.cache)

    def __len__(self) -> int:
        return self.length

    def get(self, index: int) -> np.ndarray:
        """The vector of configuration ``index`` (the zero vector when extraction fails)."""
        got = self.cache.get(index)
        if got is None:
            self.get_many([index])
            got = self.cache[index]
        return got

    def get_many(self, indices: Iterable[int]) -> np.ndarray:
        """The vectors of ``indices`` as rows of one array; missing ones are extracted first (those a
        :meth:`prefetch` is extracting are waited for)."""
        indices = [int(i) for i in indices]
        missing = list(dict.fromkeys(i for i in indices if i not in self.cache))
        if missing:
            t0 = time.perf_counter()
            with self._lock:
                waiting = {i: self._pending[i] for i in missing if i in self._pending}
            new = [i for i in missing if i not in waiting]
            pool = self._ensure_pool() if self.n_workers > 1 and len(new) >= self.pool_min else None
            if pool is not None:  # stored below, in the order asked (and their failures logged so)
                self.pool_kind = "spawn" if isinstance(pool, _HiddenMainPool) else "fork"
                waiting.update(self._submit(new, max(1, len(new) // (2 * self.n_workers)), store=False))
            elif new:
                self.pool_kind = "here"
                self._extract_locally(new)
            if waiting:
                self._collect(list(dict.fromkeys(waiting[i] for i in missing if i in waiting)))
            # what a broken pool left (or would not take): in this process
            self._extract_locally([i for i in missing if i not in self.cache])
            self.seconds += time.perf_counter() - t0
            self._save()
        if not indices:
            return np.zeros((0, self.length), dtype=np.float32)
        return np.stack([self.cache[i] for i in indices])

    def prefetch(self, indices: Iterable[int]) -> int:
        """Extract ``indices`` in the worker processes in the background, a few chunks queued at a
        time (so :meth:`get_many`'s own requests wait behind few of them); how many were queued (0
        with one worker or no pool: nothing is extracted ahead)."""
        if self.n_workers <= 1 or self._closed:
            return 0
        self._stop_feed = False
        with self._lock:
            todo = [int(i) for i in dict.fromkeys(indices) if int(i) not in self.cache
                    and int(i) not in self._pending]
        if not todo or self._ensure_pool() is None:
            return 0
        self._feeder = threading.Thread(target=self._feed, args=(todo,), name="features-prefetch",
                                        daemon=True)
        self._feeder.start()
        return len(todo)

    def stop_prefetch(self) -> None:
        """Queue no more of the prefetch (the chunks in the workers finish)."""
        self._stop_feed = True

    def wait_prefetch(self, timeout: Optional[float] = None) -> bool:
        """Wait for the prefetch to end; whether it has."""
        feeder = self._feeder
        if feeder is not None:
            feeder.join(timeout)
            return not feeder.is_alive()
        return True

    @property
    def seconds_per_candidate(self) -> float:
        return self.seconds / self.extracted if self.extracted else 0.0

    def _store(self, index: int, vec: Optional[np.ndarray], error: str) -> None:
        with self._lock:
            if index in self.cache:
                return
            if vec is None:
                self.failures[index] = error
                logger.info("features of configuration %d: extraction failed, using zeros: %s", index, error)
                vec = np.zeros(self.length, dtype=np.float32)
            self.cache[index] = vec
            self.extracted += 1

    def _save(self) -> None:
        if self.disk_file is not None:
            with self._lock:
                cache, failures = dict(self.cache), dict(self.failures)
            disk.save(self.disk_file, cache, failures, self.length)

    def _extract_locally(self, indices: List[int]) -> None:
        """Extract, in this process, those of ``indices`` not cached yet."""
        for i in indices:
            if i not in self.cache:
                self._store(*_extract_here(self.task, i, self.feature_type))

    def _submit(self, indices: List[int], chunk: int, store: bool = True) -> Dict[int, Future]:
        """``indices`` sent to the pool in chunks; index -> its chunk's future (its vectors stored
        when it is done, with ``store``; else by whoever collects it)."""
        out: Dict[int, Future] = {}
        for k in range(0, len(indices), chunk):
            part = indices[k:k + chunk]
            try:
                with FORK_LOCK:  # a forking pool forks its workers in its first submit (FORK_LOCK's docs)
                    fut = self._pool.submit(_pool_extract, part)
            except Exception as exc:  # a broken pool: the callers extract what is left here
                self._pool_failed(exc)
                break
            self._renice_workers()
            with self._lock:
                for i in part:
                    self._pending[i] = out[i] = fut
            fut.add_done_callback(lambda f, part=part: self._chunk_done(f, part, store))
        return out

    def _collect(self, futures) -> None:
        """Wait for ``futures`` and store their vectors, in their order (a future's waiters wake
        before its done callbacks run, so a callback may not have stored them yet)."""
        wait(futures)
        for fut in futures:
            if not fut.cancelled() and fut.exception() is None:
                for index, vec, error in fut.result():
                    self._store(index, vec, error)

    def _renice_workers(self) -> None:
        """Lower the priority of the pool's processes as soon as they exist: a spawned one imports
        the project before its initializer runs (seconds of CPU each, next to the first builds)."""
        for pid in list(getattr(self._pool, "_processes", None) or ()):
            if pid not in self._reniced:
                self._reniced.add(pid)
                _lower_priority(pid)

    def _chunk_done(self, fut: Future, part: List[int], store: bool) -> None:
        try:
            results = fut.result()
            if store:
                for index, vec, error in results:
                    self._store(index, vec, error)
        except Exception as exc:  # the pool broke or was shut down: the waiters extract the rest
            if not self._closed:
                self._pool_failed(exc)
        finally:
            with self._lock:
                for i in part:
                    if self._pending.get(i) is fut:
                        del self._pending[i]

    def _feed(self, todo: List[int]) -> None:
        chunk = 2
        slots = threading.Semaphore(self.prefetch_depth * self.n_workers)
        for k in range(0, len(todo), chunk):
            slots.acquire()
            if self._closed or self._stop_feed or self._pool in (None, False):
                break
            part = [i for i in todo[k:k + chunk] if i not in self.cache and i not in self._pending]
            subs = self._submit(part, chunk) if part else {}
            if not subs:
                slots.release()
                continue
            next(iter(subs.values())).add_done_callback(lambda f: slots.release())
        with self._lock:
            last = set(self._pending.values())
        self._collect(last)
        self._save()

    def _ensure_pool(self) -> Any:
        """The worker processes, started the first time (None where none can be had)."""
        with self._lock:
            if self._pool is None and not self._closed:
                try:
                    self._pool = self._start_pool() or False
                except Exception as exc:  # no processes to be had: everything in this process
                    logger.info("features: no worker processes (%s: %s); extracting in this process",
                                type(exc).__name__, exc)
                    self._pool = False
            return self._pool or None

    def _start_pool(self) -> Any:
        import multiprocessing as mp

        try:
            ctx = mp.get_context("fork")
        except ValueError:  # no fork on this platform: in this process
            return None
        if _ray_connected():  # a Ray driver's client threads do not survive a fork: spawned workers
            return self._start_spawned()
        pool = ProcessPoolExecutor(max_workers=self.n_workers, mp_context=ctx, initializer=_forked_init,
                                   initargs=(self.task, self.feature_type))
        weakref.finalize(self, pool.shutdown, wait=False, cancel_futures=True)
        return pool

    def _start_spawned(self) -> Any:
        """Spawned workers, the task sent to each once; None when the task does not pickle."""
        import multiprocessing as mp

        try:
            # function-level: the task pickled as the Ray workers get it (Ray's cloudpickle)
            from ..ray_workers import task_bytes

            blob = task_bytes(self.task)
        except Exception as exc:
            logger.info("features: the task cannot be sent to worker processes (%s: %s); extracting "
                        "in this process", type(exc).__name__, exc)
            return None
        pool = _HiddenMainPool(max_workers=self.n_workers, mp_context=mp.get_context("spawn"),
                               initializer=_spawned_init, initargs=(blob, self.feature_type))
        weakref.finalize(self, pool.shutdown, wait=False, cancel_futures=True)
        return pool

    def _pool_failed(self, exc: BaseException) -> None:
        logger.info("features: the worker processes failed (%s: %s); extracting in this process",
                    type(exc).__name__, exc)
        with self._lock:
            pool, self._pool = self._pool, False
        if pool:
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the prefetch and end the worker processes, if any (they also end with the extractor)."""
        self._closed = True
        with self._lock:
            pool, self._pool = self._pool, False
        if pool:
            pool.shutdown(wait=False, cancel_futures=True)


class _HiddenMainPool(ProcessPoolExecutor):
    """A spawning pool that starts its processes with the main module hidden from them (see
    :func:`_main_module_hidden`): processes start as the items are submitted, from the search's
    thread and the prefetch's, one at a time (the main module is this process's, shared)."""

    _hiding = threading.Lock()

    def submit(self, *args, **kwargs):
        with self._hiding, _main_module_hidden():
            return super().submit(*args, **kwargs)


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While worker processes are spawned: the main module is not named to them, so they do not run
    the script that started the tuning again (spawned children import the parent's ``__main__``
    unless it has no ``__spec__`` name and no ``__file__``; the task reaches them pickled by value)."""
    import sys

    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__spec__", "__file__") if main is not None and k in main.__dict__}
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__dict__["__spec__"] = None
        yield
    finally:
        if main is not None:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


def _spawned_init(blob: bytes, feature_type: str) -> None:
    """A spawned extraction worker: no GPU, the task rebuilt once."""
    global _POOL_TASK, _POOL_TYPE
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    _lower_priority()
    _exit_with_parent()
    # function-level: rebuilding a pickled task is the Ray workers' code (kernels.tuning.ray_workers)
    from ..ray_workers import task_from_bytes

    _POOL_TASK, _POOL_TYPE = task_from_bytes(blob), feature_type


def _ray_connected() -> bool:
    import sys

    ray = sys.modules.get("ray")
    try:
        return bool(ray is not None and ray.is_initialized())
    except Exception:  # a partial or broken Ray import
        return False


def _extract_here(task: Any, index: int, feature_type: str) -> Tuple[int, Optional[np.ndarray], str]:
    try:
        return index, feature_vector(candidate_features(task, index), feature_type), ""
    except Exception as exc:
        return index, None, f"{type(exc).__name__}: {exc}"
