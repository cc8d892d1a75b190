"""parallel / vectorize / bind follow TVM's data-flow rules: a loop over blocks whose iterations depend
on each other is refused with an error naming the block and the rule; loops that keep the rule still
run and give numpy's answer (C with OpenMP, OpenCL on PoCL)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels.script import tir as T

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@T.prim_func
def rowsum_not_compact(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (64, 16), "float32")
    B = T.match_buffer(b, (16,), "float32")
    for i, k in T.grid(64, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vk] = 0.0
            B[vk] = B[vk] + A[vi, vk]


@T.prim_func
def rowsum(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (64, 16), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i, k in T.grid(64, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def prefix(a: T.handle) -> None:
    A = T.match_buffer(a, (16,), "float32")
    for i in T.serial(15):
        with T.block("scan"):
            vi = T.axis.spatial(15, i)
            A[vi + 1] = A[vi + 1] + A[vi]


@T.prim_func
def two_writers(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (32,), "float32")
    B = T.match_buffer(b, (32,), "float32")
    for i in T.serial(32):
        with T.block("W0"):
            vi = T.axis.spatial(32, i)
            B[vi] = A[vi]
        with T.block("W1"):
            vi = T.axis.spatial(32, 31 - i)
            B[vi] = A[vi] * 2.0


@pytest.mark.parametrize("prim", ["parallel", "vectorize", "blockIdx.x", "threadIdx.x"])
def test_reduction_indexing_output_by_reduce_var_is_refused(prim):
    s = tvm.tir.Schedule(rowsum_not_compact)
    i, _ = s.get_loops(s.get_block("B"))
    with pytest.raises(tvm.tir.ScheduleError) as e:
        s.bind(i, prim) if "." in prim else getattr(s, prim)(i)
    msg = str(e.value)
    assert "block B" in msg and "compact data flow" in msg and "reduction variable vk" in msg
    assert "loop i" in msg


def test_refused_parallel_leaves_loop_serial():
    s = tvm.tir.Schedule(rowsum_not_compact)
    i, _ = s.get_loops(s.get_block("B"))
    with pytest.raises(tvm.tir.ScheduleError):
        s.parallel(i)
    assert s.get(i).kind == "serial"
    assert "#pragma omp" not in tvm.build(s.mod, target="c").get_source()


def test_block_reading_what_it_writes_is_refused():
    s = tvm.tir.Schedule(prefix)
    (i,) = s.get_loops(s.get_block("scan"))
    with pytest.raises(tvm.tir.ScheduleError, match=r"block scan .*reads the buffer it writes \(A\)"):
        s.parallel(i)


def test_second_writer_of_a_buffer_is_refused():
    s = tvm.tir.Schedule(two_writers)
    (i,) = s.get_loops(s.get_block("W0"))
    with pytest.raises(tvm.tir.ScheduleError, match=r"block W0 .*W1 also writes B"):
        s.parallel(i)


def test_spatial_loop_of_reduction_runs_parallel_on_c():
    s = tvm.tir.Schedule(rowsum)
    i, _ = s.get_loops(s.get_block("B"))
    s.parallel(i)
    f = tvm.build(s.mod, target="c")
    assert "#pragma omp parallel for" in f.get_source()
    a = np.random.default_rng(0).uniform(-1, 1, (64, 16)).astype("float32")
    b = tvm.nd.array(np.full(64, np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(a, tvm.cpu(0)), b)
    np.testing.assert_allclose(b.numpy(), a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-6)


def test_reduction_loop_is_refused_for_parallel_but_not_threadidx():
    s = tvm.tir.Schedule(rowsum)
    _, k = s.get_loops(s.get_block("B"))
    with pytest.raises(tvm.tir.ScheduleError, match="reduction variable vk of block B"):
        s.parallel(k)
    s.bind(k, "threadIdx.x")  # a cross-thread reduction
    assert s.get(k).thread_tag == "threadIdx.x"


@needs_opencl
def test_spatial_loops_bound_to_threads_run_on_opencl():
    s = tvm.tir.Schedule(rowsum)
    i, _ = s.get_loops(s.get_block("B"))
    i0, i1 = s.split(i, [None, 16])
    s.bind(i0, "blockIdx.x")
    s.bind(i1, "threadIdx.x")
    f = tvm.build(s.mod, target="opencl")
    a = np.random.default_rng(1).uniform(-1, 1, (64, 16)).astype("float32")
    b = tvm.nd.array(np.full(64, np.nan, "float32"), tvm.opencl(0))
    f(tvm.nd.array(a, tvm.opencl(0)), b)
    np.testing.assert_allclose(b.numpy(), a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-6)


@T.prim_func
def nested_sum(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16, 8), "float32")
    B = T.match_buffer(b, (8,), "float32")
    for k in T.serial(16):
        with T.block("outer"):
            T.reads(A[k, 0:8])
            T.writes(B[0:8])
            for j in T.serial(8):
                with T.block("inner"):
                    vk = T.axis.reduce(16, k)
                    vj = T.axis.spatial(8, j)
                    with T.init():
                        B[vj] = 0.0
                    B[vj] = B[vj] + A[vk, vj]


def test_nested_block_reducing_over_the_loop_is_refused():
    s = tvm.tir.Schedule(nested_sum)
    (k,) = s.get_loops(s.get_block("outer"))
    with pytest.raises(tvm.tir.ScheduleError, match="parallel: loop k computes the reduction variable vk of "
                                                    "block inner"):
        s.parallel(k)
