"""cache_read / cache_write placement, run on C and OpenCL (PoCL) and compared with numpy in float64:
a copy stage of a buffer produced and consumed inside one loop goes into that loop, right after the
producer, so the consumers there read this iteration's values."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels.script import tir as T
from kernels.tir.block import Block, BlockRealize, walk
from kernels.tir.stmt import For

TARGETS = ["c", pytest.param("opencl", marks=pytest.mark.skipif(not opencl_available(),
                                                                 reason="no OpenCL device"))]


@T.prim_func
def multi_consumer(x: T.handle, b: T.handle, c: T.handle) -> None:
    X = T.match_buffer(x, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    C = T.match_buffer(c, (64,), "float32")
    A = T.alloc_buffer((64,), "float32")
    for i in T.serial(8):
        for j in T.serial(8):
            with T.block("A"):
                vi = T.axis.spatial(64, i * 8 + j)
                A[vi] = X[vi] * 3.0
        for j in T.serial(8):
            with T.block("B"):
                vi = T.axis.spatial(64, i * 8 + j)
                B[vi] = A[vi] + 1.0
    for i in T.serial(64):
        with T.block("C"):
            vi = T.axis.spatial(64, i)
            C[vi] = A[vi]


@T.prim_func
def reduce_then_scale(a: T.handle, d: T.handle) -> None:
    A = T.match_buffer(a, (16, 12), "float32")
    D = T.match_buffer(d, (16,), "float32")
    S = T.alloc_buffer((16,), "float32")
    for i in T.serial(16):
        for k in T.serial(12):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = 0.0
                S[vi] = S[vi] + A[vi, vk]
        with T.block("D"):
            vi = T.axis.spatial(16, i)
            D[vi] = S[vi] * 0.5


def run(sch, target, *arrays):
    if target == "opencl":  # every outermost loop to blockIdx.x, the loops inside run in each group
        names = {b.name_hint for b in walk(sch.mod["main"].body) if isinstance(b, Block)}
        for name in ("B", "C", "D"):
            if name in names:
                sch.bind(sch.get_loops(sch.get_block(name))[0], "blockIdx.x")
    f = tvm.build(sch.mod, target=target)
    dev = tvm.cpu(0) if target == "c" else tvm.opencl(0)
    nd = [tvm.nd.array(a, dev) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


def _loop_of(mod, block_name: str) -> str:
    """The name of the innermost loop above the stage ``block_name`` that is not its own copy loop."""
    body = mod["main"].body
    for s in walk(body):
        if isinstance(s, For):
            for t in walk(s.body):
                if isinstance(t, BlockRealize) and t.block.name_hint == block_name and \
                        not s.loop_var.name.startswith("ax"):
                    found = s.loop_var.name
    return found


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("prim", ["cache_read", "cache_write"])
def test_stage_inside_shared_loop_gives_numpy_answer(prim, target):
    s = tvm.tir.Schedule(multi_consumer)
    stage = s.cache_read(s.get_block("B"), 0, "global") if prim == "cache_read" else \
        s.cache_write(s.get_block("A"), 0, "global")
    name = s.get(stage).name_hint
    assert _loop_of(s.mod, name) == "i"  # the copy runs inside loop i, between A and B
    x = np.random.default_rng(1).uniform(-1, 1, 64).astype("float32")
    _, b, c = run(s, target, x, np.full(64, np.nan, "float32"), np.full(64, np.nan, "float32"))
    np.testing.assert_allclose(b, x.astype(np.float64) * 3 + 1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, x.astype(np.float64) * 3, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("prim", ["cache_read", "cache_write"])
def test_reduction_stage_inside_shared_loop(prim, target):
    s = tvm.tir.Schedule(reduce_then_scale)
    if prim == "cache_read":
        s.cache_read(s.get_block("D"), 0, "local")
    else:
        s.cache_write(s.get_block("S"), 0, "local")
    a = np.random.default_rng(2).uniform(-1, 1, (16, 12)).astype("float32")
    _, d = run(s, target, a, np.full(16, np.nan, "float32"))
    np.testing.assert_allclose(d, a.astype(np.float64).sum(axis=1) * 0.5, rtol=1e-5)


def test_stage_copies_one_iteration_of_the_shared_loop():
    s = tvm.tir.Schedule(multi_consumer)
    stage = s.cache_read(s.get_block("B"), 0, "global")
    loops = s.get_loops(stage)
    assert [s.get(lp).loop_var.name for lp in loops] == ["i", "ax0"]
    assert s.get(loops[1]).extent.value == 8


def test_cache_write_without_reader_goes_to_end_of_scope():
    s = tvm.tir.Schedule(multi_consumer)
    stage = s.cache_write(s.get_block("C"), 0, "local")
    items = s.mod["main"].body.block.body.seq
    assert any(isinstance(t, BlockRealize) and t.block is s.get(stage) for t in walk(items[-1]))
    x = np.random.default_rng(3).uniform(-1, 1, 64).astype("float32")
    _, b, c = run(s, "c", x, np.full(64, np.nan, "float32"), np.full(64, np.nan, "float32"))
    np.testing.assert_allclose(c, x.astype(np.float64) * 3, rtol=1e-5, atol=1e-6)


@T.prim_func
def under_scope(x: T.handle, b: T.handle, c: T.handle) -> None:
    X = T.match_buffer(x, (32, 32), "float32")
    B = T.match_buffer(b, (32, 32), "float32")
    C = T.match_buffer(c, (32, 32), "float32")
    A = T.alloc_buffer((32, 32), "float32")
    for i0, j0 in T.grid(4, 4):
        with T.block("scope"):
            i, j = T.axis.remap("SS", [i0, j0])
            for x, y in T.grid(8, 8):
                with T.block("A"):
                    vi = T.axis.spatial(32, i * 8 + x)
                    vj = T.axis.spatial(32, j * 8 + y)
                    A[vi, vj] = X[vi, vj] + 1.0
            for x, y in T.grid(8, 8):
                with T.block("B"):
                    vi = T.axis.spatial(32, i * 8 + x)
                    vj = T.axis.spatial(32, j * 8 + y)
                    B[vi, vj] = A[vi, vj] * 3.0
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * 2.0


def test_cache_read_of_a_buffer_a_nested_scope_produces():
    s = tvm.tir.Schedule(under_scope)
    s.cache_read(s.get_block("B"), 0, "local")
    s.cache_read(s.get_block("C"), 0, "global")  # the producer "scope" keeps reading its own A
    x = np.random.default_rng(4).uniform(-1, 1, (32, 32)).astype("float32")
    _, b, c = run(s, "c", x, np.full((32, 32), np.nan, "float32"), np.full((32, 32), np.nan, "float32"))
    np.testing.assert_allclose(b, (x.astype(np.float64) + 1) * 3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, (x.astype(np.float64) + 1) * 2, rtol=1e-5, atol=1e-6)


@T.prim_func
def ragged_shared_loop(x: T.handle, b: T.handle) -> None:
    X = T.match_buffer(x, (10,), "float32")
    B = T.match_buffer(b, (10,), "float32")
    A = T.alloc_buffer((10,), "float32")
    for i in T.serial(3):
        for j in T.serial(4):
            with T.block("A"):
                T.where(i * 4 + j < 10)
                vi = T.axis.spatial(10, i * 4 + j)
                A[vi] = X[vi] * 3.0
        for j in T.serial(4):
            with T.block("B"):
                T.where(i * 4 + j < 10)
                vi = T.axis.spatial(10, i * 4 + j)
                B[vi] = A[vi] + 1.0


@T.prim_func
def ragged_root(x: T.handle, c: T.handle) -> None:
    X = T.match_buffer(x, (10,), "float32")
    C = T.match_buffer(c, (10,), "float32")
    for i_0, i_1 in T.grid(3, 4):
        with T.block("C"):
            T.where(i_0 * 4 + i_1 < 10)
            vi = T.axis.spatial(10, i_0 * 4 + i_1)
            C[vi] = X[vi] * 2.0


@pytest.mark.parametrize("prim", ["cache_read", "cache_write"])
def test_copy_of_a_ragged_region_stays_inside_the_buffer(prim):
    s = tvm.tir.Schedule(ragged_shared_loop)
    stage = s.cache_read(s.get_block("B"), 0, "local") if prim == "cache_read" else \
        s.cache_write(s.get_block("A"), 0, "local")
    # inside loop i the copy covers A[i * 4 : i * 4 + 4]; at i = 2 that runs past A[9]
    realize = next(r for r in walk(s.mod["main"].body)
                   if isinstance(r, BlockRealize) and r.block is s.get(stage))
    assert "< 10" in str(realize.predicate)
    x = np.random.default_rng(5).uniform(-1, 1, 10).astype("float32")
    _, b = run(s, "c", x, np.full(10, np.nan, "float32"))
    np.testing.assert_allclose(b, x.astype(np.float64) * 3 + 1, rtol=1e-5, atol=1e-6)


def test_cache_write_of_an_output_after_a_ragged_split_copies_only_the_buffer():
    s = tvm.tir.Schedule(ragged_root)
    stage = s.cache_write(s.get_block("C"), 0, "local")
    (ax,) = s.get_loops(stage)
    assert s.get(ax).extent.value == 10  # not 12: C has 10 elements
    x = np.random.default_rng(6).uniform(-1, 1, 10).astype("float32")
    _, c = run(s, "c", x, np.full(10, np.nan, "float32"))
    np.testing.assert_allclose(c, x.astype(np.float64) * 2, rtol=1e-6)


@T.prim_func
def scale(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (12, 10), "float32")
    C = T.match_buffer(c, (12, 10), "float32")
    for i, j in T.grid(12, 10):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * 2.0


def test_local_copy_read_outside_its_thread_loop_is_refused_at_build():
    # A_local is written by thread ax1 of each group and read by a nest no threadIdx loop covers:
    # each thread would read elements its own copy never received
    s = tvm.tir.Schedule(scale)
    stage = s.cache_read(s.get_block("C"), 0, "local")
    ax0, ax1 = s.get_loops(stage)
    s.bind(ax0, "blockIdx.x")
    s.bind(ax1, "threadIdx.x")
    i, _ = s.get_loops(s.get_block("C"))
    s.bind(i, "blockIdx.x")
    with pytest.raises(tvm.errors.LoweringError, match=r"buffer A_local is local \(one copy per GPU "
                                                       r"thread\) but block A_local accesses it under loop "
                                                       r"ax1 \(threadIdx.x\) and block C outside every "
                                                       r"threadIdx loop"):
        tvm.build(s.mod, target="opencl")
    # under the same thread loop it builds and runs
    s = tvm.tir.Schedule(scale)
    i, j = s.get_loops(s.get_block("C"))
    s.bind(i, "blockIdx.x")
    s.bind(j, "threadIdx.x")
    stage = s.cache_read(s.get_block("C"), 0, "local")
    s.compute_at(stage, j)
    if opencl_available():
        a = np.random.default_rng(8).uniform(-1, 1, (12, 10)).astype("float32")
        _, c = run(s, "opencl", a, np.full((12, 10), np.nan, "float32"))
        np.testing.assert_allclose(c, a.astype(np.float64) * 2, rtol=1e-6)
