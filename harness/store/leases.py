"""The lease of a run (schema version 7): one process at a time writes a run's results, the one that
began it or one ``kbench run --resume`` (docs/ARCHITECTURE.md, "A run's lifecycle").

A lease is a row of ``run_leases``: its holder (a random id per process and run), the holder's host
and pid, and its heartbeat and expiry in seconds since the epoch. harness.run renews it from a
heartbeat thread while the run goes on and lets it go when the run ends. Another process takes it
over only when its holder is gone: the lease expired (no heartbeat for :data:`LEASE_TTL_S`), or the
holder ran on this same host and its process no longer exists (killed, crashed). Works alike on
SQLite (the write lock orders two takers) and PostgreSQL (the primary key, and an UPDATE that names
the old holder, let only one of two racing takers win).

A process that waits for another's write lock on a SQLite store says so first (``Store.on_lock_wait``),
so that the wait is not taken for a slow step of the run.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from contextlib import AbstractContextManager
from typing import Any

from harness.errors import StoreError

from .backend import Connection
from .schema import now

__all__ = ["LEASE_TTL_S", "LeaseQueries", "RunLeased"]

#: how long a run's lease lasts past its holder's last heartbeat (seconds; harness.run renews it)
LEASE_TTL_S = 60.0

#: how long a writer waits for a busy SQLite store before it says that it waits (seconds)
LOCK_GRACE_S = 0.5


class RunLeased(StoreError):
    """Another live process holds the run's lease (it is running or resuming it)."""


class LeaseQueries:
    """The lease methods of :class:`harness.store.Store` (a mixin: it uses the store's ``_write``,
    ``_reader``, ``_check_run`` and ``path``)."""

    path: Any
    on_lock_wait: Any
    lock_wait_s: float

    def _reader(self) -> Connection:  # pragma: no cover - supplied by Store
        raise NotImplementedError

    def _write(self, what: str) -> AbstractContextManager[Connection]:  # pragma: no cover - Store's
        raise NotImplementedError

    def _check_run(self, conn: Connection, run_id: int) -> None:  # pragma: no cover - Store's
        raise NotImplementedError

    def _begin(self, conn: Connection, what: str) -> None:
        """BEGIN a write transaction; on SQLite, when another process holds the write lock, tell
        ``on_lock_wait`` first and count the wait in ``lock_wait_s`` (Store's attributes)."""
        raw = getattr(conn, "raw", None)
        if conn.dialect != "sqlite" or self.on_lock_wait is None or not isinstance(raw, sqlite3.Connection):
            conn.begin()
            return
        # a short try first (a write of a moment, such as this process's own lease heartbeat, is not
        # worth a line); still busy means another writer holds the file, which the user should hear
        # about before the wait (else it reads as a slow step of the run)
        (timeout_ms,) = raw.execute("PRAGMA busy_timeout").fetchone()
        t0 = time.monotonic()
        raw.execute(f"PRAGMA busy_timeout = {int(LOCK_GRACE_S * 1000)}")
        try:
            raw.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
        finally:
            raw.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
        self.on_lock_wait(what)
        try:
            conn.begin()
        finally:
            self.lock_wait_s += time.monotonic() - t0

    def acquire_lease(self, run_id: int, holder: str, ttl_s: float = LEASE_TTL_S) -> None:
        """Take run ``run_id``'s lease for ``holder`` (this process: its host and pid are stored), or
        renew it when ``holder`` has it already.

        A lease another holder has is taken over only when that holder is gone: its lease expired
        (no heartbeat for ``ttl_s``), or it ran on this host and its process no longer exists.

        Raises
        ------
        RunLeased
            Another live process holds the run (the message names its host, pid and last heartbeat).
        UnknownRun
            No such run.
        """
        with self._write(f"take the lease of run {run_id}") as conn:
            self._check_run(conn, run_id)
            self._take_lease(conn, run_id, holder, ttl_s)

    def renew_lease(self, run_id: int, holder: str, ttl_s: float = LEASE_TTL_S) -> bool:
        """Push the expiry of ``holder``'s lease of run ``run_id`` on by ``ttl_s`` (a heartbeat);
        False when ``holder`` no longer holds it (it expired and another process took it over)."""
        t = time.time()
        with self._write(f"renew the lease of run {run_id}") as conn:
            cur = conn.execute("UPDATE run_leases SET heartbeat_at = ?, expires_at = ? WHERE run_id = ?"
                               " AND holder = ?", (t, t + ttl_s, run_id, holder))
            return cur.rowcount > 0

    def release_lease(self, run_id: int, holder: str) -> None:
        """Let ``holder``'s lease of run ``run_id`` go (nothing when it does not hold it)."""
        with self._write(f"release the lease of run {run_id}") as conn:
            conn.execute("DELETE FROM run_leases WHERE run_id = ? AND holder = ?", (run_id, holder))

    def get_lease(self, run_id: int) -> dict[str, Any] | None:
        """Run ``run_id``'s lease as {run_id, holder, host, pid, acquired_at, heartbeat_at, expires_at},
        or None when nobody holds it."""
        cur = self._reader().execute("SELECT run_id, holder, host, pid, acquired_at, heartbeat_at, expires_at"
                                     " FROM run_leases WHERE run_id = ?", (run_id,))
        row = cur.fetchone()
        return None if row is None else dict(zip(("run_id", "holder", "host", "pid", "acquired_at",
                                                  "heartbeat_at", "expires_at"), row))

    def _take_lease(self, conn: Connection, run_id: int, holder: str, ttl_s: float) -> None:
        """Inside a write transaction: insert, renew or take over run ``run_id``'s lease for
        ``holder``, or raise :class:`RunLeased`. Two processes racing for one lease: SQLite's write
        lock orders them; on PostgreSQL the second INSERT breaks the primary key, and the second
        take-over finds the row's holder changed (UPDATE ... WHERE holder = the old one)."""
        t = time.time()
        host, pid = socket.gethostname(), os.getpid()
        row = conn.execute("SELECT holder, host, pid, heartbeat_at, expires_at FROM run_leases"
                           " WHERE run_id = ?", (run_id,)).fetchone()
        mine = (holder, host, pid, now(), t, t + ttl_s)
        if row is None:
            try:
                conn.execute("INSERT INTO run_leases (holder, host, pid, acquired_at, heartbeat_at,"
                             " expires_at, run_id) VALUES (?, ?, ?, ?, ?, ?, ?)", (*mine, run_id))
            except conn.integrity_errors as e:
                raise RunLeased(f"run {run_id} in {self.path} was taken by another process a moment ago; "
                                "one process at a time may run or resume a run") from e
            return
        other, other_host, other_pid, heartbeat, expires = row
        if other != holder and not _holder_gone(other_host, int(other_pid), float(expires), t):
            raise RunLeased(
                f"run {run_id} in {self.path} is being run by another process (host {other_host}, pid "
                f"{other_pid}, last heartbeat {max(0.0, t - float(heartbeat)):.0f} s ago); one process at a "
                f"time may run or resume a run: wait for it to end, or stop it (its lease expires "
                f"{ttl_s:g} s after its last heartbeat)")
        cur = conn.execute("UPDATE run_leases SET holder = ?, host = ?, pid = ?, acquired_at = ?,"
                           " heartbeat_at = ?, expires_at = ? WHERE run_id = ? AND holder = ?",
                           (*mine, run_id, other))
        if cur.rowcount == 0:
            raise RunLeased(f"run {run_id} in {self.path} was taken by another process a moment ago; "
                            "one process at a time may run or resume a run")


def _holder_gone(host: str, pid: int, expires_at: float, t: float) -> bool:
    """Whether a lease's holder is gone: its lease expired, or its process on this host is no more
    (or a zombie: killed, its parent not having reaped it yet)."""
    if expires_at < t:
        return True
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
