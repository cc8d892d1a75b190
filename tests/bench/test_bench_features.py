"""Benchmark: loop-feature extraction time per tuning candidate (instantiate the configuration, lower
it without the native compiler, analyse the loop IR, build the vector), and the analysis alone.
Run with ``python -m pytest tests/bench --benchmark-only``; the goal is <= 20 ms a candidate."""

from __future__ import annotations

import itertools

import pytest
from kbtest import tensorcore_tutorial

from kernels import autotvm
from kernels.tuning import features as F
from kernels.tuning.tir_task import TIRTask
from kernels.workloads import tensorir as notes


def _tensorcore_task(target):
    n = 1024
    ns = tensorcore_tutorial()
    ns.update(N=n, L=n, M=n)
    return autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, "float16", "NN"),
                               target=target)


TASKS = {
    "tir_matmul_1024/cuda": lambda: TIRTask(notes.matmul_module({"n": 1024}), "cuda"),
    "tir_vector_add/c": lambda: TIRTask(notes.vector_add_module({"n": 1 << 20}), "c"),
    "tensorcore_fp16_1024/cuda": lambda: _tensorcore_task("cuda"),
    "tensorcore_fp16_1024/opencl": lambda: _tensorcore_task("opencl"),
}


@pytest.mark.parametrize("feature_type", F.FEATURE_TYPES)
@pytest.mark.parametrize("task_name", list(TASKS))
def test_feature_extraction_per_candidate(benchmark, task_name, feature_type):
    task = TASKS[task_name]()
    # a different configuration every round (the extractor's cache is bypassed on purpose)
    indices = itertools.cycle(range(0, len(task.config_space), max(1, len(task.config_space) // 37)))

    def work():
        return F.FeatureExtractor(task, feature_type, n_workers=1).get(next(indices))

    vec = benchmark(work)
    assert vec.shape == (F.feature_length(feature_type),)


def test_analysis_alone(benchmark):
    task = TIRTask(notes.matmul_module({"n": 1024}), "cuda")
    sch, _ = task.instantiate(task.config_space.get(1234))
    func, vthreads = F.lower_for_features(sch, None, "cuda")
    pf = benchmark(lambda: F.analyze(func, vthreads))
    assert pf.threads_per_block > 1
