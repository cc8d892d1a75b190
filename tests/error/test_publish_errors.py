"""``kbench publish`` refuses what it cannot use with exit 4 and one line naming it."""

from __future__ import annotations

from harness.cli import main
from harness.errors import ExitCode
from harness.store import Store


def test_out_is_a_file(tmp_path, capsys):
    db = tmp_path / "k.db"
    Store.open(db).close()
    out = tmp_path / "site.html"
    out.write_text("not a folder")
    assert main(["publish", "--db", str(db), "--out", str(out)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"--out {out}: exists and is not a folder" in err.replace("\n", "")
    assert out.read_text() == "not a folder"


def test_missing_store(tmp_path, capsys):
    db = tmp_path / "nothing.db"
    assert main(["publish", "--db", str(db), "--out", str(tmp_path / "site")]) == ExitCode.USAGE
    assert f"no result store at {db}" in capsys.readouterr().err.replace("\n", "")
    assert not db.exists() and not (tmp_path / "site").exists()


def test_not_a_store(tmp_path, capsys):
    db = tmp_path / "k.db"
    db.write_text("hello")
    assert main(["publish", "--db", str(db), "--out", str(tmp_path / "site")]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "is not a SQLite database, so not a kbench result store" in err and "leaves it as it is" in err
