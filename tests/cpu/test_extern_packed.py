"""te.extern (ir_builder bodies, declared buffers bound to storage), tir.call_packed with registered
Python functions, and the tir math functions -- run on C and OpenCL (PoCL) against numpy; the
CUDA variants are marked ``gpu``."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import kernels as tvm
from kernels import te, tir
from kernels.runtime import remove_global_func

GPU_TARGETS = ("opencl", "cuda")


def _device(target: str):
    return {"c": tvm.cpu(0), "llvm": tvm.cpu(0), "opencl": tvm.opencl(0), "cuda": tvm.cuda(0)}[target]


def _bind_1d(s, t, factor=16):
    xo, xi = s[t].split(t.op.axis[0], factor=factor)
    s[t].bind(xo, te.thread_axis("blockIdx.x"))
    s[t].bind(xi, te.thread_axis("threadIdx.x"))


@pytest.fixture
def registered():
    """Register packed functions for one test; they are removed afterwards."""
    names = []

    def register(name, f):
        names.append(name)
        return tvm.register_func(name, f, override=True)

    yield register
    for n in names:
        remove_global_func(n)


# -- ir_builder bodies ------------------------------------------------------------------------------


def _vector_add_host(ins, outs):
    ib = tvm.tir.ir_builder.create()
    a, b, c = (ib.buffer_ptr(x) for x in (ins[0], ins[1], outs[0]))
    with ib.for_range(0, ins[0].shape[0], name="i") as i:
        c[i] = a[i] + b[i]
    return ib.get()


def _vector_add_device(ins, outs, threads=32):
    n = ins[0].shape[0]
    ib = tvm.tir.ir_builder.create()
    bx, tx = te.thread_axis("blockIdx.x"), te.thread_axis("threadIdx.x")
    ib.scope_attr(bx, "thread_extent", tvm.tir.indexdiv(n + threads - 1, threads))
    ib.scope_attr(tx, "thread_extent", threads)
    idx = bx.var * threads + tx.var
    a, b, c = (ib.buffer_ptr(x) for x in (ins[0], ins[1], outs[0]))
    with ib.if_scope(ib.likely(idx < n)):
        c[idx] = a[idx] + b[idx]
    return ib.get()


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_ir_builder_vector_add_symbolic_size(target):
    n = te.size_var("n")
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    gen = _vector_add_host if target == "c" else _vector_add_device
    C = te.extern(A.shape, [A, B], gen, name="vector_add", dtype="float32")
    s = te.create_schedule(C.op)
    f = tvm.build(s, [A, B, C], target)
    dev = _device(target)
    rng = np.random.default_rng(0)
    for size in (1, 37, 1024):
        a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
        c = tvm.nd.array(np.full(size, np.nan, "float32"), dev)
        f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
        np.testing.assert_array_equal(c.numpy(), a + b)


def _block_sums(n, threads):
    def gen(ins, outs):
        ib = tvm.tir.ir_builder.create()
        bx, tx = te.thread_axis("blockIdx.x"), te.thread_axis("threadIdx.x")
        ib.scope_attr(bx, "thread_extent", n // threads)
        ib.scope_attr(tx, "thread_extent", threads)
        sh = ib.allocate("float32", (threads,), name="sh", scope="shared")
        a, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        sh[tx.var] = a[bx.var * threads + tx.var]
        ib.emit(tvm.tir.call_intrin("int32", "tir.tvm_storage_sync", "shared"))
        with ib.if_scope(tx.var == 0):
            acc = ib.allocate("float32", (1,), name="acc", scope="local")
            acc[0] = 0.0
            with ib.for_range(0, threads, name="k") as k:
                acc[0] = acc[0] + sh[k]
            o[bx.var] = acc[0]
        return ib.get()

    return gen


@pytest.mark.parametrize("target", ["opencl", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_ir_builder_shared_memory_and_barrier(target):
    n, threads = 512, 64
    A = te.placeholder((n,), name="A")
    B = te.extern((n // threads,), [A], _block_sums(n, threads), name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target)
    dev = _device(target)
    a = np.random.default_rng(12).random(n).astype("float32")
    b = tvm.nd.empty((n // threads,), "float32", dev)
    f(tvm.nd.array(a, dev), b)
    np.testing.assert_allclose(b.numpy(), a.astype(np.float64).reshape(-1, threads).sum(axis=1), rtol=1e-5)


def _transpose_scale(ins, outs):
    """outs[0][j, i] = ins[0][i, j] * 2 through vload/vstore (elem_offset and strides applied)."""
    ib = tvm.tir.ir_builder.create()
    m, n = ins[0].shape
    with ib.for_range(0, m, name="i") as i:
        with ib.for_range(0, n, name="j") as j:
            ib.emit(outs[0].vstore([j, i], ins[0].vload([i, j]) * 2.0))
    return ib.get()


def test_extern_vload_vstore_2d_between_computes():
    m, n = 5, 7
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.extern((n, m), [B], _transpose_scale, name="C")
    D = te.compute((n, m), lambda i, j: C[i, j] - 3.0, name="D")
    s = te.create_schedule(D.op)
    f = tvm.build(s, [A, D], "c")
    a = np.random.default_rng(1).random((m, n)).astype("float32")
    d = np.zeros((n, m), "float32")
    f(a, d)
    np.testing.assert_allclose(d, ((a.astype(np.float64) + 1) * 2).T - 3, rtol=1e-6, atol=1e-6)


def test_extern_reads_padded_producer_through_stride_variables():
    m, n = 4, 6
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 3.0, name="B")
    s0, s1 = te.var("s0"), te.var("s1")
    bb = tvm.tir.decl_buffer((m, n), "float32", name="Bb", strides=[s0, s1], elem_offset=te.var("off"))

    def copy(ins, outs):
        ib = tvm.tir.ir_builder.create()
        with ib.for_range(0, m, name="i") as i:
            with ib.for_range(0, n, name="j") as j:
                ib.emit(outs[0].vstore([i, j], ins[0].vload([i, j])))
        return ib.get()

    C = te.extern((m, n), [B], copy, name="C", in_buffers=[bb])
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 8, 1)  # rows padded to a stride of 9
    f = tvm.build(s, [A, C], "c")
    assert "(i * 9)" in f.get_source()
    a = np.random.default_rng(2).random((m, n)).astype("float32")
    c = np.zeros((m, n), "float32")
    f(a, c)
    np.testing.assert_allclose(c, a.astype(np.float64) * 3, rtol=1e-6)


def test_extern_multiple_outputs_of_different_shapes():
    n = 8
    A = te.placeholder((n,), name="A", dtype="int32")

    def split_even_odd(ins, outs):
        ib = tvm.tir.ir_builder.create()
        a, even, odd = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0]), ib.buffer_ptr(outs[1])
        with ib.for_range(0, n // 2, name="i") as i:
            even[i] = a[2 * i]
            odd[i] = a[2 * i + 1]
        total = ib.buffer_ptr(outs[2])
        total[0] = 0
        with ib.for_range(0, n, name="k") as k:
            total[0] = total[0] + a[k]
        return ib.get()

    even, odd, total = te.extern([(n // 2,), (n // 2,), (1,)], [A], split_even_odd, name="E")
    assert even.op.num_outputs == 3 and total.shape[0].value == 1
    s = te.create_schedule(total.op)
    f = tvm.build(s, [A, even, odd, total], "c")
    a = np.arange(10, 10 + n, dtype="int32")
    outs = [np.zeros(n // 2, "int32"), np.zeros(n // 2, "int32"), np.zeros(1, "int32")]
    f(a, *outs)
    np.testing.assert_array_equal(outs[0], a[0::2])
    np.testing.assert_array_equal(outs[1], a[1::2])
    assert outs[2][0] == a.sum()


def test_extern_local_allocation_and_else_branch():
    n = 16
    A = te.placeholder((n,), name="A")

    def clamp_prefix(ins, outs):
        ib = tvm.tir.ir_builder.create()
        a, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        acc = ib.allocate("float32", (1,), name="acc", scope="local")
        acc[0] = 0.0
        with ib.for_range(0, n, name="i") as i:
            acc[0] = acc[0] + a[i]
            with ib.if_scope(acc[0] > 4.0):
                o[i] = 4.0
            with ib.else_scope():
                o[i] = acc[0]
        return ib.get()

    B = te.extern((n,), [A], clamp_prefix, name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "c")
    a = np.random.default_rng(3).random(n).astype("float32")
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_allclose(b, np.minimum(np.cumsum(a.astype(np.float64)), 4.0), rtol=1e-5)


def test_access_ptr_reaches_external_c_code():
    """modff(x, &out[i]) writes the integral part through an access pointer with an offset."""
    n = 10
    A = te.placeholder((n,), name="A")

    def split(ins, outs):
        ib = tvm.tir.ir_builder.create()
        frac = ib.buffer_ptr(outs[1])
        with ib.for_range(0, n, name="i") as i:
            whole_ptr = outs[0].access_ptr("w", offset=i)
            frac[i] = tvm.tir.call_extern("float32", "modff", ins[0].vload(i), whole_ptr)
        return ib.get()

    whole, frac = te.extern([(n,), (n,)], [A], split, name="S")
    s = te.create_schedule(whole.op)
    f = tvm.build(s, [A, whole, frac], "c")
    assert "modff(A[i], (&S_v0[i]))" in f.get_source()
    a = np.linspace(-3.7, 4.2, n).astype("float32")
    w, fr = np.zeros(n, "float32"), np.zeros(n, "float32")
    f(a, w, fr)
    np.testing.assert_array_equal(w, np.trunc(a))
    np.testing.assert_allclose(fr, a - np.trunc(a), atol=1e-6)


# -- packed calls -----------------------------------------------------------------------------------


def test_extern_op_tutorial_python_hook(registered, capsys):
    """The gallery's extern_op tutorial, its my_tvm_addone part, with only the imports changed."""
    def my_tvm_addone(x, y):
        print("my_tvm_addone signatures: %s, %s" % (type(x), type(y)))
        tvm.nd.array(x.numpy() + 1).copyto(y)

    registered("tvm.contrib.my_tvm_addone", my_tvm_addone)
    n = 1024
    dev = tvm.cpu(0)
    A = te.placeholder((n,), name="A")
    B = te.extern(
        A.shape,
        [A],
        lambda ins, outs: tvm.tir.call_packed("tvm.contrib.my_tvm_addone", ins[0], outs[0]),
        name="C",
    )
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "llvm")
    a = tvm.nd.array(np.random.uniform(size=(n,)).astype(A.dtype), dev)
    b = tvm.nd.array(np.random.uniform(size=(n,)).astype(B.dtype), dev)
    f(a, b)
    tvm.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-5)
    assert "NDArray" in capsys.readouterr().out


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_packed_call_between_native_parts(target, registered):
    """compute -> packed call -> compute: the function sees the first stage's result and its
    output feeds the second stage; it may be registered after building."""
    n = 256
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = te.extern(B.shape, [B], lambda ins, outs: tvm.tir.call_packed("test.square_into", ins[0], outs[0]),
                  name="C")
    D = te.compute((n,), lambda i: C[i] * 2.0, name="D")
    s = te.create_schedule(D.op)
    if target in GPU_TARGETS:
        _bind_1d(s, B)
        _bind_1d(s, D)
    f = tvm.build(s, [A, D], target)
    dev = _device(target)
    a = np.random.default_rng(4).random(n).astype("float32")
    seen = {}

    def square_into(x, y):
        seen["x"] = x.numpy()
        assert x.shape == (n,) and y.shape == (n,) and x.dtype == "float32"
        y.copyfrom(x.numpy() ** 2)

    registered("test.square_into", square_into)
    d = tvm.nd.empty((n,), "float32", dev)
    f(tvm.nd.array(a, dev), d)
    np.testing.assert_allclose(seen["x"], a + 1, rtol=1e-6)
    np.testing.assert_allclose(d.numpy(), (a.astype(np.float64) + 1) ** 2 * 2, rtol=1e-5)
    timer = f.time_evaluator(f.entry_name, dev, number=2, repeat=2)
    assert len(timer(tvm.nd.array(a, dev), d).results) == 2


def test_packed_call_scalars_strings_and_views(registered):
    n = te.size_var("n")
    A = te.placeholder((n, 3), name="A", dtype="int32")
    got = []

    def record(x, out, rows, half, word, flag):
        got.append((x.shape, rows, half, word, flag))
        out.copyfrom(x.numpy()[:, ::-1] * rows)

    registered("test.record", record)
    B = te.extern((n, 3), [A], lambda ins, outs: tvm.tir.call_packed(
        "test.record", ins[0], outs[0], n * 2 + 1, tvm.tir.const(0.5, "float64"), "word", n > 3), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "c")
    for rows in (2, 5):
        a = np.arange(rows * 3, dtype="int32").reshape(rows, 3)
        b = np.zeros((rows, 3), "int32")
        f(a, b)
        np.testing.assert_array_equal(b, a[:, ::-1] * (2 * rows + 1))
    assert got == [((2, 3), 5, 0.5, "word", False), ((5, 3), 11, 0.5, "word", True)]
    assert all(type(g[1]) is int and type(g[2]) is float and type(g[4]) is bool for g in got)


def test_packed_call_pointer_argument(registered):
    """A buffer's data pointer reaches the function as a ctypes pointer, as in TVM."""
    n = 6
    A = te.placeholder((n,), name="A")

    def negate_in_place(ptr, out, count):
        assert isinstance(ptr, ctypes.c_void_p)
        view = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(count,))
        out.copyfrom(-view)

    registered("test.negate_ptr", negate_in_place)
    B = te.extern((n,), [A],
                  lambda ins, outs: tvm.tir.call_packed("test.negate_ptr", ins[0].data, outs[0], n), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "c")
    a = np.arange(n, dtype="float32") + 0.5
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, -a)


def test_ir_builder_body_mixing_loops_and_a_packed_call(registered):
    n = 32
    A = te.placeholder((n,), name="A")
    calls = []

    def gen(ins, outs):
        ib = tvm.tir.ir_builder.create()
        a, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            o[i] = a[i] * 10.0
        ib.emit(tvm.tir.call_packed("test.bump", outs[0]))
        with ib.for_range(0, n, name="j") as j:
            o[j] = o[j] + 1.0
        return ib.get()

    registered("test.bump", lambda y: (calls.append(y.numpy().copy()), y.copyfrom(y.numpy() - 5)))
    B = te.extern((n,), [A], gen, name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "c")
    a = np.random.default_rng(5).random(n).astype("float32")
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_allclose(calls[0], a * 10, rtol=1e-6)
    np.testing.assert_allclose(b, a.astype(np.float64) * 10 - 5 + 1, rtol=1e-5)


# -- math functions ------------------------------------------------------------------------------------

UNARY = {
    "exp": np.exp, "log1p": np.log1p, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "atanh": np.arctanh, "nearbyint": np.rint,
    "trunc": np.trunc, "floor": np.floor, "ceil": np.ceil, "sqrt": np.sqrt, "tanh": np.tanh,
    "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),  # halves away from zero (C round)
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "abs": np.abs,
}
BINARY = {"fmod": np.fmod, "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign,
          "power": np.power, "nextafter": np.nextafter}


def _run_elementwise(target, dtype, inputs, fcompute, out_dtype):
    n = inputs[0].shape[0]
    phs = [te.placeholder((n,), name=f"X{k}", dtype=str(x.dtype)) for k, x in enumerate(inputs)]
    out = te.compute((n,), lambda i: fcompute(*[p[i] for p in phs]), name="Y")
    s = te.create_schedule(out.op)
    if target in GPU_TARGETS:
        _bind_1d(s, out)
    f = tvm.build(s, phs + [out], target)
    dev = _device(target)
    y = tvm.nd.empty((n,), out_dtype, dev)
    f(*[tvm.nd.array(x, dev) for x in inputs], y)
    return y.numpy()


def _sample(dtype):
    x = np.random.default_rng(6).uniform(-0.95, 0.95, 64).astype(dtype)
    x[:6] = [0.5, -0.5, 0.25, -0.0, 0.125, 0.75]
    return x


@pytest.mark.parametrize("target, dtype", [("c", "float32"), ("c", "float64"), ("opencl", "float32")])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_math_matches_numpy(target, dtype, name):
    x = _sample(dtype)
    if name in ("sqrt",):
        x = np.abs(x)
    if name == "nearbyint":
        x = x * 6  # several halves: 0.5 * 6 = 3.0 ... and 1.5, 2.5 from the fixed values
        x[:4] = [0.5, 1.5, 2.5, -2.5]
    got = _run_elementwise(target, dtype, [x], getattr(tir, name), dtype)
    want = UNARY[name](x.astype(np.float64))
    tol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("target, dtype", [("c", "float32"), ("c", "float64"), ("opencl", "float32")])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_math_matches_numpy(target, dtype, name):
    x = _sample(dtype) + 2.0
    y = np.random.default_rng(7).uniform(-3, 3, 64).astype(dtype)
    y[y == 0] = 1
    got = _run_elementwise(target, dtype, [x, y], getattr(te, name), dtype)
    if name == "nextafter":  # one ulp of the operand's own type
        want = np.nextafter(x, y)
        np.testing.assert_array_equal(got, want)
        return
    want = BINARY[name](x.astype(np.float64), y.astype(np.float64))
    tol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("target", ["c", "opencl"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32", "int64"])
def test_popcount_and_clz(target, dtype):
    info = np.iinfo(dtype)
    vals = np.random.default_rng(8).integers(info.min, info.max, 64, endpoint=True, dtype=np.int64)
    vals[:4] = [0, 1, info.max, info.min]
    vals = vals.astype(dtype)
    bits = np.dtype(dtype).itemsize * 8
    words = [int(v) & ((1 << bits) - 1) for v in vals]
    pop = _run_elementwise(target, dtype, [vals], tir.popcount, dtype)
    clz = _run_elementwise(target, dtype, [vals], tir.clz, "int32")
    np.testing.assert_array_equal(pop.astype(np.int64), [bin(w).count("1") for w in words])
    np.testing.assert_array_equal(clz, [bits - w.bit_length() for w in words])


@pytest.mark.parametrize("target, dtype", [("c", "float32"), ("c", "float64"), ("opencl", "float32")])
def test_float_classes(target, dtype):
    x = np.array([0, np.nan, np.inf, -np.inf, 1.0, -0.0, 3e38, -np.nan] * 4, dtype=dtype)

    def classes(v):
        return (tir.isnan(v).astype("int32") * 4 + tir.isinf(v).astype("int32") * 2
                + tir.isfinite(v).astype("int32"))

    got = _run_elementwise(target, dtype, [x], classes, "int32")
    np.testing.assert_array_equal(got, np.isnan(x) * 4 + np.isinf(x) * 2 + np.isfinite(x))


def test_masked_max_reduction_gives_the_finite_minimum():
    """A max over an empty (fully masked) row yields min_value: -3.4028235e38 for float32, as TVM."""
    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((3,), lambda i: te.max(A[i, k], axis=k, where=i > 0), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], "c")
    a = np.random.default_rng(9).random((3, 4)).astype("float32")
    b = np.zeros(3, "float32")
    f(a, b)
    assert b[0] == np.float32(-3.4028235e38) and np.isfinite(b[0])
    np.testing.assert_array_equal(b[1:], a[1:].max(axis=1))


# -- CUDA (needs a GPU) ----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_extern_and_packed_call(registered):
    n = te.size_var("n")
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.extern(A.shape, [A, B], _vector_add_device, name="C", dtype="float32")
    D = te.extern(C.shape, [C], lambda ins, outs: tvm.tir.call_packed("test.cuda_negate", ins[0], outs[0]),
                  name="D")
    E = te.compute(D.shape, lambda i: D[i] * 3.0, name="E")
    s = te.create_schedule(E.op)
    _bind_1d(s, E, 64)
    f = tvm.build(s, [A, B, E], "cuda")
    registered("test.cuda_negate", lambda x, y: y.copyfrom(-x.numpy()))
    dev = tvm.cuda(0)
    rng = np.random.default_rng(10)
    for size in (5, 1000):
        a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
        e = tvm.nd.empty((size,), "float32", dev)
        f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), e)
        np.testing.assert_allclose(e.numpy(), -(a.astype(np.float64) + b) * 3, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["popcount", "clz", "nearbyint", "fmod", "isnan"])
def test_cuda_math(name):
    if name in ("popcount", "clz"):
        vals = np.random.default_rng(11).integers(-2**31, 2**31 - 1, 64, dtype=np.int64).astype("int32")
        vals[:2] = [0, -1]
        got = _run_elementwise("cuda", "int32", [vals], getattr(tir, name), "int32")
        words = [int(v) & 0xFFFFFFFF for v in vals]
        if name == "popcount":
            want = [bin(w).count("1") for w in words]
        else:
            want = [32 - w.bit_length() for w in words]
        np.testing.assert_array_equal(got, want)
    elif name == "isnan":
        x = np.array([0, np.nan, np.inf, 1] * 16, "float32")
        got = _run_elementwise("cuda", "float32", [x], lambda v: tir.isnan(v).astype("int32"), "int32")
        np.testing.assert_array_equal(got, np.isnan(x))
    elif name == "fmod":
        x, y = _sample("float32") * 7, np.full(64, 1.5, "float32")
        got = _run_elementwise("cuda", "float32", [x, y], te.fmod, "float32")
        np.testing.assert_allclose(got, np.fmod(x.astype(np.float64), 1.5), atol=1e-6)
    else:
        x = np.array([0.5, 1.5, 2.5, -2.5] * 16, "float32")
        got = _run_elementwise("cuda", "float32", [x], tir.nearbyint, "float32")
        np.testing.assert_array_equal(got, np.rint(x))


def test_cuda_sources_of_math_and_packed_calls_compile():
    """nvcc accepts the CUDA C of every math function and of an extern pipeline (no GPU needed)."""
    from kernels.contrib.nvcc import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no nvcc")
    n = 64
    X = te.placeholder((n,), name="X")
    H = te.placeholder((n,), name="H", dtype="float16")
    K = te.placeholder((n,), name="K", dtype="int64")

    def body(i):
        x = X[i]
        acc = tir.const(0.0, "float32")
        for name in sorted(UNARY):
            acc = acc + getattr(tir, name)(x)
        for name in sorted(BINARY):
            acc = acc + getattr(te, name)(x, 2.0)
        acc = acc + tir.ldexp(x, 3) + tir.exp(H[i]).astype("float32") + tir.fmod(H[i], H[i]).astype("float32")
        bits = tir.popcount(K[i]) + tir.clz(K[i]).astype("int64") + tir.clz(i).astype("int64")
        flags = (tir.isnan(x).astype("int32") + tir.isinf(H[i]).astype("int32")
                 + tir.isfinite(x).astype("int32"))
        return acc + bits.astype("float32") + flags.astype("float32")

    Y = te.compute((n,), body, name="Y")
    P = te.extern(Y.shape, [Y], lambda ins, outs: tvm.tir.call_packed("test.cuda_compile", ins[0], outs[0]),
                  name="P")
    Z = te.compute(P.shape, lambda i: P[i] + 1.0, name="Z")
    s = te.create_schedule(Z.op)
    _bind_1d(s, Y)
    _bind_1d(s, Z)
    mod = tvm.build(s, [X, H, K, Z], "cuda -arch=sm_80")
    src = mod.imported_modules[0].get_source()
    for fn in ("__popcll", "__clzll", "__clz", "nearbyintf", "fmodf", "isnan", "ldexpf", "__expf"):
        assert fn in src, fn
    assert [type(k).__name__ for k in mod.spec.kernels] == ["KernelSpec", "PackedCall", "KernelSpec"]
    assert len(mod.binary) > 0
