"""Benchmark: lowering + code generation time of the vector, cooperative-fetch and double-buffered
kernels (no native compiler). Run with ``python -m pytest tests/bench --benchmark-only``; the goal
is <= 50 ms per kernel."""

from __future__ import annotations

import pytest
from kbvector import matmul_shared, rows, unary, vector_add, window_coop

from kernels.build_module import build_spec

KERNELS = {
    "exp_vec4/cuda": (lambda: unary("exp", width=4), "cuda"),
    "log_vec4/opencl": (lambda: unary("log", width=4), "opencl"),
    "vector_add_vec4/cuda": (lambda: vector_add(width=4), "cuda"),
    "rows_alignment_guard/cuda": (lambda: rows(width=4), "cuda"),
    "window_sum_shared_coop/cuda": (lambda: window_coop(width=4), "cuda"),
    "matmul_shared/cuda": (lambda: matmul_shared(1024, 1024, 1024), "cuda"),
    "matmul_shared_double_buffer/cuda": (lambda: matmul_shared(1024, 1024, 1024, double_buffer=True), "cuda"),
    "matmul_shared_ragged_db/opencl": (lambda: matmul_shared(1000, 1000, 1000, double_buffer=True), "opencl"),
}


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_lower_and_codegen(benchmark, kernel):
    make, target = KERNELS[kernel]

    def work():
        s, args = make()  # schedule construction is part of what a user pays
        return build_spec(s, args, target)

    spec = benchmark(work)
    assert spec.source
