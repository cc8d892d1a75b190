"""Reading results back as pandas frames: :class:`FrameQueries`, the part of
:class:`harness.store.database.Store` that selects results (by run, case, workload, environment ...)
joined with their case, run and environment, and their raw samples."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from harness import env as _env

from .backend import Connection
from .typed import FLOAT_COLUMNS, INTEGER_COLUMNS, TYPED_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FrameQueries", "chunks"]

# frame columns: (SQL expression, column name); env_* columns are appended from the env JSON
_FRAME_COLUMNS = (
    ("r.id", "result_id"),
    ("r.run_id", "run_id"),
    ("ru.started_at", "run_started_at"),
    ("ru.suite_name", "suite_name"),
    ("ru.git_commit", "git_commit"),
    ("ru.kbench_version", "kbench_version"),
    ("ru.kind", "run_kind"),
    ("r.case_key", "case_key"),
    ("c.workload", "workload"),
    ("c.variant", "variant"),
    ("c.params", "params"),
    ("c.knobs", "knobs"),
    ("c.dtype", "dtype"),
    ("c.target", "target"),
    ("c.gpu_model", "gpu_model"),
    ("r.outcome", "outcome"),
    ("r.message", "message"),
    ("r.median_s", "median_s"),
    ("r.ci_low_s", "ci_low_s"),
    ("r.ci_high_s", "ci_high_s"),
    ("r.n_samples", "n_samples"),
    ("r.discarded", "discarded"),
    ("r.gbps", "gbps"),
    ("r.gflops", "gflops"),
    ("r.pct_peak_bw", "pct_peak_bw"),
    ("r.pct_peak_flops", "pct_peak_flops"),
    ("r.device", "device"),
    ("r.worker", "worker"),
    ("r.mode", "mode"),
    ("r.stop_reason", "stop_reason"),
    ("r.build_s", "build_s"),
    ("r.nvcc_calls", "nvcc_calls"),
    ("r.side", "side"),
    ("r.interleave_group", "interleave_group"),
    ("r.env_id", "env_id"),
    ("r.telemetry", "telemetry"),
    *((f"r.{name}", name) for name in TYPED_COLUMNS),
    ("r.case_json", "case_json"),
    ("r.created_at", "created_at"),
    ("ru.measure_config", "run_min_samples"),  # the JSON, read as its min_samples (NA when absent)
)
_FLOAT_COLUMNS = ("median_s", "ci_low_s", "ci_high_s", "gbps", "gflops", "pct_peak_bw",
                  "pct_peak_flops", "build_s", *FLOAT_COLUMNS)
# nullable integers (NULL when nothing was timed, when not interleaved, or stored before schema 4)
_COUNT_COLUMNS = ("n_samples", "discarded", "nvcc_calls", "interleave_group", "run_min_samples",
                  *INTEGER_COLUMNS)

# results_frame filters: keyword -> SQL column
_FILTERS = {
    "run_ids": "r.run_id",
    "workload": "c.workload",
    "variant": "c.variant",
    "dtype": "c.dtype",
    "target": "c.target",
    "gpu_model": "c.gpu_model",
    "outcome": "r.outcome",
    "case_key": "r.case_key",
    "env_id": "r.env_id",
    "suite_name": "ru.suite_name",
    "result_ids": "r.id",
}

_CHUNK = 500  # ids per "IN (...)" (well under SQLite's bound-parameter limit)



class FrameQueries:
    """Frame queries over a store's connection (mixed into :class:`harness.store.database.Store`,
    which supplies ``_reader`` and ``_check_run``)."""

    def _reader(self) -> Connection:  # pragma: no cover - supplied by Store
        raise NotImplementedError

    def _check_run(self, conn: Connection, run_id: int) -> None:  # pragma: no cover - Store's
        raise NotImplementedError

    def _samples_by_result(self, result_ids: Sequence[int]) -> dict[int, tuple]:
        """result id -> (values, clocks), each in sample order."""
        out: dict[int, tuple] = {}
        conn = self._reader()
        for chunk in chunks(result_ids):
            cur = conn.execute(
                f"SELECT result_id, value_s, sm_clock_mhz FROM samples WHERE result_id IN"
                f" ({', '.join('?' * len(chunk))}) ORDER BY result_id, idx", tuple(chunk))
            for rid, value, clock in cur:
                values, clocks = out.setdefault(rid, ([], []))
                values.append(value)
                clocks.append(clock)
        return out

    # -- frames -------------------------------------------------------------------------------

    def results_frame(self, run_ids: int | Iterable[int] | None = None, *,
                      workload: Any = None, variant: Any = None, dtype: Any = None, target: Any = None,
                      gpu_model: Any = None, outcome: Any = None, case_key: Any = None,
                      env_id: Any = None, suite_name: Any = None, result_ids: Any = None,
                      with_samples: bool = False) -> pd.DataFrame:
        """One row per stored result, with its run, case and environment columns.

        Parameters
        ----------
        run_ids : int or iterable of int, optional
            Only these runs (each must exist, else :class:`UnknownRun`); default all runs.
        workload, variant, dtype, target, gpu_model, outcome, case_key, env_id, suite_name, result_ids
            Optional filters: a value or an iterable of accepted values.
        with_samples : bool
            Add ``samples`` (list of seconds) and ``sm_clocks_mhz`` (list, None where unknown)
            columns.

        Returns
        -------
        pandas.DataFrame
            Columns: result_id, run_id, run_started_at, suite_name, git_commit, kbench_version, run_kind,
            case_key, workload, variant, params, knobs (JSON text), dtype, target, gpu_model,
            outcome, message, median_s, ci_low_s, ci_high_s, n_samples, discarded, gbps, gflops,
            pct_peak_bw, pct_peak_flops, device, worker, mode, stop_reason, build_s, env_id,
            telemetry, the typed columns of :mod:`harness.store.typed` (variant_kind,
            inputs_version, peak_bw_kind, peak_bw_gbps, peak_flops_kind, tuning_source,
            tuning_device, tuning_session_id, tuning_trial_id, tuning_cost_s, phase_<phase>_s,
            timeline_<time>), case_json, created_at, run_min_samples (the run's
            ``MeasureConfig.min_samples``; NA when it stored none), then ``env_<field>`` for every field of
            harness.env.FIELDS and any other field a stored fingerprint has (None where no
            fingerprint was stored). Ordered by run, then by
            insertion.
        """
        import pandas as pd

        conn = self._reader()
        filters = {"run_ids": run_ids, "workload": workload, "variant": variant, "dtype": dtype,
                   "target": target, "gpu_model": gpu_model, "outcome": outcome, "case_key": case_key,
                   "env_id": env_id, "suite_name": suite_name, "result_ids": result_ids}
        if run_ids is not None:
            for rid in _as_list(run_ids):
                self._check_run(conn, rid)
        where, args = _where(filters)
        select = ", ".join(f"{expr} AS {name}" for expr, name in _FRAME_COLUMNS)
        base = (" FROM results r JOIN cases c ON c.key = r.case_key JOIN runs ru ON ru.id = r.run_id"
                " LEFT JOIN environments e ON e.id = r.env_id")
        cur = conn.execute(f"SELECT {select}, e.json AS env_json{base}{where} ORDER BY r.run_id, r.id",
                           args)
        rows = cur.fetchall()
        names = [name for _, name in _FRAME_COLUMNS]
        records = []
        env_fields = list(_env.FIELDS)  # then fields of other fingerprint versions, as met
        for row in rows:
            rec = dict(zip(names, row[:-1]))
            rec["run_min_samples"] = _min_samples(rec["run_min_samples"])
            fp = json.loads(row[-1]) if row[-1] is not None else {}
            env_fields += [f for f in fp if f not in env_fields]
            rec.update((f"env_{f}", v) for f, v in fp.items())
            records.append(rec)
        env_cols = [f"env_{f}" for f in env_fields]
        frame = pd.DataFrame.from_records(records, columns=names + env_cols)
        for col in _FLOAT_COLUMNS:
            frame[col] = frame[col].astype("float64")
        for col in _COUNT_COLUMNS:
            frame[col] = frame[col].astype("Int64")
        frame["result_id"] = frame["result_id"].astype("int64")
        frame["run_id"] = frame["run_id"].astype("int64")
        if with_samples:
            samples = self._samples_by_result(frame["result_id"].tolist())
            frame["samples"] = [list(samples.get(r, ((), ()))[0]) for r in frame["result_id"]]
            frame["sm_clocks_mhz"] = [list(samples.get(r, ((), ()))[1]) for r in frame["result_id"]]
        return frame

    def samples_frame(self, result_ids: Iterable[int]) -> pd.DataFrame:
        """The raw samples of ``result_ids``: columns result_id, idx, value_s, sm_clock_mhz."""
        import pandas as pd

        rows: list[tuple] = []
        conn = self._reader()
        for chunk in chunks(list(result_ids)):
            rows += conn.execute(
                f"SELECT result_id, idx, value_s, sm_clock_mhz FROM samples WHERE result_id IN"
                f" ({', '.join('?' * len(chunk))}) ORDER BY result_id, idx", tuple(chunk)).fetchall()
        frame = pd.DataFrame.from_records(rows, columns=["result_id", "idx", "value_s", "sm_clock_mhz"])
        return frame.astype({"result_id": "int64", "idx": "int64", "value_s": "float64",
                             "sm_clock_mhz": "float64"})


def _min_samples(measure_config: str | None) -> int | None:
    """The ``min_samples`` of a run's stored MeasureConfig JSON, or None."""
    try:
        value = json.loads(measure_config).get("min_samples") if measure_config else None
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def _where(filters: dict[str, Any]) -> tuple:
    clauses, args = [], []
    for name, value in filters.items():
        if value is None:
            continue
        values = _as_list(value)
        clauses.append(f"{_FILTERS[name]} IN ({', '.join('?' * len(values))})")
        args += values
    return ((" WHERE " + " AND ".join(clauses)) if clauses else ""), tuple(args)


def chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


