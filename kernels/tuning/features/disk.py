"""Feature vectors kept on disk between tuning sessions: one file per task and feature type under
``<cache>/features/`` (the build cache's folder, ``KBENCH_CACHE_DIR``), holding every configuration
index extracted so far and the reasons of those that failed.

A file's name hashes what the vectors depend on: the task's workload (template name and arguments:
for ``kbench tune``, the workload, variant, shape, dtype and knob lists), its target, the feature
type, and the source files of the code that lowers it (every loaded module that is not part of the
Python installation: kernels, harness, the suite's own modules; by path, size and modification
time). Editing any of them starts a new file. Files are written whole to a temporary name and
renamed into place, so concurrent sessions never read a half-written one (the last writer's set
wins); an unreadable file is ignored with a log line and replaced.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ...runtime.cache import write_atomic
from ...runtime.config import get_config

__all__ = ["code_fingerprint", "file_for", "load", "save"]

logger = logging.getLogger("autotvm")

#: bumped when the file layout changes
LAYOUT = 1
#: this project's packages: part of the fingerprint wherever they are installed
PROJECT_PACKAGES = ("kernels", "harness", "reports")


def _installed_prefixes() -> Tuple[str, ...]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(name)
        if p:
            paths.add(p)
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


def code_fingerprint() -> str:
    """A hash of the loaded project code: path, size and modification time of the file of every
    module in ``sys.modules`` of this project's packages or outside the Python installation (a
    suite's or user's own modules)."""
    installed = _installed_prefixes()
    h = hashlib.sha256()
    for name in sorted(sys.modules):
        f = getattr(sys.modules.get(name), "__file__", None)
        if not f or not f.endswith(".py"):
            continue
        real = os.path.realpath(f)
        if real.startswith(installed) and name.partition(".")[0] not in PROJECT_PACKAGES:
            continue
        try:
            st = os.stat(real)
        except OSError:
            continue
        h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


def file_for(task: Any, feature_type: str) -> Optional[Path]:
    """The cache file of ``task``'s ``feature_type`` vectors; None when the task has no stable key
    (only tasks with a ``workload`` tuple of plain values, as autotvm's, have one)."""
    workload = getattr(task, "workload", None)
    if not isinstance(workload, tuple):
        return None
    try:
        key = json.dumps([LAYOUT, list(workload), str(getattr(task, "target", "")), feature_type,
                          code_fingerprint()])
    except (TypeError, ValueError):
        return None
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return get_config().cache_dir / "features" / f"{digest}.npz"


def load(path: Path, length: int) -> Tuple[Dict[int, np.ndarray], Dict[int, str]]:
    """(vectors by index, failure reasons by index) from ``path``; empty when it is missing or
    unreadable (logged), or holds vectors of another length."""
    if not path.exists():
        return {}, {}
    try:
        with np.load(path, allow_pickle=False) as z:
            index, vectors = z["index"], z["vectors"]
            failures = json.loads(str(z["failures"]))
        if vectors.ndim != 2 or vectors.shape[1] != length or len(index) != len(vectors):
            raise ValueError(f"vectors of shape {vectors.shape} for {len(index)} indices, expected "
                             f"length {length}")
    except Exception as exc:  # a damaged or foreign file: start again
        logger.info("feature cache %s unreadable (%s: %s); extracting again", path, type(exc).__name__, exc)
        return {}, {}
    cache = {int(i): vectors[k].astype(np.float32) for k, i in enumerate(index)}
    return cache, {int(i): str(why) for i, why in failures.items()}


def save(path: Path, cache: Dict[int, np.ndarray], failures: Dict[int, str], length: int) -> None:
    """Write every vector of ``cache`` (and the reasons of ``failures``) to ``path`` atomically; a
    failure to write is logged, never raised (the session goes on without the file)."""
    try:
        index = np.asarray(sorted(cache), dtype=np.int64)
        vectors = (np.stack([cache[int(i)] for i in index]).astype(np.float32) if len(index)
                   else np.zeros((0, length), dtype=np.float32))
        buf = io.BytesIO()
        np.savez(buf, index=index, vectors=vectors,
                 failures=np.asarray(json.dumps({str(k): v for k, v in failures.items()})))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, buf.getvalue())
    except OSError as exc:
        logger.info("feature cache %s not written (%s: %s)", path, type(exc).__name__, exc)
