"""The tensor-core rewrite evaluates each warp's index expressions for all its lanes and loop values
at once (numpy arrays, ``kernels.lower.tensor_core.VECTORIZE``); the lane-by-lane walk is the
reference. Both must give the same IR (or the same reason for not rewriting) and so the same loop
features, over configurations of the auto-tensor-core tutorial's spaces drawn at random."""

from __future__ import annotations

import importlib
import random

import numpy as np
import pytest
from kbtest import tensorcore_tutorial

from kernels.lower import PASSES, TARGET_PASSES, schedule_to_primfunc
from kernels.tuning import features as F

tc = importlib.import_module("kernels.lower.tensor_core")


@pytest.fixture(scope="module")
def tutorial():
    return tensorcore_tutorial()


@pytest.fixture
def walk_or_arrays():
    """Set VECTORIZE for a call and restore it afterwards."""
    saved = tc.VECTORIZE

    def use(arrays: bool):
        tc.VECTORIZE = arrays

    yield use
    tc.VECTORIZE = saved


def _task(tutorial, n, dtype, layout):
    tutorial.update(N=n, L=n, M=n)
    return tutorial["autotvm"].task.create("tutorial/auto_tensorcore/test_gemm",
                                           args=(n, n, n, dtype, layout), target="cuda")


def _before_rewrite(task, index):
    """The function the tensor-core pass receives for configuration ``index`` (as lowered for
    features: every pass before it but unroll/vectorize/loop_partition)."""
    with task.target:
        sch, args = task.instantiate(task.config_space.get(index))
    func = schedule_to_primfunc(sch, args, "main")
    for p in PASSES:
        if p.name not in F.SKIPPED_PASSES:
            func = p(func)
    return func


def _rewrite(func) -> str:
    rewrite = next(p for p in TARGET_PASSES if p.name == "rewrite_tensor_core")
    try:
        return str(rewrite(func, "cuda"))
    except Exception as exc:  # the same refusal both ways, word for word
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("n, dtype, layout, count", [
    (1024, "float16", "NN", 12), (1024, "float16", "NT", 6), (512, "float16", "TT", 6),
    (512, "int8", "TN", 8), (256, "int8", "NN", 6), (256, "int4", "TN", 4), (256, "int1", "TN", 4),
])
def test_arrays_and_walk_rewrite_alike(tutorial, walk_or_arrays, n, dtype, layout, count):
    task = _task(tutorial, n, dtype, layout)
    sample = random.Random(n + count).sample(range(len(task.config_space)), count)
    rewritten, fell_back, by_arrays = 0, 0, 0
    for index in sample:
        func = _before_rewrite(task, index)
        walk_or_arrays(False)
        walked = _rewrite(func)
        walk_or_arrays(True)
        before = dict(tc.WARP_COUNTS)
        arrays = _rewrite(func)
        assert arrays == walked, (index, task.config_space.get(index))
        rewritten += "mma_sync" in walked
        by_arrays += tc.WARP_COUNTS["arrays"] - before["arrays"]
        fell_back += tc.WARP_COUNTS["walk"] - before["walk"]
    if dtype in ("float16", "int8"):
        assert rewritten, "no sampled configuration was rewritten: the comparison saw no tensor-core code"
        # the arrays did the work: no warp of these schedules needed the walk
        assert by_arrays > 0 and fell_back == 0, (by_arrays, fell_back)


def test_loop_features_are_the_same_either_way(tutorial, walk_or_arrays):
    """30 configurations of the tutorial's float16 space at 2048^3 (what the tuner extracts)."""
    task = _task(tutorial, 2048, "float16", "NN")
    sample = random.Random(7).sample(range(len(task.config_space)), 30)
    vectors = {}
    for arrays in (False, True):
        walk_or_arrays(arrays)
        vectors[arrays] = [{kind: F.feature_vector(pf, kind) for kind in F.FEATURE_TYPES}
                           for pf in (F.candidate_features(task, i) for i in sample)]
    for index, walked, fast in zip(sample, vectors[False], vectors[True]):
        for kind in F.FEATURE_TYPES:
            np.testing.assert_array_equal(fast[kind], walked[kind], err_msg=f"configuration {index}, {kind}")
    mma = F.feature_names("itervar").index("mma")
    assert any(v["itervar"][mma] > 0 for v in vectors[True])  # tensor-core code among them
