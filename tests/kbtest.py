"""Shared builders for the tests: the tutorial's schedules, sizes and numpy float64 references."""

from __future__ import annotations

import numpy as np

import kernels as tvm
from kernels import te

#: (n, m): the tutorial size, ragged sizes (not multiples of 16/32), fewer rows than threads, 1x1
ROW_SUM_SIZES = [(128, 128), (37, 45), (3, 200), (1, 1), (70, 16)]


def row_sum(variant: str, factor: int = 16, rows: int = 32):
    """The reduction tutorial's row sum with one of its schedules; returns (s, [A, B])."""
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    if variant == "default":
        pass
    elif variant in ("split", "bind"):
        s[B].split(B.op.reduce_axis[0], factor=factor)
        xo, xi = s[B].split(B.op.axis[0], factor=rows)
        if variant == "bind":
            s[B].bind(xo, te.thread_axis("blockIdx.x"))
            s[B].bind(xi, te.thread_axis("threadIdx.x"))
    elif variant == "rfactor":
        ko, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
        s.rfactor(B, ki)
    elif variant == "crossthread":
        ko, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
        BF = s.rfactor(B, ki)
        xo, xi = s[B].split(s[B].op.axis[0], factor=rows)
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.y"))
        tx = te.thread_axis("threadIdx.x")
        s[B].bind(s[B].op.reduce_axis[0], tx)
        s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
        s[B].set_store_predicate(tx.var.equal(0))
    elif variant == "direct_crossthread":
        # bind the inner reduce axis itself (no rfactor): per-thread partial sums then an all-reduce
        ko, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
        xo, xi = s[B].split(B.op.axis[0], factor=rows)
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.y"))
        s[B].bind(ki, te.thread_axis("threadIdx.x"))
    else:
        raise ValueError(variant)
    return s, [A, B]


def conv2d_3x3(bind: bool = False):
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute(
        (n - 2, n - 2),
        lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
        name="Output",
    )
    s = te.create_schedule(Output.op)
    if bind:
        i, j = Output.op.axis
        io, jo, ii, ji = s[Output].tile(i, j, 8, 8)
        s[Output].bind(io, te.thread_axis("blockIdx.y"))
        s[Output].bind(jo, te.thread_axis("blockIdx.x"))
        s[Output].bind(ii, te.thread_axis("threadIdx.y"))
        s[Output].bind(ji, te.thread_axis("threadIdx.x"))
    return s, [Input, Filter, Output]


def conv2d_ref(inp: np.ndarray, filt: np.ndarray) -> np.ndarray:
    inp = inp.astype(np.float64)
    filt = filt.astype(np.float64)
    n = inp.shape[0]
    out = np.zeros((n - 2, n - 2))
    for di in range(3):
        for dj in range(3):
            out += inp[di:di + n - 2, dj:dj + n - 2] * filt[di, dj]
    return out


def product_reduce():
    n = te.var("n")
    m = te.var("m")
    product = te.comm_reducer(lambda x, y: x * y, lambda t: tvm.tir.const(1, dtype=t), name="product")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
    return te.create_schedule(B.op), [A, B]


def device_for(target: str):
    return {"c": tvm.cpu(0), "opencl": tvm.opencl(0), "cuda": tvm.cuda(0)}[target]


def run(f, target: str, *arrays):
    """Copy numpy arrays to the target's device, call ``f``, return the outputs as numpy."""
    dev = device_for(target)
    nd = [tvm.nd.array(a, dev) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


def opencl_available() -> bool:
    try:
        return tvm.opencl(0).exist
    except Exception:
        return False
