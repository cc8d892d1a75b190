"""The tutorial's tensor-core template run on the GPU for every dtype and layout it lists, with a
fixed configuration each that gets WMMA code (float16 and int8 in NN, NT, TN, TT; int4 and int1 in
TN, passed as packed int32 / uint32 words), and for configurations that keep plain code: results
against numpy float64 (float16 inputs, float32 sums: 1e-3 relative), integers exact."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import pack_bits, subbyte_operands, tensorcore_operands, tensorcore_tutorial

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
          ("int8", "NN", (4, 16, 2, 8), True), ("int8", "NT", (4, 16, 2, 8), True),
          ("int8", "TN", (2, 32, 4, 16), True), ("int8", "TT", (8, 32, 4, 16), True),
          ("int8", "NT", (4, 8, 1, 4), False), ("float16", "NN", (2, 8, 2, 8), False)]


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


#: int4 / int1 (layout TN only): (dtype, (bx, by, step_k, v), WMMA expected)
SUBBYTE_CASES = [(dtype, cfg, True) for dtype in ("int4", "int1")
                 for cfg in ((4, 16, 2, 8), (8, 32, 1, 32), (4, 32, 2, 16))]
SUBBYTE_CASES += [("int4", (4, 16, 2, 4), True),  # the fetch moves half words (4 x 4 bits)
                  ("int4", (2, 8, 2, 8), False), ("int1", (4, 16, 1, 4), False)]


@pytest.mark.parametrize("dtype, cfg, wmma", SUBBYTE_CASES)
def test_subbyte_template_on_the_gpu(tutorial, dtype, cfg, wmma):
    tvm, autotvm = tutorial["tvm"], tutorial["autotvm"]
    bits = 4 if dtype == "int4" else 1
    N, M = 256, 384
    L = 2048 if dtype == "int1" else 512
    tutorial.update(N=N, L=L, M=M)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, dtype, "TN"),
                               target="cuda")
    bx, by, step_k, v = cfg
    s, bufs = task.instantiate(task.config_space.index_of(dict(bx=bx, by=by, step_k=step_k, v=v)))
    f = tvm.build(s, bufs, "cuda")
    src = f.imported_modules[0].get_source()
    assert (("bmma_sync" if dtype == "int1" else "mma_sync") in src) == wmma
    a, b, ref = subbyte_operands(dtype, N, L, M, np.random.default_rng(4))
    dev = tvm.cuda(0)
    c = tvm.nd.array(np.full((N, M), -7, "int32"), dev)
    # int32 words as the tutorial packs them
    f(tvm.nd.array(pack_bits(a, bits), dev), tvm.nd.array(pack_bits(b, bits), dev), c)
    np.testing.assert_array_equal(c.numpy(), ref)


@pytest.mark.parametrize("dtype", ["int4", "int1"])
def test_subbyte_ndarrays_of_the_logical_type_on_the_gpu(tutorial, dtype):
    # int4 / int1 NDArrays made with their logical shape and filled from uint32 words
    tvm, autotvm = tutorial["tvm"], tutorial["autotvm"]
    bits = 4 if dtype == "int4" else 1
    N, L, M = 128, 1024, 64
    tutorial.update(N=N, L=L, M=M)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, dtype, "TN"),
                               target="cuda")
    s, bufs = task.instantiate(task.config_space.index_of(dict(bx=4, by=16, step_k=2, v=8)))
    f = tvm.build(s, bufs, "cuda")
    a, b, ref = subbyte_operands(dtype, N, L, M, np.random.default_rng(6))
    dev = tvm.cuda(0)
    a_nd = tvm.nd.empty((N, L), dtype, dev).copyfrom(pack_bits(a, bits, "uint32"))
    b_nd = tvm.nd.empty((M, L), dtype, dev).copyfrom(pack_bits(b, bits, "uint32"))
    c = tvm.nd.array(np.full((N, M), -7, "int32"), dev)
    f(a_nd, b_nd, c)
    np.testing.assert_array_equal(c.numpy(), ref)
