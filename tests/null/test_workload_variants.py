"""kernels.workloads.variants: CUDA-source variants become FuncSpecs of the user's source (knob macros,
a #line naming the file, constant scalars, fixed launch dimensions) that nvcc builds through the
build cache like a generated kernel; callable variants bind the case's parameters and knobs."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execute.build import CaseBuildError, arg_layout, build_artifact, is_callable, lower_case
from harness.model import Case
from kernels import workloads as W
from kernels.contrib import nvcc
from kernels.runtime.serialize import spec_from_json, spec_to_json
from kernels.runtime.spec import ConstArg
from kernels.workloads import (
    BoundCall,
    CudaKernel,
    Variant,
    Workload,
    cuda_source,
    device_callable,
    poison,
    scalar,
    uniform,
)
from kernels.workloads.variants import kernel_parameters

SAXPY = r'''
// z = a x + y
extern "C" __global__ void saxpy(const float* __restrict__ x, const float *y, float* z,
                                 int n, float a) {
    int i = blockIdx.x * blockDim.x * ITEMS + threadIdx.x;
    for (int k = 0; k < ITEMS; ++k, i += blockDim.x) {
        if (i < n) z[i] = a * x[i] + y[i];
    }
}
'''


def _saxpy_variant(source=SAXPY, **changes):
    kw = dict(kernel="saxpy", source=source,
              grid=lambda p, threads=128, items=1: (-(-p["n"] // (threads * items)),),
              block=lambda p, threads=128, items=1: (threads,),
              args=(0, 1, 2, scalar("n"), scalar("a", "float32", lambda p, threads, items: 2.5)),
              knobs=(("threads", 128), ("items", 1)),
              defines=lambda p, threads=128, items=1: {"ITEMS": items})
    kw.update(changes)
    return cuda_source("cu", **kw)


def _workload(name, variant):
    return Workload(
        name=name, params=("n",), dtypes=("float32",), variants={variant.name: variant},
        make_args=lambda p, d, rng: [uniform(rng, p["n"], d), uniform(rng, p["n"], d), poison((p["n"],), d)],
        reference=lambda a: [2.5 * a[0].astype(np.float64) + a[1]],
        outputs=(2,), flops=lambda p: 2.0 * p["n"], bytes=lambda p, d: 12.0 * p["n"])


@pytest.fixture
def registered():
    names = []

    def add(name, variant):
        W.register(_workload(name, variant))
        names.append(name)
        return W.get(name)

    yield add
    for n in names:
        W.REGISTRY.pop(n, None)


def _case(workload, variant, n=1000, knobs=(("items", 1), ("threads", 128)), target="cuda"):
    return Case("t", workload, variant, (("n", n),), knobs, "float32", target)


def test_kernel_parameters_reads_pointers_scalars_and_element_types():
    params = kernel_parameters(SAXPY, "saxpy")
    assert params == [("x", True, "float32"), ("y", True, "float32"), ("z", True, "float32"),
                      ("n", False, "int32"), ("a", False, "float32")]
    assert kernel_parameters(SAXPY, "saxpy2") is None
    # a kernel in an extern "C" block, with launch bounds and a commented-out decoy
    src = ('// __global__ void k(int x)\nextern "C" {\n__global__ void __launch_bounds__(256) '
           'k(double* out, const __half* in, unsigned int m) {}\n}')
    assert kernel_parameters(src, "k") == [("out", True, "float64"), ("in", True, "float16"),
                                           ("m", False, "uint32")]


def test_a_cuda_source_variant_builds_a_kernel_at_the_case_parameters():
    v = _saxpy_variant()
    assert isinstance(v, Variant) and v.kind == "cuda_source" and v.targets == ("cuda",)
    assert v.knob_defaults() == {"threads": 128, "items": 1}
    k, none = v.build({"n": 1000}, "float32", threads=64, items=4)
    assert none is None and isinstance(k, CudaKernel)
    assert k.grid == (4, 1, 1) and k.block == (64, 1, 1)  # ceil(1000 / 256) blocks of 64 threads
    assert k.params == (0, 1, 2, ConstArg("n", "int32", 1000), ConstArg("a", "float32", 2.5))
    # the knob macros come first, then a #line restoring the user's line numbers
    head = k.source.splitlines()
    assert head[0] == "#define ITEMS 4" and head[1].startswith("#line 1 ") and "saxpy" in k.source
    spec = k.spec([((1000,), "float32")] * 3, arch="sm_80", name="w_cu")
    assert [a.name for a in spec.args] == ["arg0", "arg1", "arg2"]
    assert spec.kernels[0].params == ("arg0", "arg1", "arg2", "n", "a")
    assert spec.kernels[0].grid({}) == (4, 1, 1) and spec.constants == k.params[3:]
    assert spec.kernels[0].dynamic_shared_bytes == 0
    # dynamic shared memory a block, as a function of the knobs, reaches the kernel's launch
    shared = _saxpy_variant(shared_bytes=lambda p, threads=128, items=1: 4 * threads * items)
    k2, _ = shared.build({"n": 1000}, "float32", threads=64, items=4)
    assert k2.spec([((1000,), "float32")] * 3).kernels[0].dynamic_shared_bytes == 1024


def test_the_spec_refuses_an_array_make_args_lacks_or_of_another_type():
    k, _ = _saxpy_variant(grid=lambda p, threads=128, items=1: np.int64(1)).build({"n": 10}, "float32")
    assert k.grid == (1, 1, 1)  # numpy integers are extents too
    with pytest.raises(W.variants.VariantSpecError, match="names array 2, but make_args gives 2"):
        k.spec([((10,), "float32")] * 2)
    with pytest.raises(W.variants.VariantSpecError, match="parameter 1 is a float32 pointer but array 1 "
                                                           "of make_args holds float64"):
        k.spec([((10,), "float32"), ((10,), "float64"), ((10,), "float32")])


def test_a_file_is_read_relative_to_the_registering_module(tmp_path):
    (tmp_path / "k.cu").write_text(SAXPY)
    module = tmp_path / "mod_with_cu.py"
    module.write_text("from kernels.workloads import cuda_source, scalar\n"
                      "V = cuda_source('cu', 'saxpy', file='k.cu', grid=lambda p: (1,),\n"
                      "                block=lambda p: (32,),\n"
                      "                args=(0, 1, 2, scalar('n'), scalar('a', 'float32', lambda p: 1.0)),\n"
                      "                defines=lambda p: {'ITEMS': 1})\n")
    ns = {"__name__": "mod_with_cu", "__file__": str(module)}
    exec(compile(module.read_text(), str(module), "exec"), ns)
    k, _ = ns["V"].build({"n": 5}, "float32")
    assert k.origin == str(tmp_path / "k.cu") and f'#line 1 "{tmp_path / "k.cu"}"' in k.source


def test_lower_case_makes_the_spec_with_the_make_args_layout(registered):
    registered("uv_saxpy", _saxpy_variant())
    case = _case("uv_saxpy", "cu", knobs=(("items", 2), ("threads", 256)))
    assert arg_layout(W.get("uv_saxpy"), case) == (((1000,), "float32"),) * 3
    spec = lower_case(case, "sm_90")
    assert spec.name == "uv_saxpy_cu" and spec.arch == "sm_90" and spec.target == "cuda"
    assert spec.kernels[0].block({}) == (256, 1, 1) and spec.kernels[0].grid({}) == (2, 1, 1)
    assert not is_callable(case)
    # the spec round-trips through the saved-module description with its constants
    back = spec_from_json(spec_to_json(spec))
    assert back.constants == (ConstArg("n", "int32", 1000), ConstArg("a", "float32", 2.5))


@pytest.mark.nvcc
def test_nvcc_builds_it_through_the_build_cache(registered):
    registered("uv_saxpy_nvcc", _saxpy_variant())
    case = _case("uv_saxpy_nvcc", "cu", n=777, knobs=(("items", 3), ("threads", 64)))
    first = build_artifact(case, "sm_80")
    assert first.binary and b"\0saxpy\0" in first.binary and first.arch == "sm_80"
    assert first.spec.constants[0] == ConstArg("n", "int32", 777)
    before = nvcc.STATS["nvcc_calls"]
    again = build_artifact(case, "sm_80")  # the same source and flags: served by the cache
    assert nvcc.STATS["nvcc_calls"] == before and again.binary == first.binary and not again.nvcc_called
    # a loaded-module view of it (no GPU needed to construct one) passes n and a by value
    from kernels.runtime.cuda import CUDAModule

    mod = CUDAModule(first.spec, binary=first.binary)
    assert [mod._param_is_value(p) for p in first.spec.kernels[0].params] == [False] * 3 + [True] * 2
    assert mod._param_type("a", 2) == "f" and mod._param_type("n", 2) == "i"


@pytest.mark.nvcc
def test_an_nvcc_error_names_the_users_file_and_line(registered, tmp_path):
    broken = SAXPY.replace("z[i] = a * x[i] + y[i];", "z[i] = a * x[i] + undefined_thing;")
    registered("uv_saxpy_broken", _saxpy_variant(source=broken))
    with pytest.raises(CaseBuildError) as info:
        build_artifact(_case("uv_saxpy_broken", "cu"), "sm_80")
    msg = str(info.value)
    line = broken.splitlines().index(next(x for x in broken.splitlines() if "undefined_thing" in x)) + 1
    assert f"source string({line}): error" in msg and "undefined_thing" in msg, msg


@pytest.mark.nvcc
def test_a_kernel_whose_name_is_mangled_is_refused_after_nvcc(registered):
    # the reading of the source sees an extern "C" block before the kernel, but the kernel is outside
    # it: C++ linkage, a mangled name (_Z4pokePf) that the runtime could not find; the cubin says so
    src = 'extern "C" { __device__ float twice(float v) { return 2.0f * v; } }\n' \
          '__global__ void poke(float* x) { x[0] = twice(x[0]); }\n'
    v = cuda_source("cu", "poke", source=src, grid=lambda p: (1,), block=lambda p: (1,), args=(0,))
    registered("uv_mangled", v)
    with pytest.raises(CaseBuildError, match='the cubin has no kernel named poke: declare it extern "C"'):
        build_artifact(_case("uv_mangled", "cu", knobs=()), "sm_80")


def test_a_callable_variant_binds_parameters_and_knobs(registered):
    seen = []

    def launch(args, params, BLOCK=256):
        seen.append((list(args), dict(params), BLOCK))

    v = device_callable("tri", launch, arrays="torch", knobs=(("BLOCK", 256),))
    assert v.kind == "callable" and v.library == "torch" and v.targets == ("cuda",)
    registered("uv_callable", v)
    call, none = W.get("uv_callable").build("tri", {"n": 8}, "float32", {"BLOCK": 1024})
    assert none is None and isinstance(call, BoundCall) and call.arrays == "torch"
    go = call.launcher(["a", "b", "c"])
    assert seen == []  # nothing runs before the launch is called
    go()
    go()
    assert seen == [(["a", "b", "c"], {"n": 8}, 1024)] * 2
    assert is_callable(_case("uv_callable", "tri", knobs=(("BLOCK", 1024),)))
    with pytest.raises(CaseBuildError, match="callable variant runs the user's function"):
        lower_case(_case("uv_callable", "tri", knobs=(("BLOCK", 1024),)))


def test_a_prepared_callable_is_set_up_once_and_must_return_its_launch():
    calls = []

    def prepare(args, params, threads=32):
        calls.append("setup")
        return lambda: calls.append(("launch", threads, params["n"]))

    call, _ = device_callable("raw", prepare, arrays="cupy", knobs=(("threads", 32),),
                              prepare=True).build({"n": 3}, "float32", threads=64)
    go = call.launcher([])
    go()
    go()
    assert calls == ["setup", ("launch", 64, 3), ("launch", 64, 3)]
    bad, _ = device_callable("raw", lambda args, params: None, arrays="cupy",
                             prepare=True).build({"n": 3}, "float32")
    with pytest.raises(TypeError, match="prepare=True, so it must return a function"):
        bad.launcher([])
