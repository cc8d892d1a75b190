"""`kbench tune` on a GPU: a tuned float32 matmul on CUDA tuned per GPU model with the local executor
(nvcc builds, the harness's reference check, costs on the harness's clock: CUDA events, the L2 flush,
the stopping rule), then `kbench run` measuring the stored best for that model at the cost the tuning
stored for it (within 25 %, tests/e2e/test_tune_then_run.py's AGREEMENT says why)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_cli import kbench  # tests/e2e is not a package: conftest puts tests/ on the path

pytestmark = pytest.mark.gpu

SUITE = """\
[suite]
name = "tune-gpu"
targets = ["cuda"]

[measure]
max_time_s = 1.0

[[workload]]
name = "matmul"
params = { n = [1024], m = [1024], k = [1024] }
variants = [{ name = "shared_blocked", tuned = true, knobs = { KNOBS } }]
""".replace("KNOBS", "local_y = [4, 8], local_x = [4, 8], block_y = [8, 16], tile_k = [4, 8, 16], "
                    "vector = [1, 4]")


def test_tune_matmul_on_the_gpu_then_run_the_best(tmp_path):
    suite, db = tmp_path / "tune.toml", tmp_path / "k.db"
    suite.write_text(SUITE)
    tuned = kbench("tune", suite, "--trials", 16, "--tuner", "xgb", "--executor", "local", "--db", db)
    assert tuned.returncode == 0, tuned.stdout[-3000:] + tuned.stderr[-3000:]
    con = sqlite3.connect(db)
    (device, gpu_model, clock), = con.execute(
        "SELECT device, gpu_model, clock FROM tuning_sessions").fetchall()
    assert device == gpu_model and device  # cuda: tuned per GPU model
    assert clock == "harness"
    trials = con.execute("SELECT cost_s, error_no FROM tuning_trials").fetchall()
    assert len(trials) == 16 and any(e == 0 for _, e in trials)
    (best_knobs, best_cost), = con.execute("SELECT knobs, cost_s FROM best_configs").fetchall()
    assert best_cost == min(c for c, e in trials if e == 0)
    ran = kbench("run", suite, "--executor", "local", "--db", db)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    (case_json, source, tuned_on, median_s, cost_s), = con.execute(
        "SELECT case_json, tuning_source, tuning_device, median_s, tuning_cost_s FROM results").fetchall()
    knobs = dict(json.loads(case_json)["knobs"])
    assert {k: knobs[k] for k in json.loads(best_knobs)} == json.loads(best_knobs)
    assert source == "best" and tuned_on == device and cost_s == best_cost
    assert abs(median_s / best_cost - 1.0) <= 0.25, (median_s, best_cost)  # one clock
