"""The kbench command as a user runs it: a subprocess, real SQLite, real C/OpenCL kernels."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


def kbench(*args, cwd=ROOT, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.slow
def test_run_local_show_export_resume(tmp_path):
    db = tmp_path / "k.db"
    r = kbench("run", "suites/smoke.toml", "--executor", "local", "--db", db)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run 1: ok 3" in r.stdout and str(db) in r.stdout
    # each case's line says where its wall time went (not a terminal: one line per case)
    assert (r.stdout + r.stderr).count("[inputs ") == 3, r.stdout + r.stderr
    con = sqlite3.connect(db)
    phases = con.execute("select phase_measure_s, phase_inputs_s from results").fetchall()
    assert len(phases) == 3 and all(measure > 0 and inputs >= 0 for measure, inputs in phases)
    rows = con.execute("select outcome, n_samples, median_s from results").fetchall()
    # the suite's min_samples = 5 wins over its max_time_s = 0.1 (docs/SUITES.md)
    assert len(rows) == 3 and all(o == "ok" and n >= 5 and m > 0 for o, n, m in rows)
    assert con.execute("select count(*) from samples").fetchone()[0] == sum(n for _, n, _ in rows)
    show = kbench("show", "1", "--db", db)
    assert show.returncode == 0 and "row_sum/split" in show.stdout
    # where the code came from: the suite's repository and kbench itself (this checkout: the same)
    (kbench_commit, suite_commit), = con.execute("select kbench_commit, suite_commit from runs").fetchall()
    assert kbench_commit == suite_commit and f"at commit {suite_commit or 'unknown'}" in show.stdout
    # rates for people: "123.4 MB/s", never a bare number of GB/s
    assert re.search(r"\d+\.\d [kMGT]B/s", show.stdout), show.stdout
    out = tmp_path / "r.csv"
    assert kbench("export", out, "--db", db).returncode == 0
    df = pd.read_csv(out)
    assert sorted(df["outcome"]) == ["ok"] * 3
    # resuming a complete run runs nothing and duplicates nothing
    again = kbench("run", "suites/smoke.toml", "--executor", "local", "--db", db, "--resume", "1")
    assert again.returncode == 0, again.stderr
    assert con.execute("select count(*) from results").fetchone()[0] == 3


def test_malformed_suite_exits_4_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[suite]\nname = "x"\n\n[[workload]]\nname = "row_sum"\nparams = { n = [], m = [4] }\n')
    db = tmp_path / "k.db"
    r = kbench("run", bad, "--executor", "local", "--db", db)
    assert r.returncode == 4
    assert f"{bad}:6:" in r.stderr
    assert not db.exists()


def test_unknown_subcommand_and_listing(tmp_path):
    assert kbench("frobnicate").returncode == 4
    assert kbench().returncode == 4
    r = kbench("list", "workloads")
    assert r.returncode == 0 and "row_sum" in r.stdout and "conv2d_3x3" in r.stdout
    r = kbench("list", "suites")
    assert "suites/tutorials.toml" in r.stdout


@pytest.mark.slow
@pytest.mark.skipif(pytest.importorskip("ray") is None, reason="ray missing")
def test_run_on_embedded_ray(tmp_path):
    db = tmp_path / "k.db"
    r = kbench("run", "suites/smoke.toml", "--db", db)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run 1: ok 3" in r.stdout


@pytest.mark.slow
def test_killed_driver_resumes_without_duplicates(tmp_path):
    import signal
    import time

    db = tmp_path / "k.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "suites/tutorials.toml",
                             "--targets", "c",
                             "--executor", "local", "--db", str(db)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    stored = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
        if db.exists():
            try:
                stored = sqlite3.connect(db).execute("select count(*) from results").fetchone()[0]
            except sqlite3.Error:
                continue
            if stored >= 2:
                break
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    con = sqlite3.connect(db)
    before = con.execute("select count(*) from results").fetchone()[0]
    assert before >= 2
    r = kbench("run", "suites/tutorials.toml", "--targets", "c", "--executor", "local", "--db", db,
               "--resume", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    keys = [k for (k,) in con.execute("select case_key from results where run_id = 1")]
    from harness.suite import load_suite

    want = sum(c.target == "c" for c in load_suite(ROOT / "suites" / "tutorials.toml").cases)
    assert len(keys) == len(set(keys)) == want  # every C case of the suite exactly once
    assert con.execute("select status from runs where id = 1").fetchone()[0] == "done"
