"""The auto-tensor-core tutorial's template (tests/tutorials/auto_tensorcore.py, imports changed),
instantiated with fixed configurations. Off CUDA the "tensor_core" pragma builds plain code that
computes the same product: checked on OpenCL (PoCL) against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import (opencl_available, pack_bits, run, subbyte_operands, tensorcore_operands,
                    tensorcore_tutorial)


@pytest.fixture(scope="module")
def tutorial():
    return tensorcore_tutorial()


def test_space_has_the_tutorials_288_configurations(tutorial):
    autotvm = tutorial["autotvm"]
    tutorial.update(N=64, L=64, M=64)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(64, 64, 64, "int8", "NN"),
                               target="opencl")
    assert len(task.config_space) == 288
    assert [name for name in task.config_space.space_map] == ["bx", "by", "step_k", "v"]
    assert task.flop == 2 * 64 ** 3


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("config", [{"bx": 2, "by": 8, "step_k": 1, "v": 4},
                                    {"bx": 4, "by": 16, "step_k": 2, "v": 8}])
def test_int8_fallback_is_exact_on_opencl(tutorial, layout, config):
    tvm, autotvm = tutorial["tvm"], tutorial["autotvm"]
    N = L = M = 64
    tutorial.update(N=N, L=L, M=M)  # matmul_nn reads the module-level sizes, as in the tutorial
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, "int8", layout),
                               target="opencl")
    s, bufs = task.instantiate(task.config_space.index_of(config))
    f = tvm.build(s, bufs, "opencl")
    a, b, ref = tensorcore_operands("int8", layout, N, L, M, np.random.default_rng(0))
    _, _, c = run(f, "opencl", a, b, np.zeros((N, M), "int32"))
    np.testing.assert_array_equal(c, ref.astype(np.int64))


# -- int4 / int1 (layout TN): packed 32-bit words, element 0 in the highest bits ----------------------


def test_packing_reference_matches_the_tutorials_loops():
    # the tutorial's own int4 and int1 packing loops (numpy int32 arithmetic) agree with _pack
    rng = np.random.default_rng(5)
    x4 = rng.integers(-8, 8, (3, 16)).astype(np.int32)
    x1 = rng.integers(0, 2, (3, 64)).astype(np.int32)
    ref4 = np.zeros((3, 2), np.int32)
    ref1 = np.zeros((3, 2), np.int32)
    with np.errstate(over="ignore"):
        for i in range(3):
            for j in range(2):
                for k in range(8):
                    ref4[i, j] = ref4[i, j] | ((x4[i, j * 8 + k] & np.int32(0xF)) << np.int32((7 - k) * 4))
                for k in range(32):
                    ref1[i, j] = ref1[i, j] | ((x1[i, j * 32 + k] & np.int32(0xF)) << np.int32(31 - k))
    np.testing.assert_array_equal(pack_bits(x4, 4), ref4)
    np.testing.assert_array_equal(pack_bits(x1, 1), ref1)


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("dtype", ["int4", "int1"])
@pytest.mark.parametrize("config", [
    {"bx": 4, "by": 16, "step_k": 2, "v": 8},   # fetch: a word (int4) / a byte (int1) a thread
    {"bx": 2, "by": 8, "step_k": 1, "v": 4},    # fetch: 16 bits (int4) / 4 bits: shared tiles unpacked
    {"bx": 8, "by": 32, "step_k": 1, "v": 32},  # fetch: 4 words (int4) / a word (int1)
    {"bx": 2, "by": 16, "step_k": 4, "v": 16},  # fetch: 2 words (int4) / 16 bits (int1)
])
def test_subbyte_fallback_is_exact_on_opencl(tutorial, dtype, config):
    tvm, autotvm = tutorial["tvm"], tutorial["autotvm"]
    bits = 4 if dtype == "int4" else 1
    N, M = 64, 32
    L = 2048 if dtype == "int1" else 512
    tutorial.update(N=N, L=L, M=M)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, dtype, "TN"),
                               target="opencl")
    s, bufs = task.instantiate(task.config_space.index_of(config))
    f = tvm.build(s, bufs, "opencl")
    a, b, ref = subbyte_operands(dtype, N, L, M, np.random.default_rng(2))
    words = "int32" if dtype == "int4" else "uint32"
    _, _, c = run(f, "opencl", pack_bits(a, bits, words), pack_bits(b, bits, words),
                  np.full((N, M), -7, "int32"))
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("dtype", ["int4", "int1"])
def test_subbyte_matmul_is_exact_on_c(tutorial, dtype):
    # the tutorial's compute (matmul_nn, layout TN) with the default schedule on the C target
    tvm, te = tutorial["tvm"], tutorial["te"]
    bits = 4 if dtype == "int4" else 1
    N, L, M = 24, 256, 16
    tutorial.update(N=N, L=L, M=M)
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((M, L), name="B", dtype=dtype)
    C = tutorial["matmul_nn"](A, B, L, dtype, "TN")
    f = tvm.build(te.create_schedule(C.op), [A, B, C], "c")
    a, b, ref = subbyte_operands(dtype, N, L, M, np.random.default_rng(3))
    c = np.full((N, M), -7, "int32")
    f(pack_bits(a, bits), pack_bits(b, bits), c)  # numpy words straight into the C function
    np.testing.assert_array_equal(c, ref)
    # an NDArray of the logical type, filled with the same words, gives the same result
    a_nd = tvm.nd.empty((N, L), dtype).copyfrom(pack_bits(a, bits))
    b_nd = tvm.nd.empty((M, L), dtype).copyfrom(pack_bits(b, bits))
    c_nd = tvm.nd.array(np.full((N, M), -7, "int32"))
    f(a_nd, b_nd, c_nd)
    np.testing.assert_array_equal(c_nd.numpy(), ref)
