"""Copying runs from one store into another (`kbench import`): a machine's SQLite file into the
team's store (SQLite or PostgreSQL), with the runs' environments, cases, results and raw samples.

A run is known by its UUID (``runs.uuid``, schema version 5), not by its id, which differs from
store to store: a run whose UUID the destination already holds is skipped, so importing the same
file twice, or two files that share runs, stores every run once. Each run is copied in one
transaction of the destination (all its results and samples, or nothing). Ids are mapped: the run
and result ids are the destination's own, and ``parent_run`` and ``interleave_group`` point at the
destination's copies of the runs they named (runs are copied in id order, so a parent comes first).
Environments and cases are keyed by content and shared. Named baselines are a machine's own and are
not copied.

A source is opened read-only (it must be a kbench store; it is never written). One of an older
schema is migrated in a copy in memory; runs stored before version 5 get UUIDs derived from their
content there, the same each time, so a second import recognises them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.errors import StoreError

from .backend import Connection
from .database import Store
from .frames import chunks

__all__ = ["ImportedRun", "import_store"]


@dataclass(frozen=True)
class ImportedRun:
    """What :func:`import_store` did with one run of the source.

    Attributes
    ----------
    uuid : str
        The run's UUID (the same in both stores).
    source_id : int
        Its id in the source store.
    dest_id : int
        Its id in the destination (the existing copy's when skipped).
    n_results, n_samples : int
        Results and samples copied (0 when skipped).
    skipped : bool
        The destination already held the run; nothing was copied.
    """

    uuid: str
    source_id: int
    dest_id: int
    n_results: int
    n_samples: int
    skipped: bool


def import_store(dest: Store, source: Store) -> list[ImportedRun]:
    """Copy every run of ``source`` that ``dest`` does not hold yet into ``dest``, in id order.

    Returns
    -------
    list of ImportedRun
        One per run of the source, in its id order.

    Raises
    ------
    StoreError
        A run could not be copied (the runs copied before it stay; the failed one left nothing).
    """
    src = source._reader()
    run_ids = [int(r) for (r,) in src.execute("SELECT id FROM runs ORDER BY id").fetchall()]
    return [_import_run(dest, source, rid) for rid in run_ids]


def _rows(conn: Connection, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    cur = conn.execute(sql, tuple(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _dest_run(dest: Store, source: Store, source_run: int | None) -> int | None:
    """The destination id of the source's run ``source_run`` (None for None)."""
    if source_run is None:
        return None
    row = source._reader().execute("SELECT uuid FROM runs WHERE id = ?", (source_run,)).fetchone()
    found = None if row is None else dest.run_by_uuid(row[0])
    if found is None:
        raise StoreError(f"import: run {source_run} of {source.path} is referenced but was not copied")
    return found


def _insert(conn: Connection, table: str, row: dict[str, Any], *, tail: str = "",
            returning: bool = False) -> Any:
    names = list(row)
    sql = (f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}){tail}")
    values = tuple(row[n] for n in names)
    if returning:
        return conn.insert(sql, values)
    conn.execute(sql, values)
    return None


def _import_run(dest: Store, source: Store, source_id: int) -> ImportedRun:
    src = source._reader()
    (run,) = _rows(src, "SELECT * FROM runs WHERE id = ?", (source_id,))
    run_uuid = run["uuid"]
    existing = dest.run_by_uuid(run_uuid)
    if existing is not None:
        return ImportedRun(run_uuid, source_id, existing, 0, 0, skipped=True)
    results = _rows(src, "SELECT * FROM results WHERE run_id = ? ORDER BY id", (source_id,))
    env_ids = sorted({r["env_id"] for r in results if r["env_id"]})
    envs = []
    for chunk in chunks(env_ids):
        envs += _rows(src, f"SELECT * FROM environments WHERE id IN ({', '.join('?' * len(chunk))})", chunk)
    keys = sorted({r["case_key"] for r in results})
    cases = []
    for chunk in chunks(keys):
        cases += _rows(src, f"SELECT * FROM cases WHERE key IN ({', '.join('?' * len(chunk))})", chunk)
    samples: dict[int, list[tuple]] = {}
    for chunk in chunks([r["id"] for r in results]):
        cur = src.execute("SELECT result_id, idx, value_s, sm_clock_mhz FROM samples WHERE result_id IN"
                          f" ({', '.join('?' * len(chunk))}) ORDER BY result_id, idx", tuple(chunk))
        for rid, idx, value, clock in cur.fetchall():
            samples.setdefault(rid, []).append((idx, value, clock))
    groups = {g: _dest_run(dest, source, g) for g in {r["interleave_group"] for r in results}
              if g is not None and g != source_id}
    parent = _dest_run(dest, source, run["parent_run"])

    db = dest._reader()
    n_samples = 0
    try:
        with dest._transaction() as conn:
            new_run = dict(run)
            del new_run["id"]
            new_run["parent_run"] = parent
            dest_id = _insert(conn, "runs", new_run, returning=True)
            groups[source_id] = dest_id  # a run's results may be grouped with the run itself
            for env in envs:
                _insert(conn, "environments", env, tail=" ON CONFLICT(id) DO NOTHING")
            for case in cases:
                _insert(conn, "cases", case, tail=" ON CONFLICT(key) DO NOTHING")
            for r in results:
                new = dict(r)
                old_id = new.pop("id")
                new["run_id"] = dest_id
                if new["interleave_group"] is not None:
                    new["interleave_group"] = groups[new["interleave_group"]]
                result_id = _insert(conn, "results", new, returning=True)
                rows = [(result_id, idx, value, clock) for idx, value, clock in samples.get(old_id, ())]
                conn.executemany("INSERT INTO samples (result_id, idx, value_s, sm_clock_mhz)"
                                 " VALUES (?, ?, ?, ?)", rows)
                n_samples += len(rows)
    except db.errors as e:
        again = dest.run_by_uuid(run_uuid)
        if again is not None:  # another import stored the same run meanwhile
            return ImportedRun(run_uuid, source_id, again, 0, 0, skipped=True)
        raise StoreError(f"import: could not copy run {source_id} ({run_uuid}) of {source.path} into"
                         f" {dest.path}: {str(e).strip()}") from e
    return ImportedRun(run_uuid, source_id, dest_id, len(results), n_samples, skipped=False)
