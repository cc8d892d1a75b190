"""The GPU notes' TensorIR schedules compile for CUDA with nvcc (no GPU needed; running them is
tests/gpu's job)."""

from __future__ import annotations

import pytest

import kernels as tvm
from kernels.contrib import nvcc
from kernels.workloads import tensorir as notes

pytestmark = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found")

SCHEDULES = {
    "vector_add": (notes.vector_add_module, notes.bind_1d, {"n": 1024}),
    "window_sum_shared_coop": (notes.window_sum_module, notes.window_sum_shared_coop, {"n": 1024}),
    "matmul_blocking": (notes.matmul_module, notes.blocking, {"n": 1024}),
    "matmul_blocking_with_shared": (notes.matmul_module, notes.blocking_with_shared, {"n": 1024}),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_notes_schedule_compiles_for_sm_90(name):
    factory, schedule, params = SCHEDULES[name]
    sch = tvm.tir.Schedule(factory(params))
    schedule(sch)
    mod = tvm.build(sch.mod, target="cuda -arch=sm_90")
    dev_mod = mod.imported_modules[0]
    assert dev_mod.binary and dev_mod.binary[:4] == b"\x7fELF"
    assert 'extern "C" __global__' in dev_mod.get_source()
