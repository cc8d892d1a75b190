"""CUDA-source and callable variants that cannot work are refused when they are made (or registered)
with a WorkloadError naming the variant, the file or kernel and the field at fault; a case that cannot
build or run says why (the array make_args lacks, the library missing)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.execute import worker
from harness.execute.build import CaseBuildError, lower_case
from harness.model import Case, MeasureConfig
from kernels import workloads as W
from kernels.workloads import Workload, WorkloadError, cuda_source, device_callable, poison, scalar, uniform

SRC = ('extern "C" __global__ void scale(const float* x, float* y, int n, float a) {\n'
       '    int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
       '    if (i < n) y[i] = a * x[i];\n'
       '}\n'
       'extern "C" __global__ void other(float* y) {}\n')


def _cu(**changes):
    kw = dict(kernel="scale", source=SRC, grid=lambda p: (1,), block=lambda p: (32,),
              args=(0, 1, scalar("n"), scalar("a", "float32", lambda p: 2.0)))
    kw.update(changes)
    return cuda_source("cu", **kw)


def _refused(*needles, **changes):
    with pytest.raises(WorkloadError) as info:
        _cu(**changes)
    msg = str(info.value)
    assert "CUDA-source variant 'cu'" in msg, msg
    for needle in needles:
        assert needle in msg, msg
    return msg


def test_the_good_cuda_variant_is_made():
    assert _cu().kind == "cuda_source"


def test_a_missing_file_names_the_path(tmp_path):
    _refused("cannot read the CUDA file", f"{tmp_path}/nope.cu", source=None, file=tmp_path / "nope.cu")


def test_file_and_source_are_exclusive():
    _refused("give exactly one of `file`", file="x.cu")
    _refused("give exactly one of `file`", source=None)


def test_a_kernel_not_in_the_source_lists_the_kernels_there():
    _refused("has no __global__ function 'scal'", "its kernels: scale, other", kernel="scal")


def test_a_kernel_without_c_linkage_is_refused():
    _refused('kernel \'k\' in ', 'must be declared extern "C"', kernel="k",
             source="__global__ void k(float* y) {}\n", args=(0,))


def test_args_must_match_the_kernels_parameters():
    _refused("kernel scale in", "takes 4 parameter(s) (x, y, n, a), `args` gives 3", args=(0, 1, scalar("n")))
    _refused("args[2] is array 2 but parameter n of scale is a scalar: use scalar(...)",
             args=(0, 1, 2, scalar("a", "float32")))
    _refused("args[0] is scalar 'n' but parameter x of scale is a pointer",
             args=(scalar("n"), 1, scalar("m"), scalar("a", "float32")))
    _refused("scalar 'a' has dtype 'float16'", args=(0, 1, scalar("n"), scalar("a", "float16")))
    _refused("args[1] (y) must be a make_args index or scalar(...), got 'y'", args=(0, "y", scalar("n"),
                                                                                 scalar("a", "float32")))
    _refused("scalar names repeat", args=(0, 1, scalar("n"), scalar("n", "float32")))


def test_launch_functions_must_take_the_parameters_and_knobs():
    _refused("`grid` must be a function (params, **knobs)", grid=(1, 1, 1))
    _refused("`block` cannot be called as block(params, threads=...)", block=lambda p: (32,),
             knobs=(("threads", 32),), grid=lambda p, threads=32: (1,))
    _refused("scalar 'a': `value` must be a function", args=(0, 1, scalar("n"), scalar("a", "float32", 2.0)))


def test_bad_callable_variants_are_refused():
    with pytest.raises(WorkloadError, match="callable variant 'f': `arrays` must be one of torch, cupy, "
                                            "got 'jax'"):
        device_callable("f", lambda args, params: None, arrays="jax")
    with pytest.raises(WorkloadError, match="callable variant 'f': `fn` must be a function"):
        device_callable("f", "torch.add")
    with pytest.raises(WorkloadError, match=r"`fn` cannot be called as fn\(args, params, BLOCK=...\)"):
        device_callable("f", lambda args, params: None, knobs=(("BLOCK", 128),))


def _workload(variant):
    return Workload(
        name="uv_err", params=("n",), dtypes=("float32",), variants={variant.name: variant},
        make_args=lambda p, d, rng: [uniform(rng, p["n"], d), poison((p["n"],), d)],
        reference=lambda a: [2.0 * a[0].astype(np.float64)], outputs=(1,),
        flops=lambda p: float(p["n"]), bytes=lambda p, d: 8.0 * p["n"])


@pytest.mark.parametrize("changes,needle", [
    ({"kind": "triton"}, "`kind` must be one of schedule, cuda_source, callable, got 'triton'"),
    ({"targets": ("c", "cuda")},
     "a cuda_source variant runs on the cuda target only; `targets` is ('c', 'cuda')"),
])
def test_register_checks_the_kind_and_its_targets(changes, needle):
    before = dict(W.REGISTRY)
    v = dataclasses.replace(_cu(), **changes)
    with pytest.raises(WorkloadError, match="workload 'uv_err': variants\\['cu'\\]") as info:
        W.register(_workload(v))
    assert needle in str(info.value) and W.REGISTRY == before


def test_register_checks_a_callables_library():
    v = dataclasses.replace(device_callable("f", lambda args, params: None), library="numpy")
    with pytest.raises(WorkloadError, match="a callable variant's `library` must be one of torch, cupy, got "
                                            "'numpy'"):
        W.register(_workload(v))


def _case(variant, knobs=()):
    return Case("t", "uv_err", variant, (("n", 64),), knobs, "float32", "cuda")


@pytest.fixture
def registered():
    names = []

    def add(variant):
        W.register(_workload(variant))
        names.append("uv_err")

    yield add
    for n in names:
        W.REGISTRY.pop(n, None)


def test_args_beyond_make_args_are_a_build_error_naming_the_kernel(registered):
    registered(_cu(args=(0, 2, scalar("n"), scalar("a", "float32", lambda p: 2.0))))
    with pytest.raises(CaseBuildError, match=r"kernel scale \(.*source string\): `args` names array 2, but "
                                             r"make_args gives 2 array\(s\) \(indices 0 to 1\)"):
        lower_case(_case("cu"))


def test_a_callable_without_its_library_is_a_build_error_saying_so(registered):
    try:
        import torch  # noqa: F401

        pytest.skip("torch is installed here: the library is not missing")
    except ImportError:
        pass
    registered(device_callable("f", lambda args, params: None, arrays="torch"))
    r = worker.run_case(_case("f"), MeasureConfig(max_time_s=0.1, min_time_s=0.0))
    assert r.outcome == "build_error"
    assert r.message == ("callable variant uv_err/f needs torch with a CUDA device, which is not available "
                         "here")
