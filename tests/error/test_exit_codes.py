"""The exit codes of ``kbench`` for the errors a command can end with: a user's mistake (a
KbenchError, a file it cannot read or write) exits 4 with one line naming it; a bug in kbench exits
70 with its traceback, never 4."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main, run_handler
from harness.errors import ConfigError, ExitCode, Interrupted, KbenchError, StoreError, UsageError
from harness.execute import DispatchError
from harness.execute.portable import BaseTreeError, PortableSpecError
from harness.plan import PlanError
from harness.store import Store
from harness.suite import SuiteError

ROOT = Path(__file__).resolve().parents[2]


def _raising(exc: BaseException):
    def handler(args, argv):
        raise exc

    return argparse.Namespace(command="run", handler=handler)


USER_ERRORS = [UsageError("--fail-on 'x': bad rule"), StoreError("no result store at k.db"),
               DispatchError("unknown executor 'x'"), BaseTreeError("--base-tree /x: no such directory"),
               ConfigError("KBENCH_BATCH='0'"), FileNotFoundError(2, "No such file", "x.csv")]


@pytest.mark.parametrize("exc", USER_ERRORS)
def test_user_errors_exit_4_with_one_line(exc, capsys):
    assert run_handler(_raising(exc), []) == ExitCode.USAGE == 4
    message = capsys.readouterr().err.strip()
    assert message.startswith("kbench run: ") and "Traceback" not in message
    assert str(exc) in message


def test_a_suite_error_is_printed_as_file_line(capsys):
    assert run_handler(_raising(SuiteError("s.toml", 3, "bad key")), []) == 4
    assert capsys.readouterr().err.strip() == "s.toml:3: bad key"


@pytest.mark.parametrize("exc", [ValueError("x must be positive"), KeyError("case"), TypeError("bad operand"),
                                 AssertionError("invariant")])
def test_a_bug_is_an_internal_error_not_a_usage_error(exc, capsys):
    assert run_handler(_raising(exc), []) == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert "internal error (a bug in kbench" in err and "Traceback" in err and type(exc).__name__ in err


def test_every_error_type_of_the_harness_is_a_kbench_error_exiting_4():
    for cls in (UsageError, ConfigError, StoreError, SuiteError, PlanError, DispatchError, BaseTreeError,
                PortableSpecError):
        assert issubclass(cls, KbenchError) and cls.exit_code == ExitCode.USAGE, cls
    assert issubclass(UsageError, ValueError)  # a bad value, for callers that catch ValueError


def test_a_bad_setting_is_a_configuration_error(monkeypatch, capsys):
    monkeypatch.setenv("KBENCH_BATCH", "zero")
    assert main(["list", "runs"]) == 4
    err = capsys.readouterr().err
    assert "KBENCH_BATCH='zero': the batch size must be a whole number of at least 1" in err


def test_exit_codes_through_the_console_entry(tmp_path):
    """``python -m harness.cli`` (what the console script runs) passes the codes on."""
    missing = subprocess.run([sys.executable, "-m", "harness.cli", "show", "7", "--db",
                              str(tmp_path / "k.db")], cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 4
    assert f"kbench show: no result store at {tmp_path / 'k.db'}" in missing.stderr
    assert not (tmp_path / "k.db").exists()  # a read-only command creates no store
    Store.open(tmp_path / "k.db").close()
    no_run = subprocess.run([sys.executable, "-m", "harness.cli", "show", "7", "--db",
                             str(tmp_path / "k.db")], cwd=ROOT, capture_output=True, text=True)
    assert no_run.returncode == 4 and "kbench show: no run 7 in" in no_run.stderr
    bad = subprocess.run([sys.executable, "-m", "harness.cli", "bogus"], cwd=ROOT, capture_output=True,
                         text=True)
    assert bad.returncode == 4 and "invalid choice: 'bogus'" in bad.stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_is_one_line_and_128_plus_its_number(sig, code, capsys):
    line = (f"run 3 interrupted by {sig.name} (1 of 4 cases stored); continue it with: "
            "kbench run s.toml --resume 3")
    assert run_handler(_raising(Interrupted(sig, line)), []) == code == ExitCode.of_signal(sig)
    err = capsys.readouterr().err.strip()
    assert err == f"kbench run: {line}" and "Traceback" not in err


def test_ctrl_c_outside_a_run_is_one_line_exit_130(capsys):
    assert run_handler(_raising(KeyboardInterrupt()), []) == ExitCode.INTERRUPTED == 130
    assert capsys.readouterr().err.strip() == "kbench run: interrupted by SIGINT"


def test_an_interrupt_is_no_exception_an_executor_would_charge_to_a_case():
    assert not issubclass(Interrupted, Exception) and issubclass(Interrupted, BaseException)


def test_bad_gates_and_targets_are_usage_errors_before_anything_runs(tmp_path, capsys):
    db = tmp_path / "k.db"
    with pytest.raises(SystemExit) as ex:  # argparse parses --fail-on once, into a FailOn
        main(["compare", "1", "2", "--db", str(db), "--fail-on", "median:x"])
    assert ex.value.code == 4
    assert "bad rule 'median:x'; accepted rules: 'median:N%'" in capsys.readouterr().err
    assert main(["run", str(ROOT / "suites/smoke.toml"), "--executor", "local", "--db", str(db),
                 "--targets", "c,bogus"]) == 4
    err = capsys.readouterr().err
    assert "--targets c,bogus: unknown target 'bogus' (targets: c, opencl, cuda)" in err
    assert main(["run", str(ROOT / "suites/smoke.toml"), "--executor", "local", "--db", str(db),
                 "--retry-failed"]) == 4
    assert "--retry-failed needs --resume" in capsys.readouterr().err
    assert not db.exists()
