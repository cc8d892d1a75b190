"""A real PostgreSQL server for the store's tests: one per test session, on 127.0.0.1 only.

``pg_server`` (session) runs ``initdb`` into a temporary folder and starts ``postgres`` on a free
port of 127.0.0.1, its unix socket in that folder too, with durability off (fsync, synchronous
commit: a test server that dies loses nothing of value). It is stopped and removed at the end.
``pg_url`` (per test) creates a fresh database on it and gives its URL.

The binaries are looked for in ``KBENCH_PG_BIN``, on PATH (e.g. /usr/local/bin) and where Debian's
``postgresql`` package puts them (/usr/lib/postgresql/<version>/bin; scripts/install.sh installs
it). Tests skip only when they (or psycopg) are missing.

initdb and postgres refuse to run as root. CI runs as root (.ci/run on Debian), so as root the
server runs as the unprivileged user ``nobody`` (``runuser -u nobody --``, or ``setpriv`` where
runuser is missing) in a folder that user owns; tests connect over TCP, so they may stay root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_PG_USER = "kbench"


def pg_bindir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres, or None."""
    candidates = [os.environ.get("KBENCH_PG_BIN")]
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                    key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.name.split(".")],
                    reverse=True)
    candidates += debian
    for folder in candidates:
        if folder and all(os.access(Path(folder, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user() -> tuple[list[str], int | None, int | None]:
    """(command prefix, uid, gid) that run the server's binaries unprivileged when we are root."""
    if os.geteuid() != 0:
        return [], None, None
    user = pwd.getpwnam("nobody")
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"], user.pw_uid, user.pw_gid
    if shutil.which("setpriv"):
        return (["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"],
                user.pw_uid, user.pw_gid)
    pytest.skip("running as root without runuser or setpriv: cannot start PostgreSQL unprivileged")
    raise AssertionError  # unreachable


@dataclass(frozen=True)
class PgServer:
    host: str
    port: int
    admin_url: str

    def url(self, database: str) -> str:
        return f"postgresql://{_PG_USER}@{self.host}:{self.port}/{database}"


def _run(cmd: list[str], what: str, cwd: Path, log: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, cwd=cwd)
    if proc.returncode != 0:
        extra = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
        raise RuntimeError(f"{what} failed ({proc.returncode}): {proc.stdout}{proc.stderr}{extra}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server of its own, started for this test session and stopped after it."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed")
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl, postgres) not found; "
                    "scripts/install.sh installs Debian's postgresql package")
    prefix, uid, gid = _as_server_user()
    # not under pytest's tmp folders: those are private to root (0700), and the server user must reach
    # it; the server's commands also run from it (the checkout may be in a folder only root can read)
    top = Path(tempfile.mkdtemp(prefix="kbench-pg-"))
    data, log = top / "data", top / "server.log"
    if uid is not None:
        os.chown(top, uid, gid)
    started = False
    try:
        _run(prefix + [str(bindir / "initdb"), "-D", str(data), "-U", _PG_USER, "--auth=trust",
                       "-E", "UTF8", "--no-locale", "--no-sync"], "initdb", cwd=top)
        for _ in range(3):  # a free port may be taken before the server binds it: try another
            port = _free_port()
            options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {top} -c fsync=off"
                       " -c synchronous_commit=off -c full_page_writes=off -c max_connections=60")
            proc = subprocess.run(prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log),
                                            "-o", options, "-w", "-t", "60", "start"],
                                  capture_output=True, text=True, timeout=90, check=False, cwd=top)
            if proc.returncode == 0:
                started = True
                break
        if not started:
            raise RuntimeError(f"pg_ctl start failed: {proc.stdout}{proc.stderr}"
                               f"{log.read_text(errors='replace')[-2000:] if log.exists() else ''}")
        server = PgServer("127.0.0.1", port, f"postgresql://{_PG_USER}@127.0.0.1:{port}/postgres")
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            conn.execute("SELECT 1")
        yield server
    finally:
        if started:
            subprocess.run(prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                                     "stop"], capture_output=True, timeout=60, check=False, cwd=top)
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new, empty database on the session's server (dropped after the test)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.url(name)
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
