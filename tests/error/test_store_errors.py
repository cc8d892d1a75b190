"""Stores kbench must not write: somebody else's SQLite file, a mistyped path, a damaged store, a store
on a read-only folder, an ``--out`` that cannot be written. Each command refuses with exit 4 and a
message naming the file, and every file is left byte-identical (hashed before and after)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from harness.cli import main
from harness.model import MeasureConfig
from harness.store import Store

ROOT = Path(__file__).resolve().parents[2]


class _Suite:
    name = "smoke"
    path = None
    sha256 = None


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _store_with_a_run(path: Path) -> int:
    with Store.open(path) as st:
        run = st.begin_run(_Suite(), ["kbench", "run"], "local", MeasureConfig())
        st.finish_run(run, "done")
    return run


@pytest.fixture
def foreign(tmp_path) -> Path:
    path = tmp_path / "foreign.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    return path


def _kbench(capsys, *argv) -> tuple[int, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse refuses an option's value: Parser.error exits 4
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


COMMANDS = [
    ("list", "runs"), ("show", "1"), ("compare", "1", "1"), ("report", "1"), ("export", "{tmp}/x.csv"),
    ("baseline", "list"), ("baseline", "show", "main"), ("baseline", "set", "main", "1"),
    ("baseline", "delete", "main"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_command_refuses_a_foreign_sqlite_file_and_leaves_it_byte_identical(
        argv, foreign, tmp_path, capsys):
    before = _sha(foreign)
    argv = [a.format(tmp=tmp_path) for a in argv]
    code, text = _kbench(capsys, *argv, "--db", foreign, *(["--out", tmp_path / "o"] if argv[0] == "report"
                                                          else []))
    assert code == 4, text
    assert f"{foreign} is not a kbench result store" in text and "invoices" in text, text
    assert "Traceback" not in text
    assert _sha(foreign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]  # no -wal, no report, no csv


def test_writing_commands_refuse_a_foreign_destination(foreign, tmp_path, capsys):
    before = _sha(foreign)
    good = tmp_path / "good.db"
    _store_with_a_run(good)
    for argv in (("run", ROOT / "suites" / "smoke.toml", "--executor", "local"), ("import", good)):
        code, text = _kbench(capsys, *argv, "--db", foreign)
        assert code == 4 and f"{foreign} is not a kbench result store" in text, (argv, text)
    assert _sha(foreign) == before


def test_import_refuses_a_foreign_source_before_creating_the_destination(foreign, tmp_path, capsys):
    before = _sha(foreign)
    code, text = _kbench(capsys, "import", foreign, "--db", tmp_path / "team.db")
    assert code == 4 and f"{foreign} is not a kbench result store" in text, text
    assert _sha(foreign) == before
    assert not (tmp_path / "team.db").exists()
    with closing(sqlite3.connect(foreign)) as conn:  # nothing of kbench's inside the source
        assert [n for (n,) in conn.execute("SELECT name FROM sqlite_master")] == ["invoices"]


@pytest.mark.parametrize("argv", [a for a in COMMANDS if a[:2] not in (("baseline", "set"),)], ids=" ".join)
def test_read_only_commands_at_a_mistyped_path_create_nothing(argv, tmp_path, capsys):
    missing = tmp_path / "kbnech.db"
    argv = [a.format(tmp=tmp_path) for a in argv]
    code, text = _kbench(capsys, *argv, "--db", missing)
    assert code == 4 and f"no result store at {missing}" in text, text
    assert list(tmp_path.iterdir()) == []


def _damage(db: Path) -> None:
    """Garbage over the runs table's root page (the header and the schema page stay whole)."""
    with closing(sqlite3.connect(db)) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    data = bytearray(db.read_bytes())
    data[(root - 1) * page_size:root * page_size] = b"\x5a" * page_size
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("argv", [("list", "runs"), ("show", "1"), ("compare", "1", "1")], ids=" ".join)
def test_reading_a_damaged_store_names_it_without_a_traceback(argv, tmp_path, capsys):
    db = tmp_path / "k.db"
    _store_with_a_run(db)
    _damage(db)
    before = _sha(db)
    code, text = _kbench(capsys, *[a.format(tmp=tmp_path) for a in argv], "--db", db)
    assert code == 4 and f"result store {db} is damaged" in text and "Traceback" not in text, text
    assert _sha(db) == before


def test_a_damaged_store_is_not_written(tmp_path, capsys):
    db = tmp_path / "k.db"
    _store_with_a_run(db)
    _damage(db)
    before = _sha(db)
    code, text = _kbench(capsys, "baseline", "set", "main", "1", "--db", db)
    assert code == 4 and f"result store {db} is damaged (PRAGMA quick_check" in text, text
    assert _sha(db) == before


def _without_dac_override() -> list[str]:
    """A command prefix under which file permissions hold even for root (setpriv drops the
    capabilities that let root write a 0444 file in a 0555 folder); [] when not root."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: file permissions cannot make a read-only store")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def _kbench_unprivileged(*argv, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([*_without_dac_override(), sys.executable, "-m", "harness.cli", *map(str, argv)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.fixture
def read_only_store(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "k.db"
    _store_with_a_run(db)
    db.chmod(0o444)
    folder.chmod(0o555)
    probe = _kbench_unprivileged("baseline", "set", "main", "1", "--db", db, cwd=tmp_path)
    yield db, probe
    folder.chmod(0o755)


def test_a_store_on_a_read_only_folder_is_listed_and_shown_and_not_written(read_only_store, tmp_path):
    db, refused_write = read_only_store
    before = _sha(db)
    assert refused_write.returncode == 4, refused_write.stdout + refused_write.stderr
    assert str(db) in refused_write.stderr and "readonly" in refused_write.stderr, refused_write.stderr
    listed = _kbench_unprivileged("list", "runs", "--db", db, cwd=tmp_path)
    assert listed.returncode == 0 and "id=1 status=done suite_name=smoke" in listed.stdout, listed.stderr
    shown = _kbench_unprivileged("show", "1", "--db", db, cwd=tmp_path)
    assert shown.returncode == 0 and "run 1" in shown.stdout, shown.stderr
    assert _sha(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["k.db"]


def test_out_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys):
    db = tmp_path / "k.db"
    _store_with_a_run(db)
    a_file = tmp_path / "report.html"
    a_file.write_text("mine")
    for command in (("report", "1"), ("compare", "1", "1"), ("run", "suites/smoke.toml"),
                    ("calibrate", "suites/smoke.toml"), ("ab", "suites/smoke.toml", "--base-tree", ROOT)):
        code, text = _kbench(capsys, *command, "--db", db, "--out", a_file)
        assert code == 4 and f"argument --out: {a_file} exists and is not a folder" in text, (command, text)
    assert a_file.read_text() == "mine"
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        r = _kbench_unprivileged("report", "1", "--db", db, "--out", folder / "site", cwd=tmp_path)
    finally:
        folder.chmod(0o755)
    assert r.returncode == 4 and f"argument --out: cannot write into {folder}" in r.stderr, r.stderr
    assert list(folder.iterdir()) == []
