"""Benchmark: lowering + code generation time per tutorial kernel (no native compiler involved).

Run with ``python -m pytest tests/bench --benchmark-only``; the goal is <= 50 ms per kernel.
"""

from __future__ import annotations

import pytest
from kbtest import conv2d_3x3, product_reduce, row_sum

from kernels import te
from kernels.build_module import build_spec


def _exp():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


KERNELS = {
    "row_sum_default/c": (lambda: row_sum("default"), "c"),
    "row_sum_split/c": (lambda: row_sum("split"), "c"),
    "row_sum_bind/cuda": (lambda: row_sum("bind"), "cuda"),
    "row_sum_rfactor/c": (lambda: row_sum("rfactor"), "c"),
    "row_sum_crossthread/cuda": (lambda: row_sum("crossthread"), "cuda"),
    "row_sum_crossthread/opencl": (lambda: row_sum("crossthread"), "opencl"),
    "conv2d_3x3/c": (lambda: conv2d_3x3(), "c"),
    "product_reduce/c": (lambda: product_reduce(), "c"),
    "exp/cuda": (_exp, "cuda"),
}


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_lower_and_codegen(benchmark, kernel):
    make, target = KERNELS[kernel]

    def work():
        s, args = make()  # schedule construction is part of what a user pays
        return build_spec(s, args, target)

    spec = benchmark(work)
    assert spec.source
