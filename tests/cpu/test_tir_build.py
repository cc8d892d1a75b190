"""TensorIR modules built for C and OpenCL (PoCL) and compared with numpy in float64: every
primitive's result, ragged and symbolic sizes, te.create_prim_func, and time_evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels import te
from kernels.script import tir as T
from kernels.workloads import tensorir as notes

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@T.prim_func
def chain(a: T.handle, c: T.handle) -> None:
    n = T.var("int32")
    A = T.match_buffer(a, (n, 16), "float32")
    C = T.match_buffer(c, (n, 16), "float32")
    B = T.alloc_buffer((n, 16), "float32")
    for i, j in T.grid(n, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(n, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


def run(mod, target, *arrays):
    f = tvm.build(mod, target=target)
    dev = tvm.cpu(0) if target == "c" else tvm.opencl(0)
    nd = [tvm.nd.array(a, dev) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd], f


def matmul_args(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, size=(n, n)).astype("float32")
    b = rng.uniform(-1, 1, size=(n, n)).astype("float32")
    return a, b, np.full((n, n), np.nan, "float32"), a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("n", [1000, 129, 1])
@needs_opencl
def test_vector_add_ragged_on_opencl(n):
    sch = tvm.tir.Schedule(notes.vector_add_module({"n": n}))
    notes.bind_1d(sch, 128)
    rng = np.random.default_rng(n)
    a, b = rng.uniform(size=n).astype("float32"), rng.uniform(size=n).astype("float32")
    (_, _, c), _ = run(sch.mod, "opencl", a, b, np.full(n, np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) + b, rtol=1e-6)


@pytest.mark.parametrize("schedule", ["global", "shared_coop"])
@pytest.mark.parametrize("n", [1024, 1000, 77])
@needs_opencl
def test_window_sum_on_opencl(schedule, n):
    sch = tvm.tir.Schedule(notes.window_sum_module({"n": n}))
    (notes.bind_1d if schedule == "global" else notes.window_sum_shared_coop)(sch, 128)
    a = np.random.default_rng(n).uniform(size=n + 2).astype("float32")
    (_, b), f = run(sch.mod, "opencl", a, np.full(n, np.nan, "float32"))
    ref = a[:-2].astype(np.float64) + a[1:-1] + a[2:]
    np.testing.assert_allclose(b, ref, rtol=1e-6)
    src = f.imported_modules[0].get_source()
    assert ("__local float A_shared" in src) == (schedule == "shared_coop")
    # threads read what other threads of the block copied: a barrier separates the two
    assert ("barrier(CLK_LOCAL_MEM_FENCE);" in src) == (schedule == "shared_coop")


@pytest.mark.parametrize("schedule, knobs", [
    (notes.blocking, dict(tile_local_y=4, tile_local_x=4, tile_block_y=4, tile_block_x=8, tile_k=4)),
    (notes.blocking_with_shared,
     dict(tile_local_y=2, tile_local_x=4, tile_block_y=8, tile_block_x=4, tile_k=8)),
])
@pytest.mark.parametrize("n", [96, 70])
@needs_opencl
def test_matmul_schedules_other_tiles_on_opencl(schedule, knobs, n):
    sch = tvm.tir.Schedule(notes.matmul_module({"n": n}))
    schedule(sch, **knobs)
    a, b, c, ref = matmul_args(n)
    (_, _, out), _ = run(sch.mod, "opencl", a, b, c)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_matmul_on_c_with_cpu_primitives():
    n = 70
    sch = tvm.tir.Schedule(notes.matmul_module({"n": n}))
    block = sch.get_block("C")
    local = sch.cache_write(block, 0, "local")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, k1, i1, j1)
    sch.reverse_compute_at(local, j0)
    sch.parallel(i0)
    sch.unroll(k1)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k0)
    a, b, c, ref = matmul_args(n, 3)
    (_, _, out), f = run(sch.mod, "c", a, b, c)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    src = f.get_source()
    assert "#pragma omp parallel for" in src and "float C_local[128];" in src


@pytest.mark.parametrize("n", [37, 8])
@pytest.mark.parametrize("how", ["plain", "inline", "reverse_inline", "compute_at"])
def test_symbolic_sizes_and_inlining_on_c(how, n):
    sch = tvm.tir.Schedule(chain)
    if how == "inline":
        sch.compute_inline(sch.get_block("B"))
    elif how == "reverse_inline":
        sch.reverse_compute_inline(sch.get_block("C"))
    elif how == "compute_at":
        i, _ = sch.get_loops(sch.get_block("C"))
        io, ii = sch.split(i, [None, 5])
        sch.compute_at(sch.get_block("B"), ii)
    a = np.random.default_rng(n).uniform(size=(n, 16)).astype("float32")
    (_, c), f = run(sch.mod, "c", a, np.full((n, 16), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) * 2 + 1, rtol=1e-6)


@needs_opencl
def test_one_build_serves_every_size():
    sch = tvm.tir.Schedule(chain)
    sch.compute_inline(sch.get_block("B"))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    f = tvm.build(sch.mod, target="opencl")
    dev = tvm.opencl(0)
    for n in (1, 19, 64):
        a = np.random.default_rng(n).uniform(size=(n, 16)).astype("float32")
        c = tvm.nd.array(np.full((n, 16), np.nan, "float32"), dev)
        f(tvm.nd.array(a, dev), c)
        np.testing.assert_allclose(c.numpy(), a.astype(np.float64) * 2 + 1, rtol=1e-6)


@needs_opencl
def test_storage_align_on_opencl_shared_memory():
    sch = tvm.tir.Schedule(chain)
    b, c = sch.get_block("B"), sch.get_block("C")
    sch.set_scope(b, 0, "shared")
    i, j = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    sch.bind(j, "threadIdx.x")
    sch.compute_at(b, io)
    bi, bj = sch.get_loops(b)[-2:]
    sch.bind(bi, "threadIdx.y")
    sch.bind(bj, "threadIdx.x")
    sch.storage_align(b, 0, 0, 32, 1)
    n = 37
    a = np.random.default_rng(5).uniform(size=(n, 16)).astype("float32")
    (_, out), f = run(sch.mod, "opencl", a, np.full((n, 16), np.nan, "float32"))
    np.testing.assert_allclose(out, a.astype(np.float64) * 2 + 1, rtol=1e-6)
    src = f.imported_modules[0].get_source()
    assert "__local float B[132];" in src and "* 33)" in src


def test_create_prim_func_with_where_init_and_offset_axis_on_c():
    n = te.var("n")
    A = te.placeholder((n, 12), name="A")
    k = te.reduce_axis((2, 12), name="k")
    R = te.compute((n,), lambda i: te.max(A[i, k] * 2.0, axis=k, where=k < 9), name="R")
    S = te.compute((n,), lambda i: R[i] + 1.0, name="S")
    f = te.create_prim_func([A, S])
    a = np.random.default_rng(2).uniform(-1, 1, size=(9, 12)).astype("float32")
    (_, s), _ = run(f, "c", a, np.full(9, np.nan, "float32"))
    np.testing.assert_allclose(s, (a[:, 2:9].astype(np.float64) * 2).max(axis=1) + 1, rtol=1e-6)


@needs_opencl
def test_te_computation_with_the_notes_schedule():
    n = 128
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = tvm.tir.Schedule(te.create_prim_func([A, B, C]))
    notes.blocking_with_shared(sch, 4, 4, 8, 8, 8)
    a, b, c, ref = matmul_args(n, 9)
    (_, _, out), _ = run(sch.mod, "opencl", a, b, c)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_time_evaluator_and_entry_function():
    sch = tvm.tir.Schedule(notes.vector_add_module({"n": 4096}))
    i = sch.get_loops(sch.get_block("C"))[0]
    io, ii = sch.split(i, [None, 64])
    sch.vectorize(ii)
    f = tvm.build(sch.mod, target="c")
    assert f.entry_name == "main"
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.ones(4096, "float32"), dev)
    b = tvm.nd.array(np.full(4096, 2.0, "float32"), dev)
    c = tvm.nd.array(np.zeros(4096, "float32"), dev)
    f["main"](a, b, c)
    assert (c.numpy() == 3).all()
    res = f.time_evaluator("main", dev, number=5, repeat=3)(a, b, c)
    assert len(res.results) == 3 and all(r > 0 for r in res.results)
    assert res.mean > 0 and res.median > 0


def test_build_of_a_prim_func_under_another_name():
    f = tvm.build(notes.vector_add_module({"n": 8})["main"], target="c", name="vadd")
    assert f.entry_name == "vadd"
    a = np.arange(8, dtype="float32")
    c = np.zeros(8, "float32")
    f(a, a, c)
    assert (c == 2 * a).all()


# -- flat accesses (TVM v0.8's T.load / T.store) -------------------------------------------------------


def test_flat_access_of_an_argument_runs():
    from kernels.script import from_source

    f = from_source('''
@T.prim_func
def f(a: T.handle, d: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), dtype="float32")
    D = T.match_buffer(d, (16, 16), dtype="float32")
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[15 - vi, vj])
            T.writes(D[vi, vj])
            T.store(D.data, vi * 16 + vj, T.load("float32", A.data, (15 - vi) * 16 + vj) * T.float32(2))
''')
    m = tvm.build(f, target="c")
    h = np.random.default_rng(2).uniform(size=(16, 16)).astype("float32")
    a, d = tvm.nd.array(h), tvm.nd.empty((16, 16), "float32")
    m(a, d)
    np.testing.assert_array_equal(d.numpy(), 2 * h[::-1])  # rows reversed, doubled (exact in float32)


def test_flat_access_of_an_allocation_is_refused():
    from kernels.script import from_source

    f = from_source('''
@T.prim_func
def f(a: T.handle, d: T.handle) -> None:
    A = T.match_buffer(a, (16,), dtype="float32")
    D = T.match_buffer(d, (16,), dtype="float32")
    B = T.alloc_buffer((16,), dtype="float32")
    for i in T.serial(16):
        with T.block("B"):
            vi = T.axis.S(16, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B.data[vi] = A[vi]
    for i in T.serial(16):
        with T.block("D"):
            vi = T.axis.S(16, i)
            D[vi] = B[vi]
''')
    with pytest.raises(tvm.TVMError, match=r"T.load/T.store of B.data: a flat access of memory the function "
                                           r"allocates cannot be lowered"):
        tvm.build(f, target="c")


def test_buffers_matched_to_regions_run():
    # TVM v0.8's match_buffer_region: C is a slice of A, D a slice of C; B[0] sums every element
    from kernels.script import from_source

    f = from_source('''
@T.prim_func
def f(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16, 16, 16), "float32")
    B = T.match_buffer(b, (1,), "float32")
    for i, j in T.grid(16, 4):
        with T.block():
            vi, vj = T.axis.remap("SS", [i, j])
            C = T.match_buffer(A[0:16, vi, vj * 4 : vj * 4 + 4], (16, 1, 4))
            for ii in range(4):
                with T.block():
                    vii = T.axis.S(4, ii)
                    D = T.match_buffer(C[vii * 4 : vii * 4 + 4, 0, 0:4], (4, 1, 4))
                    for i, j in T.grid(4, 4):
                        B[0] += D[i, 0, j] * T.float32(i + 1)
''')
    m = tvm.build(f, target="c")
    h = np.random.default_rng(4).uniform(size=(16, 16, 16)).astype("float32")
    b = tvm.nd.array(np.zeros(1, "float32"))
    m(tvm.nd.array(h), b)
    # D[i, 0, j] is A[vii * 4 + i, vi, vj * 4 + j]: weight (x % 4) + 1 along A's first axis
    weights = (np.arange(16) % 4 + 1).astype("float64")
    want = (h.astype("float64") * weights[:, None, None]).sum()
    np.testing.assert_allclose(b.numpy()[0], want, rtol=1e-5)


def test_buffer_matched_to_a_region_with_unit_dimensions():
    from kernels.script import from_source

    src = '''
@T.prim_func
def f(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (4, 4), "float32")
    B = T.match_buffer(b, (4,), "float32")
    for i in T.serial(4):
        with T.block("row"):
            vi = T.axis.S(4, i)
            R = T.match_buffer(A[vi, 0:4], (4,))
            B[vi] = R[0] + R[3]
'''
    m = tvm.build(from_source(src), target="c")
    h = np.arange(16, dtype="float32").reshape(4, 4)
    b = tvm.nd.empty((4,), "float32")
    m(tvm.nd.array(h), b)
    np.testing.assert_array_equal(b.numpy(), h[:, 0] + h[:, 3])  # the row's first and last element
    with pytest.raises(tvm.TVMError, match=r"block row: R has 1 dimension\(s\) but matches a region of 2 "
                                           r"non-unit dimension\(s\) of A"):
        tvm.build(from_source(src.replace("A[vi, 0:4], (4,)", "A[0:2, 0:2], (4,)")), target="c")
