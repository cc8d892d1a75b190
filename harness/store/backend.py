"""The two database engines behind :class:`harness.store.Store`: SQLite (a file, the default) and
PostgreSQL (a server, ``postgresql://user@host:port/db``, through psycopg 3).

The store keeps ONE set of queries, written in SQLite's dialect with ``?`` placeholders; a
:class:`Connection` runs them on its engine. The PostgreSQL one turns ``?`` into ``%s`` (and a
literal ``%`` into ``%%``), binds NaN as NULL (as SQLite does) and translates the schema's DDL
(:meth:`Connection.ddl`): ``id INTEGER PRIMARY KEY`` becomes an identity column, ``INTEGER``
``BIGINT``, ``REAL`` ``DOUBLE PRECISION``; ``WITHOUT ROWID`` is dropped. JSON stays TEXT on both.

Several writers at once: SQLite waits on a busy file (a busy timeout, and ``BEGIN IMMEDIATE``
retried on SQLITE_BUSY); PostgreSQL serialises conflicting rows itself, and schema migrations
take an advisory lock so that two processes opening a fresh database do not both migrate it.
"""

from __future__ import annotations

import math
import random
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from harness.errors import StoreError

__all__ = ["BUSY_WAIT_S", "Connection", "PostgresConnection", "SQLiteConnection", "as_connection", "is_url",
           "redact", "retry_busy"]

#: how long a SQLite writer waits for a busy file in all (busy timeout, then BEGIN retries)
BUSY_WAIT_S = 120.0

_URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: Any) -> bool:
    """True when ``location`` names a PostgreSQL database (``postgresql://...``)."""
    return isinstance(location, str) and location.lower().startswith(_URL_SCHEMES)


def redact(url: str) -> str:
    """``url`` without its password (for messages and ``Store.path``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


class Connection:
    """One open database connection in the store's dialect (see the module docstring).

    Attributes
    ----------
    dialect : str
        "sqlite" or "postgresql".
    errors : tuple of exception types
        What the engine raises for a refused statement (caught by the store).
    integrity_errors : tuple of exception types
        The subset raised for a broken constraint.
    readonly : bool
        Opened by a read-only command: nothing is ever written through it.
    """

    dialect = ""
    readonly = False
    errors: tuple[type[BaseException], ...] = ()
    integrity_errors: tuple[type[BaseException], ...] = ()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; return a DB-API cursor (fetchone, fetchall, description, rowcount)."""
        raise NotImplementedError

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for each row of parameters."""
        raise NotImplementedError

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT into a table with an ``id`` key and return the new row's id."""
        raise NotImplementedError

    def begin(self) -> None:
        """Start a write transaction."""
        raise NotImplementedError

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        self.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def ddl(self, statement: str) -> str:
        """``statement`` (schema DDL in SQLite's dialect) in this engine's dialect."""
        return statement

    def table_exists(self, name: str) -> bool:
        raise NotImplementedError

    def tables(self) -> list[str]:
        """The names of the database's tables (the current schema's, on PostgreSQL)."""
        raise NotImplementedError

    def columns(self, table: str) -> list[str]:
        """The column names of ``table``."""
        raise NotImplementedError

    def quick_check(self, where: object) -> None:
        """Raise StoreError naming ``where`` when the database is damaged (SQLite's quick check;
        a PostgreSQL server keeps its own pages whole)."""

    def lock_schema(self) -> None:
        """Inside a transaction: hold off other processes migrating the same database."""

    def is_unique_violation(self, exc: BaseException, *columns: str) -> bool:
        """Whether ``exc`` is a UNIQUE constraint failure over ``columns`` (table.column names)."""
        raise NotImplementedError


def as_connection(conn: Connection | sqlite3.Connection) -> Connection:
    """``conn``, a raw :class:`sqlite3.Connection` wrapped (migrations accept either)."""
    return SQLiteConnection(conn) if isinstance(conn, sqlite3.Connection) else conn


class SQLiteConnection(Connection):
    """A SQLite file (autocommit mode: the store issues BEGIN IMMEDIATE / COMMIT itself)."""

    dialect = "sqlite"
    errors = (sqlite3.Error,)
    integrity_errors = (sqlite3.IntegrityError,)

    def __init__(self, raw: sqlite3.Connection, where: object = "the result store"):
        self.raw = raw
        #: the file, for messages
        self.where = where

    @classmethod
    def connect(cls, path: Path, create: bool, *, readonly: bool = False) -> SQLiteConnection:
        """A connection to ``path``: created when missing (``create``), else ``mode=rw`` (never
        creates the file) or, ``readonly``, ``mode=ro`` (never writes it). A read-only store on a
        read-only mount or file, where SQLite cannot open the WAL's shared-memory file beside it, is
        opened ``immutable`` (nobody can write it there meanwhile)."""
        if create and not readonly:
            raw = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
            return cls(raw, path)
        uri = path.resolve().as_uri()
        raw = sqlite3.connect(f"{uri}?mode={'ro' if readonly else 'rw'}", timeout=30.0,
                              isolation_level=None, uri=True)
        if readonly:
            try:
                raw.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            except sqlite3.OperationalError as e:
                # a WAL store whose -shm file cannot be created (read-only folder or mount)
                if "unable to open" not in str(e) and "readonly" not in str(e):
                    raise
                raw.close()
                raw = sqlite3.connect(f"{uri}?mode=ro&immutable=1", timeout=30.0, isolation_level=None,
                                      uri=True)
            except sqlite3.DatabaseError:
                pass  # not a database, or damaged: the first query says so, naming the file (execute)
        conn = cls(raw, path)
        conn.readonly = readonly
        return conn

    def in_memory_copy(self) -> SQLiteConnection:
        """A writable copy of this database in memory (an older store read by a read-only command is
        migrated there, leaving its file as it is); this connection is closed."""
        mem = sqlite3.connect(":memory:", isolation_level=None)
        self.raw.backup(mem)
        self.raw.close()
        return SQLiteConnection(mem, self.where)

    def quick_check(self, where: object) -> None:
        """Refuse a damaged database: ``PRAGMA quick_check`` must answer "ok"."""
        try:
            rows = [r[0] for r in self.raw.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.DatabaseError as e:
            rows = [str(e)]
        if rows != ["ok"]:
            problems = "; ".join(str(r) for r in rows[:3]) + ("; ..." if len(rows) > 3 else "")
            raise StoreError(f"result store {where} is damaged (PRAGMA quick_check: {problems}); kbench "
                             "does not write into a damaged store: restore it from a copy, or pass "
                             "another --db")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self.raw.execute(sql, tuple(params))
        except sqlite3.DatabaseError as e:
            self._refuse_damaged(e)
            raise

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self.raw.executemany(sql, rows)
        except sqlite3.DatabaseError as e:
            self._refuse_damaged(e)
            raise

    def _refuse_damaged(self, exc: sqlite3.DatabaseError) -> None:
        """Raise a StoreError naming the file for a damaged or foreign file met while reading or
        writing (SQLITE_CORRUPT, SQLITE_NOTADB); return for any other error."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == 26:  # SQLITE_NOTADB
            raise StoreError(f"{self.where} is not a SQLite database, so not a kbench result store ({exc});"
                             " kbench leaves it as it is: pass a kbench store or a new file as --db") from exc
        corrupt = (code & 0xFF == 11) if code is not None else "malformed" in str(exc)
        if corrupt:  # SQLITE_CORRUPT
            raise StoreError(f"result store {self.where} is damaged ({exc}): restore it from a copy, or "
                             "pass another --db") from exc

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        return int(self.execute(sql, params).lastrowid)

    def begin(self) -> None:
        """BEGIN IMMEDIATE, retried while the file stays busy (another writer holds it longer than
        the busy timeout, or SQLite reports SQLITE_BUSY without waiting, as it may in WAL mode)."""
        retry_busy(lambda: self.raw.execute("BEGIN IMMEDIATE"))

    @property
    def in_transaction(self) -> bool:
        return self.raw.in_transaction

    def close(self) -> None:
        self.raw.close()

    def table_exists(self, name: str) -> bool:
        return self.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                            (name,)).fetchone() is not None

    def tables(self) -> list[str]:
        return [n for (n,) in self.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                           " AND name NOT LIKE 'sqlite_%' ORDER BY name")]

    def columns(self, table: str) -> list[str]:
        return [r[1] for r in self.execute(f"PRAGMA table_info({table})")]

    def is_unique_violation(self, exc: BaseException, *columns: str) -> bool:
        text = str(exc)
        return "UNIQUE" in text and all(c in text for c in columns)


def _busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def retry_busy(fn: Any, wait_s: float = BUSY_WAIT_S) -> Any:
    """``fn()``, called again with a short random back-off while SQLite says the file is busy, for
    up to ``wait_s`` seconds in all."""
    deadline = time.monotonic() + wait_s
    delay = 0.01
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.5)


# -- PostgreSQL ------------------------------------------------------------------------------------

_IDENTITY = re.compile(r"\bid INTEGER PRIMARY KEY\b")
_INTEGER = re.compile(r"\bINTEGER\b")
_REAL = re.compile(r"\bREAL\b")


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as e:
        raise StoreError("a postgresql:// store needs psycopg 3: pip install 'psycopg[binary]'"
                         " (or `pip install 'kbench[postgres]'`)") from e
    return psycopg


def _param(p: Any) -> Any:
    if not isinstance(p, (str, bytes, int, float)) and callable(getattr(p, "item", None)):
        p = p.item()  # numpy scalars (ids out of pandas frames), which sqlite3 binds too
    # SQLite binds a float NaN as NULL; do the same so both engines refuse or keep the same rows
    return None if isinstance(p, float) and math.isnan(p) else p


class PostgresConnection(Connection):
    """A PostgreSQL database through psycopg 3 (autocommit mode; BEGIN/COMMIT issued explicitly)."""

    dialect = "postgresql"

    def __init__(self, raw: Any, psycopg: Any):
        self.raw = raw
        self._psycopg = psycopg
        self.errors = (psycopg.Error,)
        self.integrity_errors = (psycopg.IntegrityError,)

    @classmethod
    def connect(cls, url: str, *, readonly: bool = False) -> PostgresConnection:
        """A connection to ``url``; ``readonly``: every transaction of the session is READ ONLY."""
        psycopg = _import_psycopg()
        try:
            raw = psycopg.connect(url, autocommit=True, connect_timeout=30)
            if readonly:
                raw.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        except psycopg.Error as e:
            raise StoreError(f"cannot open result store {redact(url)}: {str(e).strip()}") from e
        conn = cls(raw, psycopg)
        conn.readonly = readonly
        return conn

    @staticmethod
    def translate(sql: str) -> str:
        """SQLite-dialect ``sql`` with ``?`` placeholders in psycopg's ``%s`` style."""
        return sql.replace("%", "%%").replace("?", "%s")

    @staticmethod
    def _params(params: Sequence[Any]) -> tuple:
        return tuple(_param(p) for p in params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(self.translate(sql), self._params(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [self._params(r) for r in rows]
        if rows:
            with self.raw.cursor() as cur:
                cur.executemany(self.translate(sql), rows)

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        (new_id,) = self.execute(sql + " RETURNING id", params).fetchone()
        return int(new_id)

    def begin(self) -> None:
        self.raw.execute("BEGIN")

    @property
    def in_transaction(self) -> bool:
        status = self.raw.info.transaction_status
        return status != self._psycopg.pq.TransactionStatus.IDLE

    def close(self) -> None:
        self.raw.close()

    def ddl(self, statement: str) -> str:
        statement = _IDENTITY.sub("id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", statement)
        statement = _INTEGER.sub("BIGINT", statement)
        statement = _REAL.sub("DOUBLE PRECISION", statement)
        return statement.replace(") WITHOUT ROWID", ")")

    def table_exists(self, name: str) -> bool:
        # a query of the catalog, seen through this statement's snapshot: a table another process
        # created (and committed) while this one waited for the schema lock is seen; to_regclass's
        # cached lookup may not see it yet
        row = self.raw.execute("SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
                               " AND tablename = %s", (name,)).fetchone()
        return row is not None

    def tables(self) -> list[str]:
        return [n for (n,) in self.raw.execute("SELECT tablename FROM pg_catalog.pg_tables"
                                               " WHERE schemaname = current_schema() ORDER BY tablename")]

    def columns(self, table: str) -> list[str]:
        return [n for (n,) in self.raw.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = %s ORDER BY ordinal_position", (table,))]

    def lock_schema(self) -> None:
        # one key for "kbench schema": a transaction-scoped advisory lock, released at COMMIT/ROLLBACK
        self.raw.execute("SELECT pg_advisory_xact_lock(7086541029)")

    def is_unique_violation(self, exc: BaseException, *columns: str) -> bool:
        if not isinstance(exc, self._psycopg.errors.UniqueViolation):
            return False
        diag = getattr(exc, "diag", None)
        name = (getattr(diag, "constraint_name", None) or "") if diag is not None else ""
        # PostgreSQL names UNIQUE (a, b) of table t "t_a_b_key"
        table = columns[0].split(".")[0] if columns else ""
        want = "_".join([table] + [c.split(".")[-1] for c in columns]) + "_key"
        return not columns or name == want
