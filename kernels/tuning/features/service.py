"""Extracting the features of a task's candidates: lowering and analysing each configuration
(:func:`candidate_features`), and :class:`FeatureExtractor`, which caches one vector per
configuration index. An extraction that fails gives the zero vector and a logged reason (a search
never stops on it), and many at once are extracted in a pool of worker processes (each lowering is
pure Python): forked ones, or, in a process connected to Ray (whose client threads do not survive a
fork: ``kbench tune --executor ray``), spawned ones kept for the extractor's life, the task sent to
each once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import weakref
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

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


# a task handed to forked workers (set before the pool starts; the children inherit it)
_POOL_TASK: Any = None
_POOL_TYPE = "itervar"


def _pool_extract(index: int) -> Tuple[int, Optional[np.ndarray], str]:
    try:
        return index, feature_vector(candidate_features(_POOL_TASK, index), _POOL_TYPE), ""
    except Exception as exc:
        return index, None, f"{type(exc).__name__}: {exc}"


class FeatureExtractor:
    """Feature vectors of a task's configurations, by index, cached (see the module docstring).

    Parameters
    ----------
    task : Task or TIRTask
        What to instantiate (``config_space``, ``instantiate``, ``target``).
    feature_type : str
        ``"itervar"`` or ``"curve"``.
    n_workers : int, optional
        Worker processes (forked) for batches of at least :attr:`pool_min` missing vectors
        (default: the machine's cores but one, at most 16; 1 extracts in this process, as does a
        process connected to Ray).
    disk_cache : bool
        Keep the vectors on disk between sessions (:mod:`kernels.tuning.features.disk`): a later
        extractor of the same task, target, feature type and code starts with them.
    """

    #: fewer missing vectors than this are extracted in this process
    pool_min = 16

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
        self.seconds = 0.0  # time spent extracting (wall), and how many were extracted
        self.extracted = 0
        # the spawned worker processes (a process connected to Ray); False: the task cannot be sent
        self._spawned: Any = None
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
        """The vectors of ``indices`` as rows of one array; missing ones are extracted first."""
        indices = [int(i) for i in indices]
        missing = list(dict.fromkeys(i for i in indices if i not in self.cache))
        if missing:
            t0 = time.perf_counter()
            if self.n_workers > 1 and len(missing) >= self.pool_min:
                self._extract_pool(missing)
            else:
                self._extract_locally(missing)
            self.seconds += time.perf_counter() - t0
            self.extracted += len(missing)
            if self.disk_file is not None:
                disk.save(self.disk_file, self.cache, self.failures, self.length)
        if not indices:
            return np.zeros((0, self.length), dtype=np.float32)
        return np.stack([self.cache[i] for i in indices])

    @property
    def seconds_per_candidate(self) -> float:
        return self.seconds / self.extracted if self.extracted else 0.0

    def _store(self, index: int, vec: Optional[np.ndarray], error: str) -> None:
        if vec is None:
            self.failures[index] = error
            logger.info("features of configuration %d: extraction failed, using zeros: %s", index, error)
            vec = np.zeros(self.length, dtype=np.float32)
        self.cache[index] = vec

    def _extract_locally(self, indices: List[int]) -> None:
        """Extract, in this process, those of ``indices`` not cached yet."""
        for i in indices:
            if i not in self.cache:
                self._store(*_extract_here(self.task, i, self.feature_type))

    def _extract_pool(self, missing: List[int]) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        global _POOL_TASK, _POOL_TYPE
        try:
            ctx = mp.get_context("fork")
        except ValueError:  # no fork on this platform: in this process
            ctx = None
        if ctx is not None and _ray_connected():
            # a Ray driver's client threads do not survive a fork: spawned workers instead
            if self._extract_spawned(missing):
                return
            ctx = None
        if ctx is None:
            self.pool_kind = "here"
            self._extract_locally(missing)
            return
        self.pool_kind = "fork"
        _POOL_TASK, _POOL_TYPE = self.task, self.feature_type
        workers = min(self.n_workers, len(missing))
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                chunk = max(1, len(missing) // (4 * workers))
                for index, vec, error in pool.map(_pool_extract, missing, chunksize=chunk):
                    self._store(index, vec, error)
        except Exception as exc:  # a broken pool: the rest in this process
            logger.info("feature extraction pool failed (%s: %s); extracting in this process",
                        type(exc).__name__, exc)
            self._extract_locally(missing)
        finally:
            _POOL_TASK = None

    def _extract_spawned(self, missing: List[int]) -> bool:
        """Extract ``missing`` in the spawned worker processes (started the first time, the task sent
        to each once); False when they cannot be had (the task does not pickle, the pool broke)."""
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        pool = self._spawned
        if pool is False:  # the task did not pickle before: it will not now
            return False
        if pool is None:
            try:
                # function-level: the task pickled as the Ray workers get it (Ray's cloudpickle)
                from ..ray_workers import task_bytes

                blob = task_bytes(self.task)
            except Exception as exc:
                logger.info("features: the task cannot be sent to worker processes (%s: %s); extracting "
                            "in this process", type(exc).__name__, exc)
                self._spawned = False
                return False
            pool = self._spawned = ProcessPoolExecutor(
                max_workers=self.n_workers, mp_context=mp.get_context("spawn"), initializer=_spawned_init,
                initargs=(blob, self.feature_type))
            weakref.finalize(self, pool.shutdown, wait=False, cancel_futures=True)
        try:
            chunk = max(1, len(missing) // (4 * self.n_workers))
            with _main_module_hidden():  # processes start as the items are submitted
                results = pool.map(_pool_extract, missing, chunksize=chunk)
            for index, vec, error in results:
                self._store(index, vec, error)
        except Exception as exc:  # a broken pool: the rest in this process, no pool from now on
            logger.info("features: the worker processes failed (%s: %s); extracting in this process",
                        type(exc).__name__, exc)
            self._spawned = None
            pool.shutdown(wait=False, cancel_futures=True)
            self._extract_locally(missing)
        self.pool_kind = "spawn"
        return True

    def close(self) -> None:
        """End the spawned worker processes, if any (they also end with the extractor)."""
        pool, self._spawned = self._spawned, None
        if pool:
            pool.shutdown(wait=False, cancel_futures=True)


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
