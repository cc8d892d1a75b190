"""The auto-tensor-core tutorial's template (tests/tutorials/auto_tensorcore.py, imports changed),
instantiated with fixed configurations. Off CUDA the "tensor_core" pragma builds plain code that
computes the same product: checked on OpenCL (PoCL) against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kbtest import opencl_available, run

TUTORIAL = Path(__file__).resolve().parents[1] / "tutorials" / "auto_tensorcore.py"


@pytest.fixture(scope="module")
def tutorial():
    """The tutorial's definitions (everything before its GPU checks), as a namespace."""
    src = TUTORIAL.read_text()
    ns: dict = {}
    exec(compile(src[:src.index("# check whether the gpu has tensorcore")], str(TUTORIAL), "exec"), ns)
    return ns


def _operands(dtype, layout, N, L, M, rng):
    # the tutorial's layouts: NN A(N, L) B(L, M); NT A(L, N); TN B(M, L); TT both transposed
    a_t, b_t = layout[1] == "T", layout[0] == "T"
    shape_a = (L, N) if a_t else (N, L)
    shape_b = (M, L) if b_t else (L, M)
    if dtype == "int8":
        a = rng.integers(-128, 127, shape_a).astype("int8")
        b = rng.integers(-128, 127, shape_b).astype("int8")
    else:
        a = rng.uniform(size=shape_a).astype(dtype)
        b = rng.uniform(size=shape_b).astype(dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = (a64.T if a_t else a64) @ (b64.T if b_t else b64)
    return a, b, ref


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
    a, b, ref = _operands("int8", layout, N, L, M, np.random.default_rng(0))
    _, _, c = run(f, "opencl", a, b, np.zeros((N, M), "int32"))
    np.testing.assert_array_equal(c, ref.astype(np.int64))
