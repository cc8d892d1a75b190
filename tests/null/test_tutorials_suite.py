"""suites/tutorials.toml covers every registered workload and every one of its variants."""

from __future__ import annotations

from pathlib import Path

from harness.suite import TARGETS, load_suite
from kernels import workloads

TUTORIALS = Path(__file__).resolve().parents[2] / "suites" / "tutorials.toml"


def test_tutorials_suite_covers_every_workload_and_variant():
    s = load_suite(TUTORIALS)
    assert s.name == "tutorials"
    covered = {(c.workload, c.variant) for c in s.cases}
    registry = {(w, v) for w in workloads.names() for v in workloads.get(w).variants}
    assert registry - covered == set(), "workload variants missing from suites/tutorials.toml"
    assert covered <= registry


def test_every_variant_runs_on_every_target_it_supports():
    s = load_suite(TUTORIALS)
    have = {(c.workload, c.variant, c.target) for c in s.cases}
    for w in workloads.names():
        for v, var in workloads.get(w).variants.items():
            for t in var.targets:
                assert t in TARGETS
                assert (w, v, t) in have, f"{w}/{v} is not run on {t}"


def test_tutorials_suite_shape():
    s = load_suite(TUTORIALS)
    # float32, and the tensor-core matmul's float16 and int8
    assert {c.dtype for c in s.cases} == {"float32", "float16", "int8"}
    assert {c.dtype for c in s.cases if c.workload != "matmul_tensorcore"} == {"float32"}
    assert {c.target for c in s.cases} == {"c", "opencl", "cuda"}
    factors = {c.knob_dict["factor"] for c in s.cases if c.variant == "rfactor_crossthread"}
    assert factors == {16, 32}
    assert {c.param_dict["n"] for c in s.cases if c.workload in ("exp", "log")} == {1 << 20}
    # a ragged row-sum shape exercises the bound predicates
    assert ("m", 777) in {p for c in s.cases if c.workload == "row_sum" for p in c.params}
    # CPU targets measure quickly: a short cap per case and few cases
    assert s.measure.max_time_s <= 0.5 and s.measure.min_time_s <= 0.05
    assert sum(c.target != "cuda" for c in s.cases) * s.measure.max_time_s < 30
    assert len({c.key for c in s.cases}) == len(s.cases)
    assert {w for w, _ in s.peers} == set(workloads.names())
