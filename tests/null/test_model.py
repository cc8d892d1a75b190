"""harness.model: the values passed along the data path (cases and their peers, sides, results of
interleaved sides) and how they read back from JSON."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.errors import ConfigError, InvalidSetting
from harness.model import Case, MeasureConfig, Result, Side, check_measure_settings


def _case(**kw) -> Case:
    base = dict(suite="s", workload="row_sum", variant="rfactor", params=(("m", 64), ("n", 128)),
                knobs=(("factor", 16),), dtype="float32", target="cuda", gpu_model="H100")
    return Case(**{**base, **kw})


def test_a_peer_case_is_known_by_its_field_and_keeps_the_key_format():
    peer = _case().as_peer("torch.sum(dim=1)")
    assert peer.peer == "torch.sum(dim=1)" and peer.knobs == () and peer.target == "cuda"
    # the key (history in the store) is what it always was
    assert peer.key == "row_sum/peer:torch.sum(dim=1)[]/m=64,n=128/float32/cuda@H100"
    assert Case.from_json(peer.to_json()) == peer
    assert "peer" not in json.loads(_case().to_json())  # kernels builds keep their stored JSON


def test_a_peer_stored_before_the_field_existed_reads_back_as_a_peer():
    old = json.loads(_case().as_peer("cupy.sum(axis=1)").to_json())
    del old["peer"]
    back = Case.from_json(json.dumps(old))
    assert back.peer == "cupy.sum(axis=1)" and back == _case().as_peer("cupy.sum(axis=1)")


def test_sides_from_pairs_and_from_json():
    cfg = MeasureConfig(interleave=(("base", 0.0), Side("head"), {"name": "slow", "slowdown": 0.05}))
    assert cfg.interleave == (Side("base", 0.0), Side("head", 0.0), Side("slow", 0.05))
    assert cfg.side_names == ("base", "head", "slow")
    stored = json.loads(json.dumps(dataclasses.asdict(cfg)))  # as harness.store keeps a run's config
    assert MeasureConfig(**stored) == cfg


def test_result_for_side():
    case = _case()
    a, b = Result(case, "ok", side="A", nvcc_calls=1), Result(case, "wrong", side="B", message="x")
    answer = dataclasses.replace(a, sides=(a, b))
    assert answer.for_side("A") == a and answer.for_side("B") == b
    # a case that failed as a whole stands for every side, labelled with it
    timeout = Result(case, "timeout", message="no result after 9 s")
    assert timeout.for_side("B") == dataclasses.replace(timeout, side="B")


# -- settings are checked where they are defined ------------------------------------------------


@pytest.mark.parametrize("changes, settings, message", [
    ({"max_time_s": -1.0}, ("max_time_s",), "max_time_s must be positive, got -1.0"),
    ({"max_time_s": -1.0, "min_time_s": 5.0}, ("max_time_s",), "max_time_s must be positive"),
    ({"min_time_s": 5.0, "max_time_s": 2.0}, ("min_time_s", "max_time_s"),
     "min_time_s (5.0) exceeds max_time_s (2.0)"),
    ({"min_samples": 50, "max_samples": 20}, ("min_samples", "max_samples"),
     "min_samples (50) exceeds max_samples (20)"),
    ({"min_samples": 0}, ("min_samples",), "min_samples must be at least 1, got 0"),
    ({"min_samples": 2.5}, ("min_samples",), "min_samples must be an integer, got 2.5"),
    ({"min_samples": True}, ("min_samples",), "min_samples must be an integer, got True"),
    ({"max_rel_ci": 0.0}, ("max_rel_ci",), "max_rel_ci must be a fraction in (0, 1), got 0.0"),
    ({"max_time_s": float("nan")}, ("max_time_s",), "max_time_s must be a number, got nan"),
    ({"max_time_s": float("inf")}, ("max_time_s",), "max_time_s must be a number, got inf"),
    ({"mode": "warm"}, ("mode",), "mode must be one of cold, hot, got 'warm'"),
    ({"stopping": "never"}, ("stopping",), "stopping must be the name of a stopping criterion (median-ci"),
    ({"seed": -3}, ("seed",), "seed must be a non-negative integer, got -3"),
    ({"slowdown": -0.05}, ("slowdown",), "slowdown must be non-negative, got -0.05"),
    ({"interleave": (("a", 0.0), ("a", 0.1))}, ("interleave",), "the sides' names repeat: a, a"),
])
def test_measure_config_refuses_bad_settings_whoever_makes_it(changes, settings, message):
    with pytest.raises(InvalidSetting) as err:
        MeasureConfig(**changes)
    assert err.value.settings == settings and message in err.value.detail
    assert str(err.value) == f"MeasureConfig: {err.value.detail}"
    assert isinstance(err.value, ConfigError)  # kbench exits 4 with its message
    with pytest.raises(InvalidSetting):  # and a replace() of a good config is checked alike
        dataclasses.replace(MeasureConfig(), **changes)


def test_measure_config_keeps_good_settings_and_makes_ints_floats():
    cfg = MeasureConfig(max_time_s=2, min_time_s=2, min_samples=5, max_samples=5, clock_floor=1.5)
    assert cfg.max_time_s == 2.0 and isinstance(cfg.max_time_s, float) and cfg.min_samples == 5
    check_measure_settings({"min_time_s": 1.0})  # a part of the settings: no pair to compare
    with pytest.raises(InvalidSetting, match="bogus is not a setting"):
        check_measure_settings({"bogus": 1})


def test_case_and_side_settings():
    with pytest.raises(InvalidSetting, match="Case: row_sum/split: timeout_s must be a positive number, "
                                             "got 0"):
        Case(suite="s", workload="row_sum", variant="split", params=(), knobs=(), dtype="float32",
             target="c", timeout_s=0)
    with pytest.raises(InvalidSetting, match="rtol must be a non-negative number, got -1e-05"):
        Case(suite="s", workload="row_sum", variant="split", params=(), knobs=(), dtype="float32",
             target="c", rtol=-1e-5)
    with pytest.raises(InvalidSetting, match="Side: side C: slowdown must be a non-negative number"):
        Side("C", -0.1)
    with pytest.raises(InvalidSetting, match="a side's name must be a non-empty string"):
        Side("")


# -- what a result notes besides its timing (typed: schema version 9's columns) --------------------


def test_the_noted_values_are_checked_where_they_are_made():
    from harness.model import Peaks, Phases, Timeline, TuningRef

    ph = Phases(inputs=1, reference=0.5, measure=2.0)
    assert ph.items() == (("inputs", 1.0), ("reference", 0.5), ("measure", 2.0))
    assert isinstance(ph.inputs, float) and Phases().items() == ()
    for bad in ({"inputs": -1.0}, {"build": float("nan")}, {"check": True}, {"warmup": "1"}):
        with pytest.raises(InvalidSetting, match=f"Phases: {next(iter(bad))} must be a non-negative number"):
            Phases(**bad)
    with pytest.raises(TypeError):  # a phase kbench does not know
        Phases(sleeping=1.0)
    t = Timeline(build_start=10, build_end=11, start=10.5, end=12)
    assert (t.build_start, t.end) == (10.0, 12.0)
    with pytest.raises(InvalidSetting, match=r"Timeline: start \(13.0\) is after end \(12.0\)") as e:
        Timeline(build_start=10, build_end=11, start=13, end=12)
    assert e.value.settings == ("start", "end")
    with pytest.raises(InvalidSetting, match="Timeline: build_end must be a non-negative number"):
        Timeline(build_start=10, build_end=None, start=11, end=12)
    assert Peaks("read", 3000, None).bandwidth_gbps == 3000.0 and Peaks() == Peaks(None, None, None)
    with pytest.raises(InvalidSetting, match="Peaks: bandwidth must be one of read, copy or None, got 'side"):
        Peaks("sideways")
    with pytest.raises(InvalidSetting, match=r"bandwidth_gbps is given but not which peak it is"):
        Peaks(bandwidth_gbps=3000.0)
    with pytest.raises(InvalidSetting, match="Peaks: bandwidth_gbps must be a positive number, got -1"):
        Peaks("copy", -1)
    with pytest.raises(InvalidSetting, match="Peaks: flops must name a measured matmul peak"):
        Peaks("copy", 1.0, "")
    assert TuningRef("best", "H100", 2, 4, 2e-5).cost_s == 2e-5
    assert TuningRef("untuned", "A100").session_id is None
    with pytest.raises(InvalidSetting, match="TuningRef: source must be one of best, untuned, got 'guessed'"):
        TuningRef("guessed")
    with pytest.raises(InvalidSetting, match="TuningRef: the best configuration needs session_id"):
        TuningRef("best", "H100")
    with pytest.raises(InvalidSetting, match="TuningRef: an untuned configuration has no session_id, cost_s"):
        TuningRef("untuned", "A100", session_id=3, cost_s=1e-5)


def test_a_result_takes_only_typed_notes():
    case = _case()
    with pytest.raises(InvalidSetting, match=r"Result: row_sum/rfactor.*: phases must be a Phases or None"):
        Result(case, "ok", phases={"inputs": 1.0})
    with pytest.raises(InvalidSetting, match="tuning must be a TuningRef or None"):
        Result(case, "ok", tuning={"source": "best"})
    with pytest.raises(InvalidSetting, match="inputs_version must be a positive integer or None, got 0"):
        Result(case, "ok", inputs_version=0)
    with pytest.raises(InvalidSetting, match="variant_kind must be a string, got None"):
        Result(case, "ok", variant_kind=None)
    assert not hasattr(Result(case, "ok"), "extra")  # nothing rides beside the typed fields
