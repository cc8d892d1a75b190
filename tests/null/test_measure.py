"""harness.measure statistics and loop, harness.execute.check messages, derived rates (no device needed)."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from harness.execute.check import check_outputs, poisoned_unwritten
from harness import model
from harness.errors import InvalidSetting, UsageError
from harness.measure import (
    STOP_REASONS,
    CpuTimer,
    derived,
    hot_rotation_count,
    measure,
    median_ci,
    should_stop,
)
from harness.measure import stopping
from harness.model import MeasureConfig, Timing

# -- median_ci ------------------------------------------------------------------------------------


def test_median_ci_n10_is_second_and_ninth_order_statistics():
    # by hand: P(B <= 1) = 11/1024 = 0.0107 < 0.025 <= P(B <= 2) = 56/1024, B ~ Bin(10, 1/2)
    assert math.isclose(binom.cdf(1, 10, 0.5), 11 / 1024)
    x = [7.0, 3.0, 9.0, 1.0, 10.0, 5.0, 2.0, 8.0, 4.0, 6.0]  # x(k) = k
    med, lo, hi = median_ci(x)
    assert (med, lo, hi) == (5.5, 2.0, 9.0)


def test_median_ci_n20_by_hand():
    # P(B <= 5) = 21700/2^20 = 0.0207 < 0.025 <= P(B <= 6) = 0.0577: ranks (6, 15)
    assert math.isclose(binom.cdf(5, 20, 0.5), 21700 / 2**20)
    x = np.arange(1, 21, dtype=float)[::-1]
    assert median_ci(x) == (10.5, 6.0, 15.0)


@pytest.mark.parametrize("n", [6, 7, 10, 11, 25, 50, 99, 100, 1000])
def test_median_ci_ranks_are_the_widest_with_coverage(n):
    # independent search: the largest l with P(B <= l-1) < alpha/2
    l_rank = max(k for k in range(1, n // 2 + 1) if binom.cdf(k - 1, n, 0.5) < 0.025)
    coverage = 1 - 2 * binom.cdf(l_rank - 1, n, 0.5)
    assert coverage >= 0.95
    assert 1 - 2 * binom.cdf(l_rank, n, 0.5) < 0.95  # one rank narrower would undercover
    x = np.random.default_rng(n).permutation(np.arange(1, n + 1, dtype=float))
    med, lo, hi = median_ci(x)
    assert (lo, hi) == (float(l_rank), float(n + 1 - l_rank))
    assert med == np.median(x)


def test_median_ci_small_and_bad():
    assert median_ci([3.0]) == (3.0, 3.0, 3.0)
    assert median_ci([1.0, 2.0, 3.0]) == (2.0, 1.0, 3.0)  # n < 6: widest available
    with pytest.raises(ValueError):
        median_ci([])
    with pytest.raises(ValueError):
        median_ci([1.0, 2.0], confidence=1.0)


def test_median_ci_99_percent_is_wider():
    x = np.random.default_rng(0).normal(size=200)
    _, lo95, hi95 = median_ci(x, 0.95)
    _, lo99, hi99 = median_ci(x, 0.99)
    assert lo99 <= lo95 and hi99 >= hi95 and (hi99 - lo99) > (hi95 - lo95)


# -- should_stop ----------------------------------------------------------------------------------

CFG = MeasureConfig(max_rel_ci=0.005, min_samples=10, min_time_s=0.5, max_time_s=15.0, max_samples=1000)
TIGHT = [1.0 + 1e-4 * i for i in range(12)]  # CI half-width ~ 4e-4 relative
WIDE = [1.0, 2.0] * 6  # CI half-width 50 %


def test_should_stop_converged():
    assert should_stop(TIGHT, 0.6, CFG) == (True, "converged")


def test_should_stop_needs_min_samples():
    assert should_stop(TIGHT[:9], 0.6, CFG) == (False, "")


def test_should_stop_needs_min_time():
    assert should_stop(TIGHT, 0.4, CFG) == (False, "")


def test_should_stop_wide_ci_continues_then_caps():
    assert should_stop(WIDE, 1.0, CFG) == (False, "")
    assert should_stop(WIDE, 1.0, CFG, wall_s=15.0) == (True, "cap")
    assert should_stop(WIDE, 15.0, CFG) == (True, "cap")
    assert should_stop(TIGHT[:3], 0.1, CFG, wall_s=20.0) == (True, "cap")  # cap beats min_samples


def test_should_stop_max_samples():
    many = WIDE * 100  # 1200 samples, never converges
    assert should_stop(many, 1.0, CFG) == (True, "max_samples")


def test_min_samples_wins_over_the_cap_up_to_the_case_limit():
    # 3 samples, min_samples 10, past max_time_s (15 s): a case limit lets sampling go on
    assert should_stop(TIGHT[:3], 0.1, CFG, wall_s=20.0, limit_s=60.0) == (False, "")
    assert should_stop(TIGHT[:9], 0.1, CFG, wall_s=59.9, limit_s=60.0) == (False, "")
    # once min_samples are there, the cap applies as usual (a wide CI that never converges)
    assert should_stop(WIDE[:10], 0.1, CFG, wall_s=20.0, limit_s=60.0) == (True, "cap")
    # the case's limit ends it with fewer samples rather than run into its timeout
    assert should_stop(TIGHT[:3], 0.1, CFG, wall_s=60.0, limit_s=60.0) == (True, "cap")
    # a limit under max_time_s never stops it before the cap
    assert should_stop(TIGHT[:3], 0.1, CFG, wall_s=10.0, limit_s=5.0) == (False, "")
    assert should_stop(TIGHT[:3], 0.1, CFG, wall_s=15.0, limit_s=5.0) == (True, "cap")


def test_measure_collects_min_samples_past_max_time_within_the_limit():
    # each launch sleeps 20 ms: max_time_s 0.05 s holds ~2 samples, min_samples asks for 6
    cfg = MeasureConfig(max_time_s=0.05, min_time_s=0.0, min_samples=6, warmup_min=1)
    nap = lambda: time.sleep(0.02)  # noqa: E731
    capped = measure(CpuTimer(flush_bytes=1 << 12), nap, cfg)  # no case limit: the cap as before
    assert capped.stop_reason == "cap" and len(capped.samples) < 6
    t = measure(CpuTimer(flush_bytes=1 << 12), nap, cfg, limit_s=5.0)
    assert len(t.samples) >= 6 and t.stop_reason in ("converged", "cap")
    short = measure(CpuTimer(flush_bytes=1 << 12), nap, cfg, limit_s=0.1)  # the limit ends it first
    assert short.stop_reason == "cap" and len(short.samples) < 6


def test_should_stop_converged_wins_over_cap():
    assert should_stop(TIGHT, 20.0, CFG, wall_s=30.0) == (True, "converged")


def test_should_stop_identical_samples_converge():
    assert should_stop([2e-6] * 10, 0.5, CFG) == (True, "converged")


def test_stopping_criterion_is_named_in_the_config(monkeypatch):
    """A registered criterion decides convergence; the minimums and the caps still hold around it."""
    seen = []

    def after_twelve(samples, config):
        seen.append(len(samples))
        return len(samples) >= 12

    monkeypatch.setattr(stopping, "CRITERIA", dict(stopping.CRITERIA))
    monkeypatch.setattr(model, "STOPPING_NAMES", set(model.STOPPING_NAMES))
    with pytest.raises(InvalidSetting, match="stopping must be the name of a stopping criterion"):
        MeasureConfig(stopping="after-twelve")  # not registered yet
    stopping.register_criterion("after-twelve", after_twelve)
    cfg = MeasureConfig(stopping="after-twelve", min_samples=10, min_time_s=0.5, max_time_s=15.0)
    assert should_stop(WIDE[:11], 1.0, cfg) == (False, "")  # the default criterion would not stop either
    assert should_stop(WIDE[:12], 1.0, cfg) == (True, "converged")  # a wide CI: only the criterion says so
    assert should_stop(WIDE[:12], 0.4, cfg) == (False, "")  # min_time_s first: not even asked
    assert should_stop(WIDE[:5], 1.0, cfg, wall_s=16.0) == (True, "cap")
    assert seen == [11, 12]
    with pytest.raises(ValueError, match="already registered"):
        stopping.register_criterion("after-twelve", after_twelve)


def test_unknown_stopping_criterion_names_the_known_ones():
    # refused where the config is made, whoever makes it
    with pytest.raises(InvalidSetting, match=r"MeasureConfig: stopping must be the name of a stopping "
                                             r"criterion \(median-ci\), got 'nope'"):
        MeasureConfig(stopping="nope")
    # a criterion unregistered behind the config's back is still named by the loop
    cfg = MeasureConfig()
    object.__setattr__(cfg, "stopping", "gone")
    with pytest.raises(UsageError, match="stopping criterion 'gone' is not one of median-ci"):
        should_stop(TIGHT, 0.6, cfg)


# -- measure() with a real function on the CPU ----------------------------------------------------

SMALL = MeasureConfig(max_time_s=0.3, min_time_s=0.005, min_samples=10, max_rel_ci=0.005)


@pytest.mark.parametrize("mode", ["cold", "hot"])
def test_measure_cpu_invariants(mode):
    a = np.random.default_rng(0).uniform(size=4096)
    t = measure(CpuTimer(flush_bytes=4 << 20), lambda: a.sum(), replace(SMALL, mode=mode))
    assert isinstance(t, Timing)
    assert t.mode == mode
    assert t.stop_reason in STOP_REASONS
    if t.stop_reason != "cap":
        assert len(t.samples) >= SMALL.min_samples
    assert t.samples and all(s > 0 for s in t.samples)
    assert min(t.samples) <= t.median <= max(t.samples)
    assert t.ci_low <= t.median <= t.ci_high
    assert t.discarded == 0 and t.clocks_mhz == ()
    tel = dict(t.telemetry)
    assert tel["kind"] == "cpu" and tel["warmup_launches"] >= 1
    assert tel["wall_s"] < SMALL.max_time_s + 0.25
    if mode == "hot":
        assert tel["batch"] >= 1 and tel["flush_bytes"] == 0
    else:
        assert tel["batch"] == 1 and tel["flush_bytes"] == 4 << 20
    assert [k for k, _ in t.telemetry] == sorted(k for k, _ in t.telemetry)


def test_measure_rotates_launches_and_respects_warmup_min():
    calls = [0, 0, 0]

    def make(i):
        def f():
            calls[i] += 1
        return f

    cfg = MeasureConfig(max_time_s=0.2, min_time_s=0.0, min_samples=10, warmup_min=5)
    t = measure(CpuTimer(flush_bytes=1 << 16), [make(0), make(1), make(2)], cfg)
    assert dict(t.telemetry)["warmup_launches"] >= 5 or dict(t.telemetry)["warmup_s"] >= 0.2 * 0.2
    assert min(calls) > 0 and max(calls) - min(calls) <= 1  # round robin


def test_measure_stops_at_max_samples():
    cfg = MeasureConfig(max_time_s=5.0, min_time_s=5.0, min_samples=10, max_samples=25)  # never converges
    t = measure(CpuTimer(flush_bytes=1 << 12), lambda: None, cfg)
    assert t.stop_reason == "max_samples" and len(t.samples) == 25


class _ClockedCpuTimer(CpuTimer):
    """The CPU timer with an SM-clock reading per sample, every third one low: checks the loop's
    discard accounting (the real clocks come from NVML, on a GPU)."""

    def clock_floor_mhz(self, config):
        return config.clock_floor * 2000.0

    def _sample(self):
        t, _ = super()._sample()
        return t, (1000.0 if self._count % 3 == 0 else 1980.0)


def test_measure_discards_low_clock_samples():
    cfg = MeasureConfig(max_time_s=0.2, min_time_s=0.0, min_samples=30, max_rel_ci=1e-9)
    t = measure(_ClockedCpuTimer(flush_bytes=1 << 12), lambda: None, cfg)
    assert t.discarded > 0
    assert len(t.clocks_mhz) == len(t.samples)
    assert all(c == 1980.0 for c in t.clocks_mhz)
    assert dict(t.telemetry)["clock_floor_mhz"] == 1500.0


def test_measure_rejects_bad_launch_and_mode():
    with pytest.raises(TypeError):
        measure(CpuTimer(), [], SMALL)
    with pytest.raises(ValueError):
        CpuTimer(mode="warm")


def test_hot_rotation_count():
    assert hot_rotation_count(256 << 20, 50 << 20) == 2
    assert hot_rotation_count(1 << 20, 50 << 20) == 100
    assert hot_rotation_count(30 << 20, 50 << 20) == 4  # 2 * 50 / 30 -> 4 copies, 120 MiB > 100 MiB


# -- check_outputs --------------------------------------------------------------------------------


def test_check_outputs_pass():
    ref = [np.linspace(0, 1, 100)]
    ok, msg = check_outputs([ref[0].astype(np.float32)], ref, 1e-5, 1e-6)
    assert ok and msg == ""


def test_check_outputs_planted_mismatch_message():
    ref = np.arange(12, dtype=np.float64).reshape(3, 4)
    got = ref.astype(np.float32)
    got[1, 2] = 7.5  # expected 6
    got[2, 0] += 1e-3  # expected 8, small error
    ok, msg = check_outputs([np.zeros(2), got], [np.zeros(2), ref], 1e-5, 1e-5)
    assert not ok
    assert msg.startswith("output 1:")
    assert "2 of 12 elements differ" in msg
    assert "worst at index (1, 2): got 7.5, expected 6" in msg
    assert "max abs error 1.5" in msg and "max rel error 0.25" in msg


def test_check_outputs_nan_where_reference_finite_fails_even_with_huge_tolerance():
    ref = np.ones(5)
    got = np.ones(5, dtype=np.float32)
    got[3] = np.nan
    ok, msg = check_outputs([got], [ref], 1e9, 1e9)
    assert not ok
    assert "output 0: 1 of 5 elements differ" in msg
    assert "worst at index (3,): got nan, expected 1" in msg
    assert "1 non-finite where the reference is finite" in msg
    assert "1 element(s) still hold the poison value" in msg


def test_check_outputs_inf_where_reference_finite_fails():
    ok, msg = check_outputs([np.array([1.0, np.inf])], [np.array([1.0, 2.0])], 1.0, 1e30)
    assert not ok and "got inf, expected 2" in msg


def test_check_outputs_nonfinite_reference():
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert check_outputs([ref.copy()], [ref], 0, 0) == (True, "")
    bad = ref.copy()
    bad[1] = -np.inf
    ok, msg = check_outputs([bad], [ref], 1e-3, 1e-3)
    assert not ok and "worst at index (1,): got -inf, expected inf" in msg


def test_check_outputs_shape_and_count():
    ok, msg = check_outputs([np.zeros(3)], [np.zeros(4)], 0.1, 0.1)
    assert not ok and "output 0: shape (3,) differs from the reference's (4,)" in msg
    ok, msg = check_outputs([np.zeros(3)], [np.zeros(3), np.zeros(3)], 0.1, 0.1)
    assert not ok and "1 output(s) produced, the reference has 2" in msg


def test_check_outputs_integers_exact():
    big = np.array([2**62 + 1, 5], dtype=np.int64)
    off = np.array([2**62, 5], dtype=np.int64)  # equal in float64, different as integers
    assert check_outputs([big], [big.copy()], 0, 0) == (True, "")
    ok, msg = check_outputs([off], [big], 0, 0)
    assert not ok and "1 of 2 elements differ (exact comparison)" in msg and "index (0,)" in msg


def test_poisoned_unwritten():
    a = np.ones(10, np.float32)
    a[[2, 5]] = np.nan
    assert poisoned_unwritten(a) == 2
    b = np.zeros(4, np.int32)
    b[0] = np.iinfo(np.int32).min
    assert poisoned_unwritten(b) == 1
    assert poisoned_unwritten(np.zeros(3, bool)) == 0
    assert poisoned_unwritten(np.full(3, -1.0), value=-1.0) == 3


# -- derived --------------------------------------------------------------------------------------


def test_derived_by_hand():
    t = Timing(samples=(2e-3,), median=2e-3, ci_low=2e-3, ci_high=2e-3)
    peaks = {"copy_gbps": 1000.0, "matmul_fp32_gflops": 50_000.0, "matmul_fp16_gflops": 500_000.0}
    # 4e9 bytes in 2 ms = 2000 GB/s = 200 % of 1000; 1e9 ops in 2 ms = 500 GFLOP/s = 1 % of 50000
    d = derived(t, flops=1e9, nbytes=4e9, peaks=peaks)
    assert d.pop("peak_bw") == "copy"  # no read/write split given: the copy peak
    assert d == pytest.approx({"gbps": 2000.0, "gflops": 500.0, "pct_peak_bw": 200.0, "pct_peak_flops": 1.0})
    assert derived(t, 1e9, 4e9, peaks, dtype="float16")["pct_peak_flops"] == pytest.approx(0.1)
    assert derived(t, 1e9, 4e9, peaks, dtype="float64")["pct_peak_flops"] is None  # no fp64 peak
    d = derived(t, flops=None, nbytes=1e6, peaks=None)
    assert d["gbps"] == pytest.approx(0.5) and d["gflops"] is None and d["pct_peak_bw"] is None
    nan = Timing(samples=(), median=float("nan"))
    assert derived(nan, 1.0, 1.0, peaks) == {"gbps": None, "gflops": None, "pct_peak_bw": None,
                                             "pct_peak_flops": None, "peak_bw": "copy"}


def test_chunked_check_agrees_with_the_elementwise_rule(monkeypatch):
    """check_outputs' fast chunked pass gives the verdict of the rule applied element by element
    (finite pairs within atol + rtol * |ref|; NaN only against NaN; an infinity only against the same
    infinity), on arrays mixing every kind of value, across chunk borders."""
    import harness.execute.check as chk

    monkeypatch.setattr(chk, "CHUNK", 7)  # many chunks, borders everywhere
    rng = np.random.default_rng(11)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0])

    def rule(g, r, rtol, atol):
        for gv, rv in zip(g.astype(np.float64), r):
            if np.isnan(rv):
                if not np.isnan(gv):
                    return False
            elif np.isinf(rv):
                if gv != rv:
                    return False
            elif not (np.isfinite(gv) and abs(gv - rv) <= atol + rtol * abs(rv)):
                return False
        return True

    for trial in range(300):
        n = int(rng.integers(1, 40))
        ref = rng.uniform(-2, 2, n)
        got = (ref * (1 + rng.normal(0, 1e-6, n))).astype(np.float32)
        for _ in range(int(rng.integers(0, 3))):  # a few special values, on one side or both
            k = int(rng.integers(0, n))
            v = specials[int(rng.integers(0, len(specials)))]
            side = int(rng.integers(0, 3))
            if side != 1:
                ref[k] = v
            if side != 0:
                got[k] = v
        ok, msg = chk.check_outputs([got], [ref], 1e-5, 1e-6)
        assert ok == rule(got, ref, 1e-5, 1e-6), (trial, got, ref, msg)
