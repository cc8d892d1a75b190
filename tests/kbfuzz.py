"""Planted kernels for the fuzzer's own tests (tests/cpu/test_fuzz.py), and schedules its regression
tests share (one_thread_matmul): each planted one builds a kernel with a
known defect and the workload that feeds and checks it, as ``kernels.testing.fuzz`` samples of kind
``callable`` name them (``"kbfuzz:<function>"``). ``params["threads"]`` binds one element a thread
(for the GPU-style targets)."""

from __future__ import annotations

import numpy as np

from kernels import te
from kernels.script import tir as T
from kernels.tir.function import IRModule
from kernels.workloads import Workload


def _workload(name, make_args, reference, outputs):
    return Workload(name=name, params=("n",), dtypes=("float32",), variants={}, make_args=make_args,
                    reference=reference, outputs=outputs, flops=lambda p: 0.0, bytes=lambda p, d: 0.0)


def _copy_workload(name):
    return _workload(name, lambda p, d, rng: [rng.random(p["n"], dtype=np.float32),
                                              np.full(p["n"], np.nan, np.float32)],
                     lambda a: [a[0].astype(np.float64)], (1,))


def scatter_past_end(params, dtype):
    """``B[Idx[i]] = A[i]`` in TensorIR with the last index one past B: a data-dependent store the
    lowered IR cannot show, which lands in B's red zone."""
    n = int(params["n"])

    @T.prim_func
    def main(A: T.Buffer[(n,), "float32"], Idx: T.Buffer[(n,), "int32"],
             B: T.Buffer[(n,), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.serial(n):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[Idx[vi]] = A[vi]

    def make(p, d, rng):
        idx = np.arange(p["n"], dtype=np.int32)
        idx[-1] = p["n"]
        return [rng.random(p["n"], dtype=np.float32), idx, np.full(p["n"], np.nan, np.float32)]

    def ref(a):
        out = a[0].astype(np.float64)
        out[-1] = np.nan
        return [out]

    mod = IRModule({"main": main})
    if params.get("threads"):  # a GPU target: one element a thread
        from kernels.tir.schedule import Schedule

        sch = Schedule(mod)
        (i,) = sch.get_loops(sch.get_block("B"))
        bx, tx = sch.split(i, [None, int(params["threads"])])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        mod = sch.mod
    return mod, None, _workload("planted_scatter_past_end", make, ref, (2,))


def shifted_load(params, dtype):
    """``B[i] = A[i + 1]`` in TE: the last load reads one element past A (seen in the lowered IR)."""
    n = int(params["n"])
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i + 1], name="B")
    return _bind(te.create_schedule(B.op), B, params), [A, B], _copy_workload("planted_shifted_load")


def _gather(name, far: int):
    def make(p, d, rng):
        n = p["n"]
        idx = np.arange(n, dtype=np.int32)
        idx[-1] = n - 1 + far  # the last index points past A
        return [rng.random(n, dtype=np.float32), idx, np.full(n, np.nan, np.float32)]

    def ref(a):
        x, idx = a[0].astype(np.float64), a[1]
        return [np.where(idx < x.size, x[np.minimum(idx, x.size - 1)], x[-1])]

    return _workload(name, make, ref, (2,))


def _bind(s, B, params):
    """One element a thread on a GPU target (``params["threads"]`` a block)."""
    if params.get("threads"):
        bx, tx = s[B].split(B.op.axis[0], factor=int(params["threads"]))
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s


def _gather_schedule(params):
    n = int(params["n"])
    A = te.placeholder((n,), name="A")
    Idx = te.placeholder((n,), name="Idx", dtype="int32")
    B = te.compute((n,), lambda i: A[Idx[i]], name="B")
    return _bind(te.create_schedule(B.op), B, params), [A, Idx, B]


def gather_past_end(params, dtype):
    """``B[i] = A[Idx[i]]`` with the last index one past A: a data-dependent read the lowered IR
    cannot show, which reads the red zone (NaN) and so computes a wrong value."""
    s, args = _gather_schedule(params)
    return s, args, _gather("planted_gather_past_end", 1)


def gather_far_away(params, dtype):
    """``B[i] = A[Idx[i]]`` with the last index 2**30 past A: on the C target a segmentation fault."""
    s, args = _gather_schedule(params)
    return s, args, _gather("planted_gather_far_away", 1 << 30)


def endless_sum(params, dtype):
    """A sum of A[0] over 2**31 - 1 terms into B[0]: seconds of work, longer than a short timeout."""
    n = int(params["n"])
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, (1 << 31) - 1), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i] * 1.0000001, axis=k), name="B")
    return te.create_schedule(B.op), [A, B], _copy_workload("planted_endless_sum")


def one_thread_matmul(n: int, m: int, k: int):
    """The fuzzer's define_split template (its CUDA half) at one block of one thread: the whole n x m
    product of C in that thread's local array (cache_write, compute_at the thread loop)."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    bi, i = s[C].split(i, nparts=1)
    ti, ii = s[C].split(i, nparts=1)
    bj, j = s[C].split(j, nparts=1)
    tj, ji = s[C].split(j, nparts=1)
    s[C].reorder(bi, bj, ti, tj, ii, ji)
    for ax, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"), (tj, "threadIdx.x")):
        s[C].bind(ax, te.thread_axis(tag))
    s[CL].compute_at(s[C], tj)
    return s, [A, B, C]

