"""Harness settings. The only module of the harness that reads environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError


@dataclass(frozen=True)
class Settings:
    db: Path | str  # default result store: a SQLite file, or a postgresql:// URL (kept as text)
    out_dir: Path  # reports and CI outputs
    batch_size: int  # most cases in one batch (batches are cut smaller to balance the workers)


def settings() -> Settings:
    """The settings from the environment (``KBENCH_DB``, ``KBENCH_OUT``, ``KBENCH_BATCH``).

    Raises
    ------
    harness.errors.ConfigError
        ``KBENCH_BATCH`` is not a whole number of at least 1.
    """
    batch = os.environ.get("KBENCH_BATCH", "16")
    try:
        batch_size = int(batch)
    except ValueError:
        batch_size = 0
    if batch_size < 1:
        raise ConfigError(f"KBENCH_BATCH={batch!r}: the batch size must be a whole number of at least 1")
    db = os.environ.get("KBENCH_DB", "kbench.db")
    return Settings(
        db=db if db.lower().startswith(("postgresql://", "postgres://")) else Path(db),
        out_dir=Path(os.environ.get("KBENCH_OUT", "kbench-out")),
        batch_size=batch_size,
    )


#: Environment defaults for the processes that measure (a value already set wins). PoCL, the CPU
#: OpenCL runtime CI times OpenCL kernels on, runs work-groups on a pool of threads, one per core by
#: default; with the timing thread on top, a 2-core machine is oversubscribed and the same kernel's
#: median moved 20-40 % from one run to the next (samples' spread 10-40 %), against 2-5 % with one
#: PoCL thread. So kbench times OpenCL-on-CPU with one PoCL thread unless told otherwise.
RUNTIME_ENV_DEFAULTS = {"POCL_MAX_PTHREAD_COUNT": "1"}


def apply_runtime_defaults() -> None:
    """Set :data:`RUNTIME_ENV_DEFAULTS` where unset; call before the OpenCL runtime starts."""
    for key, value in RUNTIME_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
