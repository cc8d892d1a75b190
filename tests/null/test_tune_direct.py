"""harness.tune.direct: a variant that is not a schedule is tuned configuration by configuration in
grid order, skipping what the store already measured; each configuration is a case run as `kbench
run` runs it, and a case that is not ok becomes a trial with its error and the reason."""

from __future__ import annotations

import pytest

from harness.model import Case, MeasureConfig
from harness.tune.direct import configurations, measure_configuration, untried
from kernels import workloads as W
from kernels.tuning import MeasureErrorNo


def test_configurations_are_the_grid_last_knob_fastest():
    space = (("BLOCK", (256, 1024)), ("num_warps", (4, 8)))
    assert configurations(space) == [{"BLOCK": 256, "num_warps": 4}, {"BLOCK": 256, "num_warps": 8},
                                     {"BLOCK": 1024, "num_warps": 4}, {"BLOCK": 1024, "num_warps": 8}]


def test_untried_skips_stored_trials_and_keeps_grid_indices():
    space = (("BLOCK", (256, 512, 1024)),)
    assert list(untried(space, [{"BLOCK": 512}, {"BLOCK": 4096}])) == [(0, {"BLOCK": 256}),
                                                                      (2, {"BLOCK": 1024})]
    assert list(untried(space, [{"BLOCK": b} for b in (256, 512, 1024)])) == []


def test_a_configuration_that_cannot_run_is_a_trial_with_its_reason():
    try:
        import torch  # noqa: F401

        pytest.skip("torch is installed here: the callable could run")
    except ImportError:
        pass
    seen = []
    W.register(W.Workload(
        name="uv_tune", params=("n",), dtypes=("float32",),
        variants={"f": W.device_callable("f", lambda args, params, BLOCK=1: seen.append(BLOCK),
                                         knobs=(("BLOCK", 1),))},
        make_args=lambda p, d, rng: [W.uniform(rng, p["n"], d), W.poison((p["n"],), d)],
        reference=lambda a: [a[0].astype("float64")], outputs=(1,), flops=lambda p: 0.0,
        bytes=lambda p, d: 8.0 * p["n"]))
    try:
        case = Case("t", "uv_tune", "f", (("n", 16),), (), "float32", "cuda", tuned=True)
        res = measure_configuration(case, {"BLOCK": 64}, MeasureConfig(max_time_s=0.1, min_time_s=0.0))
    finally:
        W.REGISTRY.pop("uv_tune", None)
    assert not res.ok and res.error_no == MeasureErrorNo.COMPILE_DEVICE and seen == []
    assert res.costs == ("build_error: callable variant uv_tune/f needs torch with a CUDA device, which is "
                         "not available here",)
    assert res.all_cost > 0
