"""FuncSpec.constants: values fixed when a function was built (a hand-written kernel's scalar parameters
at one problem size), passed by value to the kernels that name them, on the C and OpenCL runtimes,
kept by an exported module; malformed constants are refused when the module is made."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import private_cache

from kernels.errors import BuildError
from kernels.runtime import array, build_module, cpu, empty, load_module, opencl
from kernels.runtime.spec import BufferArg, ConstArg, FuncSpec, KernelSpec, LaunchDims

SCALE_C = """#include <stdint.h>
void scale(const float* x, float* y, int32_t n, float a) {
    for (int32_t i = 0; i < n; ++i) y[i] = a * x[i] + (float)n;
}
"""

SCALE_CL = """__kernel void scale(__global const float* x, __global float* y, int n, float a) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + (float)n;
}
"""

N = 1000


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
    with private_cache(tmp_path_factory.mktemp("kbench-cache")):
        yield


def _spec(target, source, n=N, a=-1.5, **changes):
    args = (BufferArg("x", "float32", (n,)), BufferArg("y", "float32", (n,)))
    kernel = KernelSpec("scale", ("x", "y", "n", "a"), LaunchDims((-(-n // 64),)), LaunchDims((64,)))
    spec = FuncSpec("scale", target, source, args, (), (), (kernel,),
                    constants=(ConstArg("n", "int32", n), ConstArg("a", "float32", a)))
    return FuncSpec(**{**spec.__dict__, **changes})


def _expected(x, n=N, a=-1.5):
    return a * x.astype(np.float64) + n


def test_c_kernel_receives_its_constants():
    x = np.random.default_rng(1).standard_normal(N).astype("float32")
    y = np.full(N, np.nan, "float32")
    build_module(_spec("c", SCALE_C))(x, y)
    np.testing.assert_allclose(y, _expected(x), rtol=1e-6)


@pytest.mark.opencl
def test_opencl_kernel_receives_its_constants():
    dev = opencl(0)
    x = np.random.default_rng(2).standard_normal(N).astype("float32")
    y = empty((N,), "float32", dev)
    build_module(_spec("opencl", SCALE_CL, a=0.25))(array(x, dev), y)
    np.testing.assert_allclose(y.numpy(), _expected(x, a=0.25), rtol=1e-6)


def test_an_exported_module_keeps_its_constants(tmp_path):
    mod = build_module(_spec("c", SCALE_C, n=7, a=3.0))
    mod.export_library(tmp_path / "scale.tar")
    back = load_module(tmp_path / "scale.tar")
    assert back.spec.constants == (ConstArg("n", "int32", 7), ConstArg("a", "float32", 3.0))
    x = np.arange(7, dtype="float32")
    y = array(np.zeros(7, "float32"), cpu(0))
    back(array(x, cpu(0)), y)
    np.testing.assert_allclose(y.numpy(), _expected(x, n=7, a=3.0))


@pytest.mark.parametrize("constants,needle", [
    ((ConstArg("x", "int32", 1), ConstArg("a", "float32", 1.0)), "constant names ['x', 'a'] repeat or are "
                                                                  "argument names (['x', 'y'])"),
    ((ConstArg("n", "float16", 1), ConstArg("a", "float32", 1.0)), "constant n has dtype float16"),
])
def test_malformed_constants_are_refused(constants, needle):
    with pytest.raises(BuildError) as info:
        build_module(_spec("c", SCALE_C, constants=constants))
    assert needle in str(info.value)
