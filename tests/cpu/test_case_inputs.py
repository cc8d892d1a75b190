"""A shape's inputs and float64 reference are made once per worker process and shared by every
variant and peer of that shape (harness.execute.inputs); outputs are fresh poisoned copies for
every case; each result carries where its wall time went."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execute import inputs
from harness.execute.worker import run_case
from harness.model import Case, MeasureConfig
from kernels.workloads import get


def _case(variant, n=4096, dtype="float32", knobs=(), target="c", workload="vector_add"):
    return Case(suite="t", workload=workload, variant=variant, params=(("n", n),), knobs=knobs, dtype=dtype,
                target=target)


@pytest.fixture(autouse=True)
def _fresh_cache():
    inputs.clear()
    yield
    inputs.clear()


def test_variants_of_one_shape_share_inputs_and_reference():
    w = get("vector_add")
    a = inputs.case_data(w, _case("default"), seed=7)
    b = inputs.case_data(w, _case("bind", knobs=(("vector", 4),)), seed=7)
    assert not a.cached and b.cached and b.inputs_s == 0.0 and b.reference_s == 0.0
    assert a.args[0] is b.args[0] and a.args[1] is b.args[1]  # the same input arrays
    assert not a.args[0].flags.writeable and not a.reference[0].flags.writeable
    with pytest.raises(ValueError):
        a.args[0][0] = 1.0  # read-only: a case cannot change what the next one sees
    # outputs: a fresh poisoned copy each time, never shared
    assert a.args[2] is not b.args[2] and a.args[2].flags.writeable
    a.args[2][:] = 0.0
    assert np.isnan(b.args[2]).all() and np.isnan(inputs.case_data(w, _case("default"), seed=7).args[2]).all()
    # the reference is float64 A + B, computed independently here
    expect = a.args[0].astype(np.float64) + a.args[1].astype(np.float64)
    np.testing.assert_array_equal(b.reference[0], expect)
    assert inputs.stats()["hits"] == 2 and inputs.stats()["misses"] == 1


def test_other_shapes_dtypes_and_seeds_get_other_data():
    w = get("vector_add")
    base = inputs.case_data(w, _case("default"), seed=7).args[0]
    for other in (inputs.case_data(w, _case("default", n=4097), seed=7),
                  inputs.case_data(w, _case("default", dtype="float16"), seed=7),
                  inputs.case_data(w, _case("default"), seed=8)):
        assert not other.cached
        m = min(len(base), len(other.args[0]))
        assert not np.array_equal(base[:m].astype(np.float64), other.args[0][:m].astype(np.float64))
    # the same seed and shape on a fresh process (cache cleared) draws the same data again
    inputs.clear()
    np.testing.assert_array_equal(inputs.case_data(w, _case("bind"), seed=7).args[0], base)


def test_the_cache_keeps_at_most_its_byte_budget(monkeypatch):
    w = get("vector_add")
    per_shape = 4098 * 4 * 3 + 4098 * 8  # A, B, C float32 + the float64 reference (the largest n)
    monkeypatch.setattr(inputs, "CACHE_BYTES", 2 * per_shape)
    for n in (4096, 4096 + 1, 4096 + 2):
        inputs.case_data(w, _case("default", n=n), seed=1)
    st = inputs.stats()
    assert st["entries"] == 2 and st["bytes"] <= 2 * per_shape
    assert not inputs.case_data(w, _case("default", n=4096), seed=1).cached  # the oldest went first
    assert inputs.case_data(w, _case("default", n=4096 + 2), seed=1).cached


def test_results_carry_their_phases_and_the_second_variant_reuses_the_data():
    config = MeasureConfig(min_time_s=0.01, max_time_s=0.05)
    first = run_case(_case("default", n=1 << 16), config)
    second = run_case(_case("bind", n=1 << 16, knobs=(("vector", 4),), target="opencl"), config) \
        if _opencl() else run_case(_case("default", n=1 << 16), config)
    for r in (first, second):
        assert r.outcome == "ok", r.message
        ph = dict(r.phases.items())
        assert set(ph) == {"inputs", "reference", "build", "build_wait", "check", "warmup", "measure"}
        assert all(v >= 0 for v in ph.values()) and ph["measure"] > 0
    assert first.phases.inputs > 0
    assert second.phases.inputs == 0 and second.phases.reference == 0


def _opencl() -> bool:
    from kbtest import opencl_available

    return opencl_available()
