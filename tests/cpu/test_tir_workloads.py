"""The TensorIR workload registration: the notes' workloads and their schedule variants build through
the harness's build path (a TVMScript module where a TE variant gives a schedule and arguments) and
match their float64 references."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from harness.execute.build import lower_case
from harness.model import Case
from kernels import workloads
from kernels.workloads import WorkloadError
from kernels.workloads import tensorir as tir_workloads

SIZES = {"vector_add_tir": {"n": 1000}, "window_sum_tir": {"n": 1000}, "matmul_tir": {"n": 100}}


@pytest.fixture(scope="module", autouse=True)
def registered():
    tir_workloads.register_notes_workloads()
    tir_workloads.register_notes_workloads()  # idempotent
    yield
    for name in tir_workloads.NOTES_WORKLOADS:
        workloads.REGISTRY.pop(name, None)


CASES = [("vector_add_tir", "bind"), ("window_sum_tir", "global"), ("window_sum_tir", "shared_coop"),
         ("matmul_tir", "blocking"), ("matmul_tir", "blocking_with_shared")]


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("wname,variant", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_variant_matches_reference_on_opencl(wname, variant, dtype):
    w = workloads.get(wname)
    params = SIZES[wname]
    mod, args = w.build(variant, params, dtype)
    assert args is None and isinstance(mod, tvm.tir.IRModule)
    f = tvm.build(mod, args, "opencl")
    host = w.make_args(params, dtype, np.random.default_rng(1))
    nd = [tvm.nd.array(a, tvm.opencl(0)) for a in host]
    f(*nd)
    tol = w.tolerance_for(dtype, params)
    for idx, ref in zip(w.outputs, w.reference(host)):
        np.testing.assert_allclose(nd[idx].numpy(), ref, rtol=tol[0], atol=tol[1])
    assert w.flops(params) > 0 and w.bytes(params, dtype) > 0


def test_harness_lowers_a_tir_case():
    case = Case(suite="t", workload="matmul_tir", variant="blocking_with_shared", params=(("n", 128),),
                knobs=(("tile_k", 4),), dtype="float32", target="cuda")
    spec = lower_case(case, "sm_90")
    assert spec.name == "matmul_tir_blocking_with_shared" and spec.arch == "sm_90"
    assert "__shared__ __align__(16) float A_shared[" in spec.source
    assert [a.name for a in spec.args] == ["A", "B", "C"]


def test_knobs_reach_the_schedule():
    w = workloads.get("matmul_tir")
    mod, _ = w.build("blocking", {"n": 64}, "float32", {"tile_block_y": 4, "tile_local_y": 2})
    text = mod.script()
    assert 'T.thread_binding(4, thread="threadIdx.y")' in text
    with pytest.raises(WorkloadError, match="variant matmul_tir/blocking has no knob 'tile'"):
        w.build("blocking", {"n": 64}, "float32", {"tile": 4})


def test_add_variants_to_an_existing_workload():
    extra = tir_workloads.tir_variant("as_written", tir_workloads.vector_add_module, None, ("c",),
                                      description="the module unscheduled")
    w = tir_workloads.add_variants("vector_add_tir", {"as_written": extra})
    try:
        mod, _ = w.build("as_written", {"n": 16}, "float32")
        f = tvm.build(mod, None, "c")
        a = np.arange(16, dtype="float32")
        c = np.zeros(16, "float32")
        f(a, a, c)
        assert (c == 2 * a).all()
        with pytest.raises(WorkloadError, match="already has a variant 'as_written'"):
            tir_workloads.add_variants("vector_add_tir", {"as_written": extra})
    finally:
        del w.variants["as_written"]
    with pytest.raises(WorkloadError, match="unknown workload 'nope'"):
        tir_workloads.add_variants("nope", {})
