"""Workloads of the reduction and intrinsic-math tutorials."""

from __future__ import annotations

from typing import List

import numpy as np

from .. import te, tir
from .base import Variant, Workload, _isize, _poison, register, uniform
from .base import default_tolerance  # noqa: F401  (its public name before it moved to base)

GPU = ("cuda", "opencl")
CPU = ("c",)


# -- row sum ---------------------------------------------------------------------------------------


def _row_sum_compute(dtype: str):
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A", dtype=dtype)
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def _row_sum_default(params, dtype):
    A, B = _row_sum_compute(dtype)
    return te.create_schedule(B.op), [A, B]


def _row_sum_split(params, dtype, factor=16, rows=32):
    A, B = _row_sum_compute(dtype)
    s = te.create_schedule(B.op)
    s[B].split(B.op.reduce_axis[0], factor=factor)
    s[B].split(B.op.axis[0], factor=rows)
    return s, [A, B]


def _row_sum_bind(params, dtype, rows=32, factor=16):
    A, B = _row_sum_compute(dtype)
    s = te.create_schedule(B.op)
    s[B].split(B.op.reduce_axis[0], factor=factor)
    xo, xi = s[B].split(B.op.axis[0], factor=rows)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def _row_sum_rfactor_crossthread(params, dtype, factor=16, rows=32):
    A, B = _row_sum_compute(dtype)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=rows)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    return s, [A, B]


def _row_sum_args(p, dtype, rng):
    return [uniform(rng, (p["n"], p["m"]), dtype), _poison((p["n"],), dtype)]


register(Workload(
    name="row_sum",
    params=("n", "m"),
    dtypes=("float32", "float64"),
    variants={
        "default": Variant("default", _row_sum_default, CPU, (), "the default schedule: one loop nest"),
        "split": Variant("split", _row_sum_split, CPU, (("factor", 16), ("rows", 32)),
                         "rows and the reduction split (tutorial step 2)"),
        "bind": Variant("bind", _row_sum_bind, GPU, (("rows", 32), ("factor", 16)),
                        "one thread per row (tutorial step 3)"),
        "rfactor_crossthread": Variant(
            "rfactor_crossthread", _row_sum_rfactor_crossthread, GPU, (("factor", 16), ("rows", 32)),
            "rfactor + cross-thread reduction over `factor` lanes, `rows` rows per block (tutorial)"),
    },
    make_args=_row_sum_args,
    reference=lambda a: [a[0].astype(np.float64).sum(axis=1)],
    outputs=(1,),
    flops=lambda p: float(p["n"] * p["m"]),
    bytes=lambda p, d: float((p["n"] * p["m"] + p["n"]) * _isize(d)),
    write_bytes=lambda p, d: float(p["n"] * _isize(d)),
    peers=("torch.sum(dim=1)", "cupy.sum(axis=1)"),
    description="B[i] = sum_k A[i, k]",
))


# -- conv2d 3x3 ------------------------------------------------------------------------------------


def _conv_compute(dtype):
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input", dtype=dtype)
    Filter = te.placeholder((3, 3), name="Filter", dtype=dtype)
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute((n - 2, n - 2), lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj],
                                                           axis=[di, dj]), name="Output")
    return Input, Filter, Output


def _conv_default(params, dtype):
    I, F, O = _conv_compute(dtype)  # noqa: E741  (the tutorial's names)
    return te.create_schedule(O.op), [I, F, O]


def _conv_tiled(params, dtype, tile=16):
    I, F, O = _conv_compute(dtype)  # noqa: E741
    s = te.create_schedule(O.op)
    i, j = O.op.axis
    io, jo, ii, ji = s[O].tile(i, j, tile, tile)
    s[O].bind(io, te.thread_axis("blockIdx.y"))
    s[O].bind(jo, te.thread_axis("blockIdx.x"))
    s[O].bind(ii, te.thread_axis("threadIdx.y"))
    s[O].bind(ji, te.thread_axis("threadIdx.x"))
    return s, [I, F, O]


def _conv_ref(a: List[np.ndarray]) -> List[np.ndarray]:
    inp, filt = a[0].astype(np.float64), a[1].astype(np.float64)
    n = inp.shape[0]
    out = np.zeros((n - 2, n - 2))
    for di in range(3):
        for dj in range(3):
            out += inp[di:di + n - 2, dj:dj + n - 2] * filt[di, dj]
    return [out]


register(Workload(
    name="conv2d_3x3",
    params=("n",),
    dtypes=("float32", "float64"),
    variants={
        "default": Variant("default", _conv_default, CPU, (), "the default loop nest"),
        "tiled": Variant("tiled", _conv_tiled, GPU, (("tile", 16),), "tile x tile outputs per block"),
    },
    make_args=lambda p, d, rng: [uniform(rng, (p["n"], p["n"]), d),
                                 uniform(rng, (3, 3), d), _poison((p["n"] - 2, p["n"] - 2), d)],
    reference=_conv_ref,
    outputs=(2,),
    flops=lambda p: float(2 * 9 * (p["n"] - 2) ** 2),
    bytes=lambda p, d: float((p["n"] ** 2 + 9 + (p["n"] - 2) ** 2) * _isize(d)),
    write_bytes=lambda p, d: float((p["n"] - 2) ** 2 * _isize(d)),
    peers=("torch.conv2d(3x3)",),
    description="Output[i, j] = sum_{di, dj} Input[i + di, j + dj] * Filter[di, dj]",
    # the schedule is symbolic in n (built without it, it serves every size)
    check=lambda p, d: None if "n" not in p or int(p["n"]) >= 3 else
    f"n must be at least 3 (the input holds the 3 x 3 window of each output), got n = {p['n']}",
))


# -- product reduction (comm_reducer) ----------------------------------------------------------------


def _product_compute(dtype):
    n, m = te.var("n"), te.var("m")
    product = te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, dtype=t), name="product")
    A = te.placeholder((n, m), name="A", dtype=dtype)
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
    return A, B


def _product_default(params, dtype):
    A, B = _product_compute(dtype)
    return te.create_schedule(B.op), [A, B]


def _product_crossthread(params, dtype, factor=32, rows=8):
    A, B = _product_compute(dtype)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
    xo, xi = s[B].split(B.op.axis[0], factor=rows)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    s[B].bind(ki, te.thread_axis("threadIdx.x"))
    return s, [A, B]


register(Workload(
    name="product_reduce",
    params=("n", "m"),
    dtypes=("float32", "float64"),
    variants={
        "default": Variant("default", _product_default, CPU, (), "the default loop nest"),
        "crossthread": Variant("crossthread", _product_crossthread, GPU, (("factor", 32), ("rows", 8)),
                               "partial products per thread, then a cross-thread all-reduce"),
    },
    # values near 1 keep long products finite
    make_args=lambda p, d, rng: [uniform(rng, (p["n"], p["m"]), d, 0.999, 1.001),
                                 _poison((p["n"],), d)],
    reference=lambda a: [np.prod(a[0].astype(np.float64), axis=1)],
    outputs=(1,),
    flops=lambda p: float(p["n"] * p["m"]),
    bytes=lambda p, d: float((p["n"] * p["m"] + p["n"]) * _isize(d)),
    write_bytes=lambda p, d: float(p["n"] * _isize(d)),
    peers=("torch.prod(dim=1)",),
    description="B[i] = prod_k A[i, k] (te.comm_reducer)",
))


# -- exp and log (intrinsics) ----------------------------------------------------------------------


def _unary_variants(fn):
    def compute(dtype, n=None):
        n = te.var("n") if n is None else n  # the tutorial's symbolic size unless a variant fixes it
        A = te.placeholder((n,), name="A", dtype=dtype)
        B = te.compute(A.shape, lambda i: fn(A[i]), name="B")
        return A, B

    def default(params, dtype):
        A, B = compute(dtype)
        return te.create_schedule(B.op), [A, B]

    def bind(params, dtype, threads=64):
        A, B = compute(dtype)
        s = te.create_schedule(B.op)
        bx, tx = s[B].split(B.op.axis[0], factor=threads)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
        return s, [A, B]

    def bind_vector(params, dtype, threads=256, vector=4, items=1):
        # the size is a constant here: where the block's elements divide it, nvcc gets straight-line
        # vector loads with no bounds checks and can issue every item's load before the first store
        A, B = compute(dtype, params["n"])
        s = te.create_schedule(B.op)
        ax, vec = s[B].split(B.op.axis[0], factor=vector)
        s[B].vectorize(vec)  # `vector` consecutive elements: one vector load and store
        ax, tx = s[B].split(ax, factor=threads)
        if items > 1:  # `items` such vectors a thread, `threads * vector` elements apart
            ax, item = s[B].split(ax, factor=items)
            s[B].unroll(item)
        s[B].bind(ax, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
        return s, [A, B]

    return {
        "default": Variant("default", default, CPU, (), "one loop"),
        "bind": Variant("bind", bind, GPU, (("threads", 64),), "one element per thread (tutorial)"),
        "bind_vector": Variant("bind_vector", bind_vector, GPU,
                               (("threads", 256), ("vector", 4), ("items", 1)),
                               "`items` vectors of `vector` consecutive elements per thread"),
    }


def _unary(name: str, fn, ref, low: float, peer: str):
    register(Workload(
        name=name,
        params=("n",),
        dtypes=("float32", "float64"),
        variants=_unary_variants(fn),
        make_args=lambda p, d, rng: [uniform(rng, p["n"], d, low, 3.0), _poison((p["n"],), d)],
        reference=lambda a: [ref(a[0].astype(np.float64))],
        outputs=(1,),
        flops=lambda p: float(p["n"]),
        bytes=lambda p, d: float(2 * p["n"] * _isize(d)),
        write_bytes=lambda p, d: float(p["n"] * _isize(d)),
        peers=(peer,),
        description=f"B[i] = {name}(A[i]) (te.{name}: CUDA float32 uses the fast-math builtin)",
        # CUDA's __expf/__logf: a few ulp, and absolute error near log's zero
        tolerance={"float32": (2e-5, 2e-6), "float64": (1e-12, 0.0)},
    ))


_unary("exp", te.exp, np.exp, -3.0, "torch.exp")
_unary("log", te.log, np.log, 0.1, "torch.log")
