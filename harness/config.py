"""Harness settings. The only module of the harness that reads environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    db: Path  # default result store
    out_dir: Path  # reports and CI outputs
    batch_size: int  # cases per Ray task (a GPU task starts a fresh process: batch many)


def settings() -> Settings:
    return Settings(
        db=Path(os.environ.get("KBENCH_DB", "kbench.db")),
        out_dir=Path(os.environ.get("KBENCH_OUT", "kbench-out")),
        batch_size=int(os.environ.get("KBENCH_BATCH", "16")),
    )
