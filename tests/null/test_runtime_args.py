"""Runtime argument checking, arrays and devices, with hand-written C kernels (no accelerator needed).

Every FuncSpec here is written by hand, so these tests depend only on the runtime and a C compiler.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from kbtest import private_cache

from kernels.contrib import nvcc
from kernels.errors import ArgumentError, BuildError, DeviceError
from kernels.runtime import Device, NDArray, array, build_module, cpu, cuda, empty, enabled, opencl
from kernels.runtime import device as device_mod
from kernels.runtime.spec import BufferArg, DerivedDim, FuncSpec, KernelSpec, Workspace

pytestmark = pytest.mark.skipif(not enabled("c"), reason="no C compiler")

ONE = (lambda env: (1, 1, 1),) * 2  # grid and block of a C host function (unused there)

ADD_C = """
void add(const float* A, const float* B, float* C, int n) {
    for (int i = 0; i < n; ++i) C[i] = A[i] + B[i];
}
"""

WINDOW_C = """
void window_sum(const float* A, float* Out, int n) {
    for (int i = 0; i < n - 2; ++i) Out[i] = A[i] + A[i + 1] + A[i + 2];
}
"""

ROW_SUM_C = """
void row_sum(const float* A, float* B, int n, int m) {
    for (int i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int j = 0; j < m; ++j) acc += A[i * m + j];
        B[i] = acc;
    }
}
"""

SCALE3_C = """
void scale3(const double* W, const double* X, double* Y, int n) {
    for (int i = 0; i < n; ++i) Y[i] = W[i % 3] * X[i];
}
"""

# one host function using a workspace: T = 2 * A, then B[i] = T[i] + T[n - 1 - i]
MIRROR_C = """
void mirror(const int* A, int* B, int* T, int n) {
    for (int i = 0; i < n; ++i) T[i] = 2 * A[i];
    for (int i = 0; i < n; ++i) B[i] = T[i] + T[n - 1 - i];
}
"""

ADD_CL = """
__kernel void add(__global const float* A, __global const float* B, __global float* C, int n) {
    int i = get_global_id(0);
    if (i < n) C[i] = A[i] + B[i];
}
"""


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
    """Build into a fresh cache folder so the tests see real compiles, and restore afterwards."""
    with private_cache(tmp_path_factory.mktemp("kbench-cache")):
        yield


def _vec(name: str, dtype: str = "float32", dim: object = "n") -> BufferArg:
    return BufferArg(name, dtype, (dim,))


def _c_spec(name, source, args, shape_vars, params, workspaces=()) -> FuncSpec:
    return FuncSpec(
        name=name,
        target="c",
        source=source,
        args=tuple(args),
        shape_vars=tuple(shape_vars),
        workspaces=tuple(workspaces),
        kernels=(KernelSpec(name, tuple(params), *ONE),),
    )


def _add_spec() -> FuncSpec:
    return _c_spec("add", ADD_C, [_vec("A"), _vec("B"), _vec("C")], ["n"], ["A", "B", "C", "n"])


N_MINUS_2 = DerivedDim("n - 2", lambda env: env["n"] - 2)


def _window_spec() -> FuncSpec:
    args = [_vec("A"), BufferArg("Out", "float32", (N_MINUS_2,))]
    return _c_spec("window_sum", WINDOW_C, args, ["n"], ["A", "Out", "n"])


@pytest.fixture(scope="module")
def add_mod():
    return build_module(_add_spec())


@pytest.fixture(scope="module")
def window_mod():
    return build_module(_window_spec())


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype("float32")


# -- correct calls -----------------------------------------------------------------------------


def test_add_matches_numpy(add_mod):
    rng = np.random.default_rng(0)
    a, b = _rand(rng, 1000), _rand(rng, 1000)
    c = empty((1000,), "float32", cpu(0))
    add_mod(array(a), array(b), c)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) + b.astype(np.float64), rtol=1e-6)


def test_derived_dim_window_sum(window_mod):
    rng = np.random.default_rng(1)
    a = _rand(rng, 8)
    out = empty((6,), "float32")
    window_mod(array(a), out)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(out.numpy(), a64[:-2] + a64[1:-1] + a64[2:], rtol=1e-6)


def test_two_shape_variables_row_sum():
    args = [BufferArg("A", "float32", ("n", "m")), _vec("B")]
    mod = build_module(_c_spec("row_sum", ROW_SUM_C, args, ["n", "m"], ["A", "B", "n", "m"]))
    rng = np.random.default_rng(2)
    a = _rand(rng, 7, 33)
    b = empty((7,), "float32")
    mod(array(a), b)
    np.testing.assert_allclose(b.numpy(), a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_constant_dimension_and_float64():
    args = [_vec("W", "float64", 3), _vec("X", "float64"), _vec("Y", "float64")]
    mod = build_module(_c_spec("scale3", SCALE3_C, args, ["n"], ["W", "X", "Y", "n"]))
    w, x = np.array([1.0, -2.0, 0.5]), np.arange(10, dtype=np.float64)
    y = empty((10,), "float64")
    mod(array(w), array(x), y)
    np.testing.assert_array_equal(y.numpy(), np.tile(w, 4)[:10] * x)
    with pytest.raises(ArgumentError, match=re.escape("argument W (index 0): shape[0] = 4, expected 3")):
        mod(array(np.ones(4)), array(x), y)


def test_workspace_is_passed_and_resized():
    args = [_vec("A", "int32"), _vec("B", "int32")]
    ws = Workspace("T", "int32", lambda env: env["n"])
    mod = build_module(_c_spec("mirror", MIRROR_C, args, ["n"], ["A", "B", "T", "n"], [ws]))
    for n in (5, 5, 12):
        a = np.arange(n, dtype=np.int32) * 3 - 4
        b = empty((n,), "int32")
        mod(array(a), b)
        np.testing.assert_array_equal(b.numpy(), 2 * a + 2 * a[::-1])


def test_numpy_arrays_accepted_by_the_c_target_and_written_in_place(add_mod):
    a = np.arange(6, dtype=np.float32)
    c = np.zeros(6, dtype=np.float32)
    add_mod(a, array(a), c)
    np.testing.assert_array_equal(c, 2 * a)


def test_zero_size_call_is_fine(add_mod):
    c = empty((0,), "float32")
    add_mod(array(np.zeros(0, "float32")), array(np.zeros(0, "float32")), c)
    assert c.numpy().shape == (0,)


def test_module_surface(add_mod):
    assert add_mod.entry_name == "add"
    assert add_mod.get_source() == ADD_C
    assert add_mod.imported_modules == []
    assert add_mod.type_key == "c"
    f = add_mod.get_function("add")
    a = array(np.ones(3, "float32"))
    c = empty((3,), "float32")
    f(a, a, c)
    add_mod["add"](a, a, c)
    np.testing.assert_array_equal(c.numpy(), [2, 2, 2])
    with pytest.raises(AttributeError, match="no function 'sub'"):
        add_mod.get_function("sub")


def test_time_evaluator_on_c(add_mod):
    a = array(np.ones(256, "float32"))
    c = empty((256,), "float32")
    result = add_mod.time_evaluator(add_mod.entry_name, cpu(0), number=5, repeat=3)(a, a, c)
    assert len(result.results) == 3
    assert result.mean > 0 and result.median > 0 and result.std >= 0
    assert min(result.results) <= result.mean <= max(result.results)


def test_build_cache_is_content_addressed(add_mod):
    again = build_module(_add_spec())
    assert again.library_path == add_mod.library_path
    assert (add_mod.library_path.parent / "source.c").read_text() == ADD_C


# -- argument errors ---------------------------------------------------------------------------


def test_wrong_argument_count(add_mod):
    a = array(np.ones(4, "float32"))
    with pytest.raises(ArgumentError, match=re.escape("add() takes 3 argument(s) (A, B, C), got 2")):
        add_mod(a, a)


def test_wrong_dtype(add_mod):
    a = array(np.ones(4, "float32"))
    with pytest.raises(
        ArgumentError, match=re.escape("argument B (index 1): dtype is float64, expected float32")
    ):
        add_mod(a, array(np.ones(4)), empty((4,)))


def test_wrong_ndim(add_mod):
    a = array(np.ones(4, "float32"))
    with pytest.raises(
        ArgumentError, match=re.escape("argument A (index 0): has 2 dimension(s) (shape (2, 2))")
    ):
        add_mod(array(np.ones((2, 2), "float32")), a, a)


def test_inconsistent_shape_variable(add_mod):
    a, b = array(np.ones(4, "float32")), array(np.ones(5, "float32"))
    message = "argument B (index 1): shape[0] = 5 but n = 4 from argument A shape[0]"
    with pytest.raises(ArgumentError, match=re.escape(message)):
        add_mod(a, b, empty((4,)))


def test_derived_dimension_mismatch(window_mod):
    with pytest.raises(
        ArgumentError, match=re.escape("argument Out (index 1): shape[0] must be n - 2 = 6, got 7")
    ):
        window_mod(array(np.ones(8, "float32")), empty((7,)))


def test_derived_dimension_negative(window_mod):
    with pytest.raises(ArgumentError, match=re.escape("argument Out (index 1): shape[0] must be n - 2 = -1")):
        window_mod(array(np.ones(1, "float32")), empty((0,)))


def test_unbound_shape_variable():
    spec = _c_spec("add", ADD_C, [_vec("A"), _vec("B"), _vec("C")], ["n", "m"], ["A", "B", "C", "n"])
    mod = build_module(spec)
    a = array(np.ones(2, "float32"))
    with pytest.raises(ArgumentError, match=r"shape variable\(s\) m not bound .* \(A, B, C\)"):
        mod(a, a, a)


def test_not_an_array(add_mod):
    a = array(np.ones(3, "float32"))
    with pytest.raises(
        ArgumentError, match=re.escape("argument C (index 2): expected an NDArray or a C-contiguous")
    ):
        add_mod(a, a, [0.0, 0.0, 0.0])


def test_non_contiguous_numpy_rejected(add_mod):
    a = np.ones(8, "float32")
    with pytest.raises(
        ArgumentError, match=re.escape("argument A (index 0): the numpy array is not C-contiguous")
    ):
        add_mod(a[::2], a[:4], a[:4].copy())


def test_nothing_runs_when_an_argument_is_wrong(add_mod):
    c = np.full(4, 7.0, "float32")
    with pytest.raises(ArgumentError, match="argument B"):
        add_mod(np.ones(4, "float32"), np.ones(4, "float64"), c)
    np.testing.assert_array_equal(c, 7.0)


def _opencl_add():
    kernel = KernelSpec(
        "add", ("A", "B", "C", "n"), lambda e: ((e["n"] + 63) // 64, 1, 1), lambda e: (64, 1, 1)
    )
    spec = FuncSpec("add", "opencl", ADD_CL, (_vec("A"), _vec("B"), _vec("C")), ("n",), (), (kernel,))
    return build_module(spec)


def _expected_gpu_error(kind: str):
    """With the device kind present the argument is wrong; without it there is no device at all."""
    return ArgumentError if Device(kind, 0).exist else DeviceError


def test_numpy_passed_to_opencl():
    mod = _opencl_add()
    a = np.ones(4, "float32")
    with pytest.raises(_expected_gpu_error("opencl"), match=r"argument A \(index 0\).*numpy\.ndarray"):
        mod(a, a, a)


def test_wrong_device_type_for_opencl():
    mod = _opencl_add()
    a = array(np.ones(4, "float32"), cpu(0))
    with pytest.raises(_expected_gpu_error("opencl"), match=r"argument A \(index 0\).*cpu\(0\)"):
        mod(a, a, a)


def test_wrong_device_type_for_c(add_mod):
    if not opencl(0).exist:
        pytest.skip("needs an OpenCL device to make a non-cpu array")
    a = array(np.ones(4, "float32"), opencl(0))
    with pytest.raises(ArgumentError, match=re.escape("argument A (index 0): expected an NDArray or")):
        add_mod(a, a, a)


@pytest.mark.skipif(nvcc.find_nvcc() is None or cuda(0).exist, reason="needs nvcc and no GPU")
def test_cuda_module_builds_but_needs_a_gpu():
    source = 'extern "C" __global__ void add(const float* A, const float* B, float* C, int n) {}'
    kernel = KernelSpec("add", ("A", "B", "C", "n"), lambda e: (1, 1, 1), lambda e: (32, 1, 1))
    spec = FuncSpec("add", "cuda", source, (_vec("A"), _vec("B"), _vec("C")), ("n",), (), (kernel,), "sm_80")
    mod = build_module(spec)
    assert mod.imported_modules[0].get_source() == source
    a = np.ones(4, "float32")
    with pytest.raises(DeviceError, match="built, but running it needs a cuda device"):
        mod(a, a, a)


# -- build errors ------------------------------------------------------------------------------


def test_c_compile_error_names_source_and_message():
    spec = _c_spec("bad", "void bad(float* A, int n) { return nope; }", [_vec("A")], ["n"], ["A", "n"])
    with pytest.raises(BuildError) as info:
        build_module(spec)
    message = str(info.value)
    assert "nope" in message
    path = re.search(r"for (\S+source\.c)", message).group(1)
    assert Path(path).read_text().startswith("void bad")


def test_missing_c_function():
    spec = _c_spec("other", ADD_C, [_vec("A"), _vec("B"), _vec("C")], ["n"], ["A", "B", "C", "n"])
    with pytest.raises(BuildError, match="exports no function other"):
        build_module(spec)


def test_unknown_kernel_parameter():
    spec = _c_spec("add", ADD_C, [_vec("A"), _vec("B"), _vec("C")], ["n"], ["A", "B", "X", "n"])
    with pytest.raises(BuildError, match="kernel add takes 'X'"):
        build_module(spec)


def test_unknown_target():
    spec = FuncSpec("f", "metal", "", (), (), (), ())
    with pytest.raises(BuildError, match="unknown target 'metal'"):
        build_module(spec)


# -- arrays ------------------------------------------------------------------------------------


def test_array_round_trip_and_attributes():
    host = np.arange(12, dtype=np.int16).reshape(3, 4)
    arr = array(host, cpu(0))
    assert isinstance(arr, NDArray)
    assert arr.shape == (3, 4) and arr.dtype == "int16" and arr.device == cpu(0) and arr.ctx == cpu(0)
    np.testing.assert_array_equal(arr.numpy(), host)
    np.testing.assert_array_equal(arr.asnumpy(), host)
    host[0, 0] = 99  # arrays copy their input
    assert arr.numpy()[0, 0] == 0
    assert "shape=(3, 4), int16, cpu(0)" in repr(arr)


def test_array_ctx_keyword_and_contiguous_copy():
    host = np.arange(6, dtype=np.float32).reshape(2, 3).T
    arr = array(host, ctx=cpu(0))
    out = arr.numpy()
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, host)


@pytest.mark.parametrize(
    "dtype",
    [
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
    ],
)
def test_supported_dtypes(dtype):
    host = (np.arange(5) % 2).astype(dtype)
    arr = array(host)
    assert arr.dtype == dtype
    np.testing.assert_array_equal(arr.numpy(), host)


def test_unsupported_dtype_and_bad_copy():
    with pytest.raises(ArgumentError, match="unsupported dtype complex64"):
        array(np.ones(2, np.complex64))
    arr = empty((3,), "float32")
    with pytest.raises(ArgumentError, match=r"source shape \(4,\) does not match"):
        arr.copyfrom(np.ones(4))
    arr.copyfrom([1, 2, 3])
    np.testing.assert_array_equal(arr.numpy(), [1, 2, 3])


def test_packed_int4_array():
    arr = empty((2, 16), "int4")
    assert arr.shape == (2, 16) and arr.dtype == "int4" and arr.nbytes == 16
    words = np.array([[0x12345678, -1], [0, 7]], dtype=np.int32)
    arr.copyfrom(words)
    np.testing.assert_array_equal(arr.numpy(), words)
    with pytest.raises(ArgumentError, match="multiple of 8"):
        empty((3,), "int4")


# -- devices -----------------------------------------------------------------------------------


def test_device_basics():
    assert repr(cuda(0)) == "cuda(0)" and repr(opencl(1)) == "opencl(1)"
    assert device_mod.gpu(2) == cuda(2) and device_mod.cl(0) == opencl(0)
    assert device_mod.device("gpu", 1) == Device("cuda", 1)
    assert device_mod.device("cuda -arch=sm_80") == cuda(0)
    assert cuda(0) != cuda(1) and len({cpu(0), cpu(0), cuda(0)}) == 2
    assert cpu(0).exist and cpu(0).device_type == "cpu" and cuda(3).index == 3
    cpu(0).sync()
    with pytest.raises(DeviceError, match="no CUDA compute version"):
        _ = cpu(0).compute_version
    with pytest.raises(DeviceError, match="unknown device type 'tpu'"):
        Device("tpu", 0)


def test_enabled():
    assert enabled("c") and enabled("llvm")
    assert not enabled("vulkan")
    assert enabled("opencl") == opencl(0).exist


@pytest.mark.skipif(cuda(0).exist, reason="checks the no-GPU path")
def test_missing_cuda_device_is_reported():
    assert not cuda(0).exist
    with pytest.raises(DeviceError, match="cuda"):
        _ = cuda(0).compute_version
    with pytest.raises(DeviceError, match=r"device cuda\(0\) is not available"):
        empty((4,), "float32", cuda(0))


def test_nvcc_version_helpers():
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert nvcc.parse_compute_version("sm_90") == (9, 0)
    assert nvcc.parse_compute_version("10.0") == (10, 0)
    with pytest.raises(ValueError, match="'abc'"):
        nvcc.parse_compute_version("abc")
    assert nvcc.have_tensorcore("7.0") and nvcc.have_tensorcore("9.0")
    assert not nvcc.have_tensorcore("6.1")
    assert nvcc.have_tensorcore(target="cuda -arch=sm_80")
    assert nvcc.normalize_arch("8.6") == "sm_86" and nvcc.normalize_arch("sm_100") == "sm_100"
    assert nvcc.get_target_compute_version("sm_75") == "7.5"


def test_nvcc_feature_helpers():
    # CUDA programming guide, arithmetic instructions: half arithmetic from 5.3 (not 5.0-5.2, 6.x yes),
    # 8-bit integer dot products from 6.x, bfloat16 from 8.0
    assert [nvcc.have_fp16(v) for v in ("5.0", "5.2", "5.3", "6.0", "6.1", "9.0")] == \
        [False, False, True, True, True, True]
    assert [nvcc.have_int8(v) for v in ("5.3", "6.0", "6.1", "8.6")] == [False, True, True, True]
    assert [nvcc.have_bf16(v) for v in ("7.5", "8.0", "sm_90", "10.0")] == [False, True, True, True]
    with pytest.raises(ValueError, match="'fast'"):
        nvcc.have_fp16("fast")
    assert nvcc.have_cudagraph() == (nvcc.find_nvcc() is not None and nvcc.nvcc_version() >= (10, 0))
