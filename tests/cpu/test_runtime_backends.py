"""Runtime backends running real kernels: OpenCL on the CPU (PoCL), C, nvcc builds, and CUDA (gpu).

The kernels are hand-written OpenCL C / CUDA C with hand-made launch descriptions, so these tests
exercise only the runtime: program builds, grid/block launches, workspaces shared by kernels,
empty launches, timing and cubin generation.
"""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import private_cache

import kernels.runtime.device
from kernels.contrib import nvcc
from kernels.errors import BuildError
from kernels.runtime import array, build_module, cpu, cuda, empty, opencl
from kernels.runtime.spec import BufferArg, DerivedDim, FuncSpec, KernelSpec, Workspace

HAVE_OPENCL = kernels.runtime.device.opencl(0).exist
HAVE_GPU = kernels.runtime.device.cuda(0).exist
HAVE_NVCC = nvcc.find_nvcc() is not None

needs_opencl = pytest.mark.skipif(not HAVE_OPENCL, reason="no OpenCL device (install pyopencl and PoCL)")
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
    """Build into a fresh cache folder, and restore the settings afterwards."""
    with private_cache(tmp_path_factory.mktemp("kbench-cache")):
        yield


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _vec(name: str, dtype: str = "float32", dim: object = "n") -> BufferArg:
    return BufferArg(name, dtype, (dim,))


def _blocks_of(size: int):
    """grid/block callables covering ``n`` with blocks of ``size`` threads along x."""
    return (lambda e: (_ceil_div(e["n"], size), 1, 1), lambda e: (size, 1, 1))


# -- OpenCL kernels ----------------------------------------------------------------------------

ADD_CL = """
__kernel void add(__global const float* A, __global const float* B, __global float* C, int n) {
    int i = get_global_id(0);
    if (i < n) C[i] = A[i] + B[i];
}
"""

# 2-D launch: x walks columns, y walks rows
MATADD_CL = """
__kernel void matadd(__global const float* A, __global const float* B, __global float* C,
                     int n, int m) {
    int j = get_group_id(0) * get_local_size(0) + get_local_id(0);
    int i = get_group_id(1) * get_local_size(1) + get_local_id(1);
    if (i < n && j < m) C[i * m + j] = A[i * m + j] - 2.0f * B[i * m + j];
}
"""

# one work-group per row, a shared-memory tree reduction with barriers (a GPU-style schedule)
ROW_SUM_CL = """
__kernel void row_sum(__global const float* A, __global float* B, int n, int m) {
    __local float part[64];
    int row = get_group_id(0);
    int t = get_local_id(0);
    float acc = 0.0f;
    for (int j = t; j < m; j += 64) acc += A[row * m + j];
    part[t] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 32; s > 0; s >>= 1) {
        if (t < s) part[t] += part[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) B[row] = part[0];
}
"""

# two kernels sharing a workspace: T = A * A, then Out[i] = T[i] + T[i + 1] (Out has n - 1 rows)
TWO_STEP_CL = """
__kernel void square(__global const float* A, __global float* T, int n) {
    int i = get_global_id(0);
    if (i < n) T[i] = A[i] * A[i];
}
__kernel void pair_sum(__global const float* T, __global float* Out, int n) {
    int i = get_global_id(0);
    if (i < n - 1) Out[i] = T[i] + T[i + 1];
}
"""

N_MINUS_1 = DerivedDim("n - 1", lambda e: e["n"] - 1)


def _opencl_add(block: int = 64):
    kernel = KernelSpec("add", ("A", "B", "C", "n"), *_blocks_of(block))
    return build_module(
        FuncSpec("add", "opencl", ADD_CL, (_vec("A"), _vec("B"), _vec("C")), ("n",), (), (kernel,))
    )


@needs_opencl
@pytest.mark.parametrize("n", [1, 63, 64, 1000])
def test_opencl_add(n):
    mod = _opencl_add()
    dev = opencl(0)
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
    c = empty((n,), "float32", dev)
    mod(array(a, dev), array(b, dev), c)
    assert c.device == dev
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) + b.astype(np.float64), rtol=1e-6)
    assert mod.imported_modules[0].get_source() == ADD_CL


@needs_opencl
def test_opencl_2d_grid():
    kernel = KernelSpec(
        "matadd",
        ("A", "B", "C", "n", "m"),
        lambda e: (_ceil_div(e["m"], 8), _ceil_div(e["n"], 4), 1),
        lambda e: (8, 4, 1),
    )
    args = tuple(BufferArg(x, "float32", ("n", "m")) for x in "ABC")
    mod = build_module(FuncSpec("matadd", "opencl", MATADD_CL, args, ("n", "m"), (), (kernel,)))
    dev = opencl(0)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((13, 29)).astype("float32"), rng.standard_normal((13, 29)).astype("float32")
    c = empty((13, 29), "float32", dev)
    mod(array(a, dev), array(b, dev), c)
    np.testing.assert_allclose(
        c.numpy(), a.astype(np.float64) - 2 * b.astype(np.float64), rtol=1e-6, atol=1e-6
    )


@needs_opencl
def test_opencl_local_memory_reduction():
    kernel = KernelSpec("row_sum", ("A", "B", "n", "m"), lambda e: (e["n"], 1, 1), lambda e: (64, 1, 1))
    args = (BufferArg("A", "float32", ("n", "m")), _vec("B"))
    mod = build_module(FuncSpec("row_sum", "opencl", ROW_SUM_CL, args, ("n", "m"), (), (kernel,)))
    dev = opencl(0)
    a = np.random.default_rng(4).standard_normal((5, 300)).astype("float32")
    b = empty((5,), "float32", dev)
    mod(array(a, dev), b)
    np.testing.assert_allclose(b.numpy(), a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


@needs_opencl
def test_opencl_workspace_shared_by_two_kernels():
    kernels_ = (
        KernelSpec("square", ("A", "T", "n"), *_blocks_of(32)),
        KernelSpec("pair_sum", ("T", "Out", "n"), *_blocks_of(32)),
    )
    ws = Workspace("T", "float32", lambda e: e["n"])
    args = (_vec("A"), BufferArg("Out", "float32", (N_MINUS_1,)))
    mod = build_module(FuncSpec("two_step", "opencl", TWO_STEP_CL, args, ("n",), (ws,), kernels_))
    dev = opencl(0)
    for n in (100, 100, 37):
        a = np.linspace(-1, 1, n).astype("float32")
        out = empty((n - 1,), "float32", dev)
        mod(array(a, dev), out)
        sq = a.astype(np.float64) ** 2
        np.testing.assert_allclose(out.numpy(), sq[:-1] + sq[1:], rtol=1e-6)


@needs_opencl
def test_opencl_empty_launch_is_skipped():
    mod = _opencl_add()
    dev = opencl(0)
    z = empty((0,), "float32", dev)
    mod(z, z, z)  # grid (0, 1, 1): nothing is launched
    assert z.numpy().shape == (0,)


@needs_opencl
def test_opencl_build_error_carries_the_log():
    kernel = KernelSpec("add", ("A", "n"), *_blocks_of(64))
    source = "__kernel void add(__global float* A, int n) { A[0] = undeclared_thing; }"
    with pytest.raises(BuildError, match="OpenCL build failed") as info:
        build_module(FuncSpec("add", "opencl", source, (_vec("A"),), ("n",), (), (kernel,)))
    assert "undeclared_thing" in str(info.value)


@needs_opencl
def test_opencl_array_copies():
    dev = opencl(0)
    host = np.arange(10, dtype=np.int64)
    arr = array(host, dev)
    assert arr.shape == (10,) and arr.dtype == "int64"
    np.testing.assert_array_equal(arr.numpy(), host)
    arr.copyfrom(host * 3)
    np.testing.assert_array_equal(arr.asnumpy(), host * 3)
    back = arr.copyto(cpu(0))
    np.testing.assert_array_equal(back.numpy(), host * 3)
    assert dev.max_threads_per_block >= 1


@needs_opencl
def test_opencl_time_evaluator():
    mod = _opencl_add()
    dev = opencl(0)
    a = array(np.ones(4096, "float32"), dev)
    c = empty((4096,), "float32", dev)
    timer = mod.time_evaluator(mod.entry_name, dev, number=5, repeat=3)
    result = timer(a, a, c)
    assert len(result.results) == 3 and all(r > 0 for r in result.results)
    assert result.mean > 0 and result.median > 0
    np.testing.assert_array_equal(c.numpy(), 2.0)


# -- C target timing ---------------------------------------------------------------------------


def test_c_time_evaluator_min_repeat_ms():
    source = (
        "void add(const float* A, const float* B, float* C, int n) {"
        " for (int i = 0; i < n; ++i) C[i] = A[i] + B[i]; }"
    )
    kernel = KernelSpec("add", ("A", "B", "C", "n"), lambda e: (1, 1, 1), lambda e: (1, 1, 1))
    mod = build_module(FuncSpec("add", "c", source, (_vec("A"), _vec("B"), _vec("C")), ("n",), (), (kernel,)))
    a = array(np.ones(64, "float32"))
    c = empty((64,), "float32")
    result = mod.time_evaluator("add", cpu(0), number=1, repeat=2, min_repeat_ms=5)(a, a, c)
    assert result.mean > 0
    assert result.number > 1  # grew so that each repeat lasts >= 5 ms
    assert result.number * result.min >= 4e-3


# -- CUDA builds (nvcc only) -------------------------------------------------------------------

ADD_CU = r"""
extern "C" __global__ void add(const float* __restrict__ A, const float* __restrict__ B,
                               float* __restrict__ C, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) C[i] = A[i] + B[i];
}
"""

# two kernels and a workspace, as in the OpenCL test, plus a shared-memory block reduction
TWO_STEP_CU = r"""
extern "C" __global__ void square(const float* A, float* T, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) T[i] = A[i] * A[i];
}
extern "C" __global__ void pair_sum(const float* T, float* Out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) Out[i] = T[i] + T[i + 1];
}
"""


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"])
def test_compile_cuda_cubin(arch):
    cubin = nvcc.compile_cuda(ADD_CU, target="cubin", arch=arch)
    assert cubin[:4] == b"\x7fELF"
    assert nvcc.compile_cuda(ADD_CU, target="cubin", arch=arch) == cubin  # from the cache


@needs_nvcc
def test_compile_cuda_ptx_and_fatbin():
    ptx = nvcc.compile_cuda(ADD_CU, target="ptx", arch="sm_80").decode()
    assert ".target sm_80" in ptx and ".entry add" in ptx
    fatbin = nvcc.compile_cuda(ADD_CU, target="fatbin", arch=["sm_80", "sm_90"])
    assert len(fatbin) > 0
    assert nvcc.nvcc_version() >= (11, 0)


@needs_nvcc
def test_compile_cuda_error():
    with pytest.raises(BuildError, match=r"nvcc failed .*source\.cu[\s\S]*not_declared"):
        nvcc.compile_cuda('extern "C" __global__ void k() { not_declared = 1; }', arch="sm_80")


@needs_nvcc
def test_cuda_module_builds_without_a_gpu():
    kernel = KernelSpec("add", ("A", "B", "C", "n"), *_blocks_of(128))
    spec = FuncSpec("add", "cuda", ADD_CU, (_vec("A"), _vec("B"), _vec("C")), ("n",), (), (kernel,), "sm_86")
    mod = build_module(spec)
    assert mod.arch == "sm_86"
    assert mod.imported_modules[0].get_source() == ADD_CU
    assert mod.imported_modules[0].binary[:4] == b"\x7fELF"


def test_default_architecture_follows_the_present_gpu():
    """Without a GPU every default is the project's architecture; with one, cuda(0)'s own."""
    from kernels.build_module import default_arch as build_default
    from kernels.meta_schedule import target_of_tag
    from kernels.runtime.cuda import default_arch
    from kernels.runtime.device import present_cuda_arch

    present = present_cuda_arch()
    if HAVE_GPU:
        major, minor = cuda(0).compute_version.split(".")
        assert present == f"sm_{major}{minor}"
    else:
        assert present is None
    expected = present or nvcc.DEFAULT_ARCH
    assert default_arch() == build_default() == expected
    assert nvcc.get_target_compute_version(None) == ".".join(map(str, nvcc.parse_compute_version(expected)))
    # a tag whose architecture CUDA 13 cannot build (the P100's sm_60) falls back to the same one
    assert target_of_tag("nvidia/tesla-p100").arch == expected


# -- CUDA runs (GPU machine) -------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="no CUDA device")
def test_cuda_kernels_run():
    dev = cuda(0)
    arch = nvcc.normalize_arch(dev.compute_version)
    add = KernelSpec("add", ("A", "B", "C", "n"), *_blocks_of(128))
    mod = build_module(
        FuncSpec("add", "cuda", ADD_CU, (_vec("A"), _vec("B"), _vec("C")), ("n",), (), (add,), arch)
    )
    rng = np.random.default_rng(5)
    for n in (1, 1000, 100_003):
        a, b = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
        c = empty((n,), "float32", dev)
        mod(array(a, dev), array(b, dev), c)
        np.testing.assert_allclose(c.numpy(), a.astype(np.float64) + b.astype(np.float64), rtol=1e-6)
    z = empty((0,), "float32", dev)
    mod(z, z, z)  # empty launch skipped

    steps = (
        KernelSpec("square", ("A", "T", "n"), *_blocks_of(256)),
        KernelSpec("pair_sum", ("T", "Out", "n"), *_blocks_of(256)),
    )
    ws = Workspace("T", "float32", lambda e: e["n"])
    args = (_vec("A"), BufferArg("Out", "float32", (N_MINUS_1,)))
    two = build_module(FuncSpec("two_step", "cuda", TWO_STEP_CU, args, ("n",), (ws,), steps, arch))
    a = np.linspace(-1, 1, 5000).astype("float32")
    out = empty((4999,), "float32", dev)
    two(array(a, dev), out)
    sq = a.astype(np.float64) ** 2
    np.testing.assert_allclose(out.numpy(), sq[:-1] + sq[1:], rtol=1e-6)

    x = array(np.ones(1 << 20, "float32"), dev)
    y = empty((1 << 20,), "float32", dev)
    result = mod.time_evaluator(mod.entry_name, dev, number=20, repeat=3)(x, x, y)
    assert len(result.results) == 3 and result.mean > 0
    dev.sync()
    assert dev.max_threads_per_block >= 1024 and dev.warp_size == 32


def test_c_libraries_are_built_for_this_cpu_and_keyed_by_it(monkeypatch):
    import kernels.runtime.c as c_runtime

    assert "-O3" in c_runtime.C_FLAGS and "-march=native" in c_runtime.C_FLAGS
    source = "void kb_cache_probe(float* a) { a[0] = 1.0f; }\n"
    here = c_runtime.compile_c(source)
    assert c_runtime.compile_c(source) == here  # the same build is a load
    # a library built where -march=native means another CPU is not reused
    monkeypatch.setattr(c_runtime, "native_target", lambda compiler: "-march= some-other-cpu")
    assert c_runtime.compile_c(source) != here
