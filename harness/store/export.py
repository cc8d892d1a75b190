"""Results out of the store: as a pandas DataFrame (:func:`load_results`) or a CSV/Parquet file
(:func:`export`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import StoreError

from .database import DEFAULT_DB, PathLike, Store

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["export", "load_results"]


def load_results(db_path: PathLike = DEFAULT_DB, run_id: int | Iterable[int] | None = None,
                 **filters: Any) -> pd.DataFrame:
    """The results stored in ``db_path`` as a pandas DataFrame (see :meth:`Store.results_frame`).

    Parameters
    ----------
    db_path : path
        An existing store (it is not created).
    run_id : int or iterable of int, optional
        Only these runs; default every run.
    **filters
        ``workload``, ``variant``, ``dtype``, ``target``, ``gpu_model``, ``outcome``,
        ``case_key``, ``env_id``, ``suite_name`` (a value or a list), ``with_samples``.
    """
    with Store.open(db_path, readonly=True) as store:
        return store.results_frame(run_id, **filters)


def export(db_path: PathLike, out_path: PathLike, run_id: int | Iterable[int] | None = None,
           samples: bool = False) -> int:
    """Write the results of ``db_path`` (one run, some runs or all) to ``out_path``.

    The format follows the suffix: ``.csv`` or ``.parquet`` (needs pyarrow: ``pip install
    kbench[parquet]``). With ``samples=True`` the raw samples are added as list columns (JSON
    text in CSV). Returns the number of rows written.
    """
    out = Path(out_path)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise StoreError(f"export: cannot write {out}: use a .csv or .parquet file name")
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401  (only its presence is checked here)
        except ImportError as e:
            raise StoreError(f"export: writing {out} needs pyarrow; install it with"
                             " `pip install 'kbench[parquet]'` (or `pip install pyarrow`)") from e
    if not out.parent.is_dir():
        raise StoreError(f"export: cannot write {out}: directory {out.parent} does not exist")
    frame = load_results(db_path, run_id, with_samples=samples)
    if suffix == ".csv":
        if samples:
            for col in ("samples", "sm_clocks_mhz"):
                frame[col] = [json.dumps(v) for v in frame[col]]
        frame.to_csv(out, index=False)
    else:
        frame.to_parquet(out, index=False)
    return len(frame)


