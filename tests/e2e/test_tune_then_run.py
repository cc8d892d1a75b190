"""`kbench tune --then-run`: the suite tuned, then run on the same executor (one embedded Ray start for
both), the tuned variant run at the best configuration the tuning stored; the exit code is the run's."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.opencl]

#: one tuned OpenCL matmul, 2 x 2 x 2 x 2 = 16 configurations, all of which build
SUITE = """\
[suite]
name = "tune-then-run"
targets = ["opencl"]

[measure]
min_time_s = 0.01
max_time_s = 0.2
min_samples = 5

[[workload]]
name = "matmul"
params = { n = [64], m = [64], k = [64] }
variants = [{ name = "shared_blocked", tuned = true, knobs = { tile_k = [4, 8], local_y = [2, 4], local_x = [2, 4], block_y = [4, 8] } }]
"""


def kbench(*args, cwd, timeout=600, **env_extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env_extra)
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.parametrize("executor", ["ray", "local"])
def test_tune_then_run_on_one_executor(tmp_path, executor):
    from kbtest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device")
    suite, db = tmp_path / "s.toml", tmp_path / "k.db"
    suite.write_text(SUITE)
    r = kbench("tune", suite, "--executor", executor, "--then-run", "--trials", 4, "--tuner", "random",
               "--seed", 1, "--db", db, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "tuned 1 case(s)" in r.stdout and "run 1: ok 1" in r.stdout and "exit code 0" in r.stdout
    # the run reused the tuning's executor: no executor of its own was started or closed
    (time_line,) = [line for line in r.stdout.splitlines() if line.startswith("time: ")]
    start = float(re.search(r"executor start ([\d.]+) s", time_line).group(1))
    assert start < 1.0 and "executor close" not in time_line, time_line
    con = sqlite3.connect(db)
    assert con.execute("select count(*) from tuning_trials").fetchone()[0] == 4
    (best,) = con.execute("select knobs from best_configs").fetchone()
    (status,) = con.execute("select status from runs").fetchone()
    (case_json, source, outcome), = con.execute("select case_json, tuning_source, outcome from results")
    knobs = dict(json.loads(case_json)["knobs"])
    assert status == "done" and outcome == "ok" and source == "best"
    assert {k: knobs[k] for k in json.loads(best)} == json.loads(best)


#: how far the run's median of the tuned best may be from the cost the tuning stored for it. Both
#: are medians of cold samples of the same build on the same host, with the same timer, flush and
#: stopping rule; what differs: the tuning's cheaper stop (a CI of 2 % rather than the suite's, at
#: most 1 s), the winner's curse (the best of 16 noisy medians is biased low by about their noise),
#: and a shared CI host's load between the two measurements, seconds apart. The runtime's
#: time_evaluator (means of back-to-back launches, caches warm) gave 37 us where the run gave 63 us
#: on this suite (1.7x; 65 us against 146 us on a larger case): far outside this. 0.25 failed once in
#: CI (2026-11-28: 1.29x after the retry, a 90 us kernel, the other core running tests): 0.4 still
#: tells the two clocks apart.
AGREEMENT = 0.4

#: PoCL on one thread for the agreement test: a kernel split over both cores of a 2-core machine takes
#: twice as long while anything else runs on the other core (the tests of another worker, a CI
#: neighbour), and the best of 16 candidates is the one timed while it did not (run/tune 1.97x, twice
#: in one CI run); one thread does not wait for the other core (the best candidate here: 70-82 us on one
#: thread with a fuzzer busy on both cores, 128-141 us on two threads with the machine quiet)
ONE_POCL_THREAD = {"POCL_MAX_PTHREAD_COUNT": "1", "POCL_CPU_MAX_CU_COUNT": "1"}


def test_the_tuned_best_costs_what_the_run_then_measures(tmp_path):
    """One clock: `kbench tune` times each candidate as `kbench run` does (the harness's timer, flush,
    warm-up and stopping rule), so the run of the stored best reports (within AGREEMENT) the cost the
    tuning stored for it; the session records that it was measured on the harness's clock."""
    from kbtest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device")
    suite, db = tmp_path / "s.toml", tmp_path / "k.db"
    suite.write_text(SUITE.replace("max_time_s = 0.2", "max_time_s = 0.5"))
    r = kbench("tune", suite, "--executor", "local", "--then-run", "--trials", 16, "--tuner", "grid",
               "--db", db, cwd=tmp_path, **ONE_POCL_THREAD)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    con = sqlite3.connect(db)
    assert con.execute("select clock from tuning_sessions").fetchall() == [("harness",)]
    (tuned_s, trial_id), = con.execute("select cost_s, trial_id from best_configs").fetchall()
    (run_s, ref_cost, ref_trial), = con.execute(
        "select median_s, tuning_cost_s, tuning_trial_id from results").fetchall()
    assert (ref_cost, ref_trial) == (tuned_s, trial_id)  # the run ran (and names) the stored best
    # the run's table is followed by the tuned case's two numbers and their ratio
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("tuned matmul/shared_blocked[tuned]")]
    assert f"run/tune {run_s / tuned_s:.2f}x" in line, line
    if abs(run_s / tuned_s - 1.0) > AGREEMENT:
        # a burst of load on a shared host is passing, a second clock is not: the run once more
        r = kbench("run", suite, "--executor", "local", "--db", db, cwd=tmp_path, **ONE_POCL_THREAD)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        (run_s,), = con.execute("select median_s from results order by id desc limit 1").fetchall()
    assert abs(run_s / tuned_s - 1.0) <= AGREEMENT, (run_s, tuned_s)
