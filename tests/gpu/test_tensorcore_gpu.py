"""The tutorial's tensor-core template run on the GPU for every dtype and layout it lists that
WMMA code is made for (float16 in NN, NT, TN, TT; int8 where its tiles are 32-byte aligned), and for
configurations that keep plain code: results against numpy float64 (float16 inputs, float32 sums:
1e-3 relative), int8 exact."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import tensorcore_operands, tensorcore_tutorial

pytestmark = pytest.mark.gpu



@pytest.fixture(scope="module")
def tutorial():
    ns = tensorcore_tutorial()
    tvm = ns["tvm"]
    if not tvm.cuda(0).exist:
        pytest.skip("no CUDA GPU")
    return ns


CASES = [("float16", lay, cfg, True) for lay in ("NN", "NT", "TN", "TT")
         for cfg in ((4, 16, 2, 8), (4, 8, 1, 4), (8, 32, 4, 16), (2, 64, 2, 8))]
CASES += [("int8", "NN", (4, 8, 1, 4), True), ("int8", "TN", (4, 8, 1, 4), True),
          ("int8", "NN", (4, 16, 2, 8), False), ("int8", "TT", (8, 32, 4, 16), False),
          ("float16", "NN", (2, 8, 2, 8), False)]


@pytest.mark.parametrize("dtype, layout, cfg, wmma", CASES)
def test_template_on_the_gpu(tutorial, dtype, layout, cfg, wmma):
    tvm, autotvm = tutorial["tvm"], tutorial["autotvm"]
    N, L, M = 256, 512, 384
    tutorial.update(N=N, L=L, M=M)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, dtype, layout),
                               target="cuda")
    bx, by, step_k, v = cfg
    s, bufs = task.instantiate(task.config_space.index_of(dict(bx=bx, by=by, step_k=step_k, v=v)))
    f = tvm.build(s, bufs, "cuda")
    assert ("mma_sync" in f.imported_modules[0].get_source()) == wmma
    a, b, ref = tensorcore_operands(dtype, layout, N, L, M, np.random.default_rng(1), lo=-1.0)
    dev = tvm.cuda(0)
    out_dtype = "int32" if dtype == "int8" else "float32"
    c = tvm.nd.array(np.full((N, M), -7, out_dtype), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    got = c.numpy()
    if dtype == "int8":
        np.testing.assert_array_equal(got, ref.astype(np.int64))
    else:
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
        assert err < 1e-3, err
