"""`kbench tune` mistakes: each exits 4 (usage or configuration) with one message naming what is wrong,
before a tuning session is stored."""

from __future__ import annotations

import sqlite3

import pytest

from harness.cli import main

TUNED = """\
[suite]
name = "t"
targets = ["c"]

[[workload]]
name = "row_sum"
params = { n = [64], m = [64] }
variants = [{ name = "split", tuned = true, knobs = { factor = [4, 8] } }]
"""

UNTUNED = TUNED.replace("tuned = true, ", "")


def _kbench(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.err


def _sessions(db) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM tuning_sessions").fetchone()[0]


def test_an_unknown_tuner_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "t.toml").write_text(TUNED)
    with pytest.raises(SystemExit) as exit_:
        main(["tune", str(tmp_path / "t.toml"), "--tuner", "annealing", "--db", str(tmp_path / "k.db")])
    assert exit_.value.code == 4
    err = capsys.readouterr().err
    assert "--tuner" in err and "'annealing'" in err and "xgb" in err and "grid" in err


@pytest.mark.parametrize("trials", ["0", "-3", "many"])
def test_a_bad_trial_count_is_a_usage_error(tmp_path, capsys, trials):
    (tmp_path / "t.toml").write_text(TUNED)
    with pytest.raises(SystemExit) as exit_:
        main(["tune", str(tmp_path / "t.toml"), "--trials", trials])
    assert exit_.value.code == 4 and "--trials" in capsys.readouterr().err


def test_a_suite_without_a_tuned_variant_is_named(tmp_path, capsys):
    suite, db = tmp_path / "t.toml", tmp_path / "k.db"
    suite.write_text(UNTUNED)
    code, err = _kbench(capsys, "tune", suite, "--executor", "local", "--db", db)
    assert code == 4 and "Traceback" not in err
    assert str(suite) in err and "has no tuned variant" in err and "tuned = true" in err
    assert _sessions(db) == 0


def test_an_unknown_gpu_model_is_named_with_the_clusters(tmp_path, capsys):
    suite, db = tmp_path / "t.toml", tmp_path / "k.db"
    suite.write_text(TUNED)
    code, err = _kbench(capsys, "tune", suite, "--executor", "local", "--gpu-model", "B300", "--db", db)
    assert code == 4 and "--gpu-model 'B300' is not in the cluster" in err
    assert "cluster GPU models: none" in err  # this machine has no GPU
    assert _sessions(db) == 0


def test_a_malformed_tuned_variant_names_file_and_line(tmp_path, capsys):
    suite = tmp_path / "t.toml"
    suite.write_text(TUNED.replace("tuned = true", 'tuned = "yes"'))
    code, err = _kbench(capsys, "tune", suite, "--executor", "local", "--db", tmp_path / "k.db")
    assert code == 4 and err.strip() == (f"{suite}:8: variant row_sum/split: tuned must be true or false, "
                                         "got 'yes' (string)")


def test_a_space_where_nothing_builds_is_named(tmp_path, capsys):
    suite, db = tmp_path / "t.toml", tmp_path / "k.db"
    suite.write_text(TUNED.replace("factor = [4, 8]", "factor = [0, -4]"))
    code, err = _kbench(capsys, "tune", suite, "--executor", "local", "--db", db)
    assert code == 4 and "Traceback" not in err
    assert f"{suite}: row_sum/split[tuned]/m=64,n=64/float32/c: row_sum/split: no configuration of the " \
           "tuning space builds" in err and "factor must be positive" in err
    assert _sessions(db) == 0


def test_no_tuned_case_can_run_here(tmp_path, capsys):
    suite = tmp_path / "t.toml"
    suite.write_text(TUNED.replace('targets = ["c"]', 'targets = ["cuda"]')
                     .replace('name = "split"', 'name = "bind"')
                     .replace("factor = [4, 8]", "rows = [16, 32]"))
    code, err = _kbench(capsys, "tune", suite, "--executor", "local", "--targets", "cuda",
                        "--db", tmp_path / "k.db")
    assert code == 4 and "no tuned case of suite 't' can run here" in err and "cuda" in err


def test_the_ray_executor_without_its_runner_is_named(tmp_path, capsys, monkeypatch):
    """--executor ray needs kernels.tuning.ray_measure; where it cannot be imported the message says so."""
    import sys
    from dataclasses import replace

    from harness.model import Case
    from harness.tune.runner import RunnerSettings, measure_option_for

    monkeypatch.setitem(sys.modules, "kernels.tuning.ray_measure", None)  # as if not installed
    case = Case("t", "row_sum", "bind", (("m", 64), ("n", 64)), (("rows", 32),), "float32", "cuda",
                tuned=True)
    from harness.errors import ConfigError

    with pytest.raises(ConfigError,
                       match=r"--executor ray: the Ray builder and runner \(kernels.tuning.ray_measure\)"):
        measure_option_for("ray", case, RunnerSettings())
    with pytest.raises(ConfigError, match="--executor 'slurm'"):
        measure_option_for("slurm", case, RunnerSettings())
    # CPU targets are measured in this process whatever the executor (their device is this host)
    local = measure_option_for("ray", replace(case, target="c", variant="split"), RunnerSettings())
    assert type(local.runner).__name__ == "CheckedRunner" and local.runner.timeout == case.timeout_s


def test_tuning_settings_are_checked_where_they_are_made(tmp_path, capsys):
    from harness.errors import InvalidSetting
    from harness.tune.runner import RunnerSettings
    from harness.tune.session import TuneRequest

    for changes, message in (({"number": 0}, "number must be an integer of at least 1, got 0"),
                             ({"repeat": 2.5}, "repeat must be an integer of at least 1, got 2.5"),
                             ({"timeout_s": 0.0}, "timeout_s must be a positive number of seconds"),
                             ({"min_repeat_ms": float("nan")}, "min_repeat_ms must be a non-negative number"),
                             ({"seed": -1}, "seed must be a non-negative integer, got -1")):
        with pytest.raises(InvalidSetting, match=f"RunnerSettings: {message}"):
            RunnerSettings(**changes)
    for changes, message in (({"tuner": "annealing"}, "tuner 'annealing' is not one of xgb, random, grid"),
                             ({"n_trial": 0}, "n_trial must be an integer of at least 1, got 0"),
                             ({"targets": ("c", "bogus")}, "unknown target 'bogus'")):
        with pytest.raises(InvalidSetting, match=f"TuneRequest: {message}"):
            TuneRequest("s.toml", tmp_path / "k.db", **changes)
    # from the command line: exit 4 before a store is opened
    suite = tmp_path / "t.toml"
    suite.write_text(TUNED)
    db = tmp_path / "k.db"
    code, err = _kbench(capsys, "tune", suite, "--targets", "c,bogus", "--db", db)
    assert code == 4 and "TuneRequest: unknown target 'bogus' (targets: c, opencl, cuda)" in err, err
    assert not db.exists()


@pytest.mark.parametrize("argv, names", [(["--clock", "sundial"], ["--clock", "'sundial'", "harness"]),
                                         (["--max-time", "0"], ["--max-time", "more than 0"])])
def test_a_bad_clock_option_is_a_usage_error(tmp_path, capsys, argv, names):
    (tmp_path / "t.toml").write_text(TUNED)
    with pytest.raises(SystemExit) as exit_:
        main(["tune", str(tmp_path / "t.toml"), *argv, "--db", str(tmp_path / "k.db")])
    err = capsys.readouterr().err
    assert exit_.value.code == 4 and all(n in err for n in names), err
    assert not (tmp_path / "k.db").exists()


def test_a_clock_setting_is_checked_where_it_is_made():
    from harness.errors import InvalidSetting
    from harness.tune.runner import RunnerSettings

    with pytest.raises(InvalidSetting, match="RunnerSettings: clock must be one of harness, time_evaluator, "
                                             "got 'sundial'"):
        RunnerSettings(clock="sundial")


def test_a_negative_retry_count_of_the_ray_executor_is_named_before_ray_starts():
    pytest.importorskip("ray")
    from harness.execute import DispatchError
    from harness.execute.ray_executor import RayExecutor

    with pytest.raises(DispatchError, match="the Ray executor's max_retries must be >= 0, got -1"):
        RayExecutor(max_retries=-1)
