"""TE programs written for TVM that the core used to refuse or get wrong, checked against numpy
(float64) on C and, where they bind GPU threads, on OpenCL (PoCL)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import gpu_target_params, opencl_available, run

import kernels as tvm
from kernels import te, tir
from kernels.errors import TVMError

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
RNG = np.random.default_rng(11)


def _rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


# -- == and != build conditions ------------------------------------------------------------------

@pytest.mark.parametrize("target", ["c"] + gpu_target_params())
def test_if_then_else_on_equality_is_an_identity_matrix(target):
    n = 7
    E = te.compute((n, n), lambda i, j: te.if_then_else(i == j, 1.0, 0.0), name="E")
    N = te.compute((n, n), lambda i, j: tir.Select(i != j, 1.0, 0.0), name="N")
    s = te.create_schedule([E.op, N.op])
    if target != "c":
        for T in (E, N):
            s[T].bind(T.op.axis[0], te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [E, N], target)
    e, nn = run(f, target, np.full((n, n), np.nan, "float32"), np.full((n, n), np.nan, "float32"))
    np.testing.assert_array_equal(e, np.eye(n))
    np.testing.assert_array_equal(nn, 1 - np.eye(n))


def test_where_reading_a_placeholder_masks_rows():
    n, m = 9, 13
    A = te.placeholder((n, m), name="A")
    R = te.placeholder((n,), name="R", dtype="int32")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k, where=R[i] == 1), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, R, B], "c")
    a, r = _rand(n, m), RNG.integers(0, 2, n).astype("int32")
    _, _, b = run(f, "c", a, r, np.full(n, np.nan, "float32"))
    np.testing.assert_allclose(b, np.where(r == 1, a.astype(np.float64).sum(1), 0.0), rtol=1e-5, atol=1e-5)
    # leaving R out of the arguments is an error naming it, not rows of zeros
    with pytest.raises(TVMError, match="placeholder R .* missing from the argument list"):
        tvm.build(s, [A, B], "c")


# -- rfactor ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("factor_axis", [0, 1, -1, -2])
def test_rfactor_factor_axis_counts_from_the_end_when_negative(factor_axis):
    n, m = 6, 40
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki, factor_axis=factor_axis)
    pos = factor_axis % 2  # of the two axes of B.rf: -1 is the last, -2 the first
    assert int(BF.shape[pos]) == 8 and int(BF.shape[1 - pos]) == n
    f = tvm.build(s, [A, B], "c")
    a = _rand(n, m)
    _, b = run(f, "c", a, np.zeros(n, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def test_rfactor_factor_axis_out_of_range_names_the_range():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=4)
    with pytest.raises(TVMError, match=r"factor_axis=-3 must be in \[-2, 1\]"):
        s.rfactor(B, ki, factor_axis=-3)


@pytest.mark.parametrize("target", ["c"] + gpu_target_params())
def test_rfactor_with_init_applies_init_once(target):
    n, m = 5, 48
    A = te.placeholder((n, m), name="A")
    I = te.placeholder((n,), name="I")  # noqa: E741 - TVM's test names
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k, init=I[i]), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=16)
    s.rfactor(B, ki)
    if target != "c":
        s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
        s[B].bind(s[B].op.reduce_axis[0], te.thread_axis("threadIdx.x"))
        BF = s.stages[[st.name for st in s.stages].index("B.rf")].op.output(0)
        s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    f = tvm.build(s, [A, I, B], target)
    a, i0 = _rand(n, m), _rand(n)
    _, _, b = run(f, target, a, i0, np.zeros(n, "float32"))
    np.testing.assert_allclose(b, i0 + a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


# -- store predicates and attach points -----------------------------------------------------------

@pytest.mark.parametrize("target", gpu_target_params())
def test_store_predicate_on_a_thread_the_stage_does_not_bind(target):
    """B's store predicate reads threadIdx.x, which only B.rf (computed inside B) binds: the guard
    goes around B's store, where the index exists, not above the kernel."""
    n, m = 16, 64
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki)
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    s[BF].compute_at(s[B], s[B].op.axis[0])
    s[BF].bind(s[BF].op.axis[0], tx)
    s[B].set_store_predicate(tx.var.equal(0))
    f = tvm.build(s, [A, B], target)
    a = _rand(n, m)
    _, b = run(f, target, a, np.full(n, np.nan, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    # the CUDA source of the same schedule compiles (the index is declared before its use)
    from kernels.contrib import nvcc

    if nvcc.find_nvcc() is not None:
        tvm.build(s, [A, B], "cuda -arch=sm_80")


@pytest.mark.parametrize("change", ["split", "fuse"])
def test_compute_at_an_axis_split_or_fused_afterwards(change):
    A = te.compute((10, 10), lambda i, j: (i * 10 + j).astype("float32"), name="A")
    B = te.compute((10, 10), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[A].compute_at(s[B], B.op.axis[1])
    if change == "split":
        s[B].split(B.op.axis[1], 2)
    else:
        s[B].fuse(B.op.axis[0], B.op.axis[1])
    f = tvm.build(s, [A, B], "c")
    a, b = run(f, "c", np.zeros((10, 10), "float32"), np.zeros((10, 10), "float32"))
    want = np.arange(100, dtype=np.float64).reshape(10, 10)
    np.testing.assert_array_equal(a, want)  # an argument computed at B is still stored whole
    np.testing.assert_array_equal(b, 2 * want)


# -- what TVM accepts ------------------------------------------------------------------------------

def test_tensor_indexed_one_dimension_at_a_time():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda i, j: A[i][j] * 2.0, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "c")
    a = _rand(3, 4)
    _, b = run(f, "c", a, np.zeros((3, 4), "float32"))
    np.testing.assert_allclose(b, 2 * a.astype(np.float64))
    with pytest.raises(TVMError, match=r"A has 2 dimensions but A\[i\] gives 1"):
        te.compute((3,), lambda i: A[i] + 1.0)


def test_default_names_unused_arguments_float_shapes_and_no_target():
    A, B = te.placeholder((4,)), te.placeholder((4.0,))  # both named "placeholder"; an integral float
    U = te.placeholder((3,), name="U")  # passed, never read
    C = te.compute((4,), lambda i: A[i] + B[i] * 2.0)
    f = tvm.build(te.create_schedule(C.op), [A, B, U, C])  # no target: the host (C)
    a, b = _rand(4), _rand(4)
    u = _rand(3)
    out = run(f, "c", a, b, u, np.zeros(4, "float32"))
    np.testing.assert_allclose(out[3], a.astype(np.float64) + 2 * b, rtol=1e-6)
    np.testing.assert_array_equal(out[2], u)
    with pytest.raises(TVMError, match="shape"):
        te.placeholder((4.5,))


def test_fuse_of_no_axes_schedules_a_scalar():
    A = te.placeholder((), name="A")
    T = te.compute((), lambda: A() + 1.0, name="T")
    s = te.create_schedule(T.op)
    fused = s[T].fuse()
    assert tuple(s[T].leaf_iter_vars) == (fused,)
    assert any(isinstance(r, te.schedule.Singleton) for r in s[T].relations)
    f = tvm.build(s, [A, T], "c")
    _, t = run(f, "c", np.array(2.5, "float32"), np.array(0, "float32"))
    assert t == 3.5


def test_iter_var_attrs_report_tvm_iter_types():
    A = te.placeholder((100,), name="A")
    T = te.compute((100,), lambda i: A[i], name="T")
    s = te.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    s[T].pragma(xo, "pragma1")
    s[T].pragma(xi, "vectorize")
    assert s[T].iter_var_attrs[xo].pragma_keys[0].value == "pragma1"
    assert s[T].iter_var_attrs[xi].iter_type == te.schedule.IterVar.Vectorized
    s2 = te.create_schedule(T.op)
    yo, yi = s2[T].split(T.op.axis[0], factor=10)
    s2[T].unroll(yi)
    assert s2[T].iter_var_attrs[yi].iter_type == te.schedule.IterVar.Unrolled


@pytest.mark.parametrize("target", ["c"] + gpu_target_params())
def test_virtual_threads_tile_a_matmul(target):
    n = 32
    A, Bm = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * Bm[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    vx = te.thread_axis((0, 2), "vthread", name="vx")
    vy = te.thread_axis((0, 2), "vthread", name="vy")
    io, ii = s[C].split(C.op.axis[0], factor=8)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    vyo, iii = s[C].split(ii, nparts=2)
    vxo, jii = s[C].split(ji, nparts=2)
    s[C].reorder(io, jo, vyo, vxo, iii, jii, C.op.reduce_axis[0])
    s[C].bind(vyo, vy)
    s[C].bind(vxo, vx)
    if target != "c":
        AA = s.cache_read(A, "shared", [C])
        s[C].bind(io, te.thread_axis("blockIdx.y"))
        s[C].bind(jo, te.thread_axis("blockIdx.x"))
        s[C].bind(iii, te.thread_axis("threadIdx.y"))
        s[C].bind(jii, te.thread_axis("threadIdx.x"))
        s[AA].compute_at(s[C], jii)
    f = tvm.build(s, [A, Bm, C], target)
    a, b = _rand(n, n), _rand(n, n)
    _, _, c = run(f, target, a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_groups_place_their_members_together():
    m, n = 6, 5
    x = te.compute((m, n), lambda i, j: (i * n + j).astype("float32"), name="x")
    x1 = te.compute(x.shape, lambda *i: x(*i) + 1.0, name="x1")
    x2 = te.compute(x.shape, lambda *i: x1(*i) * 2.0, name="x2")
    s = te.create_schedule(x2.op)
    g1 = s.create_group(outputs=x, inputs=x, include_inputs=True)
    g2 = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert s[x].group is g1 and s[x1].group is g2 and g1.group is g2
    g2.compute_at(s[x2], x2.op.axis[0])  # x and x1 follow g2 into x2's row loop ...
    bounds = te.schedule.InferBound(s)
    assert int(bounds[x1.op.axis[0]].extent) == 1 and int(bounds[x1.op.axis[1]].extent) == n
    g1.compute_at(s[x1], s[x1].op.axis[1])  # ... until g1 (x alone) goes one loop deeper
    bounds = te.schedule.InferBound(s)
    assert int(bounds[x.op.axis[0]].extent) == 1 and int(bounds[x.op.axis[1]].extent) == 1
    f = tvm.build(s, [x2], "c")
    (out,) = run(f, "c", np.zeros((m, n), "float32"))
    np.testing.assert_array_equal(out, 2.0 * (np.arange(m * n).reshape(m, n) + 1.0))
    with pytest.raises(TVMError, match="output x2 does not depend on the inputs"):
        s.create_group(outputs=x2, inputs=te.placeholder((1,), name="P"))


def test_fusing_a_data_axis_with_a_reduction_axis():
    """As TVM: the fused loop is a reduction loop; the init runs over it too (redundantly)."""
    n, m = 6, 9
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    R = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    s[R].fuse(R.op.axis[0], R.op.reduce_axis[0])
    f = tvm.build(s, [A, R], "c")
    a = _rand(n, m)
    _, r = run(f, "c", a, np.full(n, np.nan, "float32"))
    np.testing.assert_allclose(r, a.astype(np.float64).sum(1), rtol=1e-5)


def test_cache_write_of_a_reduction_whose_range_and_reducer_read_the_data_axis():
    n = 10
    X = te.placeholder((n,), name="x")

    def fn(i):
        rv = te.reduce_axis((0, i))  # a triangular reduction
        ident = lambda dtype: tir.Select(i > 1, tir.const(0, dtype), i.astype(dtype))  # noqa: E731
        red = te.comm_reducer(lambda x, y: te.max(x + y, i.astype("float32")), ident, name="red")
        return red(X[rv], axis=rv)

    Y = te.compute((n,), fn, name="y")
    s = te.create_schedule(Y.op)
    s.cache_write(Y, "local")
    f = tvm.build(s, [X, Y], "c")
    x = _rand(n)
    _, y = run(f, "c", x, np.full(n, np.nan, "float32"))
    want = []
    for i in range(n):
        acc = 0.0 if i > 1 else float(i)
        for r in range(i):
            acc = max(acc + float(x[r]), float(i))
        want.append(acc)
    np.testing.assert_allclose(y, want, rtol=1e-5)


@pytest.mark.parametrize("kind, rule, inlined", [
    ("elemwise", "AutoInlineElemWise", True),
    ("broadcast", "AutoInlineBroadcast", True),
    ("broadcast", "AutoInlineElemWise", False),   # reads A at i only: not elementwise
    ("injective", "AutoInlineInjective", True),
    ("injective", "AutoInlineBroadcast", False),  # reads A at j % m: not a broadcast
])
def test_auto_inline(kind, rule, inlined):
    m, n = 4, 5
    A1, B = te.placeholder((m,), name="A"), te.placeholder((m, n), name="B")
    C = te.placeholder((m, n), name="C")
    if kind == "elemwise":
        T1 = te.compute((m, n), lambda i, j: B(i, j) * 2.0, name="T1")
    elif kind == "broadcast":
        T1 = te.compute((m, n), lambda i, j: A1(i) * B(i, j), name="T1")
    else:
        T1 = te.compute((m, n), lambda i, j: A1(j % m) * B(i, j), name="T1")
    T2 = te.compute((m, n), lambda i, j: T1(i, j) + C(i, j), name="T2")
    s = te.create_schedule(T2.op)
    assert s[T1].attach_type == 1 and s[T1].attach_type == "root"  # TVM's kGroupRoot code
    getattr(te.schedule, rule)(s)
    assert (s[T1].attach_type == 2) == inlined  # kInline
    f = tvm.build(s, [A1, B, C, T2], "c")
    a, b, c = _rand(m), _rand(m, n), _rand(m, n)
    *_, t2 = run(f, "c", a, b, c, np.zeros((m, n), "float32"))
    if kind == "elemwise":
        want = 2.0 * b + c
    elif kind == "broadcast":
        want = a[:, None] * b + c
    else:
        want = a[np.arange(n) % m][None, :] * b + c
    np.testing.assert_allclose(t2, want, rtol=1e-5)


@pytest.mark.parametrize("target", gpu_target_params())
@pytest.mark.parametrize("n, nthread", [(1025, 16), (64, 32), (70, 8)])
def test_cross_thread_reduction_inside_a_thread_bound_stage(target, n, nthread):
    """TVM's rfactor_elemwise_threads: B reduces across threadIdx.x while computed inside C's
    threadIdx.y loop; each row (threadIdx.y) reduces on its own, and the output is written once."""
    m = 10
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n))
    B = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="B")
    BB = te.compute((m,), lambda i: B[i] + 1.0, name="BB")
    C = te.compute((m,), lambda i: BB[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[BB].compute_inline()
    bx, ty = s[C].split(s[C].op.axis[0], factor=16)
    _, kf = s[B].split(k, factor=nthread)
    BF = s.rfactor(B, kf)
    s[B].compute_at(s[C], ty)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    s[C].set_store_predicate(tx.var.equal(0))
    f = tvm.build(s, [A, C], target)
    a = _rand(m, n)
    _, c = run(f, target, a, np.full(m, np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64).sum(1) + 2.0, rtol=1e-4, atol=1e-4)


def test_build_of_a_lowered_module_with_a_name():
    """tvm.build(tvm.lower(s, args), target, name=...) as TVM's test_reduce does: the lowered module
    (also an instance of tvm.IRModule for isinstance checks) is built as loops, not as TensorIR."""
    n = 37
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((), lambda: te.sum(A[k], axis=k, init=10.0), name="B")
    s = te.create_schedule(B.op)
    lowered = tvm.lower(s, args=[A, B])
    assert isinstance(lowered, tvm.IRModule)
    f = tvm.build(lowered, target="c", name="mysum")
    a = np.random.default_rng(0).uniform(size=n).astype("float32")
    b = tvm.nd.array(np.zeros((), "float32"))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), 10.0 + a.astype(np.float64).sum(), rtol=1e-5)
