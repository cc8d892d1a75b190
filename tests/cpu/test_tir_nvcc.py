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


def test_tensorir_and_te_share_the_passes():
    """The notes' blocking_with_shared from TVMScript and the same schedule in TE (workload matmul,
    shared_blocked at the notes' tiles) give the same kernel: the same loops, one barrier pair, and an
    unrolled k loop in both once it is asked for (sch.unroll / unroll_k=1); tvm.lower takes both."""
    import re

    from kernels import workloads
    from kernels.build_module import build_spec

    def shape(src):  # the loop structure: loop extents in order, barriers, float4 accesses
        return (re.findall(r"for \(int \w+ = 0; \w+ < (\d+);", src), src.count("__syncthreads()"),
                src.count("float4"))

    w = workloads.get("matmul")
    tiles = dict(local_y=8, local_x=8, block_y=8, block_x=8, tile_k=8)
    for unroll in (0, 1):
        sch = tvm.tir.Schedule(notes.matmul_module({"n": 1024}))
        notes.blocking_with_shared(sch, 8, 8, 8, 8, 8)
        if unroll:
            sch.unroll(sch.get_loops(sch.get_block("C_update"))[4])
        tir_src = build_spec(sch.mod, target="cuda -arch=sm_90").source
        s, args = w.build("shared_blocked", {"n": 1024, "m": 1024, "k": 1024}, "float32",
                          dict(tiles, unroll_k=unroll))
        te_src = build_spec(s, args, "cuda -arch=sm_90").source
        assert shape(tir_src) == shape(te_src), (tir_src, te_src)
        assert ("for (int k_1" in tir_src) == (not unroll)
    lowered = tvm.lower(sch.mod)
    assert "k_1" not in str(lowered) and "C_local" in str(lowered)
