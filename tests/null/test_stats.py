"""harness.stats: tests, intervals, BH, verdicts, suite comparison, gates and history.

References are independent of the code under test: hand-derived numbers, scipy computed
separately, brute-force enumeration and seeded synthetic samples with a known truth.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from harness import stats
from harness.errors import compose_exit_code
from harness.stats import intervals, steps
from harness.stats import verdicts as verdict_table
from harness.stats import (
    FailOn,
    Step,
    benjamini_hochberg,
    bootstrap_ratio_ci,
    compare_frames,
    detect_steps,
    exit_code,
    first_bad,
    judge,
    lookback_zscore,
    mann_whitney_p,
    parse_fail_on,
)
from harness.model import Verdict

# ---------------------------------------------------------------------------------------------
# Benjamini-Hochberg
# ---------------------------------------------------------------------------------------------


def test_bh_hand_values():
    # sorted: 0.01 (rank 1), 0.03 (2), 0.04 (3), 0.20 (4); m = 4
    # raw p*m/rank: 0.04, 0.06, 0.0533.., 0.20 -> running min from the top: 0.04, 0.0533, 0.0533, 0.20
    q = benjamini_hochberg([0.01, 0.04, 0.03, 0.20])
    np.testing.assert_allclose(q, [0.04, 0.16 / 3, 0.16 / 3, 0.20], rtol=1e-12)


def test_bh_clips_to_one_and_passes_nan_through():
    # m = 2 (NaN not counted): 0.5 * 2 / 1 = 1.0, 0.9 * 2 / 2 = 0.9 -> min from the top: 0.9, 0.9
    q = benjamini_hochberg([0.5, float("nan"), 0.9])
    assert math.isnan(q[1])
    np.testing.assert_allclose(q[[0, 2]], [0.9, 0.9])
    assert benjamini_hochberg([0.7, 0.8])[0] <= 1.0
    np.testing.assert_allclose(benjamini_hochberg([1.0, 1.0, 1.0]), [1.0, 1.0, 1.0])
    assert benjamini_hochberg([]).shape == (0,)
    assert np.isnan(benjamini_hochberg([float("nan")])).all()


def test_bh_matches_scipy_and_is_monotone():
    from scipy.stats import false_discovery_control

    p = np.random.default_rng(4).uniform(0, 0.2, 37)
    q = benjamini_hochberg(p)
    np.testing.assert_allclose(q, false_discovery_control(p, method="bh"), rtol=1e-12)
    order = np.argsort(p)
    assert np.all(np.diff(q[order]) >= 0)
    assert np.all(q >= p)


# ---------------------------------------------------------------------------------------------
# Mann-Whitney
# ---------------------------------------------------------------------------------------------


def test_mann_whitney_exact_small_examples():
    # complete separation of 3 vs 3: one of C(6, 3) = 20 equally likely rankings per tail -> 2/20
    assert mann_whitney_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)
    assert mann_whitney_p([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]) == pytest.approx(0.1)
    # 4 vs 4: C(8, 4) = 70 -> 2/70
    assert mann_whitney_p([1, 2, 3, 4], [5, 6, 7, 8]) == pytest.approx(2 / 70)
    # U = 1 for 3 vs 3 (one inversion): P(U <= 1) = 2/20 per tail -> 0.2
    assert mann_whitney_p([1.0, 2.0, 4.0], [3.0, 5.0, 6.0]) == pytest.approx(0.2)


def test_mann_whitney_degenerate_inputs_give_no_evidence():
    assert mann_whitney_p([1.0], [2.0, 3.0]) == 1.0
    assert mann_whitney_p([1.0, 2.0], []) == 1.0
    assert mann_whitney_p([2.0, 2.0, 2.0], [2.0, 2.0]) == 1.0
    assert mann_whitney_p([1.0, float("nan")], [2.0, 3.0]) == 1.0  # NaN dropped -> 1 sample


def test_mann_whitney_large_matches_scipy_asymptotic():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 0.01, 120), rng.normal(1.004, 0.01, 90)
    ref = mannwhitneyu(b, a, alternative="two-sided", method="asymptotic").pvalue
    assert mann_whitney_p(a, b) == pytest.approx(ref, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# bootstrap CI
# ---------------------------------------------------------------------------------------------


def _lognormal(rng: np.random.Generator, n: int, sigma: float, scale: float = 1.0) -> np.ndarray:
    return scale * np.exp(rng.normal(0.0, sigma, n))


def test_bootstrap_deterministic_for_a_seed_and_brackets_the_point_ratio():
    rng = np.random.default_rng(0)
    base, new = _lognormal(rng, 30, 0.02), _lognormal(rng, 25, 0.02, 1.05)
    ci = bootstrap_ratio_ci(base, new, seed=3)
    assert ci == bootstrap_ratio_ci(base, new, seed=3)
    assert ci != bootstrap_ratio_ci(base, new, seed=4)
    assert ci[0] < np.median(new) / np.median(base) < ci[1]
    assert bootstrap_ratio_ci([2.0], [3.0]) == (1.5, 1.5)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([], [1.0])
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0], confidence=1.5)


def test_bootstrap_matches_naive_resampling():
    # reference: resample values (not indices) with numpy's choice, many replicates
    rng = np.random.default_rng(11)
    base, new = _lognormal(rng, 15, 0.03), _lognormal(rng, 16, 0.03, 1.02)
    r = np.random.default_rng(99)
    naive = np.median(r.choice(new, (20000, 16)), axis=1) / np.median(r.choice(base, (20000, 15)), axis=1)
    ref = np.quantile(naive, [0.025, 0.975])
    np.testing.assert_allclose(bootstrap_ratio_ci(base, new, n_boot=20000), ref, atol=0.003)


def test_bootstrap_covers_true_ratio_of_shifted_lognormals():
    # true ratio of medians is exactly 1.05; a 95 % interval should cover it ~95 % of the time
    rng = np.random.default_rng(7)
    trials, hits = 200, 0
    for i in range(trials):
        lo, hi = bootstrap_ratio_ci(_lognormal(rng, 40, 0.02), _lognormal(rng, 40, 0.02, 1.05), seed=i)
        hits += lo <= 1.05 <= hi
    assert 0.88 <= hits / trials <= 0.995


def test_bootstrap_chunked_and_exact_paths_agree(monkeypatch):
    rng = np.random.default_rng(5)
    base, new = _lognormal(rng, 201, 0.02), _lognormal(rng, 301, 0.02, 1.01)
    ref = bootstrap_ratio_ci(base, new, n_boot=6000)
    monkeypatch.setattr(intervals, "_BOOT_CHUNK_ELEMENTS", 1000)  # 4 resamples per block
    chunked = bootstrap_ratio_ci(base, new, n_boot=6000)
    assert chunked == bootstrap_ratio_ci(base, new, n_boot=6000)
    np.testing.assert_allclose(chunked, ref, atol=0.002)
    # odd sizes: the exact order-statistic law is the law of the median itself
    monkeypatch.setattr(intervals, "_BOOT_EXACT_ABOVE", 100)
    np.testing.assert_allclose(bootstrap_ratio_ci(base, new, n_boot=6000), ref, atol=0.002)


# ---------------------------------------------------------------------------------------------
# the decision table
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio, ci, q, expected", [
    (1.05, (1.01, 1.02), 0.001, "SAME"),       # row 1 wins even over a high point ratio
    (1.01, (1.0, 1.029), 0.001, "SAME"),       # row 1: significant but negligible
    (0.975, (0.972, 0.99), 0.9, "SAME"),        # row 1, lower edge 1/1.03 = 0.97087
    (1.05, (1.031, 1.07), 0.001, "SLOWER"),    # row 2
    (1.05, (1.031, 1.07), 0.06, "AMBIGUOUS"),  # no evidence (q >= alpha) -> row 5
    (0.95, (0.93, 0.9700), 0.001, "FASTER"),   # row 3: 0.97 < 1/1.03
    (1.05, (1.02, 1.08), 0.001, "AMBIGUOUS"),  # row 5: CI straddles 1.03
    (1.02, (1.01, 1.04), 0.001, "SAME"),       # row 4: point ratio in the band
    (1.01, (0.95, 1.08), 0.5, "SAME"),         # row 4: noisy, nothing seen
    (1.04, (0.99, 1.09), 0.2, "AMBIGUOUS"),    # row 5: practical-size estimate, no evidence
    (1.04, (0.99, 1.09), 0.001, "AMBIGUOUS"),  # evidence needs the CI to exclude 1 too
    (float("inf"), (1.0, float("inf")), 0.001, "AMBIGUOUS"),
])
def test_decision_table_rows(ratio, ci, q, expected):
    assert verdict_table.decide(ratio, ci, q, 0.03, 0.05) == expected


def test_judge_uses_q_value_when_given_and_reports_fields():
    base = [1.00, 1.001, 1.002, 1.003]
    new = [1.10, 1.101, 1.102, 1.103]
    out = judge(base, new)
    assert out["p_value"] == pytest.approx(2 / 70)  # exact 4 vs 4, see above
    assert out["verdict"] == "SLOWER" and out["q_value"] == out["p_value"]
    assert out["ratio"] == pytest.approx(1.1015 / 1.0015)
    assert out["ratio_ci"][0] > 1.03
    assert judge(base, new, q_value=0.2)["verdict"] == "AMBIGUOUS"
    assert judge(new, base)["verdict"] == "FASTER"
    assert judge(base, new, threshold=0.2)["verdict"] == "SAME"
    with pytest.raises(ValueError, match="threshold"):
        judge(base, new, threshold=0)
    with pytest.raises(ValueError):
        judge([], new)


# A/A and shift detection over seeded synthetic samples. Cells span the requested range
# (10..200 samples, 0.5..3 % lognormal noise); the harness's own stopping rule (CI half-width of
# the median <= 0.5 %) keeps real runs at the low-noise end for small sample counts.
AA_CELLS = [(10, 0.005), (20, 0.01), (50, 0.03), (200, 0.02), (10, 0.03)]
AA_TRIALS = 300


def _aa_counts(n: int, sigma: float, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    for i in range(AA_TRIALS):
        v = judge(_lognormal(rng, n, sigma), _lognormal(rng, n, sigma), seed=i)["verdict"]
        counts[v] = counts.get(v, 0) + 1
    return counts


@pytest.mark.parametrize("n, sigma", AA_CELLS)
def test_aa_false_alarms_and_ambiguous_rate(n, sigma):
    counts = _aa_counts(n, sigma, seed=1000 * n + int(sigma * 1000))
    false_alarm = (counts.get("SLOWER", 0) + counts.get("FASTER", 0)) / AA_TRIALS
    ambiguous = counts.get("AMBIGUOUS", 0) / AA_TRIALS
    assert false_alarm <= 0.01, counts
    if (n, sigma) == (10, 0.03):
        # 10 samples at 3 % noise cannot resolve a 3 % threshold: the point ratio alone wanders
        # past 3 % in ~8 % of A/A pairs; those are honestly inconclusive (measured: ~6 %)
        assert ambiguous <= 0.10, counts
    else:
        assert ambiguous <= 0.01, counts  # measured: 0 in these cells


@pytest.mark.parametrize("n", [20, 50])
def test_five_percent_shift_is_detected(n):
    rng = np.random.default_rng(n)
    trials = 100
    slower = sum(judge(_lognormal(rng, n, 0.01), _lognormal(rng, n, 0.01, 1.05), seed=i)["verdict"]
                 == "SLOWER" for i in range(trials))
    assert slower / trials >= 0.95


# ---------------------------------------------------------------------------------------------
# compare_frames
# ---------------------------------------------------------------------------------------------

_rid = itertools.count(1)


def _row(case_key: str, run_id: int, outcome: str = "ok", samples=None, device: str = "H100",
         message: str = "") -> dict:
    samples = list(samples) if samples is not None else []
    return {"result_id": next(_rid), "run_id": run_id, "case_key": case_key, "workload": "row_sum",
            "variant": case_key, "target": "cuda", "outcome": outcome,
            "median_s": float(np.median(samples)) if samples else float("nan"), "device": device,
            "env_id": "env1", "message": message, "samples": samples}


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows)


def _times(seed: int, n: int = 40, scale: float = 1e-3, sigma: float = 0.005) -> list[float]:
    return list(_lognormal(np.random.default_rng(seed), n, sigma, scale))


def test_compare_frames_every_kind_of_verdict():
    base = _frame([
        _row("a_same", 1, samples=_times(1)),
        _row("b_regressed", 1, samples=_times(2)),
        _row("c_still_wrong", 1, outcome="wrong", message="bad"),
        _row("e_fixed", 1, outcome="crashed"),
        _row("f_missing", 1, samples=_times(3)),
        _row("g_pooled", 1, samples=_times(4, n=20)),
        _row("g_pooled", 2, samples=_times(5, n=30)),
        _row("i_other_gpu", 1, samples=_times(6), device="A100"),
    ])
    new = _frame([
        _row("a_same", 9, samples=_times(11)),
        _row("b_regressed", 9, outcome="wrong", message="max abs err 3.0"),
        _row("c_still_wrong", 9, outcome="wrong"),
        _row("d_new", 9, samples=_times(12)),
        _row("e_fixed", 9, samples=_times(13)),
        _row("g_pooled", 9, samples=_times(14, scale=1.1e-3)),
        _row("i_other_gpu", 9, samples=_times(15)),
    ])
    got = compare_frames(new, base)
    by = {(v.case_key, v.device): v for v in got}
    assert [v.case_key for v in got] == sorted(v.case_key for v in got)
    assert len(got) == 9

    a = by["a_same", "H100"]
    assert a.verdict == "SAME" and a.n_new == 40 and a.n_base == 40 and a.new_outcome == "ok"
    assert a.ratio == pytest.approx(a.new_median_s / a.base_median_s)
    assert a.ratio_ci[0] <= a.ratio <= a.ratio_ci[1] and a.p_value is not None and a.q_value >= a.p_value
    assert a.threshold == 0.03 and a.env_id == "env1" and a.workload == "row_sum"
    assert a.new_result_id is not None and len(a.base_result_ids) == 1

    b = by["b_regressed", "H100"]
    assert b.verdict == "WRONG" and b.base_outcome == "ok" and b.regression
    assert "max abs err 3.0" in b.message and b.ratio is None
    c = by["c_still_wrong", "H100"]
    assert c.verdict == "WRONG" and c.base_outcome == "wrong" and not c.regression

    d = by["d_new", "H100"]
    assert d.verdict == "NEW" and d.base_outcome is None and d.n_new == 40 and d.base_result_ids == ()
    e = by["e_fixed", "H100"]
    assert e.verdict == "NEW" and e.message == "baseline was crashed" and e.base_outcome == "crashed"

    f = by["f_missing", "H100"]
    assert f.verdict == "MISSING" and f.new_outcome is None and f.n_base == 40

    g = by["g_pooled", "H100"]
    pooled = _times(4, n=20) + _times(5, n=30)
    assert g.n_base == 50 and g.base_run_ids == (1, 2) and len(g.base_result_ids) == 2
    assert g.base_median_s == pytest.approx(float(np.median(pooled)))
    assert g.verdict == "SLOWER" and g.ratio == pytest.approx(1.1, rel=0.01)

    # the same case on another GPU is not a baseline: NEW on H100, its A100 baseline MISSING
    assert by["i_other_gpu", "H100"].verdict == "NEW"
    assert by["i_other_gpu", "A100"].verdict == "MISSING"
    assert exit_code(got) == 2


def test_compare_frames_shows_no_ci_from_fewer_than_min_samples():
    # one sample against a full baseline (a capped case): no CI, AMBIGUOUS, and why; a 10 % slowdown
    # that a CI of 40 samples would call SLOWER is not called on 1
    one = _row("k", 2, samples=[1.1e-3])
    enough = _row("j", 2, samples=_times(31, scale=1.1e-3))
    base = _frame([{**_row("k", 1, samples=_times(30)), "run_min_samples": 10},
                   {**_row("j", 1, samples=_times(32)), "run_min_samples": 10}])
    got = {v.case_key: v for v in compare_frames(_frame([{**one, "run_min_samples": 5},
                                                         {**enough, "run_min_samples": 5}]), base)}
    k = got["k"]
    assert k.verdict == "AMBIGUOUS" and k.ratio_ci is None and k.q_value is None and k.n_new == 1
    assert k.message == ("too few samples in the new run for a confidence interval: 1, its runs asked "
                         "for min_samples 5")
    assert k.ratio == pytest.approx(1.1e-3 / float(np.median(_times(30))))
    assert got["j"].verdict == "SLOWER" and got["j"].ratio_ci is not None
    # the baseline's own minimum counts too; rows without the column keep the old behaviour
    base_few = _frame([{**_row("k", 1, samples=_times(33, n=4)), "run_min_samples": 10}])
    new_full = _frame([{**_row("k", 2, samples=_times(34)), "run_min_samples": 10}])
    (v,) = compare_frames(new_full, base_few)
    assert v.verdict == "AMBIGUOUS" and v.ratio_ci is None and "in the baseline" in v.message
    (plain,) = compare_frames(_frame([_row("k", 2, samples=_times(34))]),
                              _frame([_row("k", 1, samples=_times(33, n=4))]))
    assert plain.ratio_ci is not None


def test_compare_frames_threshold_override():
    # a 2 % slowdown with 0.3 % noise: real, but under the default 3 % -> SAME; under 1 % -> SLOWER
    base = _frame([_row("k", 1, samples=_times(21, n=60, sigma=0.003)),
                   _row("other", 1, samples=_times(22, n=60, sigma=0.003))])
    new = _frame([_row("k", 2, samples=_times(23, n=60, scale=1.02e-3, sigma=0.003)),
                  _row("other", 2, samples=_times(24, n=60, scale=1.02e-3, sigma=0.003))])
    default = {v.case_key: v for v in compare_frames(new, base)}
    assert default["k"].verdict == "SAME" and default["other"].verdict == "SAME"
    tight = {v.case_key: v for v in compare_frames(new, base, thresholds={"k": 0.01})}
    assert tight["k"].verdict == "SLOWER" and tight["k"].threshold == 0.01
    assert tight["other"].verdict == "SAME" and tight["other"].threshold == 0.03
    assert {v.case_key: v for v in compare_frames(new, base, threshold=0.01)}["other"].verdict == "SLOWER"
    with pytest.raises(ValueError, match="thresholds\\['k'\\]"):
        compare_frames(new, base, thresholds={"k": -1})


def test_compare_frames_applies_bh_across_cases():
    # 4 vs 4 samples, completely separated, 10 % slower: exact p = 2/70 < 0.05 and the CI lies
    # wholly above 1.03 -> SLOWER alone. Next to four unchanged cases BH gives it
    # q = (2/70) * 5 / 1 = 0.143 > 0.05: the evidence is gone -> AMBIGUOUS.
    slow_base = [1.00e-3, 1.001e-3, 1.002e-3, 1.003e-3]
    slow_new = [x * 1.1 for x in slow_base]
    alone = compare_frames(_frame([_row("s", 2, samples=slow_new)]),
                           _frame([_row("s", 1, samples=slow_base)]))
    assert alone[0].verdict == "SLOWER" and alone[0].q_value == pytest.approx(2 / 70)

    base_rows, new_rows = [_row("s", 1, samples=slow_base)], [_row("s", 2, samples=slow_new)]
    for i in range(4):  # identical samples: p = 1
        base_rows.append(_row(f"z{i}", 1, samples=_times(30 + i)))
        new_rows.append(_row(f"z{i}", 2, samples=_times(30 + i)))
    got = compare_frames(_frame(new_rows), _frame(base_rows))
    s = next(v for v in got if v.case_key == "s")
    assert s.p_value == pytest.approx(2 / 70)
    assert s.q_value == pytest.approx(2 / 70 * 5)
    assert s.verdict == "AMBIGUOUS"
    np.testing.assert_allclose([v.q_value for v in got], benjamini_hochberg([v.p_value for v in got]))
    assert exit_code(got) == 3


def test_compare_frames_median_only_rows_and_latest_new_row():
    # no stored samples: the median counts as one sample; two new rows: the latest is judged
    base = _frame([{**_row("m", 1), "samples": [], "median_s": 1e-3}])
    new = _frame([_row("m", 2, samples=_times(40)), _row("m", 3, outcome="timeout")])
    v = compare_frames(new, base)[0]
    assert v.verdict == "WRONG" and v.new_outcome == "timeout"
    v = compare_frames(_frame([_row("m", 2, samples=[1e-3, 1e-3])]), base)[0]
    assert v.n_base == 1 and v.verdict == "SAME" and v.p_value == 1.0
    assert compare_frames(_frame([]), _frame([])) == []


# ---------------------------------------------------------------------------------------------
# exit codes and gates
# ---------------------------------------------------------------------------------------------


def _v(*names: str) -> list[Verdict]:
    return [Verdict(case_key=f"c{i}", verdict=n) for i, n in enumerate(names)]


def test_exit_code_precedence():
    assert exit_code([]) == 0
    assert exit_code(_v("SAME", "FASTER", "NEW", "MISSING")) == 0
    assert exit_code(_v("SAME", "AMBIGUOUS")) == 3
    assert exit_code(_v("AMBIGUOUS", "SLOWER")) == 1
    assert exit_code(_v("SLOWER", "AMBIGUOUS", "WRONG")) == 2
    assert exit_code(_v("WRONG")) == 2


@pytest.mark.parametrize("text, threshold, ambiguous", [
    ("median:3%", 0.03, False),
    ("median:3%,ambiguous", 0.03, True),
    (" Median: 2.5 % , WRONG ", 0.025, False),
    ("ambiguous", None, True),
    ("wrong,median:10%", 0.10, False),
])
def test_parse_fail_on_good(text, threshold, ambiguous):
    gate = parse_fail_on(text)
    assert isinstance(gate, FailOn) and FailOn.of(gate) is gate and FailOn.of(text) == gate
    assert gate.fail_ambiguous is ambiguous and gate.fail_wrong is True and str(gate) == text.strip()
    if threshold is None:
        assert gate.threshold is None  # not given: the caller keeps the suite's thresholds
    else:
        assert gate.threshold == pytest.approx(threshold)


def test_exit_code_of_gates_and_incomplete_runs():
    """The one composition of exit codes (harness.errors.compose_exit_code), case by case."""
    assert compose_exit_code(verdicts=_v("SAME", "AMBIGUOUS")) == 3
    assert compose_exit_code(verdicts=_v("SAME", "AMBIGUOUS"), gated=True) == 0  # the gate passes it
    assert compose_exit_code(verdicts=_v("SAME", "AMBIGUOUS"), gated=True, fail_ambiguous=True) == 3
    # an incomplete run passes no gate, even when every case it has is SAME or FASTER
    assert compose_exit_code(verdicts=_v("SAME", "FASTER"), incomplete=True, gated=True) == 3
    assert compose_exit_code(verdicts=_v("SAME", "MISSING"), incomplete=True) == 3
    assert compose_exit_code(verdicts=_v("SLOWER"), incomplete=True, gated=True) == 1
    # a case that failed to run outranks every verdict
    assert compose_exit_code(outcomes=["ok", "crashed"], verdicts=_v("SLOWER"), incomplete=True) == 2
    assert compose_exit_code(outcomes=["ok", "ok"]) == 0


@pytest.mark.parametrize("text, named", [
    ("median:3", "'median:3'"),
    ("median:x%", "'median:x%'"),
    ("speed:3%", "'speed:3%'"),
    ("median:3%,fast", "'fast'"),
    ("median:3%,", "empty rule"),
    ("median:0%", "'median:0%'"),
    ("median:3%,median:4%", "'median:4%'"),
    ("", "empty"),
])
def test_parse_fail_on_bad(text, named):
    with pytest.raises(ValueError) as info:
        parse_fail_on(text)
    assert named in str(info.value)
    assert "median:N%" in str(info.value) and "ambiguous" in str(info.value)


# ---------------------------------------------------------------------------------------------
# history
# ---------------------------------------------------------------------------------------------


def test_lookback_zscore():
    # mean 3, sample std sqrt(2.5)
    assert lookback_zscore([1, 2, 3, 4, 5], 6.0) == pytest.approx(3 / math.sqrt(2.5))
    assert lookback_zscore([100, 100, 1, 2, 3, 4, 5], 6.0, window=5) == pytest.approx(3 / math.sqrt(2.5))
    assert lookback_zscore([1, 2, float("nan"), 3, 4, 5], 0.0) == pytest.approx(-3 / math.sqrt(2.5))
    assert lookback_zscore([1, 2, 3, 4], 6.0) is None  # fewer than min_points
    assert lookback_zscore([2.0] * 6, 2.0) == 0.0
    assert lookback_zscore([2.0] * 6, 2.1) is None


def test_l1_segment_costs_match_brute_force():
    x = list(np.random.default_rng(2).normal(size=23))
    for s in (0, 7):
        want = [np.abs(np.asarray(x[s:s + k + 1]) - np.median(x[s:s + k + 1])).sum()
                for k in range(len(x) - s)]
        np.testing.assert_allclose(steps._l1_costs_from(x, s), want, atol=1e-12)


def _brute_force_bounds(x: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """Segment starts (after 0) of the cheapest segmentation, by enumerating all of them."""
    n, best, best_bounds = len(x), math.inf, []
    for k in range(n):
        for cut in itertools.combinations(range(1, n), k):
            edges = [0, *cut, n]
            if any(b - a < min_size for a, b in itertools.pairwise(edges)):
                continue
            cost = sum(np.abs(x[a:b] - np.median(x[a:b])).sum() + penalty
                       for a, b in itertools.pairwise(edges))
            if cost < best - 1e-12:
                best, best_bounds = cost, list(cut)
    return best_bounds


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_detect_steps_is_the_optimal_partition(seed):
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(1.0, 0.05, 4), rng.normal(1.5, 0.05, 5), rng.normal(0.8, 0.05, 3)]
    for penalty in (0.02, 0.3, 3.0):
        got = [s.index for s in detect_steps(x, min_size=2, penalty=penalty, rel_threshold=0.0)]
        assert got == _brute_force_bounds(x, penalty, 2)


def test_detect_steps_single_step():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(1.0, 0.01, 20), rng.normal(1.10, 0.011, 20)]
    steps = detect_steps(x)
    assert len(steps) == 1
    assert abs(steps[0].index - 20) <= 1
    assert steps[0].ratio == pytest.approx(1.10, abs=0.01)
    assert steps[0].ratio == pytest.approx(steps[0].after / steps[0].before)


@pytest.mark.parametrize("sigma", [0.01, 0.03])
def test_detect_steps_flat_noise_has_none(sigma):
    for seed in range(20):
        x = np.random.default_rng(seed).normal(1.0, sigma, 60)
        assert detect_steps(x) == [], seed


def test_detect_steps_two_steps_nan_and_small_changes():
    rng = np.random.default_rng(3)
    x = np.r_[rng.normal(1.0, 0.01, 20), rng.normal(1.08, 0.01, 20), rng.normal(0.95, 0.01, 20)]
    steps = detect_steps(x)
    assert [abs(s.index - want) <= 1 for s, want in zip(steps, (20, 40))] == [True, True]
    assert steps[0].ratio > 1.05 and steps[1].ratio < 0.9
    # a NaN (failed run) before the step: indices still refer to the input
    with_nan = np.r_[x[:10], np.nan, x[10:]]
    assert [s.index for s in detect_steps(with_nan)] == [s.index + 1 for s in steps]
    # a clean 2 % step: found with rel_threshold 1 %, merged away at the default 3 %
    small = np.r_[rng.normal(1.0, 0.001, 15), rng.normal(1.02, 0.001, 15)]
    assert [s.index for s in detect_steps(small, rel_threshold=0.01)] == [15]
    assert detect_steps(small) == []
    assert detect_steps([1.0, 2.0, 3.0, 4.0, 5.0]) == []  # shorter than two minimal segments
    assert isinstance(steps[0], Step)


def test_detect_steps_constant_levels():
    assert detect_steps([1.0] * 10) == []
    assert [(s.index, s.ratio) for s in detect_steps([1.0] * 6 + [1.5] * 6)] == [(6, 1.5)]


def test_a_large_slowdown_with_a_noisier_slow_level_is_a_step():
    """Timing noise grows with the level: three runs at ~20 us, then three at ~300 us spread over
    270-540 us (a case of the publish test's planted 10x slowdown). In absolute terms two of the five
    differences are the slow level's noise, which priced the second segment above its gain; the
    noise is measured in relative terms, so the step is named at its first slow run."""
    x = [32.4, 20.6, 22.0, 329.9, 536.1, 272.2]
    (step,) = detect_steps(x)
    assert step.index == 3 and step.ratio == pytest.approx(329.9 / 22.0)
    # the same flat relative noise at any level: no step
    for scale in (1e-6, 1.0, 1e3):
        for seed in range(10):
            flat = scale * np.random.default_rng(seed).normal(1.0, 0.03, 40)
            assert detect_steps(flat) == [], (scale, seed)


def test_first_bad_names_the_most_recent_slowdown():
    rng = np.random.default_rng(8)
    x = np.r_[rng.normal(1.0, 0.01, 15), rng.normal(1.2, 0.01, 15), rng.normal(1.0, 0.01, 15),
              rng.normal(1.1, 0.01, 15)]
    run_ids = list(range(100, 160))
    commits = [f"c{i:02d}" for i in range(60)]
    bad = first_bad(x, run_ids, commits)
    assert bad is not None and abs(bad["index"] - 45) <= 1
    assert bad["run_id"] == run_ids[bad["index"]] and bad["commit"] == commits[bad["index"]]
    assert bad["ratio"] == pytest.approx(1.1, abs=0.02)
    faster = np.r_[rng.normal(1.0, 0.01, 15), rng.normal(0.8, 0.01, 15)]
    assert first_bad(faster, list(range(30)), ["x"] * 30) is None
    with pytest.raises(ValueError, match="length"):
        first_bad(x, run_ids[:-1], commits)


def test_compare_frames_pools_new_rounds_and_a_bad_round_is_wrong():
    # interleaved A/B rounds: three new rows of one case are pooled (n_new counts them all)
    base = _frame([_row("k", 1, samples=_times(1)), _row("k", 3, samples=_times(3))])
    new = _frame([_row("k", 2, samples=_times(2)), _row("k", 4, samples=_times(4)),
                  _row("k", 6, samples=_times(6))])
    (v,) = compare_frames(new, base)
    assert v.verdict == "SAME" and v.n_new == 120 and v.n_base == 80
    # one round that went wrong makes the case WRONG, whatever the other rounds measured
    new = _frame([_row("k", 2, samples=_times(2)), _row("k", 4, outcome="wrong", samples=[]),
                  _row("k", 6, samples=_times(6))])
    (v,) = compare_frames(new, base)
    assert v.verdict == "WRONG" and v.new_outcome == "wrong" and v.base_outcome == "ok"


# ---------------------------------------------------------------------------------------------
# interleaved sides (harness.measure.measure_interleaved): rows 2i/3i
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio, ci, q, expected", [
    (1.05, (1.02, 1.08), 0.001, "SLOWER"),     # 2i: point ratio past 1.03 with evidence
    (1.035, (1.005, 1.065), 0.001, "SLOWER"),  # 2i
    (1.035, (0.99, 1.08), 0.001, "AMBIGUOUS"),  # CI holds 1: no evidence
    (1.05, (1.02, 1.08), 0.2, "AMBIGUOUS"),    # q too large
    (1.02, (1.005, 1.035), 0.001, "SAME"),     # real but under the threshold (row 4)
    (0.96, (0.93, 0.99), 0.001, "FASTER"),     # 3i
    (1.01, (0.995, 1.025), 0.5, "SAME"),       # row 1
])
def test_decision_table_interleaved_rows(ratio, ci, q, expected):
    assert verdict_table.decide(ratio, ci, q, 0.03, 0.05, interleaved=True) == expected


def _suite_verdicts(rng, cases: int, n: int, sigma: float, scale: float, interleaved: bool) -> list[str]:
    """One suite of ``cases`` cases judged together (BH over the suite), lognormal samples."""
    base, new = [], []
    for c in range(cases):
        group = 1 if interleaved else None
        base.append({**_row(f"c{c}", 1, samples=_lognormal(rng, n, sigma)), "interleave_group": group})
        new.append({**_row(f"c{c}", 2, samples=_lognormal(rng, n, sigma, scale)), "interleave_group": group})
    return [v.verdict for v in compare_frames(_frame(new), _frame(base), n_boot=500)]


def test_interleaved_rule_aa_false_alarms_and_five_percent_power():
    """At this machine's per-sample noise (~10 %) and 400 samples a side: the interleaved rule
    keeps A/A false alarms under 1 % (BH over the suite) and finds a 5 % change in >= 95 % of
    cases, where the whole-CI rule for separate runs finds far fewer (hand estimate: the ratio's
    standard error is ~0.9 %, so its CI reaches below 1.03 in most trials)."""
    rng = np.random.default_rng(42)
    aa = [v for _ in range(10) for v in _suite_verdicts(rng, 20, 400, 0.10, 1.0, True)]
    assert sum(v in ("SLOWER", "FASTER") for v in aa) / len(aa) <= 0.01
    sl = [v for _ in range(5) for v in _suite_verdicts(rng, 20, 400, 0.10, 1.05, True)]
    assert sum(v == "SLOWER" for v in sl) / len(sl) >= 0.95
    strict = [v for _ in range(5) for v in _suite_verdicts(rng, 20, 400, 0.10, 1.05, False)]
    assert sum(v == "SLOWER" for v in strict) / len(strict) < 0.6


def test_compare_frames_knows_interleaved_rows_by_their_group():
    rng = np.random.default_rng(3)
    a, b = _lognormal(rng, 400, 0.02), _lognormal(rng, 400, 0.02, 1.035)

    def verdict(base_group, new_groups):
        base = _frame([{**_row("k", 1, samples=a), "interleave_group": base_group}])
        new = _frame([{**_row("k", 2 + i, samples=b[i::len(new_groups)]), "interleave_group": g}
                      for i, g in enumerate(new_groups)])
        (v,) = compare_frames(new, base)
        return v

    together = verdict(7, [7])
    assert together.interleaved and together.verdict == "SLOWER", together
    apart = verdict(7, [8])  # different loops
    assert not apart.interleaved
    assert verdict(None, [7]).interleaved is False
    # a new side pooled from a loop the baseline was not part of is not interleaved
    assert not verdict(7, [7, None]).interleaved


# ---------------------------------------------------------------------------------------------
# separate runs: run-to-run spread added to the CI
# ---------------------------------------------------------------------------------------------


def test_history_sd_is_the_robust_spread_of_log_medians():
    logs = [0.0, 0.02, -0.02, 0.04, -0.04]  # |deviations| 0, .02, .02, .04, .04: median .02
    assert stats.history_sd([math.exp(x) for x in logs]) == stats.Spread(pytest.approx(1.4826 * 0.02), 4)
    # one disturbed run (3x slower): log median 0.01, |deviations| .01 .01 .03 .03 .05 1.09 -> .03;
    # a plain SD of the logs would be about 0.44
    assert stats.history_sd([math.exp(x) for x in logs] + [3.0]).sd == pytest.approx(1.4826 * 0.03)
    assert stats.history_sd([1.0, 1.1]) is None  # fewer than three runs
    assert stats.history_sd([1.0, float("nan"), 0.0, 1.1]) is None


def test_widen_ci_by_hand():
    # ratio 1.05, CI (1.04, 1.06), run spread 2 %, one run a side:
    # extra = (1.96 * 0.02)^2 * 2 = 0.003073; low half-width sqrt((ln1.05 - ln1.04)^2 + extra) = 0.05625
    lo, hi = stats.widen_ci(1.05, (1.04, 1.06), 0.02, 1, 1)
    assert lo == pytest.approx(math.exp(math.log(1.05) - 0.05625), rel=1e-4)
    assert hi == pytest.approx(math.exp(math.log(1.05) + 0.05624), rel=1e-4)
    assert lo < 1.0 < hi  # a 5 % change is no longer certain against a 2 % run-to-run spread
    # more runs per side shrink the added part
    lo3, hi3 = stats.widen_ci(1.05, (1.04, 1.06), 0.02, 3, 3)
    assert lo < lo3 < 1.04 and 1.06 < hi3 < hi
    assert stats.widen_ci(1.05, (1.04, 1.06), 0.0, 1, 1) == (1.04, 1.06)
    # a spread from three runs a side (4 degrees of freedom): Student's 2.776 instead of 1.96
    lo4, _ = stats.widen_ci(1.05, (1.04, 1.06), 0.02, 1, 1, df=4)
    extra = (2.7764 * 0.02) ** 2 * 2
    assert lo4 == pytest.approx(math.exp(math.log(1.05) - math.sqrt(math.log(1.05 / 1.04) ** 2 + extra)),
                                rel=1e-4)


def test_compare_frames_adds_history_spread_to_separate_runs_only():
    base = _frame([_row("k", 1, samples=_times(1))])
    new = _frame([_row("k", 2, samples=[x * 1.05 for x in _times(2)])])
    (tight,) = compare_frames(new, base)
    assert tight.verdict == "SLOWER" and tight.run_sd is None
    (spread,) = compare_frames(new, base, run_sd={"k": stats.Spread(0.02, 9)})
    assert spread.verdict == "AMBIGUOUS" and spread.run_sd == 0.02
    assert spread.ratio_ci[0] < 1.0 < spread.ratio_ci[1]
    assert spread.ratio == tight.ratio  # the point estimate is the same
    # sides timed in one loop share the machine's drift: no run spread is added
    (inter,) = compare_frames(_frame([{**_row("k", 2, samples=[x * 1.05 for x in _times(2)]),
                                       "interleave_group": 5}]),
                              _frame([{**_row("k", 1, samples=_times(1)), "interleave_group": 5}]),
                              run_sd={"k": stats.Spread(0.02, 9)})
    assert inter.verdict == "SLOWER" and inter.run_sd is None


def test_pooled_rounds_bring_their_own_spread_and_keep_aa_false_alarms_rare():
    """Separate runs of unchanged code whose medians drift 3 % from run to run (within-run noise
    0.5 %), three runs a side: judged on pooled samples alone most such pairs differ
    "significantly"; with the spread between each side's runs added to the CI, false SLOWER/FASTER
    stay under 1 %."""
    rng = np.random.default_rng(11)

    def side(run0: int, c: str) -> list[dict]:
        return [_row(c, run0 + i, samples=list(_lognormal(rng, 60, 0.005, math.exp(rng.normal(0, 0.03)))))
                for i in range(3)]

    verdicts = []
    for trial in range(40):
        cases = [f"c{i}" for i in range(10)]
        base = _frame([r for c in cases for r in side(1, c)])
        new = _frame([r for c in cases for r in side(4, c)])
        verdicts += compare_frames(new, base, n_boot=400)
    bad = sum(v.verdict in ("SLOWER", "FASTER") for v in verdicts)
    assert len(verdicts) == 400 and bad / len(verdicts) <= 0.01, bad
    sds = [v.run_sd for v in verdicts]
    assert None not in sds and 0.024 <= float(np.median(sds)) <= 0.036  # the planted 3 %, estimated
    # the same pairs judged without any run spread: the samples alone call many of them changed
    plain = [verdict_table.decide(v.ratio, stats.bootstrap_ratio_ci([1.0], [v.ratio]), 0.0, 0.03, 0.05)
             for v in verdicts]
    assert sum(x in ("SLOWER", "FASTER") for x in plain) > 0.1 * len(verdicts)
