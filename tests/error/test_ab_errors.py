"""Bad input to kbench ab, to the portable specs it carries between source trees, and to the
execution options it shares with run and calibrate: each error names the thing at fault, exits 4
from the command line, and stores no run."""

from __future__ import annotations

import pytest
from test_cli import kbench
from test_cli_ab import _runs, _tree

from harness.execute import portable
from harness.execute.portable import BaseTreeError, check_base_tree
from harness.execute.portable import PortableSpecError, thaw


@pytest.fixture
def exp_suite(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text('[suite]\nname = "ab-exp"\ntargets = ["c"]\n'
                    "[measure]\nmin_samples = 5\nmin_time_s = 0.01\nmax_time_s = 0.05\n"
                    '[[workload]]\nname = "exp"\nparams = { n = [4096] }\nvariants = ["default"]\n')
    return path


def test_ab_bad_base_trees_are_usage_errors_and_store_nothing(tmp_path, exp_suite):
    db = tmp_path / "k.db"
    r = kbench("ab", exp_suite, "--base-tree", tmp_path / "nowhere", "--executor", "local", "--db", db)
    assert r.returncode == 4 and "--base-tree" in r.stderr and "no such directory" in r.stderr
    r = kbench("ab", exp_suite, "--base-tree", tmp_path, "--executor", "local", "--db", db)
    assert r.returncode == 4 and "no kernels/ package" in r.stderr
    broken = _tree(tmp_path / "broken")
    (broken / "kernels" / "__init__.py").write_text("this is not python\n")
    r = kbench("ab", exp_suite, "--base-tree", broken, "--executor", "local", "--db", db)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "could not build the cases" in r.stderr and "NameError" in r.stderr
    assert not db.exists() or _runs(db) == []
    r = kbench("ab", exp_suite, "--executor", "local", "--db", db)
    assert r.returncode == 4 and "--base-tree" in r.stderr


def test_check_base_tree_names_the_option_and_the_missing_package(tmp_path):
    with pytest.raises(BaseTreeError, match=r"--base-tree .*: no such directory"):
        check_base_tree(tmp_path / "nowhere")
    (tmp_path / "kernels").mkdir()
    with pytest.raises(BaseTreeError, match=r"no kernels/ package there \(expected .*__init__\.py\)"):
        check_base_tree(tmp_path)


@pytest.mark.parametrize("data, match", [
    ({"error": "KeyError: no variant 'x'"}, "no variant 'x'"),
    ({"format": "other/9"}, "format 'other/9'"),
    ({"format": portable.FORMAT, "name": "f"}, "malformed portable spec: KeyError"),
])
def test_thaw_refuses_bad_data(data, match):
    with pytest.raises(PortableSpecError, match=match):
        thaw(data)


@pytest.mark.parametrize("args, words", [
    (("run", "suites/smoke.toml", "--max-rel-ci", "1.5"), "--max-rel-ci: must be a fraction in (0, 1)"),
    (("run", "suites/smoke.toml", "--max-rel-ci", "tight"), "--max-rel-ci: not a number: 'tight'"),
    (("calibrate", "suites/smoke.toml", "--interleave", "rounds"), "--interleave: invalid choice: 'rounds'"),
    (("ab", "suites/smoke.toml", "--base-tree", ".", "--max-rel-ci", "0"),
     "--max-rel-ci: must be a fraction"),
])
def test_bad_execution_options_name_the_option(tmp_path, args, words):
    db = tmp_path / "k.db"
    r = kbench(*args, "--db", db)
    assert r.returncode == 4 and words in r.stderr, r.stderr
    assert not db.exists()
