"""Runtime settings: the only place in the runtime that reads environment variables.

Variables
---------
CC
    The C compiler used by the ``c`` backend (default ``cc``).
KBENCH_CACHE_DIR
    Root of the content-addressed build cache (default ``~/.cache/kbench``). Compiled shared
    libraries go under ``<root>/c`` and CUDA binaries under ``<root>/cuda``.
CUDA_HOME, CUDA_PATH
    Where to look for ``bin/nvcc`` when ``nvcc`` is not on ``PATH``.
TVM_TEST_TARGETS
    The targets ``kernels.testing`` tests against, separated by ``;`` (TVM's variable; default
    ``kernels.testing.DEFAULT_TEST_TARGETS``).

The settings are read once (:func:`get_config`); :func:`reload_config` reads them again, which
tests use after changing the environment.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class RuntimeConfig:
    """The runtime's settings, read from the environment by :func:`get_config`.

    Attributes
    ----------
    cc : str
        C compiler command (a name looked up on ``PATH`` or a path).
    cache_dir : pathlib.Path
        Root folder of the build cache.
    cuda_home : str or None
        CUDA toolkit root used to find ``nvcc`` when it is not on ``PATH``.
    test_targets : str
        ``TVM_TEST_TARGETS`` ("" when unset).
    """

    cc: str
    cache_dir: Path
    cuda_home: Optional[str]
    test_targets: str = ""


def _read_environment() -> RuntimeConfig:
    cc = os.environ.get("CC", "").strip() or "cc"
    cache = os.environ.get("KBENCH_CACHE_DIR", "").strip()
    cache_dir = Path(cache).expanduser() if cache else Path.home() / ".cache" / "kbench"
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or None
    return RuntimeConfig(cc=cc, cache_dir=cache_dir, cuda_home=cuda_home,
                         test_targets=os.environ.get("TVM_TEST_TARGETS", "").strip())


@functools.lru_cache(maxsize=1)
def get_config() -> RuntimeConfig:
    """Return the runtime settings, reading the environment on the first call only.

    Returns
    -------
    RuntimeConfig
        The cached settings.
    """
    return _read_environment()


def reload_config() -> RuntimeConfig:
    """Read the environment again and return the new settings.

    Returns
    -------
    RuntimeConfig
        The fresh settings, also returned by later :func:`get_config` calls.
    """
    get_config.cache_clear()
    return get_config()


def find_c_compiler() -> Optional[str]:
    """Return the full path of the configured C compiler (``CC``, default ``cc``), or None."""
    return shutil.which(get_config().cc)
