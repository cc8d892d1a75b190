"""harness.judge on real stores with planted samples: the thresholds a run is judged with, and the one
re-measure of AMBIGUOUS cases (separate runs and sides timed together)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from harness import judge
from harness.model import DEFAULT_THRESHOLD, Case, MeasureConfig, Result, Timing
from harness.store import Store


@dataclass(frozen=True)
class PlantedSuite:
    name: str = "planted"
    path: str | None = None
    sha256: str | None = None
    regression_threshold: float = 0.05
    thresholds: tuple = field(default=(("slow_wl", 0.10),))


def case(workload: str = "wl", n: int = 64) -> Case:
    return Case("planted", workload, "default", (("n", n),), (), "float32", "c")


def timing(scale: float, n: int = 200, sigma: float = 0.002, seed: int = 0) -> Timing:
    x = scale * np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))
    return Timing(samples=tuple(float(v) for v in x), median=float(np.median(x)), ci_low=float(x.min()),
                  ci_high=float(x.max()))


def run_with(st: Store, cases: dict, suite=PlantedSuite(), **kw) -> int:
    """A finished run whose results are the planted timings ``{case: (scale, seed)}``."""
    rid = st.begin_run(suite, [], "local", MeasureConfig(), **kw)
    for c, (scale, seed) in cases.items():
        st.record_result(rid, Result(c, "ok", timing=timing(scale, seed=seed), device="cpu"))
    st.finish_run(rid, "done")
    return rid


def test_a_run_is_judged_with_the_thresholds_stored_with_it(tmp_path):
    db = tmp_path / "k.db"
    with Store.open(db) as st:
        run = run_with(st, {case(): (1e-3, 1), case("slow_wl"): (1e-3, 2)})
        assert judge.run_thresholds(st, run) == (0.05, {case().key: 0.05, case("slow_wl").key: 0.10})
        # a run whose suite gave no thresholds (an object without them) is judged with the default
        bare = run_with(st, {case(): (1e-3, 3)}, suite=type("S", (), {"name": "bare", "path": None})())
        assert judge.run_thresholds(st, bare) == (DEFAULT_THRESHOLD, {case().key: DEFAULT_THRESHOLD})
        # a 7 % slowdown: beyond the suite's 5 %, within the workload's 10 %
        new = run_with(st, {case(): (1.07e-3, 4), case("slow_wl"): (1.07e-3, 5)})
        verdicts = {v.case_key: v for v in judge.judge(st, new, str(run)).verdicts}
    assert verdicts[case().key].verdict == "SLOWER" and verdicts[case().key].threshold == 0.05
    assert verdicts[case("slow_wl").key].verdict == "SAME" and verdicts[case("slow_wl").key].threshold == 0.10


def _ambiguous_first(st: Store, new: int, base: str) -> judge.Judgement:
    """The judgement of ``new`` against ``base`` with every case marked AMBIGUOUS (as a noisy first
    measurement would leave them), to exercise the re-measure on its own."""
    first = judge.judge(st, new, base)
    return replace(first, verdicts=tuple(replace(v, verdict="AMBIGUOUS") for v in first.verdicts))


def test_remeasure_of_a_separate_run_judges_the_new_run_alone_against_the_same_history(tmp_path):
    db = tmp_path / "k.db"
    with Store.open(db) as st:
        old = run_with(st, {case(): (1e-3, 1)})
        new = run_with(st, {case(): (1.2e-3, 2)})  # 20 % slower than history
        first = _ambiguous_first(st, new, "auto")
    calls = []

    def again(keys):
        calls.append(set(keys))
        with Store.open(db) as st:
            return {"": [run_with(st, {case(): (1.2e-3, 3)}, kind="remeasure", parent_run=new)]}

    got = judge.remeasure_ambiguous(db, first, again)
    assert calls == [{case().key}]
    (v,) = got.verdicts
    # judged against the history before the run it re-measures (run `old`), never against that run
    assert v.remeasured and v.verdict == "SLOWER" and v.base_run_ids == (old,)
    assert got.new_runs == (new,) and got.exit_code == 1


def test_remeasure_of_sides_timed_together_pools_both_measurements(tmp_path):
    db = tmp_path / "k.db"
    with Store.open(db) as st:
        base = run_with(st, {case(): (1e-3, 1)}, kind="ab")
        head = run_with(st, {case(): (1e-3, 2)}, kind="ab", parent_run=base)
        first = _ambiguous_first(st, head, str(base))

    def again(keys):
        with Store.open(db) as st:
            b = run_with(st, {case(): (1e-3, 3)}, kind="ab", parent_run=base)
            h = run_with(st, {case(): (1e-3, 4)}, kind="ab", parent_run=b)
        return {"base": [b], "head": [h]}

    got = judge.remeasure_ambiguous(db, first, again, new_side="head", base_side="base")
    (v,) = got.verdicts
    assert v.remeasured and v.verdict == "SAME"
    assert v.n_new == v.n_base == 400  # the first and the second measurement, pooled per side
    assert set(v.base_run_ids) == {base, base + 2}


def test_remeasure_does_nothing_without_ambiguous_cases_or_a_way_to_time_again(tmp_path):
    db = tmp_path / "k.db"
    with Store.open(db) as st:
        base = run_with(st, {case(): (1e-3, 1)})
        new = run_with(st, {case(): (1e-3, 2)})
        plain = judge.judge(st, new, str(base))
        ambiguous = _ambiguous_first(st, new, str(base))

    def never(keys):
        raise AssertionError("nothing to re-measure")

    assert judge.remeasure_ambiguous(db, plain, never) is plain
    assert judge.remeasure_ambiguous(db, ambiguous, None) is ambiguous


def test_judge_refuses_overlapping_sides(tmp_path):
    with Store.open(tmp_path / "k.db") as st:
        run = run_with(st, {case(): (1e-3, 1)})
        with pytest.raises(ValueError, match="share run ids"):
            judge.judge(st, run, str(run))
