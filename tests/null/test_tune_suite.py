"""Tuned variants without a device: the suite format (``tuned = true``), tuned case keys, the plan step
that picks stored configurations, the store's tuning tables (schema version 6, its migration, best
configurations), and the best-so-far chart of the report."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from store_data import TUNING_SPACE, fill_tuning, tuned_case  # noqa: E402

from harness import plan as planmod  # noqa: E402
from harness.errors import ConfigError  # noqa: E402
from harness.model import Case, TuningRef  # noqa: E402
from harness.store import SCHEMA_VERSION, Store, StoreError, in_space, schema  # noqa: E402
from harness.suite import SuiteError, parse_suite  # noqa: E402

SUITE = """\
[suite]
name = "tiny"
targets = ["opencl", "cuda"]

[[workload]]
name = "matmul"
params = { n = [64, 128], m = [64], k = [64] }
variants = ["naive", { name = "shared_blocked", tuned = true, knobs = { tile_k = [4, 8], vector = [1, 4] } }]
"""


def test_a_tuned_variant_gives_one_case_per_shape_and_its_space():
    s = parse_suite(SUITE, "tiny.toml")
    tuned = s.tuned_cases
    # one case per shape x target the variant builds for (opencl, cuda), not one per knob combination
    assert [c.key for c in tuned] == [
        "matmul/shared_blocked[tuned]/k=64,m=64,n=64/float32/opencl",
        "matmul/shared_blocked[tuned]/k=64,m=64,n=64/float32/cuda",
        "matmul/shared_blocked[tuned]/k=64,m=64,n=128/float32/opencl",
        "matmul/shared_blocked[tuned]/k=64,m=64,n=128/float32/cuda"]
    # the untuned variant still expands as before
    assert [c.key for c in s.cases if not c.tuned][0] == "matmul/naive[tile=16]/k=64,m=64,n=64/float32/opencl"
    space = dict(s.space_for(tuned[0]))
    assert space["tile_k"] == (4, 8) and space["vector"] == (1, 4)
    assert space["local_y"] == (8,)  # knobs not listed keep their default, one candidate
    # the case carries the first configuration of its space until a run picks a stored one
    assert tuned[0].knob_dict["tile_k"] == 4 and tuned[0].knob_dict["vector"] == 1


def test_tuned_case_key_json_and_peer():
    c = tuned_case()
    assert c.key == "matmul/shared_blocked[tuned]/k=64,m=64,n=64/float32/cuda@H100"
    assert c.tuning_key == "matmul/shared_blocked[tuned]/k=64,m=64,n=64/float32/cuda"
    assert Case.from_json(c.to_json()) == c and json.loads(c.to_json())["tuned"] is True
    assert "tuned" not in json.loads(tuned_case().as_peer("torch.matmul(tf32=off)").to_json())
    # the key does not change with the knobs a run picked
    from dataclasses import replace

    assert replace(c, knobs=(("tile_k", 8), ("vector", 4))).key == c.key


@pytest.mark.parametrize("variant, line, needle", [
    ('{ name = "shared_blocked", tuned = "yes", knobs = { tile_k = [4, 8] } }', 8,
     "tuned must be true or false"),
    ('{ name = "shared_blocked", tuned = true }', 8, "is tuned but its knobs give one configuration"),
    ('{ name = "shared_blocked", tuned = true, knobs = { tile_k = 4 } }', 8,
     "is tuned but its knobs give one configuration"),
])
def test_tuned_variant_errors_name_file_and_line(variant, line, needle):
    text = SUITE.replace(SUITE.splitlines()[7].split("= ", 1)[1], f'[{variant}]')
    with pytest.raises(SuiteError) as err:
        parse_suite(text, "tiny.toml")
    assert str(err.value).startswith(f"tiny.toml:{line}: ") and needle in str(err.value)
    assert "matmul/shared_blocked" in str(err.value)


def _lookup(stored):
    """A lookup over ``stored`` {(tuning key, device): knobs}, answering as Store.best_in_space."""
    def lookup(key, device, space):
        knobs = stored.get((key, device))
        if knobs is None or not in_space(knobs, space):
            return None
        return {"knobs": knobs, "session_id": 7, "trial_id": 70, "cost_s": 1e-5}
    return lookup


def test_pick_tuned_uses_the_stored_best_per_gpu_model_and_says_where_none_is():
    s = parse_suite(SUITE, "tiny.toml")
    cases = planmod.plan(s, ["H100", "A100"])
    first = s.tuned_cases[1]  # cuda, n=64
    best = dict(first.knob_dict, tile_k=8, vector=4)
    picked, picks = planmod.pick_tuned(cases, s, ["H100", "A100"], "cpu:Test CPU x2",
                                       _lookup({(first.tuning_key, "H100"): best}))
    tuned = [c for c in picked if c.tuned]
    # cuda tuned cases: once per GPU model (the best configuration depends on it); opencl: once
    assert len(tuned) == 2 * 1 + 2 * 2
    by_key = {p.case_key: p for p in picks}
    h100 = next(c for c in tuned if c.key == first.key + "@H100")
    assert h100.knob_dict == best and by_key[h100.key].source == "best" and by_key[h100.key].session_id == 7
    a100 = next(c for c in tuned if c.key == first.key + "@A100")
    assert a100.knobs == first.knobs and by_key[a100.key].source == "untuned"
    assert by_key[a100.key].as_ref() == TuningRef("untuned", "A100")
    assert by_key[h100.key].as_ref() == TuningRef("best", "H100", session_id=7, trial_id=70, cost_s=1e-5)
    assert [c for c in picked if not c.tuned] == [c for c in cases if not c.tuned]


def test_pick_tuned_ignores_a_stored_best_outside_the_space():
    s = parse_suite(SUITE, "tiny.toml")
    case = s.tuned_cases[0]  # opencl
    outside = dict(case.knob_dict, tile_k=16)  # the suite no longer lists tile_k = 16
    _, picks = planmod.pick_tuned([case], s, [], "cpu:X", _lookup({(case.tuning_key, "cpu:X"): outside}))
    assert [p.source for p in picks] == ["untuned"]


# -- the store: schema version 6 --------------------------------------------------------------------


def test_a_v5_store_migrates_to_v6_keeping_its_runs(tmp_path, monkeypatch):
    db = tmp_path / "k.db"
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:5])
    with Store.open(db) as old:
        assert old.schema_version == 5
        # what kbench with schema 5 wrote (begin_run writes today's columns)
        run = old._conn.insert("INSERT INTO runs (started_at, status, suite_name, kbench_version, argv,"
                               " executor, measure_config, uuid)"
                               " VALUES ('t', 'done', 'tutorials', 'v', '[]', 'local', '{}', 'u')", ())
    monkeypatch.undo()
    with Store.open(db) as new:
        assert new.schema_version == SCHEMA_VERSION == 10
        assert new.get_run(run)["status"] == "done" and new.tuning_sessions() == []
        assert new.best_config("x", "H100") is None
    with sqlite3.connect(db) as raw:
        tables = {t for (t,) in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"tuning_sessions", "tuning_trials", "best_configs"} <= tables


def test_trials_best_configuration_and_best_so_far(tmp_path):
    with Store.open(tmp_path / "k.db") as st:
        s1, s2 = fill_tuning(st)
        key = tuned_case().tuning_key
        trials = st.tuning_trials(key, device="H100")
        frame = st.trials_frame([key])
        best = st.best_config(key, "H100")
        assert st.tuning_sessions(key, "H100")[0]["status"] == "done"
        # a failed trial keeps its message and error number, no cost
        assert trials[1]["error_no"] == 1 and trials[1]["cost_s"] is None and "factor" in trials[1]["error"]
        # mean of the costs; GFLOP/s = 2 * 64^3 / cost
        assert trials[0]["cost_s"] == pytest.approx(5e-5)
        assert trials[0]["gflops"] == pytest.approx(2 * 64 ** 3 / 5e-5 / 1e9)
        assert best["knobs"] == {"tile_k": 4, "vector": 4} and best["session_id"] == s2
        # the best within a space that no longer holds vector = 4: the fastest trial that fits
        narrow = (("tile_k", (4, 8)), ("vector", (1,)))
        assert st.best_in_space(key, "H100", narrow)["knobs"] == {"tile_k": 4, "vector": 1}
        assert st.best_in_space(key, "A100", TUNING_SPACE) is None
        with pytest.raises(StoreError, match="positive costs"):
            st.record_trial(s1, 9, config_index=0, knobs={}, costs=[0.0], error_no=0, all_cost_s=0,
                            timestamp=0)
        with pytest.raises(StoreError, match="no tuning session 99"):
            st.record_trial(99, 0, config_index=0, knobs={}, costs=["x"], error_no=1, all_cost_s=0,
                            timestamp=0)
        with pytest.raises(StoreError, match="not a case of a tuned variant"):
            st.begin_tuning_session(Case("s", "row_sum", "split", (), (), "float32", "c"), device="cpu",
                                    tuner="grid", n_trial=1, executor="local", space=())
    # best so far per session, derived by hand from TUNING_TRIALS: 5e-5, (failed) 5e-5, 3e-5 | 2e-5
    assert frame["best_cost_s"].tolist() == pytest.approx([5e-5, 5e-5, 3e-5, 2e-5])
    assert frame["trial"].tolist() == [0, 1, 2, 0] and frame["tuner"].tolist() == ["random"] * 3 + ["xgb"]


def test_best_so_far_chart_draws_each_session(tmp_path):
    from reports.tuning_plots import best_so_far_chart

    with Store.open(tmp_path / "k.db") as st:
        fill_tuning(st)
        frame = st.trials_frame()
    svg = best_so_far_chart(frame, title="matmul/shared_blocked", chart_id="tuning-0")
    assert svg.startswith("<svg") and "session 1 (random, H100)" in svg and "session 2 (xgb, H100)" in svg
    assert "failed trial" in svg and "GFLOP/s" in svg
    # without operation counts the best time is drawn
    svg = best_so_far_chart(frame.assign(gflops=float("nan")), chart_id="tuning-1")
    assert "best time so far" in svg
    assert pd.isna(frame.assign(gflops=float("nan"))["gflops"]).all()


def test_sessions_are_planned_per_gpu_model_of_the_cluster():
    from harness.tune.session import plan_sessions

    s = parse_suite(SUITE, "tiny.toml")
    plan, skipped = plan_sessions(s, ["H100", "A100", "H100"], "", "cpu:X", ("cuda",), gpus=3)
    assert [(c.key, d) for c, d in plan] == [
        ("matmul/shared_blocked[tuned]/k=64,m=64,n=64/float32/cuda@H100", "H100"),
        ("matmul/shared_blocked[tuned]/k=64,m=64,n=64/float32/cuda@A100", "A100"),
        ("matmul/shared_blocked[tuned]/k=64,m=64,n=128/float32/cuda@H100", "H100"),
        ("matmul/shared_blocked[tuned]/k=64,m=64,n=128/float32/cuda@A100", "A100")] and skipped == []
    # --gpu-model keeps one model (spelled as the cluster spells it)
    plan, _ = plan_sessions(s, ["H100", "A100"], "a100", "cpu:X", ("cuda",), gpus=2)
    assert {d for _, d in plan} == {"A100"}
    # a workload restricted to some GPU models is tuned on those only
    restricted = parse_suite(SUITE + 'gpu_models = ["H100"]\n', "tiny.toml")
    plan, _ = plan_sessions(restricted, ["H100", "A100"], "", "cpu:X", ("cuda",), gpus=2)
    assert {d for _, d in plan} == {"H100"}
    # no GPU: cuda is skipped, and with nothing left that is an error naming the suite
    with pytest.raises(ConfigError, match="no tuned case of suite 'tiny' can run here .*cuda"):
        plan_sessions(s, [], "", "cpu:X", ("cuda",), gpus=0)


def test_a_session_records_its_clock_and_costs_of_two_clocks_are_never_compared(tmp_path):
    """Schema 10: the session's clock is stored and read back with its trials; a best stored by a
    session of another clock (time_evaluator: warm caches, lower costs) is replaced by the first
    successful trial of a harness-clock session even though that costs more, and from then on the
    harness-clock trials compete among themselves only."""
    from harness.cli.tune import CLOCK_CHOICES, TUNER_CHOICES
    from harness.tune.runner import CLOCKS
    from harness.tune.session import TUNERS

    assert CLOCK_CHOICES == CLOCKS and TUNER_CHOICES == TUNERS  # the CLI's copies of the names
    case, key = tuned_case(), tuned_case().tuning_key
    with Store.open(tmp_path / "k.db") as st:
        old, new = (st.begin_tuning_session(case, device="H100", tuner="grid", n_trial=2,
                                            executor="local", space=TUNING_SPACE, clock=c)
                    for c in ("time_evaluator", "harness"))

        def trial(session, n, knobs, cost):
            st.record_trial(session, n, config_index=0, knobs=knobs, costs=[cost], error_no=0,
                            all_cost_s=0.1, flop=1e6, timestamp=1.0)
            return st.best_config(key, "H100")

        assert trial(old, 0, {"tile_k": 4, "vector": 1}, 3e-5)["session_id"] == old
        best = trial(new, 0, {"tile_k": 8, "vector": 1}, 6e-5)  # dearer, but of the other clock
        assert (best["session_id"], best["cost_s"]) == (new, 6e-5)
        assert trial(new, 1, {"tile_k": 8, "vector": 4}, 7e-5)["cost_s"] == 6e-5  # same clock: compared
        assert trial(new, 2, {"tile_k": 4, "vector": 4}, 5e-5)["knobs"] == {"tile_k": 4, "vector": 4}
        clocks = {t["session_id"]: t["clock"] for t in st.tuning_trials(key)}
        assert clocks == {old: "time_evaluator", new: "harness"}
        assert [s["clock"] for s in st.tuning_sessions(key)] == ["time_evaluator", "harness"]
        assert st.trials_frame([key])["clock"].tolist() == ["time_evaluator"] + ["harness"] * 3
