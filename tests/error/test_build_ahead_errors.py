"""A case whose build ahead fails is built again by the worker in its turn and recorded as a
``build_error`` naming the problem; the other cases of the batch are not affected."""

from __future__ import annotations

from harness.execute.worker import run_cases
from harness.model import Case, MeasureConfig


def _case(variant: str, knobs=()) -> Case:
    return Case(suite="t", workload="row_sum", variant=variant, params=(("m", 64), ("n", 64)), knobs=knobs,
                dtype="float32", target="c")


def test_a_failed_build_ahead_is_a_build_error_of_its_case_only():
    cases = [_case("default"), _case("split", (("nonsense", 3),)), _case("split", (("factor", 4),))]
    results = list(run_cases(cases, MeasureConfig(min_time_s=0.01, max_time_s=0.05, min_samples=3)))
    assert [r.outcome for r in results] == ["ok", "build_error", "ok"]
    assert "variant row_sum/split has no knob 'nonsense'" in results[1].message
