"""The result store: runs, environment fingerprints, cases, results and their raw samples, in one
SQLite file or one PostgreSQL database (the package docstring of :mod:`harness.store` has the
conventions and the schema; :mod:`harness.store.backend` the two engines).

Size: :class:`Store` is the one writer of every table of a run (runs and their lease, cases, results,
samples, baselines), each write one transaction with its checks; the lease's own queries live in
:mod:`harness.store.leases`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import __version__
from harness import env as _env
from harness.errors import StoreError
from harness.model import Case, Result, Timing

from .backend import Connection, PostgresConnection, is_url, redact
from .frames import FrameQueries, chunks
from .leases import LEASE_TTL_S, LeaseQueries, RunLeased
from .schema import RUN_KINDS, migrate, now, open_sqlite, read_version
from .tuning import TuningQueries
from .typed import TYPED_COLUMNS, typed_fields, typed_values

__all__ = ["DEFAULT_DB", "LEASE_TTL_S", "RUN_STATUSES", "DuplicateResult", "PathLike", "RunLeased", "Store",
           "UnknownRun"]

PathLike = str | Path

#: run states: "running" while the driver works, then "done" (every planned case has a result),
#: "failed" (it could not go on) or "interrupted" (a signal); --resume puts it back to "running"
RUN_STATUSES = ("running", "done", "failed", "interrupted")


#: default store file (relative to the current directory)
DEFAULT_DB = "kbench.db"


#: begin_run's commits when not given: found from kbench's checkout and the suite's path
_FIND = object()


class DuplicateResult(StoreError):
    """A result for this (run, case key) is already stored; a resumed run must skip the case."""


class UnknownRun(StoreError):
    """No run with this id in the store."""




_RESULT_COLUMNS = (
    "run_id", "case_key", "env_id", "outcome", "message", "median_s", "ci_low_s", "ci_high_s",
    "n_samples", "discarded", "gbps", "gflops", "pct_peak_bw", "pct_peak_flops", "device", "worker",
    "mode", "stop_reason", "build_s", "telemetry", "extra", "case_json", "created_at",
    "nvcc_calls", "side", "interleave_group", *TYPED_COLUMNS,
)


class Store(FrameQueries, TuningQueries, LeaseQueries):
    """A kbench result database. Open with :meth:`Store.open`; use as a context manager.

    Examples
    --------
    >>> with Store.open("kbench.db") as store:                       # doctest: +SKIP
    ...     run = store.begin_run(suite, sys.argv, "local", MeasureConfig())
    ...     store.record_result(run, result, env=harness.env.fingerprint("cuda"))
    ...     store.finish_run(run, "done")
    """

    def __init__(self, conn: Connection, path: Path | str, *, readonly: bool = False):
        """Use :meth:`Store.open`; this only wraps an already migrated connection."""
        self._conn: Connection = conn
        #: the SQLite file, or the PostgreSQL URL without its password
        self.path = path
        #: opened for a read-only command: every write is refused
        self.readonly = readonly
        #: called with what the store is about to write when another process holds the SQLite file's
        #: write lock and this one waits for it (e.g. to print "waiting for the store lock")
        self.on_lock_wait: Callable[[str], None] | None = None
        #: seconds spent waiting for the write lock so far
        self.lock_wait_s = 0.0

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: PathLike = DEFAULT_DB, *, create: bool = True, readonly: bool = False) -> Store:
        """Open (and migrate) the store at ``path``; create it when missing unless ``create=False``.

        Parameters
        ----------
        path : str or Path
            A SQLite file, or a PostgreSQL database as a URL ``postgresql://user[:password]@host[:port]/db``
            (libpq's other settings, e.g. ``?sslmode=require``, go in the query string). A PostgreSQL
            database must exist; its kbench tables are created (``create`` only concerns files).
        create : bool
            Create a missing (or empty) file as a new store.
        readonly : bool
            For commands that only read (list, show, compare, report, export, import's sources): the
            store must exist, is opened read-only (SQLite ``mode=ro``, a READ ONLY PostgreSQL session)
            and nothing is ever written into it; an older SQLite store is migrated in a copy in memory.

        A database that holds tables but not kbench's schema marker (somebody else's) is refused and
        left as it is (:func:`harness.store.schema.read_version`). Before its first write, a SQLite
        store is checked with ``PRAGMA quick_check``: kbench does not write into a damaged store.

        Raises
        ------
        StoreError
            The parent directory does not exist, the file is missing (``create=False``) or is not
            a SQLite database or not a kbench store, the server cannot be reached or refuses the
            login, psycopg is not installed, the schema is newer than this kbench, the store is
            damaged, or a migration failed.
        """
        if is_url(path):
            return cls._open_postgres(str(path), readonly)
        path = Path(path)
        return cls(open_sqlite(path, create=create, readonly=readonly), path, readonly=readonly)

    @classmethod
    def _open_postgres(cls, url: str, readonly: bool = False) -> Store:
        where = redact(url)
        conn = PostgresConnection.connect(url, readonly=readonly)
        try:
            if readonly and read_version(conn, where) == 0:
                raise StoreError(f"no result store in {where} (the database has no kbench tables)")
            migrate(conn, where)
        except conn.errors as e:
            conn.close()
            raise StoreError(f"cannot open result store {where}: {str(e).strip()}") from e
        except BaseException:
            conn.close()
            raise
        return cls(conn, where, readonly=readonly)

    @property
    def dialect(self) -> str:
        """"sqlite" or "postgresql"."""
        return self._reader().dialect

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The schema version of the open file."""
        return read_version(self._reader())

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def _transaction(self, what: str = "write") -> Iterator[Connection]:
        """BEGIN (IMMEDIATE on SQLite, waiting out other writers) ... COMMIT, rolled back on any
        exception (KeyboardInterrupt too). A wait for another writer is announced to
        :attr:`on_lock_wait` and counted in :attr:`lock_wait_s`."""
        conn = self._reader()
        if self.readonly:
            raise StoreError(f"result store {self.path} was opened read-only: nothing can be written")
        self._begin(conn, what)
        try:
            yield conn
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise

    # -- runs ---------------------------------------------------------------------------------

    def begin_run(self, suite: Any, argv: Sequence[str], executor: str, measure_config: Any,
                  git_commit: str | None = None, *, kind: str = "run", parent_run: int | None = None,
                  kbench_commit: str | None | object = _FIND,
                  suite_commit: str | None | object = _FIND,
                  holder: str | None = None) -> int:
        """Record a new run in state "running" and return its id.

        Parameters
        ----------
        suite
            Any object with ``name`` and (optionally None) ``path`` and ``sha256`` attributes; its
            practical thresholds are stored with the run when it has them (``regression_threshold``
            and ``thresholds``, pairs of workload and threshold: :class:`harness.suite.Suite`), so the
            run is judged with the thresholds it was made with.
        argv : sequence of str
            The command line, stored as JSON.
        executor : str
            "ray", "local", ...
        measure_config
            A :class:`harness.model.MeasureConfig` (or a dict, or None), stored as JSON.
        git_commit : str, optional
            The commit of the code under test (see :func:`git_commit`).
        kind : str
            "run" (default), "calibration" (never used as a baseline) or "remeasure" (the
            automatic re-measure of run ``parent_run``'s AMBIGUOUS cases).
        parent_run : int, optional
            The run a re-measure belongs to.
        kbench_commit, suite_commit : str or None, optional
            The commit of kbench itself and of the repository holding the suite file (schema version
            8); found with :func:`harness.env.kbench_commit` and :func:`harness.env.suite_commit` of
            ``suite.path`` when not given.
        holder : str, optional
            Take the run's lease for this holder (see :meth:`acquire_lease`) in the same transaction.

        The run also gets a new UUID (``get_run(id)["uuid"]``), its identity across stores.
        """
        if kind not in RUN_KINDS:
            raise StoreError(f"begin_run: kind {kind!r} is not one of {', '.join(RUN_KINDS)}")
        name = getattr(suite, "name", None)
        if not name:
            raise StoreError(f"begin_run: suite {suite!r} has no name")
        path = getattr(suite, "path", None)
        mc = measure_config
        if dataclasses.is_dataclass(mc) and not isinstance(mc, type):
            mc = dataclasses.asdict(mc)
        threshold = getattr(suite, "regression_threshold", None)
        overrides = dict(getattr(suite, "thresholds", None) or ())
        if kbench_commit is _FIND:
            kbench_commit = _env.kbench_commit()
        if suite_commit is _FIND:
            suite_commit = _env.suite_commit(path)
        row = (now(), "running", str(name), None if path is None else str(path),
               getattr(suite, "sha256", None), git_commit, __version__,
               _dumps(list(argv), "argv"), str(executor), _dumps(mc or {}, "measure_config"), kind,
               parent_run, _float(threshold),
               None if threshold is None else _dumps(overrides, "thresholds"), str(uuid.uuid4()),
               kbench_commit, suite_commit)
        with self._write("begin a run") as conn:
            if parent_run is not None:
                self._check_run(conn, parent_run)
            run_id = conn.insert(
                "INSERT INTO runs (started_at, status, suite_name, suite_path, suite_sha256,"
                " git_commit, kbench_version, argv, executor, measure_config, kind, parent_run,"
                " regression_threshold, thresholds, uuid, kbench_commit, suite_commit)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            if holder is not None:
                self._take_lease(conn, run_id, holder, LEASE_TTL_S)
            return run_id

    def finish_run(self, run_id: int, status: str, holder: str | None = None) -> None:
        """Mark run ``run_id`` "done", "failed" or "interrupted", stamp its end time and let its lease
        go (``holder``'s; without one, whoever holds it)."""
        if status not in RUN_STATUSES or status == "running":
            raise StoreError(f"finish_run: status {status!r} is not one of done, failed, interrupted")
        with self._write(f"finish run {run_id}") as conn:
            cur = conn.execute("UPDATE runs SET status = ?, ended_at = ? WHERE id = ?",
                               (status, now(), run_id))
            if cur.rowcount == 0:
                raise UnknownRun(f"no run {run_id} in {self.path}")
            if not conn.table_exists("run_leases"):  # a store of an older schema (tests of migrations)
                return
            if holder is None:
                conn.execute("DELETE FROM run_leases WHERE run_id = ?", (run_id,))
            else:
                conn.execute("DELETE FROM run_leases WHERE run_id = ? AND holder = ?", (run_id, holder))

    def resume_run(self, run_id: int, holder: str | None = None, *, retry_failed: bool = False) -> set[str]:
        """Put run ``run_id`` back in state "running" (``--resume``); return its :meth:`done_keys`.

        Parameters
        ----------
        holder : str, optional
            Take the run's lease for this holder first (:meth:`acquire_lease`): a run another live
            process holds is refused (:class:`RunLeased`) and left as it is.
        retry_failed : bool
            Forget the run's ``crashed`` and ``timeout`` results (they are not among the keys
            returned, so those cases run again); by default they stay, as every other result.

        Raises
        ------
        UnknownRun
            No such run.
        RunLeased
            Another live process holds the run.
        """
        with self._write(f"resume run {run_id}") as conn:
            self._check_run(conn, run_id)
            if holder is not None:
                self._take_lease(conn, run_id, holder, LEASE_TTL_S)
            conn.execute("UPDATE runs SET status = 'running', ended_at = NULL WHERE id = ?", (run_id,))
            if retry_failed:
                conn.execute("DELETE FROM samples WHERE result_id IN (SELECT id FROM results WHERE"
                             " run_id = ? AND outcome IN ('crashed', 'timeout'))", (run_id,))
                conn.execute("DELETE FROM results WHERE run_id = ? AND outcome IN ('crashed', 'timeout')",
                             (run_id,))
        return self.done_keys(run_id)

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        """Run ``run_id`` as a dict, or None when there is no such run.

        Keys: the runs columns (``argv`` a list, ``measure_config`` a dict), ``n_results`` and
        ``outcomes`` (outcome -> count).
        """
        runs = self._runs("WHERE id = ?", (run_id,))
        return runs[0] if runs else None

    def list_runs(self, limit: int | None = 20) -> list[dict[str, Any]]:
        """The newest ``limit`` runs (all with None), newest first, as :meth:`get_run` dicts."""
        if limit is None:
            return self._runs("ORDER BY id DESC", ())
        return self._runs("ORDER BY id DESC LIMIT ?", (int(limit),))

    def _runs(self, tail: str, args: tuple) -> list[dict[str, Any]]:
        conn = self._reader()
        cur = conn.execute(f"SELECT * FROM runs {tail}", args)
        names = [d[0] for d in cur.description]
        runs = []
        for row in cur.fetchall():
            run = dict(zip(names, row))
            run["argv"] = json.loads(run["argv"])
            run["measure_config"] = json.loads(run["measure_config"])
            run["thresholds"] = None if run["thresholds"] is None else json.loads(run["thresholds"])
            counts = dict(conn.execute(
                "SELECT outcome, COUNT(*) FROM results WHERE run_id = ? GROUP BY outcome ORDER BY outcome",
                (run["id"],)).fetchall())
            run["outcomes"] = counts
            run["n_results"] = sum(counts.values())
            runs.append(run)
        return runs

    def run_by_uuid(self, run_uuid: str) -> int | None:
        """The id of the run whose UUID is ``run_uuid`` in this store, or None."""
        row = self._reader().execute("SELECT id FROM runs WHERE uuid = ?", (str(run_uuid),)).fetchone()
        return None if row is None else int(row[0])

    def _check_run(self, conn: Connection, run_id: int) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise UnknownRun(f"no run {run_id} in {self.path}")

    # -- named baselines (schema v2) ----------------------------------------------------------

    def set_baseline(self, name: str, run_id: int, note: str = "") -> None:
        """Point baseline ``name`` at run ``run_id`` (replacing where it pointed before).

        Raises
        ------
        StoreError
            The name is empty, the run does not exist (:class:`UnknownRun`), or it is a
            calibration run (its timings may carry an injected slowdown).
        """
        if not name or not name.strip():
            raise StoreError("baseline set: the baseline name is empty")
        with self._write(f"set baseline {name!r}") as conn:
            self._check_run(conn, run_id)
            (kind,) = conn.execute("SELECT kind FROM runs WHERE id = ?", (run_id,)).fetchone()
            if kind == "calibration":
                raise StoreError(f"baseline set: run {run_id} is a calibration run and cannot be a baseline")
            if kind == "ab":
                raise StoreError(f"baseline set: run {run_id} is a side of a kbench ab comparison and "
                                 "cannot be a baseline")
            conn.execute("INSERT INTO baselines (name, run_id, set_at, note) VALUES (?, ?, ?, ?)"
                         " ON CONFLICT(name) DO UPDATE SET run_id = excluded.run_id,"
                         " set_at = excluded.set_at, note = excluded.note",
                         (name, run_id, now(), note))

    def get_baseline(self, name: str) -> dict[str, Any] | None:
        """Baseline ``name`` as {name, run_id, set_at, note}, or None."""
        row = self._reader().execute("SELECT name, run_id, set_at, note FROM baselines WHERE name = ?",
                                     (name,)).fetchone()
        return None if row is None else dict(zip(("name", "run_id", "set_at", "note"), row))

    def list_baselines(self) -> list[dict[str, Any]]:
        """Every named baseline, by name."""
        rows = self._reader().execute("SELECT name, run_id, set_at, note FROM baselines ORDER BY name")
        return [dict(zip(("name", "run_id", "set_at", "note"), r)) for r in rows.fetchall()]

    def delete_baseline(self, name: str) -> bool:
        """Forget baseline ``name`` (the run stays); True when it existed."""
        with self._write(f"delete baseline {name!r}") as conn:
            return conn.execute("DELETE FROM baselines WHERE name = ?", (name,)).rowcount > 0

    def latest_results(self, case_keys: Iterable[str], *, before_run: int,
                       per_key: int = 1) -> list[int]:
        """Result ids of the most recent ``ok`` results of ``case_keys`` in runs older than
        ``before_run`` that are ordinary runs (kind "run" and their re-measures), at most
        ``per_key`` per (case key, environment), newest first. The default baseline ("auto")."""
        ids: list[int] = []
        conn = self._reader()
        for chunk in chunks(list(case_keys)):
            rows = conn.execute(
                "SELECT r.id, r.case_key, r.env_id FROM results r JOIN runs ru ON ru.id = r.run_id"
                f" WHERE r.case_key IN ({', '.join('?' * len(chunk))}) AND r.run_id < ?"
                " AND r.outcome = 'ok' AND ru.kind IN ('run', 'remeasure')"
                " AND COALESCE(ru.parent_run, 0) < ?"
                " ORDER BY r.run_id DESC, r.id DESC", (*chunk, before_run, before_run)).fetchall()
            seen: dict[tuple, int] = {}
            for rid, key, env_id in rows:
                n = seen.get((key, env_id), 0)
                if n < per_key:
                    seen[(key, env_id)] = n + 1
                    ids.append(int(rid))
        return ids

    # -- environments -------------------------------------------------------------------------

    def record_environment(self, fp: dict[str, Any]) -> str:
        """Store fingerprint ``fp`` (harness.env.fingerprint) if new; return its id (idempotent)."""
        with self._write("record an environment") as conn:
            return self._insert_environment(conn, fp)

    def _insert_environment(self, conn: Connection, fp: dict[str, Any]) -> str:
        env_id = _env.fingerprint_id(fp)
        conn.execute("INSERT INTO environments (id, json, first_seen) VALUES (?, ?, ?)"
                     " ON CONFLICT(id) DO NOTHING",
                     (env_id, _dumps(fp, "environment"), now()))
        return env_id

    def get_environment(self, env_id: str) -> dict[str, Any] | None:
        """The fingerprint stored under ``env_id``, or None."""
        row = self._reader().execute("SELECT json FROM environments WHERE id = ?", (env_id,)).fetchone()
        return None if row is None else json.loads(row[0])

    # -- results ------------------------------------------------------------------------------

    def record_result(self, run_id: int, result: Result, env: dict[str, Any] | None = None) -> int:
        """Store ``result`` of run ``run_id`` in one transaction; return the result id.

        The case row (first sighting wins), the environment ``env`` (default: the result's own
        ``environment``, the fingerprint of the worker that measured it), the result row and all its
        raw samples are written together or not at all.

        Raises
        ------
        DuplicateResult
            The run already has a result for ``result.case.key``.
        UnknownRun
            No such run.
        StoreError
            The environment is unknown or disagrees with ``result.env_id``, the timing is
            inconsistent, or the database refused a row (e.g. a NaN sample); nothing was written.
        """
        case = result.case
        key = case.key
        timing = result.timing
        if timing is not None and timing.clocks_mhz and len(timing.clocks_mhz) != len(timing.samples):
            raise StoreError(f"{key}: {len(timing.clocks_mhz)} SM clocks for {len(timing.samples)} samples")
        row = {
            "run_id": run_id,
            "case_key": key,
            "outcome": result.outcome,
            "message": result.message,
            "median_s": _float(timing.median) if timing else None,
            "ci_low_s": _float(timing.ci_low) if timing else None,
            "ci_high_s": _float(timing.ci_high) if timing else None,
            "n_samples": len(timing.samples) if timing else None,
            "discarded": int(timing.discarded) if timing else None,
            "gbps": _float(result.gbps),
            "gflops": _float(result.gflops),
            "pct_peak_bw": _float(result.pct_peak_bw),
            "pct_peak_flops": _float(result.pct_peak_flops),
            "device": result.device,
            "worker": result.worker,
            "mode": timing.mode if timing else None,
            "stop_reason": timing.stop_reason if timing else None,
            "build_s": _float(result.build_s),
            "telemetry": _dumps(dict(timing.telemetry), f"{key}: telemetry") if timing else None,
            "extra": "{}",  # no pairs ride beside the typed columns (schema version 9)
            "case_json": case.to_json(),
            "created_at": now(),
            "nvcc_calls": int(result.nvcc_calls),
            "side": result.side,
            "interleave_group": result.interleave_group,
            **typed_values(result),
        }
        if env is None:
            env = result.environment
        db = self._reader()
        try:
            with self._transaction(f"record {key}") as conn:
                self._check_run(conn, run_id)
                row["env_id"] = self._resolve_env(conn, result, env)
                if conn.execute("SELECT 1 FROM results WHERE run_id = ? AND case_key = ?",
                                (run_id, key)).fetchone() is not None:
                    raise DuplicateResult(f"run {run_id} already has a result for {key}")
                conn.execute(
                    "INSERT INTO cases (key, workload, variant, params, knobs, dtype, target, gpu_model,"
                    " case_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
                    (key, case.workload, case.variant, _dumps(case.param_dict, f"{key}: params"),
                     _dumps(case.knob_dict, f"{key}: knobs"), case.dtype, case.target,
                     case.gpu_model, case.to_json()))
                result_id = conn.insert(
                    f"INSERT INTO results ({', '.join(_RESULT_COLUMNS)})"
                    f" VALUES ({', '.join('?' * len(_RESULT_COLUMNS))})",
                    tuple(row[c] for c in _RESULT_COLUMNS))
                if timing is not None:
                    self._insert_samples(conn, result_id, timing)
                return result_id
        except db.integrity_errors as e:
            if db.is_unique_violation(e, "results.run_id", "results.case_key"):  # a concurrent writer won
                raise DuplicateResult(f"run {run_id} already has a result for {key}") from e
            raise StoreError(f"could not record {key} in run {run_id} ({self.path}): {e}") from e
        except db.errors as e:
            raise StoreError(f"could not record {key} in run {run_id} ({self.path}): {e}") from e

    def _resolve_env(self, conn: Connection, result: Result,
                     env: dict[str, Any] | None) -> str | None:
        if env is not None:
            env_id = self._insert_environment(conn, env)
            if result.env_id and result.env_id != env_id:
                raise StoreError(f"{result.case.key}: result.env_id {result.env_id} does not match the"
                                 f" fingerprint passed ({env_id})")
            return env_id
        if not result.env_id:
            return None
        if conn.execute("SELECT 1 FROM environments WHERE id = ?", (result.env_id,)).fetchone() is None:
            raise StoreError(f"{result.case.key}: environment {result.env_id} is not in {self.path};"
                             " pass env= or call record_environment first")
        return result.env_id

    def _insert_samples(self, conn: Connection, result_id: int, timing: Timing) -> None:
        """Insert the raw samples of one result (runs inside record_result's transaction)."""
        clocks: Sequence[float | None] = timing.clocks_mhz or (None,) * len(timing.samples)
        conn.executemany(
            "INSERT INTO samples (result_id, idx, value_s, sm_clock_mhz) VALUES (?, ?, ?, ?)",
            ((result_id, i, _float(v), _float(c)) for i, (v, c) in enumerate(zip(timing.samples, clocks))))

    def done_keys(self, run_id: int) -> set[str]:
        """The case keys run ``run_id`` already has a result for (any outcome)."""
        conn = self._reader()
        self._check_run(conn, run_id)
        return {k for (k,) in conn.execute("SELECT case_key FROM results WHERE run_id = ?", (run_id,))}

    def get_results(self, run_id: int) -> list[Result]:
        """The results of run ``run_id`` as :class:`harness.model.Result` objects (in insert order).

        Samples, clocks, telemetry and the typed columns (phases, timeline, peaks, tuning ...) come
        back as stored; JSON turns tuples inside telemetry values into lists. ``environment`` is the
        stored fingerprint of ``env_id``.
        """
        conn = self._reader()
        self._check_run(conn, run_id)
        cur = conn.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run_id,))
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
        samples = self._samples_by_result([r["id"] for r in rows if r["n_samples"] is not None])
        environments = {e: self.get_environment(e) for e in {r["env_id"] for r in rows} if e}
        out = []
        for r in rows:
            timing = None
            if r["n_samples"] is not None:
                values, clocks = samples.get(r["id"], ((), ()))
                timing = Timing(
                    samples=tuple(values),
                    discarded=r["discarded"],
                    clocks_mhz=() if all(c is None for c in clocks) else
                    tuple(math.nan if c is None else c for c in clocks),
                    median=r["median_s"], ci_low=r["ci_low_s"], ci_high=r["ci_high_s"],
                    mode=r["mode"], stop_reason=r["stop_reason"],
                    telemetry=tuple(json.loads(r["telemetry"]).items()),
                )
            out.append(Result(
                case=Case.from_json(r["case_json"]), outcome=r["outcome"], message=r["message"],
                timing=timing, gbps=r["gbps"], gflops=r["gflops"], pct_peak_bw=r["pct_peak_bw"],
                pct_peak_flops=r["pct_peak_flops"], device=r["device"], env_id=r["env_id"] or "",
                worker=r["worker"], build_s=r["build_s"], nvcc_calls=r["nvcc_calls"] or 0,
                environment=environments.get(r["env_id"]), side=r["side"],
                interleave_group=r["interleave_group"], **typed_fields(r),
            ))
        return out

    # -- helpers ------------------------------------------------------------------------------

    def _reader(self) -> Connection:
        if self._conn is None:
            raise StoreError(f"result store {self.path} is closed")
        return self._conn

    @contextmanager
    def _write(self, what: str) -> Iterator[Connection]:
        """A transaction whose database errors become StoreError naming ``what`` and the store."""
        db = self._reader()
        try:
            with self._transaction(what) as conn:
                yield conn
        except db.errors as e:
            raise StoreError(f"could not {what} in {self.path}: {e}") from e



def _float(x: Any) -> float | None:
    return None if x is None else float(x)


def _json_default(obj: Any) -> Any:
    item = getattr(obj, "item", None)  # numpy scalars
    if callable(item):
        return item()
    tolist = getattr(obj, "tolist", None)  # numpy arrays
    if callable(tolist):
        return tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _dumps(obj: Any, what: str) -> str:
    try:
        return json.dumps(obj, default=_json_default)
    except (TypeError, ValueError) as e:
        raise StoreError(f"{what}: cannot store as JSON: {e}") from e


