"""TensorIR on a real GPU: the GPU notes' code unchanged (imports aside) with every printed module
built for CUDA and compared with numpy, the notes' workloads at other sizes, and time_evaluator."""

from __future__ import annotations

import contextlib
import io
import runpy
from pathlib import Path

import numpy as np
import pytest
from kbtest import notes_check_source

import kernels as tvm
from kernels import workloads
from kernels.workloads import tensorir as notes

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

_CHECK = notes_check_source("cuda", rtol=1e-4)


def test_notes_unchanged_on_cuda(tmp_path):
    code = (ROOT / "tests" / "tutorials" / "gpu_acceleration.py").read_text()
    anchor = "from kernels.script import tir as T\n"
    code = code.replace(anchor, anchor + _CHECK, 1)
    code = code.replace("\nsch.mod.show()\n", "\nsch.mod.show()\n_check(sch)\n")
    path = tmp_path / "gpu_acceleration.py"
    path.write_text(code)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        runpy.run_path(str(path), run_name="__notes__")
    assert buf.getvalue().count("CHECKED") == 6


@pytest.fixture()
def notes_workloads():
    notes.register_notes_workloads()
    yield
    for name in notes.NOTES_WORKLOADS:
        workloads.REGISTRY.pop(name, None)


@pytest.mark.parametrize("wname, variant, params", [
    ("vector_add_tir", "bind", {"n": 1 << 20}),
    ("vector_add_tir", "bind", {"n": 1000}),
    ("window_sum_tir", "global", {"n": 100000}),
    ("window_sum_tir", "shared_coop", {"n": 100001}),
    ("matmul_tir", "blocking", {"n": 512}),
    ("matmul_tir", "blocking", {"n": 200}),
    ("matmul_tir", "blocking_with_shared", {"n": 1024}),
    ("matmul_tir", "blocking_with_shared", {"n": 300}),
])
def test_notes_workloads_on_cuda(notes_workloads, wname, variant, params):
    w = workloads.get(wname)
    mod, _ = w.build(variant, params, "float32")
    f = tvm.build(mod, target="cuda")
    host = w.make_args(params, "float32", np.random.default_rng(3))
    dev = tvm.cuda(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    f(*nd)
    tol = w.tolerance_for("float32", params)
    for idx, ref in zip(w.outputs, w.reference(host)):
        np.testing.assert_allclose(nd[idx].numpy(), ref, rtol=tol[0], atol=tol[1])


def test_time_evaluator_of_the_shared_matmul():
    sch = tvm.tir.Schedule(notes.matmul_module({"n": 1024}))
    notes.blocking_with_shared(sch, 8, 8, 8, 8, 8)
    f = tvm.build(sch.mod, target="cuda")
    dev = tvm.cuda(0)
    a = tvm.nd.array(np.random.default_rng(0).uniform(size=(1024, 1024)).astype("float32"), dev)
    b = tvm.nd.array(np.random.default_rng(1).uniform(size=(1024, 1024)).astype("float32"), dev)
    c = tvm.nd.array(np.zeros((1024, 1024), "float32"), dev)
    res = f.time_evaluator("main", dev, number=10, repeat=3)(a, b, c)
    assert len(res.results) == 3 and 0 < res.median < 0.1  # well under 100 ms on any CUDA GPU
    gflops = 2 * 1024 ** 3 / res.median / 1e9
    print(f"\nblocking_with_shared 1024^3: {res.median * 1e3:.3f} ms, {gflops:.0f} GFLOP/s")
    assert gflops > 100
