"""The result store: runs, environment fingerprints, cases, results and their raw samples.

One SQLite file (default ``./kbench.db``, the CLI's ``--db``) keeps a machine's history; a team keeps
theirs in one PostgreSQL database (``--db postgresql://user@host:port/db``, or ``KBENCH_DB``), the
same schema and queries behind the same :class:`Store` API (:mod:`~harness.store.backend`), and
`kbench import` copies the runs of machine files into it (:mod:`~harness.store.importing`; each run
carries a UUID from its creation, so a run is stored once however often it is imported).
Conventions:

- The schema is versioned (:mod:`harness.store.schema`): opening an older file migrates it in one
  transaction; a file written by a newer kbench is refused with :class:`StoreError`. Migrations
  add: old rows keep every value they stored (version 9 moves what results carried in their JSON
  ``extra`` into typed columns, :mod:`~harness.store.typed`).
- Every result is written in ONE transaction (case row, result row, all samples), so a crash or a
  kill leaves either the whole result or none of it. ``UNIQUE(run_id, case_key)`` guarantees a
  resumed run never stores a case twice (:class:`DuplicateResult`); the case key includes the GPU
  model, so one run may hold the same workload on several GPU generations.
- One process at a time writes a run: the one that began it, or one ``--resume`` (the run's lease,
  schema version 7: :meth:`Store.acquire_lease`, :class:`RunLeased`), taken over only when its
  holder is gone (its heartbeat expired, or its process on this host no longer exists).
- SQLite: WAL journal (readers do not block the writer) and foreign keys on; a writer waits for a
  busy file (busy timeout, then ``BEGIN IMMEDIATE`` retried), so several processes may write at once.
  PostgreSQL: several writers at once by design; migrations hold an advisory lock.

Reading back: :meth:`Store.results_frame` / :func:`load_results` give one pandas row per result
with its case, run and environment (``env_*``) columns; :func:`export` writes CSV or Parquet.

Modules: :mod:`~harness.store.schema` (tables, versions, migrations), :mod:`~harness.store.backend`
(the SQLite and PostgreSQL connections), :mod:`~harness.store.database` (:class:`Store`),
:mod:`~harness.store.leases` (one writer of a run at a time; the announced wait for a SQLite lock),
:mod:`~harness.store.importing` (runs copied between stores), :mod:`~harness.store.export` (frames and
files out), :mod:`~harness.store.tuning` (`kbench tune`'s sessions, trials and best configurations),
:mod:`~harness.store.typed` (a result's typed columns: phases, timeline, peaks, tuning, ...).

The tables of each schema version are listed in :mod:`harness.store.schema`.
"""

from harness.errors import StoreError
from harness.store.database import (
    DEFAULT_DB,
    LEASE_TTL_S,
    RUN_STATUSES,
    DuplicateResult,
    RunLeased,
    Store,
    UnknownRun,
)
from harness.store.export import export, load_results
from harness.store.importing import ImportedRun, import_store
from harness.store.schema import MIGRATIONS, NOT_HISTORY, RUN_KINDS, SCHEMA_VERSION
from harness.store.tuning import cpu_device, in_space

__all__ = [
    "DEFAULT_DB", "LEASE_TTL_S", "MIGRATIONS", "NOT_HISTORY", "RUN_KINDS", "RUN_STATUSES", "SCHEMA_VERSION",
    "DuplicateResult", "ImportedRun", "RunLeased", "Store", "StoreError", "UnknownRun", "cpu_device",
    "export",
    "import_store", "in_space", "load_results",
]
