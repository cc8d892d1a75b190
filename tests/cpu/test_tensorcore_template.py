"""The auto-tensor-core tutorial's template (tests/tutorials/auto_tensorcore.py, imports changed),
instantiated with fixed configurations. Off CUDA the "tensor_core" pragma builds plain code that
computes the same product: checked on OpenCL (PoCL) against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available, run, tensorcore_operands, tensorcore_tutorial


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
