"""The result store's schema: the tables of each version and the migrations between them.

The schema is versioned: :data:`SCHEMA_VERSION` and an ordered list :data:`MIGRATIONS` where
``MIGRATIONS[i]`` turns a version-``i`` database into version ``i + 1`` (version 0 is a database
without kbench tables). :func:`migrate` brings an older file forward in one transaction and refuses
a file written by a newer kbench. Migrations add: old rows keep every value they stored (versions 4
and 9 fill new columns of older results from the JSON they carried, version 5 the new ``runs.uuid``
of older runs; version 9 moves those values out of ``results.extra`` into their columns, so that none
is held twice). A read-only command migrates an older file in a copy in memory
(:meth:`harness.store.Store.open`), never the file.

The DDL is written in SQLite's dialect; a PostgreSQL store runs the same statements translated by
:meth:`harness.store.backend.Connection.ddl` (and the one migration SQLite does by rebuilding a
table, version 3, alters the CHECK constraint in place there).

Size: every version's tables and migration live in this one module, in the order they were added,
so that the schema reads from its first version to its last; a released migration never changes.

Schema (version 10)::

    schema_version(version PK, applied_at, kbench_version)       one row per applied migration
    runs(id PK, started_at, ended_at, status, suite_name, suite_path, suite_sha256, git_commit,
         kbench_version, argv JSON, executor, measure_config JSON,
         kind ('run' | 'calibration' | 'remeasure' | 'ab' [v3]), parent_run FK NULL,  [kind: v2]
         regression_threshold NULL, thresholds JSON NULL,                         [v4]
         uuid UNIQUE,                                                              [v5]
         kbench_commit NULL, suite_commit NULL)                                    [v8]
    baselines(name PK, run_id FK, set_at, note)                                   [v2]
    environments(id PK = harness.env.fingerprint_id, json, first_seen)
    cases(key PK, workload, variant, params JSON, knobs JSON, dtype, target, gpu_model, case_json)
    results(id PK, run_id FK, case_key FK, env_id FK NULL, outcome, message, median_s, ci_low_s,
            ci_high_s, n_samples, discarded, gbps, gflops, pct_peak_bw, pct_peak_flops, device,
            worker, mode, stop_reason, build_s, telemetry JSON, extra JSON, case_json, created_at,
            nvcc_calls NULL, side, interleave_group FK NULL,                      [v4]
            phase_{inputs,reference,build,build_wait,check,warmup,measure}_s NULL,  [v9]
            timeline_{build_start,build_end,start,end} NULL, inputs_version NULL,    [v9]
            variant_kind, peak_bw_kind NULL, peak_bw_gbps NULL, peak_flops_kind NULL, [v9]
            tuning_source NULL, tuning_device NULL, tuning_session_id NULL,         [v9]
            tuning_trial_id NULL, tuning_cost_s NULL,                               [v9]
            UNIQUE(run_id, case_key))
            (extra: since version 9 only pairs stored before it that have no column, which kbench
            never wrote itself; "{}" for every result stored since)
    samples(result_id FK, idx, value_s, sm_clock_mhz, PK(result_id, idx))
    tuning_sessions(id PK, uuid UNIQUE, started_at, ended_at, status, suite_name, suite_path,   [v6]
         tuning_key, workload, variant, params JSON, dtype, target, device, gpu_model, tuner,
         n_trial, executor, space JSON, git_commit, kbench_version, argv JSON,
         clock NULL)                                                               [v10]
    tuning_trials(id PK, session_id FK, trial, config_index, knobs JSON, cost_s NULL, costs JSON, [v6]
         error_no, error, gflops NULL, all_cost_s, timestamp, device, gpu_model,
         UNIQUE(session_id, trial))
    best_configs(tuning_key, device, knobs JSON, config_index, cost_s, gflops NULL,             [v6]
         session_id FK, trial_id FK, updated_at, PK(tuning_key, device))
    run_leases(run_id PK FK, holder, host, pid, acquired_at, heartbeat_at, expires_at)          [v7]
"""

from __future__ import annotations

import json
import math
import sqlite3
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from harness import __version__
from harness.errors import StoreError
from harness.model import OUTCOMES

from .backend import Connection, SQLiteConnection, as_connection, retry_busy

__all__ = ["MARKER_COLUMNS", "MIGRATIONS", "NOT_HISTORY", "RUN_KINDS", "SCHEMA_VERSION", "migrate", "now",
           "open_sqlite", "read_version"]


# The outcomes schema version 1 accepts. Frozen here on purpose: a new outcome in
# harness.model.OUTCOMES needs a migration (SQLite rebuilds a table to change a CHECK), and the
# assertion below makes that impossible to forget.
_V1_OUTCOMES = ("ok", "wrong", "timeout", "crashed", "build_error")

_V1_STATEMENTS = (
    """CREATE TABLE schema_version (
        version INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL,
        kbench_version TEXT NOT NULL
    )""",
    """CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
        suite_name TEXT NOT NULL,
        suite_path TEXT,
        suite_sha256 TEXT,
        git_commit TEXT,
        kbench_version TEXT NOT NULL,
        argv TEXT NOT NULL,
        executor TEXT NOT NULL,
        measure_config TEXT NOT NULL
    )""",
    """CREATE TABLE environments (
        id TEXT PRIMARY KEY,
        json TEXT NOT NULL,
        first_seen TEXT NOT NULL
    )""",
    """CREATE TABLE cases (
        key TEXT PRIMARY KEY,
        workload TEXT NOT NULL,
        variant TEXT NOT NULL,
        params TEXT NOT NULL,
        knobs TEXT NOT NULL,
        dtype TEXT NOT NULL,
        target TEXT NOT NULL,
        gpu_model TEXT NOT NULL,
        case_json TEXT NOT NULL
    )""",
    f"""CREATE TABLE results (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        case_key TEXT NOT NULL REFERENCES cases(key),
        env_id TEXT REFERENCES environments(id),
        outcome TEXT NOT NULL CHECK (outcome IN ({", ".join(repr(o) for o in _V1_OUTCOMES)})),
        message TEXT NOT NULL,
        median_s REAL,
        ci_low_s REAL,
        ci_high_s REAL,
        n_samples INTEGER,
        discarded INTEGER,
        gbps REAL,
        gflops REAL,
        pct_peak_bw REAL,
        pct_peak_flops REAL,
        device TEXT NOT NULL,
        worker TEXT NOT NULL,
        mode TEXT,
        stop_reason TEXT,
        build_s REAL,
        telemetry TEXT,
        extra TEXT NOT NULL,
        case_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (run_id, case_key)
    )""",
    """CREATE TABLE samples (
        result_id INTEGER NOT NULL REFERENCES results(id),
        idx INTEGER NOT NULL,
        value_s REAL NOT NULL,
        sm_clock_mhz REAL,
        PRIMARY KEY (result_id, idx)
    ) WITHOUT ROWID""",
    "CREATE INDEX results_by_case_env ON results(case_key, env_id)",
    "CREATE INDEX cases_by_workload ON cases(workload, variant)",
)


def _sql(*statements: str) -> Callable[[Connection], None]:
    """A migration that executes ``statements`` (SQLite-dialect DDL, translated for the store's
    engine) in order, inside the caller's transaction."""

    def migrate(conn: Connection | sqlite3.Connection) -> None:
        conn = as_connection(conn)
        for statement in statements:
            conn.execute(conn.ddl(statement))

    migrate.statements = statements  # type: ignore[attr-defined]
    return migrate


#: ``MIGRATIONS[i]`` migrates a version-i database to version i + 1 (a callable taking the
#: connection; it runs inside the transaction that also records the new version). Append only.
# Version 2: runs get a ``kind`` ("run"; "calibration" for `kbench calibrate`'s runs, which may
# carry an injected slowdown and must never serve as a baseline; "remeasure" for the automatic
# re-measure of AMBIGUOUS cases) and a ``parent_run`` (the run a re-measure belongs to), and named
# baselines (`kbench baseline set NAME RUN`). Old runs read as kind "run".
_V2_STATEMENTS = (
    "ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'run'"
    " CHECK (kind IN ('run', 'calibration', 'remeasure'))",
    "ALTER TABLE runs ADD COLUMN parent_run INTEGER REFERENCES runs(id)",
    """CREATE TABLE baselines (
        name TEXT PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        set_at TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT ''
    )""",
)

#: run kinds (schema version 3): "ab" is a side of `kbench ab` (two source trees timed in one loop)
RUN_KINDS = ("run", "calibration", "remeasure", "ab")

#: kinds that are never a baseline nor part of a case's history
NOT_HISTORY = ("calibration", "ab")


def _v3_run_kind_ab(conn: Connection | sqlite3.Connection) -> None:
    """Version 3: runs.kind also takes "ab" (the sides of `kbench ab`, which, like calibration runs,
    are never a baseline nor history). SQLite cannot widen a CHECK in place, so ``runs`` is rebuilt:
    a new table with the wider CHECK, every row copied as it is (ids kept), the old table dropped and
    the new one renamed. The references to ``runs(id)`` (results, baselines, runs.parent_run) name the
    table, so they point at the new one. :func:`migrate` runs migrations with foreign keys off (as
    SQLite's procedure for rebuilding a table asks) and checks them all before it commits.
    PostgreSQL replaces the constraint in place (it named it ``runs_kind_check``)."""
    conn = as_connection(conn)
    if conn.dialect == "postgresql":
        conn.execute("ALTER TABLE runs DROP CONSTRAINT runs_kind_check, ADD CONSTRAINT runs_kind_check"
                     " CHECK (kind IN ('run', 'calibration', 'remeasure', 'ab'))")
        return
    cols = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
    old_check = "CHECK (kind IN ('run', 'calibration', 'remeasure'))"
    if not sql.startswith("CREATE TABLE runs") or sql.count(old_check) != 1:
        raise StoreError(f"the runs table is not the one schema version 2 made: {sql}")
    # the same table (columns, types, other constraints) but for the wider CHECK
    conn.execute(sql.replace("CREATE TABLE runs", "CREATE TABLE runs_v3", 1)
                 .replace(old_check, "CHECK (kind IN ('run', 'calibration', 'remeasure', 'ab'))"))
    names = ", ".join(cols)
    conn.execute(f"INSERT INTO runs_v3 ({names}) SELECT {names} FROM runs ORDER BY id")
    conn.execute("DROP TABLE runs")
    conn.execute("ALTER TABLE runs_v3 RENAME TO runs")


_V4_STATEMENTS = (
    # the practical thresholds the run was made with (the suite's, and per workload where its suite
    # overrides it, as JSON {workload: threshold}); NULL for runs stored before version 4
    "ALTER TABLE runs ADD COLUMN regression_threshold REAL",
    "ALTER TABLE runs ADD COLUMN thresholds TEXT",
    # nvcc invocations the result's build made; its interleaved side ('' when not interleaved) and the
    # group of results timed in one loop with it (the first side's run; NULL when not interleaved)
    "ALTER TABLE results ADD COLUMN nvcc_calls INTEGER",
    "ALTER TABLE results ADD COLUMN side TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE results ADD COLUMN interleave_group INTEGER REFERENCES runs(id)",
    "CREATE INDEX results_by_interleave_group ON results(interleave_group)",
)


def _v4_typed_results(conn: Connection | sqlite3.Connection) -> None:
    """Version 4: what results carried in their JSON columns gets columns of its own (nvcc calls, the
    interleaved side and its group), and runs keep their practical thresholds. Older results get the
    new columns filled from the JSON they hold (``extra.nvcc_calls``, ``telemetry.interleave_group`` and
    ``telemetry.interleave_side``); nothing they stored changes. Older runs keep NULL thresholds:
    harness.judge then reads their suite file, if it still has the content they were made from."""
    conn = as_connection(conn)
    for statement in _V4_STATEMENTS:
        conn.execute(conn.ddl(statement))
    rows = conn.execute("SELECT id, telemetry, extra FROM results WHERE telemetry LIKE '%interleave_group%'"
                        " OR extra LIKE '%nvcc_calls%'").fetchall()
    for result_id, telemetry, extra in rows:
        tel = _json_object(telemetry)
        calls = _json_object(extra).get("nvcc_calls")
        group = tel.get("interleave_group")
        conn.execute("UPDATE results SET nvcc_calls = ?, interleave_group = ?, side = ? WHERE id = ?",
                     (int(calls) if isinstance(calls, int) else None,
                      int(group) if isinstance(group, int) else None,
                      str(tel.get("interleave_side") or "") if group is not None else "", result_id))


def _json_object(text: str | None) -> dict:
    """A JSON object column's value as a dict ({} for NULL or anything else)."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


#: the namespace of the UUIDs version 5 derives for runs stored before it (uuid5 of their content)
_OLD_RUN_NAMESPACE = uuid.UUID("6f1d3c1e-8a0b-5c43-9e53-3b0c1a7e2d64")


def _v5_run_uuid(conn: Connection | sqlite3.Connection) -> None:
    """Version 5: every run carries a unique id from its creation (``runs.uuid``, a UUID4 in text),
    so that `kbench import` recognises a run it already copied from another store. Older runs get one
    derived from what they stored (id, start time to the microsecond, suite, command line): the same
    on every migration of the same file, so a file read by a read-only command (migrated in a copy in
    memory, its file left as it is) names its runs alike each time it is imported."""
    conn = as_connection(conn)
    conn.execute("ALTER TABLE runs ADD COLUMN uuid TEXT NOT NULL DEFAULT ''")
    rows = conn.execute("SELECT id, started_at, suite_name, argv FROM runs ORDER BY id").fetchall()
    for run_id, started_at, suite_name, argv in rows:
        content = json.dumps([int(run_id), started_at, suite_name, argv])
        conn.execute("UPDATE runs SET uuid = ? WHERE id = ?", (str(uuid.uuid5(_OLD_RUN_NAMESPACE, content)),
                                                               run_id))
    conn.execute("CREATE UNIQUE INDEX runs_by_uuid ON runs(uuid)")


# Version 6: `kbench tune`. A tuning session tunes one tuned case (its Case.tuning_key) on one device
# (a GPU model for cuda, the host's CPU for c and opencl) with one tuner; every measured candidate is
# a trial (its knobs, its cost in seconds or its error number and message, its index in the session);
# best_configs keeps the fastest trial per (tuning key, device) over every session, which `kbench run`
# uses for the case.
_V6_STATEMENTS = (
    """CREATE TABLE tuning_sessions (
        id INTEGER PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
        suite_name TEXT NOT NULL,
        suite_path TEXT,
        tuning_key TEXT NOT NULL,
        workload TEXT NOT NULL,
        variant TEXT NOT NULL,
        params TEXT NOT NULL,
        dtype TEXT NOT NULL,
        target TEXT NOT NULL,
        device TEXT NOT NULL,
        gpu_model TEXT NOT NULL,
        tuner TEXT NOT NULL,
        n_trial INTEGER NOT NULL,
        executor TEXT NOT NULL,
        space TEXT NOT NULL,
        git_commit TEXT,
        kbench_version TEXT NOT NULL,
        argv TEXT NOT NULL
    )""",
    """CREATE TABLE tuning_trials (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES tuning_sessions(id),
        trial INTEGER NOT NULL,
        config_index INTEGER NOT NULL,
        knobs TEXT NOT NULL,
        cost_s REAL,
        costs TEXT NOT NULL,
        error_no INTEGER NOT NULL,
        error TEXT NOT NULL,
        gflops REAL,
        all_cost_s REAL NOT NULL,
        timestamp REAL NOT NULL,
        device TEXT NOT NULL,
        gpu_model TEXT NOT NULL,
        UNIQUE (session_id, trial)
    )""",
    """CREATE TABLE best_configs (
        tuning_key TEXT NOT NULL,
        device TEXT NOT NULL,
        knobs TEXT NOT NULL,
        config_index INTEGER NOT NULL,
        cost_s REAL NOT NULL,
        gflops REAL,
        session_id INTEGER NOT NULL REFERENCES tuning_sessions(id),
        trial_id INTEGER NOT NULL REFERENCES tuning_trials(id),
        updated_at TEXT NOT NULL,
        PRIMARY KEY (tuning_key, device)
    )""",
    "CREATE INDEX tuning_sessions_by_key ON tuning_sessions(tuning_key, device)",
)


# Version 7: the lease of a run. One process at a time writes a run's results (the one that began it,
# or one `kbench run --resume`): it holds the run's row here (holder: a random id per process and
# run; its host and pid; heartbeat_at and expires_at in seconds since the epoch, renewed while it
# works). Another process takes the lease over only when its holder is gone: past expires_at, or a
# pid that no longer lives on this same host. The row goes when the run ends (done, failed,
# interrupted).
_V7_STATEMENTS = (
    """CREATE TABLE run_leases (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        holder TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        acquired_at TEXT NOT NULL,
        heartbeat_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
)


# Version 8: a run keeps the commit of kbench itself and the commit of the repository holding its
# suite file, separately (harness.env.kbench_commit, suite_commit); ``git_commit`` stays the commit
# the caller gave as that of the code under test. Older runs have NULL in both.
_V8_STATEMENTS = (
    "ALTER TABLE runs ADD COLUMN kbench_commit TEXT",
    "ALTER TABLE runs ADD COLUMN suite_commit TEXT",
)


# Version 9: what results carried as free-form pairs in their JSON ``extra`` gets typed columns
# (harness.model.Result's phases, timeline, inputs_version, variant_kind, peaks and tuning): where the
# case's wall time went (seconds per phase), when its build and the case ran (seconds since the epoch),
# how its inputs were drawn, its variant's kind, which bandwidth peak (and its GB/s) and which matmul
# peak its percentages are of, and which stored configuration a tuned case ran (the session and trial
# ids are those of the store the run was made in). NULL where a result has no such value.
_V9_PHASES = ("inputs", "reference", "build", "build_wait", "check", "warmup", "measure")
_V9_TIMELINE = ("build_start", "build_end", "start", "end")
_V9_COLUMNS = (
    *((f"phase_{p}_s", "REAL") for p in _V9_PHASES),
    *((f"timeline_{t}", "REAL") for t in _V9_TIMELINE),
    ("inputs_version", "INTEGER"),
    ("variant_kind", "TEXT NOT NULL DEFAULT ''"),
    ("peak_bw_kind", "TEXT"),
    ("peak_bw_gbps", "REAL"),
    ("peak_flops_kind", "TEXT"),
    ("tuning_source", "TEXT"),
    ("tuning_device", "TEXT"),
    ("tuning_session_id", "INTEGER"),
    ("tuning_trial_id", "INTEGER"),
    ("tuning_cost_s", "REAL"),
)
_V9_STATEMENTS = tuple(f"ALTER TABLE results ADD COLUMN {name} {kind}" for name, kind in _V9_COLUMNS)


def _v9_typed_extra(conn: Connection | sqlite3.Connection) -> None:
    """Version 9: the typed columns of :data:`_V9_COLUMNS`, filled for older results from the pairs
    their ``extra`` JSON held (``phases_s``, ``timeline``, ``inputs_version``, ``variant_kind``,
    ``peaks``, ``tuning``; and ``nvcc_calls``, which version 4 already copied into its column). Each
    value moves out of ``extra`` into its columns: ``extra`` keeps only what has no column (pairs
    kbench never wrote itself, or a value not of the shape kbench wrote, which stays as it was), so
    that no value is held twice. A row whose ``extra`` holds nothing to move is not touched."""
    conn = as_connection(conn)
    for statement in _V9_STATEMENTS:
        conn.execute(conn.ddl(statement))
    last = -1
    while True:  # a thousand rows at a time: a store of millions of results is not read at once
        rows = conn.execute("SELECT id, extra, nvcc_calls FROM results WHERE id > ? AND extra <> '{}'"
                            " ORDER BY id LIMIT 1000", (last,)).fetchall()
        if not rows:
            return
        for result_id, extra, nvcc_calls in rows:
            last = result_id
            try:
                pairs = json.loads(extra)
            except (TypeError, ValueError):
                continue  # not JSON: left as it is
            if not isinstance(pairs, dict):
                continue
            values, left = _v9_values(pairs, nvcc_calls)
            if not values and left == pairs:
                continue
            sets = "".join(f"{name} = ?, " for name in values)
            conn.execute(f"UPDATE results SET {sets}extra = ? WHERE id = ?",
                         (*values.values(), json.dumps(left), result_id))


def _v9_number(v: object, *, positive: bool = False) -> bool:
    """A finite real number (not a bool), non-negative (positive with ``positive``)."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and (v > 0 if positive else v >= 0))


def _v9_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _v9_values(pairs: dict, nvcc_calls: object) -> tuple[dict, dict]:
    """The columns ``pairs`` (a result's ``extra``) fill, and what stays in ``extra``. A pair moves
    only when its value has the shape kbench wrote (the rules harness.model's Phases, Timeline,
    Peaks and TuningRef hold it to, written out here so that this migration never changes)."""
    values: dict = {}
    left = dict(pairs)
    phases = pairs.get("phases_s")
    if (isinstance(phases, dict) and set(phases) <= set(_V9_PHASES)
            and all(_v9_number(v) for v in phases.values())):
        values.update((f"phase_{k}_s", float(v)) for k, v in phases.items())
        del left["phases_s"]
    timeline = pairs.get("timeline")
    if (isinstance(timeline, dict) and set(timeline) == set(_V9_TIMELINE)
            and all(_v9_number(v) for v in timeline.values())
            and timeline["build_start"] <= timeline["build_end"] and timeline["start"] <= timeline["end"]):
        values.update((f"timeline_{k}", float(timeline[k])) for k in _V9_TIMELINE)
        del left["timeline"]
    if _v9_int(pairs.get("inputs_version")):
        values["inputs_version"] = pairs["inputs_version"]
        del left["inputs_version"]
    kind = pairs.get("variant_kind")
    if isinstance(kind, str):
        values["variant_kind"] = kind
        del left["variant_kind"]
    peaks = pairs.get("peaks")
    if isinstance(peaks, dict) and set(peaks) <= {"bandwidth", "bandwidth_gbps", "flops"}:
        bw, gbps, flops = peaks.get("bandwidth"), peaks.get("bandwidth_gbps"), peaks.get("flops")
        gbps_ok = gbps is None or (bw is not None and _v9_number(gbps, positive=True))
        if bw in (None, "read", "copy") and gbps_ok and (flops is None or (isinstance(flops, str) and flops)):
            values.update(peak_bw_kind=bw, peak_bw_gbps=None if gbps is None else float(gbps),
                          peak_flops_kind=flops)
            del left["peaks"]
    tuning = pairs.get("tuning")
    tuning_keys = {"source", "device", "session_id", "trial_id", "tuned_cost_s"}
    if isinstance(tuning, dict) and set(tuning) <= tuning_keys:
        source, device = tuning.get("source"), tuning.get("device", "")
        refs = (tuning.get("session_id"), tuning.get("trial_id"), tuning.get("tuned_cost_s"))
        best = (source == "best" and _v9_int(refs[0]) and _v9_int(refs[1])
                and (refs[2] is None or _v9_number(refs[2])))
        untuned = source == "untuned" and refs == (None, None, None)
        if isinstance(device, str) and (best or untuned):
            values.update(tuning_source=source, tuning_device=device, tuning_session_id=refs[0],
                          tuning_trial_id=refs[1], tuning_cost_s=None if refs[2] is None else float(refs[2]))
            del left["tuning"]
    calls = pairs.get("nvcc_calls")
    if isinstance(calls, int) and not isinstance(calls, bool) and calls >= 0:
        if nvcc_calls is None:
            values["nvcc_calls"] = calls
            del left["nvcc_calls"]
        elif int(nvcc_calls) == calls:  # version 4 copied it: held twice
            del left["nvcc_calls"]
    return values, left


# Version 10: a tuning session keeps the clock its trials were timed with (harness.tune.runner.CLOCKS:
# "harness", the timers and loop of `kbench run`, or "time_evaluator", the runtime's means of
# back-to-back launches). Older sessions have NULL: they did not record it (engine-tuned variants were
# timed with time_evaluator then, CUDA-source and callable variants with the harness's clock).
_V10_STATEMENTS = ("ALTER TABLE tuning_sessions ADD COLUMN clock TEXT",)


MIGRATIONS: list[Callable[[Connection], None]] = [
    _sql(*_V1_STATEMENTS),  # 0 -> 1: the first layout
    _sql(*_V2_STATEMENTS),  # 1 -> 2: run kinds, re-measure parents, named baselines
    _v3_run_kind_ab,  # 2 -> 3: run kind "ab"
    _v4_typed_results,  # 3 -> 4: thresholds of runs; nvcc calls, sides and interleave groups of results
    _v5_run_uuid,  # 4 -> 5: a unique id of each run (kbench import)
    _sql(*_V6_STATEMENTS),  # 5 -> 6: tuning sessions, their trials, the best configuration per device
    _sql(*_V7_STATEMENTS),  # 6 -> 7: the lease of a run (one writer at a time: --resume)
    _sql(*_V8_STATEMENTS),  # 7 -> 8: the commits of kbench and of the suite's repository
    _v9_typed_extra,  # 8 -> 9: typed columns for what results carried in extra (phases, peaks, ...)
    _sql(*_V10_STATEMENTS),  # 9 -> 10: the clock a tuning session measured with
]

SCHEMA_VERSION = 10

assert SCHEMA_VERSION == len(MIGRATIONS), "SCHEMA_VERSION must equal len(MIGRATIONS)"
assert set(_V1_OUTCOMES) == set(OUTCOMES), (
    "harness.model.OUTCOMES changed: add a store migration that widens results.outcome's CHECK")


#: kbench's schema marker: the table ``schema_version`` with these columns (one row per migration)
MARKER_COLUMNS = ("version", "applied_at", "kbench_version")


def read_version(conn: Connection, path: object = None) -> int:
    """The schema version of the database behind ``conn``: 0 for an empty database (no tables at
    all, e.g. a file kbench has just created), else the newest version its schema marker records.

    Raises
    ------
    StoreError
        The database holds tables but not kbench's schema marker (the ``schema_version`` table with
        the columns :data:`MARKER_COLUMNS`): it is somebody else's, and kbench never writes into it.
    """
    if not conn.table_exists("schema_version"):
        others = conn.tables()
        if not others:
            return 0
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise StoreError(f"{path if path is not None else 'the database'} is not a kbench result store "
                         f"(it has tables {shown} but not kbench's schema marker, the schema_version "
                         "table); kbench leaves it as it is: pass a kbench store or a new file as --db")
    if not set(MARKER_COLUMNS) <= set(conn.columns("schema_version")):
        raise StoreError(f"{path if path is not None else 'the database'} is not a kbench result store "
                         "(its schema_version table is not kbench's); kbench leaves it as it is")
    (version,) = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(version or 0)


def migrate(conn: Connection, path: object) -> None:
    """Bring the database to ``len(MIGRATIONS)`` in one transaction, or refuse a newer one."""
    target = len(MIGRATIONS)  # read at call time, so tests can append a fake migration
    version = read_version(conn, path)
    if version > target:
        raise StoreError(
            f"result store {path} has schema version {version}, newer than this kbench"
            f" ({__version__}) supports (version {target}); upgrade kbench or use another --db file")
    if version == target:
        return
    if conn.readonly:
        raise StoreError(f"result store {path} has schema version {version}; this kbench reads version"
                         f" {target}: a command that writes (e.g. `kbench baseline set`, or a run) migrates"
                         " it, read-only commands do not")
    sqlite = conn.dialect == "sqlite"
    # SQLite: foreign keys are off while migrating (a migration may rebuild a referenced table, see
    # _v3_run_kind_ab; the pragma cannot change inside a transaction) and checked before COMMIT.
    if sqlite:
        conn.execute("PRAGMA foreign_keys = OFF")
    try:
        conn.begin()
        try:
            conn.lock_schema()  # PostgreSQL: one migrating process at a time
            version = read_version(conn, path)  # another process may have migrated meanwhile
            while version < target:
                try:
                    MIGRATIONS[version](conn)
                except Exception as e:
                    raise StoreError(f"result store {path}: migrating schema version {version} to"
                                     f" {version + 1} failed: {e}") from e
                version += 1
                conn.execute("INSERT INTO schema_version (version, applied_at, kbench_version)"
                             " VALUES (?, ?, ?)", (version, now(), __version__))
            broken = conn.execute("PRAGMA foreign_key_check").fetchall() if sqlite else []
            if broken:
                raise StoreError(f"result store {path}: migrating to schema version {target} would leave "
                                 f"{len(broken)} broken reference(s), e.g. {broken[0]}; nothing was changed")
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
    finally:
        if sqlite:
            conn.execute("PRAGMA foreign_keys = ON")


def open_sqlite(path: Path, *, create: bool, readonly: bool) -> SQLiteConnection:
    """The connection :meth:`harness.store.Store.open` wraps for the SQLite file ``path``: a missing or
    empty file made a store when ``create`` (never when ``readonly``); somebody else's database
    refused before anything is written (:func:`read_version`); ``readonly``: opened ``mode=ro``, an
    older store migrated in a copy in memory; else ``PRAGMA quick_check`` before the first write
    (a damaged store is refused), WAL on, migrated to the latest version.

    Raises
    ------
    StoreError
        Naming the file and what is wrong with it.
    """
    create = create and not readonly
    parent = path.parent
    if not parent.is_dir():
        raise StoreError(f"cannot open result store {path}: directory {parent} does not exist")
    if path.exists() and not path.is_file():
        raise StoreError(f"cannot open result store {path}: it is not a file")
    fresh = not path.exists() or path.stat().st_size == 0
    if fresh and not create:
        raise StoreError(f"no result store at {path}" + (" (the file is empty)" if path.exists() else ""))
    try:
        conn = SQLiteConnection.connect(path, create, readonly=readonly)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open result store {path}: {e}") from e
    try:
        version = read_version(conn, path)  # refuses somebody else's database before any write
        if readonly:
            if version == 0:
                raise StoreError(f"no result store at {path} (an empty SQLite database)")
            if version < len(MIGRATIONS):
                conn = conn.in_memory_copy()
        elif version > 0:
            conn.quick_check(path)
        if not conn.readonly:
            conn.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            # switching to WAL needs the file to itself for a moment: wait out other writers
            retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        migrate(conn, path)
    except sqlite3.DatabaseError as e:  # e.g. "file is not a database"
        conn.close()
        raise StoreError(f"cannot open result store {path}: {e}") from e
    except BaseException:
        conn.close()
        raise
    return conn


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


