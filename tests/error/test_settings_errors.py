"""Settings given on the command line are refused exactly as in a suite: exit 4 and a message naming
the option, before a store is opened or anything runs; a case too big for the host's memory is refused
by the plan, naming the case and the size, before a run is stored."""

from __future__ import annotations

import pytest

from harness.cli import main


@pytest.mark.parametrize("options, message", [
    (("--max-time", "-1", "--min-time", "5"), "--max-time: max_time_s must be positive, got -1.0"),
    (("--max-time", "1", "--min-time", "5"),
     "--min-time and --max-time: min_time_s (5.0) exceeds max_time_s (1.0)"),
    (("--min-time", "-0.5"), "--min-time: min_time_s must be non-negative, got -0.5"),
    (("--max-time", "nan"), "--max-time: max_time_s must be a number, got nan"),
    (("--targets", "c,bogus"), "--targets c,bogus: unknown target 'bogus' (targets: c, opencl, cuda)"),
    (("--targets", "c,"), "unknown target ''"),
])
@pytest.mark.parametrize("command", [("run", "suites/smoke.toml"), ("calibrate", "suites/smoke.toml"),
                                     ("ab", "suites/smoke.toml", "--base-tree", ".")], ids=lambda c: c[0])
def test_bad_execution_options_exit_4_naming_the_option(command, options, message, tmp_path, capsys):
    db = tmp_path / "k.db"
    code = main([*command, *options, "--db", str(db), "--executor", "local"])
    text = capsys.readouterr()
    assert code == 4, text
    assert message in text.err and "Traceback" not in text.err, text.err
    assert not db.exists()  # refused before the store was opened


def test_an_option_that_clashes_with_the_suite_is_named(tmp_path, capsys):
    # suites/smoke.toml caps max_time_s at 0.1 s: --min-time 5 alone is refused once they meet
    code = main(["run", "suites/smoke.toml", "--min-time", "5", "--db", str(tmp_path / "k.db"),
                 "--executor", "local"])
    text = capsys.readouterr().err
    assert code == 4, text
    assert ("MeasureConfig: min_time_s (5.0) exceeds max_time_s (0.1) (--min-time 5.0 given on the command "
            "line)") in text


def test_a_suite_refuses_the_same_values_naming_its_line(tmp_path, capsys):
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\n\n[measure]\nmin_time_s = 5.0\nmax_time_s = -1.0\n\n'
                     '[[workload]]\nname = "vector_add"\nparams = { n = [64] }\ndtypes = ["float32"]\n'
                     'variants = ["default"]\ntargets = ["c"]\n')
    code = main(["run", str(suite), "--db", str(tmp_path / "k.db"), "--executor", "local"])
    text = capsys.readouterr().err
    assert code == 4 and "s.toml:6" in text and "max_time_s must be positive, got -1.0" in text, text


def test_an_enormous_case_is_refused_before_a_run_is_stored(tmp_path, capsys):
    import sqlite3

    suite = tmp_path / "big.toml"
    suite.write_text('[suite]\nname = "big"\ntargets = ["c"]\n\n[[workload]]\nname = "row_sum"\n'
                     'params = { n = [1099511627776], m = [1] }\ndtypes = ["float32"]\n'
                     'variants = ["default"]\n')
    db = tmp_path / "k.db"
    code = main(["run", str(suite), "--db", str(db), "--executor", "local"])
    text = capsys.readouterr().err
    assert code == 4, text
    assert f"{suite}: case row_sum/default[]/m=1,n=1099511627776/float32/c needs about 24576.0 GiB" in text
    assert "MemoryError" not in text and "Traceback" not in text
    if db.exists():  # the store may be opened before planning; no run is in it
        assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
