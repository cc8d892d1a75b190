"""`kbench tune` then `kbench run` as a user runs them, in-process on the C and OpenCL (PoCL) targets:
trials and best configurations in a real SQLite store, a re-tune appending a session that measures
new configurations only, failed candidates (one that does not build, one that computes wrong)
recorded with their error and never chosen, the run using the stored best, and the report's curve."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap

import pytest

from harness.cli import main

pytestmark = [pytest.mark.slow]

#: a suite of one tuned OpenCL matmul: 3 x 2 x 2 x 2 = 24 configurations, the 8 with tile_k = 0 fail
#: to build (a split by 0)
MATMUL_SUITE = """\
[suite]
name = "tiny-tune"
targets = ["opencl"]

[measure]
min_time_s = 0.01
max_time_s = 0.2
min_samples = 5

[[workload]]
name = "matmul"
params = { n = [64], m = [64], k = [64] }
variants = [{ name = "shared_blocked", tuned = true, knobs = { KNOBS } }]
""".replace("KNOBS", "tile_k = [0, 4, 8], local_y = [2, 4], local_x = [2, 4], block_y = [4, 8]")

KEY = "matmul/shared_blocked[tuned]/k=64,m=64,n=64/float32/opencl"


def _rows(db, sql, *args):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture(autouse=True)
def _workloads_restored():
    """The probe workloads a suite imports register into the process's workload registry: take them out
    again (and their modules) so that no later test sees them."""
    import sys

    from kernels import workloads

    before, mods = dict(workloads.REGISTRY), set(sys.modules)
    yield
    workloads.REGISTRY.clear()
    workloads.REGISTRY.update(before)
    for name in set(sys.modules) - mods:
        if name.startswith("kbench_tune_probe"):
            del sys.modules[name]


def _kbench(*argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.opencl
def test_tune_then_run_uses_the_best_configuration(tmp_path, capsys):
    suite, db, out = tmp_path / "tiny.toml", tmp_path / "k.db", tmp_path / "out"
    suite.write_text(MATMUL_SUITE)

    # never tuned: the run says so, names the case and `kbench tune`, and runs the space's first point
    code, _, err = _kbench("run", suite, "--executor", "local", "--db", db, capsys=capsys)
    assert code == 2  # tile_k = 0 comes first: that configuration does not build
    assert KEY in err and "no tuned configuration stored" in err and "kbench tune" in err
    (case_json, source, outcome), = _rows(db, "SELECT case_json, tuning_source, outcome FROM results")
    assert outcome == "build_error" and source == "untuned"
    assert dict(json.loads(case_json)["knobs"])["tile_k"] == 0

    code, stdout, _ = _kbench("tune", suite, "--trials", 8, "--tuner", "random", "--executor", "local",
                              "--seed", 1, "--db", db, capsys=capsys)
    assert code == 0 and "kbench tune tiny-tune" in stdout
    # the best rate in units for people (e.g. "3.2 GFLOP/s"), never a raw count of GFLOP/s
    assert re.search(r" [1-9]\d{0,2}\.\d [kMGTP]FLOP/s ", stdout), stdout
    trials = _rows(db, "SELECT session_id, trial, config_index, knobs, cost_s, error_no, error"
                       " FROM tuning_trials ORDER BY id")
    assert [t[1] for t in trials] == list(range(8)) and {t[0] for t in trials} == {1}
    assert len({t[2] for t in trials}) == 8  # no configuration measured twice
    for _, _, index, knobs, cost, error_no, error in trials:
        knobs = json.loads(knobs)
        # the index is the point of the space whose knobs were stored: knobs in the variant's order
        # (local_y, local_x, block_y, block_x, tile_k, ...), the first fastest, one-value knobs aside
        assert index == ([2, 4].index(knobs["local_y"]) + 2 * [2, 4].index(knobs["local_x"])
                         + 4 * [4, 8].index(knobs["block_y"]) + 8 * [0, 4, 8].index(knobs["tile_k"]))
        if knobs["tile_k"] == 0:  # a failing candidate: recorded with its error, no cost
            assert error_no == 1 and cost is None and "factor must be positive" in error
        else:
            assert error_no == 0 and cost > 0 and error == ""
    ok = [(t[4], json.loads(t[3])) for t in trials if t[5] == 0]
    assert ok and len(ok) < 8  # seed 1 draws both kinds
    (best_knobs, best_cost, device), = _rows(db, "SELECT knobs, cost_s, device FROM best_configs WHERE"
                                                 " tuning_key = ?", KEY)
    assert best_cost == min(c for c, _ in ok) and json.loads(best_knobs) == min(ok, key=lambda x: x[0])[1]
    assert device.startswith("cpu:")
    (session,) = _rows(db, "SELECT tuner, n_trial, status, device, space FROM tuning_sessions")
    assert session[:4] == ("random", 8, "done", device)
    assert dict(json.loads(session[4]))["tile_k"] == [0, 4, 8]

    # the run now measures exactly the stored best, marked tuned
    code, _, err = _kbench("run", suite, "--executor", "local", "--db", db, "--out", out, capsys=capsys)
    assert code == 0 and "the best configuration of tuning session 1" in err
    (case_json, outcome, *tuning), = _rows(db, "SELECT case_json, outcome, tuning_source, tuning_device,"
                                             " tuning_session_id, tuning_trial_id, tuning_cost_s FROM results"
                                             " WHERE run_id = 2")
    assert outcome == "ok" and json.loads(case_json)["tuned"] is True
    assert dict(json.loads(case_json)["knobs"]) == {**dict(json.loads(case_json)["knobs"]),
                                                    **json.loads(best_knobs)}
    assert tuning == ["best", device, 1, _rows(db, "SELECT trial_id FROM best_configs")[0][0], best_cost]
    html = (out / "run2-report.html").read_text()
    assert 'id="tuning"' in html and "session 1 (random, cpu:" in html and "best so far" in html

    # tuning again appends a session that starts from the stored trials: 8 new configurations
    code, _, err = _kbench("tune", suite, "--trials", 8, "--tuner", "random", "--executor", "local",
                           "--seed", 2, "--db", db, capsys=capsys)
    assert code == 0 and "(8 earlier trials)" in err
    both = _rows(db, "SELECT session_id, config_index, cost_s FROM tuning_trials ORDER BY id")
    assert len(both) == 16 and [s for s, _, _ in both] == [1] * 8 + [2] * 8
    assert len({i for _, i, _ in both}) == 16
    (best_cost2,) = _rows(db, "SELECT cost_s FROM best_configs WHERE tuning_key = ?", KEY)[0]
    assert best_cost2 == min(c for _, _, c in both if c is not None)


PROBE = '''
"""A test workload whose knob ``scale`` makes a wrong kernel: B = A * scale against the reference B = A."""
import numpy as np

from kernels import te
from kernels.workloads import Variant, Workload, register


def _scaled(params, dtype, scale=1, factor=4):
    n = params["n"]
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: A[i] * te.const(scale, dtype), name="B") if hasattr(te, "const") else \\
        te.compute((n,), lambda i: A[i] * float(scale), name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=factor)
    return s, [A, B]


register(Workload(
    name="tune_probe_scale", params=("n",), dtypes=("float32",),
    variants={"scaled": Variant("scaled", _scaled, ("c",), (("scale", 1), ("factor", 4)))},
    make_args=lambda p, d, rng: [rng.uniform(size=(p["n"],)).astype(d), np.full((p["n"],), np.nan, d)],
    reference=lambda a: [a[0].astype(np.float64)], outputs=(1,), flops=lambda p: float(p["n"]),
    bytes=lambda p, d: 8.0 * p["n"]))
'''


def test_grid_records_wrong_candidates_and_stops_when_the_space_is_measured(tmp_path, capsys):
    (tmp_path / "kbench_tune_probe.py").write_text(textwrap.dedent(PROBE))
    suite, db = tmp_path / "probe.toml", tmp_path / "k.db"
    suite.write_text('[suite]\nname = "probe"\ntargets = ["c"]\nimports = ["kbench_tune_probe"]\n\n'
                     '[[workload]]\nname = "tune_probe_scale"\nparams = { n = [256] }\n'
                     'variants = [{ name = "scaled", tuned = true, '
                     'knobs = { scale = [1, 2], factor = [4, 8] } }]\n')
    code, _, _ = _kbench("tune", suite, "--trials", 8, "--tuner", "grid", "--executor", "local", "--db", db,
                         capsys=capsys)
    assert code == 0
    trials = _rows(db, "SELECT trial, config_index, knobs, error_no, error FROM tuning_trials ORDER BY id")
    # grid: the 4 points of the space in index order (scale fastest), no more
    assert [t[1] for t in trials] == [0, 1, 2, 3] and [t[0] for t in trials] == [0, 1, 2, 3]
    for _, _, knobs, error_no, error in trials:
        if json.loads(knobs)["scale"] == 2:  # twice the reference: WRONG_ANSWER, the worst element named
            assert error_no == 5 and "output 0" in error
        else:
            assert error_no == 0 and error == ""
    (best,) = _rows(db, "SELECT knobs FROM best_configs")
    assert json.loads(best[0])["scale"] == 1
    # every configuration is measured: a second tune opens no session
    code, _, err = _kbench("tune", suite, "--trials", 8, "--tuner", "grid", "--executor", "local", "--db", db,
                           capsys=capsys)
    assert code == 0 and "nothing left to measure" in err
    assert _rows(db, "SELECT COUNT(*) FROM tuning_sessions") == [(1,)]


def test_xgb_learns_from_the_stored_trials_of_an_earlier_session(tmp_path, capsys):
    """A second xgb session starts from the first's 9 stored trials (enough for its cost model) and
    proposes only configurations not measured yet; together they cover the space once."""
    (tmp_path / "kbench_tune_probe2.py").write_text(textwrap.dedent(PROBE).replace("tune_probe_scale",
                                                                                    "tune_probe_scale2"))
    suite, db = tmp_path / "probe.toml", tmp_path / "k.db"
    suite.write_text('[suite]\nname = "probe"\ntargets = ["c"]\nimports = ["kbench_tune_probe2"]\n\n'
                     '[[workload]]\nname = "tune_probe_scale2"\nparams = { n = [512] }\n'
                     'variants = [{ name = "scaled", tuned = true, '
                     'knobs = { scale = [1, 2], factor = [1, 2, 4, 8, 16, 32] } }]\n')
    for trials, seed in ((9, 3), (3, 4)):
        code, _, err = _kbench("tune", suite, "--trials", trials, "--tuner", "xgb", "--executor", "local",
                               "--seed", seed, "--db", db, capsys=capsys)
        assert code == 0, err
    assert "(9 earlier trials)" in err
    rows = _rows(db, "SELECT session_id, config_index, error_no, knobs FROM tuning_trials ORDER BY id")
    assert [s for s, *_ in rows] == [1] * 9 + [2] * 3
    assert sorted(i for _, i, _, _ in rows) == list(range(12))  # each of the 12 points once
    assert all((e == 5) == (json.loads(k)["scale"] == 2) for _, _, e, k in rows)
    (best,) = _rows(db, "SELECT knobs FROM best_configs")
    assert json.loads(best[0])["scale"] == 1
