"""`kbench import` and `--db` errors name the store at fault (exit 4), never a traceback, and never
print a password."""

from __future__ import annotations

import pytest
from test_cli import kbench

from harness.store import Store, StoreError


def test_missing_source_is_named_and_not_created(tmp_path):
    missing = tmp_path / "nope.db"
    r = kbench("import", missing, "--db", tmp_path / "team.db")
    assert r.returncode == 4 and f"no result store at {missing}" in r.stderr, r.stderr
    assert not missing.exists()


def test_source_that_is_the_destination_is_refused(tmp_path):
    Store.open(tmp_path / "team.db").close()
    r = kbench("import", tmp_path / "team.db", "--db", tmp_path / "team.db")
    assert r.returncode == 4 and "is the destination store itself (--db)" in r.stderr, r.stderr


def test_unreachable_postgres_is_named_without_its_password(tmp_path):
    pytest.importorskip("psycopg")
    Store.open(tmp_path / "m.db").close()
    r = kbench("import", tmp_path / "m.db", "--db", "postgresql://kbench:secret@127.0.0.1:1/team")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "cannot open result store postgresql://kbench:***@127.0.0.1:1/team" in r.stderr
    assert "secret" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    with pytest.raises(StoreError, match=r"cannot open result store postgresql://u@127\.0\.0\.1:1/x"):
        Store.open("postgresql://u@127.0.0.1:1/x")


def test_postgres_without_psycopg_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an installation without psycopg sees
    with pytest.raises(StoreError, match=r"needs psycopg 3: pip install 'psycopg\[binary\]'"):
        Store.open("postgresql://u@127.0.0.1:1/x")
