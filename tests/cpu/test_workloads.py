"""Every registered workload variant builds, runs and matches its float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels import workloads
from kernels.workloads import WorkloadError

SIZES = {"row_sum": {"n": 37, "m": 45}, "conv2d_3x3": {"n": 19}, "product_reduce": {"n": 9, "m": 70},
         "exp": {"n": 130}, "log": {"n": 130}, "vector_add": {"n": 1000}, "window_sum": {"n": 1000},
         "matmul": {"n": 100, "m": 77, "k": 53}, "matmul_tensorcore": {"n": 33, "m": 40, "l": 24, "layout": "NT"}}
CASES = [(w, v, t, d) for w in workloads.names() for v, var in workloads.get(w).variants.items()
         for t in var.targets if t != "cuda" for d in ("float32", "float64") if d in workloads.get(w).dtypes]


def test_every_tutorial_workload_is_registered():
    assert set(workloads.names()) >= {"row_sum", "conv2d_3x3", "product_reduce", "exp", "log"}
    assert set(workloads.get("row_sum").variants) == {"default", "split", "bind", "rfactor_crossthread"}


@pytest.mark.parametrize("wname,variant,target,dtype", CASES)
def test_workload_matches_reference(wname, variant, target, dtype):
    if target == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    w = workloads.get(wname)
    params = SIZES[wname]
    s, args = w.build(variant, params, dtype)
    f = tvm.build(s, args, target)
    rng = np.random.default_rng(1)
    host = w.make_args(params, dtype, rng)
    dev = tvm.cpu(0) if target == "c" else tvm.opencl(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    f(*nd)
    refs = w.reference_of(host, params, dtype)
    tol = w.tolerance_for(dtype, params)
    for idx, ref in zip(w.outputs, refs):
        np.testing.assert_allclose(nd[idx].numpy(), ref, rtol=tol[0], atol=tol[1])
    assert w.flops(params) > 0 and w.bytes(params, dtype) > 0


def test_unknown_names_are_clear_errors():
    with pytest.raises(WorkloadError, match="unknown workload 'nope'; known: conv2d_3x3, exp"):
        workloads.get("nope")
    with pytest.raises(WorkloadError, match="workload row_sum has no variant 'fast'; variants: default"):
        workloads.get("row_sum").build("fast", {"n": 4, "m": 4}, "float32")
    with pytest.raises(WorkloadError, match="variant row_sum/bind has no knob 'tile'; knobs: rows, factor"):
        workloads.get("row_sum").build("bind", {"n": 4, "m": 4}, "float32", {"tile": 4})
    with pytest.raises(WorkloadError, match="does not support dtype int8"):
        workloads.get("row_sum").build("bind", {"n": 4, "m": 4}, "int8")
