"""Named regressions of what the schedule fuzzer (kernels.testing.fuzz) and TVM's own tests found: each
test is one failure, checked against numpy (or the clear refusal that replaced it)."""

from __future__ import annotations

import numpy as np
import pytest
from kbfuzz import one_thread_matmul
from kbtest import opencl_available

import kernels as tvm
from kernels import te
from kernels.contrib import nvcc
from kernels.testing import fuzz
from kernels.workloads import WorkloadError
from kernels.workloads import get as get_workload

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")


def _warp_reduction(m: int, n: int):
    """TVM v0.8's test_reduce.py test_warp_reduction1: a max over ``n`` split into 32 parts bound to
    threadIdx.x (declared with extent 32), 4 rows a block on threadIdx.y."""
    block_x = te.thread_axis("blockIdx.x")
    thread_x = te.thread_axis((0, 32), "threadIdx.x")
    thread_y = te.thread_axis((0, 4), "threadIdx.y")
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n))
    B = te.compute((m,), lambda i: te.max(A[i][k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, _ = s[B].split(s[B].op.reduce_axis[0], nparts=32)
    s[B].bind(ko, thread_x)
    xo, xi = s[B].split(s[B].op.axis[0], factor=4)
    s[B].bind(xi, thread_y)
    s[B].bind(xo, block_x)
    return s, [A, B]


def test_split_nparts_wider_than_the_axis_keeps_its_threads():
    # an axis of 20 split into 32 parts bound to threadIdx.x: the outer part has the 32 iterations the
    # thread axis declares (TVM's rule), the 12 threads past the axis are guarded
    s, args = _warp_reduction(10, 20)
    text = str(tvm.lower(s, args, simple_mode=True))
    assert '"threadIdx.x")] "thread_extent" = 32' in text
    assert "threadIdx.x < 20" in text


@needs_opencl
@pytest.mark.parametrize("m, n", [(10, 20), (32, 256), (10, 37), (1, 1), (3, 33)])
def test_warp_reduction_with_32_parts_of_a_short_axis_opencl(m, n):
    s, args = _warp_reduction(m, n)
    f = tvm.build(s, args, "opencl", name="warp_reduction")
    a_np = np.random.default_rng(m * 1000 + n).uniform(-1, 1, size=(m, n)).astype("float32")
    dev = tvm.opencl(0)
    a = tvm.nd.array(a_np, dev)
    b = tvm.nd.array(np.full((m,), np.nan, "float32"), dev)
    f(a, b)
    np.testing.assert_array_equal(b.numpy(), a_np.astype(np.float64).max(axis=1).astype("float32"))


_N32 = {"n": 32, "l": 512, "m": 512, "layout": "NN"}


def _tutorial_sample(target: str, dtype: str, knobs: dict, params=None) -> dict:
    return {"space": "tc_tutorial", "target": target, "seed": 7, "id": 0, "kind": "variant",
            "workload": "matmul_tensorcore", "variant": "tutorial", "dtype": dtype,
            "params": dict(params or _N32), "knobs": dict(knobs)}


#: configurations of the tutorial's space that read past their shared tiles at N=32 (their block has
#: more thread rows than C has rows): the GPU reported illegal memory accesses for these
TALL_BLOCKS = [dict(bx=4, by=64, step_k=8, v=8), dict(bx=2, by=64, step_k=1, v=4),
               dict(bx=8, by=64, step_k=32, v=32)]


@pytest.mark.parametrize("knobs", TALL_BLOCKS)
def test_tensorcore_tutorial_block_taller_than_c_stays_in_its_tiles(knobs):
    # the lowered CUDA kernel, every access checked against its buffer under its guards: the fetches
    # and the register copies of rows 32-63 are guarded, the shared tiles have the block's 64 rows
    res = fuzz.execute(_tutorial_sample("cuda", "float16", knobs), build_only="lower")
    assert res["outcome"] == "built", res["detail"]
    text = str(tvm.lower(*get_workload("matmul_tensorcore").build("tutorial", _N32, "float16", knobs)))
    assert "threadIdx.y < 32" in text


@needs_opencl
@pytest.mark.parametrize("knobs", TALL_BLOCKS[:2])
def test_tensorcore_tutorial_block_taller_than_c_computes_numpys_product_opencl(knobs):
    # the same schedule in int8 (this OpenCL device has no float16), run between red zones
    res = fuzz.execute(_tutorial_sample("opencl", "int8", knobs))
    assert res["outcome"] == "ok", res["detail"]


@pytest.mark.nvcc
@needs_nvcc
def test_tensorcore_tutorial_block_taller_than_c_compiles_with_nvcc():
    res = fuzz.execute(_tutorial_sample("cuda", "float16", TALL_BLOCKS[0]), build_only=True)
    assert res["outcome"] == "built", res["detail"]


def test_conv2d_smaller_than_its_window_is_refused():
    # the fuzzer drew conv2d_3x3 at n = 1: the arguments' maker raised numpy's "negative dimensions"
    w = get_workload("conv2d_3x3")
    with pytest.raises(WorkloadError, match="n must be at least 3 .* got n = 1"):
        w.build("tiled", {"n": 1}, "float32")
    assert w.invalid({"n": 2}, "float32") == ("n must be at least 3 (the input holds the 3 x 3 window of "
                                              "each output), got n = 2")
    assert w.invalid({"n": 3}, "float32") is None
    assert fuzz.execute({"space": "elementwise", "target": "c", "seed": 0, "id": 0, "kind": "variant",
                         "workload": "conv2d_3x3", "variant": "default", "dtype": "float32",
                         "params": {"n": 1}, "knobs": {}})["outcome"] == "refused"


def _tir_sample(kind: str, workload: str, n: int, **extra) -> dict:
    base = {"space": "tune_tir", "target": "opencl", "seed": n, "id": 0, "kind": kind, "workload": workload,
            "variant": "", "dtype": "float32", "params": {"n": n}}
    base.update(extra)
    return base


@needs_opencl
@pytest.mark.parametrize("n", [1, 11, 29])
def test_tune_tir_tiling_of_a_prime_matmul_builds_and_computes_numpys_product_opencl(n):
    # at n = 1 or a prime every tile factor is 1: the shared copies have one loop of their own (the k
    # step of 1 makes none), which the cooperative fetch fused with the thread-bound loop around it and
    # was refused ("fuse: loop i_1_j_1_fused ... is bound to a thread") for 18 of 71 samples
    from kernels.tuning.tir_task import TIRTask
    from kernels.workloads.tensorir import matmul_module

    task = TIRTask(matmul_module({"n": n}), "opencl")
    for index in range(0, len(task.config_space), max(1, len(task.config_space) // 3)):
        res = fuzz.execute(_tir_sample("tir_task", "matmul_tir", n, index=index))
        assert res["outcome"] == "ok", (res["knobs"], res["detail"])
        assert res["knobs"]["tile_k"] == [-1, 1]


@needs_opencl
@pytest.mark.parametrize("n, knobs", [
    (4, dict(tile_local_y=1, tile_local_x=2, tile_block_y=2, tile_block_x=3, tile_k=1)),
    (41, dict(tile_local_y=1, tile_local_x=16, tile_block_y=16, tile_block_x=2, tile_k=1))])
def test_notes_blocking_with_shared_and_a_k_tile_of_one_opencl(n, knobs):
    # the notes' schedule with tile_k = 1 was refused ("fuse: loop ax0 (block A_shared) is not the
    # only child of loop k_0"): the fetch now fuses the copy's own loops only
    res = fuzz.execute(_tir_sample("variant", "matmul_tir", n, variant="blocking_with_shared", knobs=knobs))
    assert res["outcome"] == "ok", res["detail"]


def test_raster_on_a_ragged_c_names_the_rows_not_zero_block_rows():
    w = get_workload("matmul_tensorcore")
    with pytest.raises(tvm.TVMError, match=r"raster=1 needs C's rows \(1\) to be a whole number of block "
                                           r"rows of by \* ty = 16"):
        w.build("warp_tile", {"n": 1, "m": 8, "l": 32, "layout": "NN"}, "float16",
                dict(bx=2, by=16, ty=1, tx=8, warp_m=16, raster=1))


#: OpenCL samples PoCL's optimizer gets wrong (its CPU device): the kernels are correct with
#: -cl-opt-disable and the lowered IR passes the access check, so the fuzzer reports a device_bug
POCL_CASES = [
    # the int1 tile's store of C is guarded (row < 31), but the optimised kernel also stores row 31
    # (the store's condition repeats the guard of the accumulation inside the k loop's barriers)
    {"space": "tc_plain", "kind": "variant", "workload": "matmul_tensorcore", "variant": "plain",
     "dtype": "int1", "params": {"n": 31, "m": 4, "l": 256, "layout": "TN"},
     "knobs": {"bx": 2, "by": 8, "step_k": 1, "v": 16}},
    # PoCL's work-group compiler aborts ("Incoming edges to non-entry block!") on this kernel
    {"space": "tir_variants", "kind": "variant", "workload": "matmul_tir", "variant": "blocking_with_shared",
     "dtype": "float32", "params": {"n": 2},
     "knobs": {"tile_local_y": 1, "tile_local_x": 2, "tile_block_y": 3, "tile_block_x": 1, "tile_k": 1}},
    # every element of C wrong, optimised: an int8 tile fetched three steps ahead (multi_buffer(3))
    {"space": "tc_warp_tile", "kind": "variant", "workload": "matmul_tensorcore", "variant": "warp_tile",
     "dtype": "int8", "params": {"n": 23, "m": 8, "l": 47, "layout": "NN"},
     "knobs": {"bx": 4, "by": 4, "step_k": 1, "v": 1, "ty": 8, "tx": 2, "warp_m": 32, "double_buffer": 3,
               "flat_fetch": 1, "align_all": 0, "raster": 0}},
    # every element of C wrong, optimised: the tutorial's int4 template at n = 3, m = 1
    {"space": "tc_tutorial", "kind": "variant", "workload": "matmul_tensorcore", "variant": "tutorial",
     "dtype": "int4", "params": {"n": 3, "m": 1, "l": 296, "layout": "TN"},
     "knobs": {"bx": 4, "by": 32, "step_k": 8, "v": 32}},
]


@needs_opencl
def test_opencl_compiler_bugs_are_device_bugs_and_the_kernels_are_correct_unoptimised():
    samples = [dict(case, target="opencl", seed=k, id=k) for k, case in enumerate(POCL_CASES)]
    rep = fuzz.run_fuzz("opencl", samples=samples, timeout=90)
    got = {r["id"]: r for r in rep.results}
    # "ok" where the device's compiler gets them right (another OpenCL implementation, a fixed PoCL)
    assert [got[k]["outcome"] in ("ok", "device_bug") for k in range(4)] == [True] * 4, rep.results
    assert not rep.failures
    for k in range(4):
        if got[k]["outcome"] == "device_bug":
            assert got[k]["detail"].startswith("correct with -cl-opt-disable; optimised: ")
    # unoptimised, each computes numpy's answer with every red zone intact
    plain = fuzz.run_fuzz("opencl", samples=[dict(s, options=["-cl-opt-disable"]) for s in samples],
                          timeout=90)
    assert [r["outcome"] for r in plain.results] == ["ok"] * 4, plain.results


def test_local_arrays_over_cudas_512_kib_a_thread_are_refused_at_build():
    # fuzz --target cuda --seed 21 on an H200: tile_i [-1, 1, 487], tile_j [-1, 1, 452] gave one thread
    # a 487 x 452 float32 accumulator (880,496 bytes); it built and every launch failed with
    # "cuLaunchKernel failed: invalid argument". Here the accumulator of one element (4 bytes, C.local_acc)
    # is a local array too.
    s, args = one_thread_matmul(487, 452, 16)
    with pytest.raises(tvm.error.BuildError) as info:
        tvm.build(s, args, target="cuda")
    msg = str(info.value)
    assert "880,500 bytes a thread" in msg and "C.local: 880,496 bytes" in msg and "512 KiB" in msg
    # 362 x 362 x 4 + 4 = 524,180 bytes: just under the limit (524,288), built
    s, args = one_thread_matmul(362, 362, 4)
    assert "C_local[131044]" in tvm.build(s, args, target="cuda").imported_modules[0].get_source()
    s, args = one_thread_matmul(363, 362, 4)  # 363 x 362 x 4 + 4 = 525,628 bytes
    with pytest.raises(tvm.error.BuildError, match="525,628 bytes a thread"):
        tvm.build(s, args, target="cuda")
