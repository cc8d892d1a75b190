"""TensorIR programs that several schedule test files use (tests/cpu/test_tir_schedule_*.py): written
once here, each test file schedules them with its own primitive."""

from __future__ import annotations

from kernels.script import tir as T

__all__ = ["input_overwritten", "output_read_between", "window3"]


@T.prim_func
def input_overwritten(x: T.handle, c: T.handle) -> None:
    X = T.match_buffer(x, (16,), "float32")
    C = T.match_buffer(c, (16,), "float32")
    A = T.alloc_buffer((16,), "float32")
    B = T.alloc_buffer((16,), "float32")
    for i in T.serial(16):
        with T.block("X"):
            vi = T.axis.spatial(16, i)
            A[vi] = X[vi]
    for i in T.serial(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * 2.0
    for i in T.serial(16):
        with T.block("Y"):
            vi = T.axis.spatial(16, i)
            A[vi] = 100.0
    for i in T.serial(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] + A[vi]


@T.prim_func
def output_read_between(x: T.handle, d: T.handle, e: T.handle) -> None:
    X = T.match_buffer(x, (16,), "float32")
    D = T.match_buffer(d, (16,), "float32")
    E = T.match_buffer(e, (16,), "float32")
    B = T.alloc_buffer((16,), "float32")
    for i in T.serial(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = X[vi] * 2.0
    for i in T.serial(16):
        with T.block("E"):
            vi = T.axis.spatial(16, i)
            E[vi] = D[vi]
    for i in T.serial(16):
        with T.block("D"):
            vi = T.axis.spatial(16, i)
            D[vi] = B[vi] + 1.0


@T.prim_func
def window3(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (14,), "float32")
    C = T.match_buffer(c, (12,), "float32")
    B = T.alloc_buffer((14,), "float32")
    for i in T.serial(14):
        with T.block("B"):
            vi = T.axis.spatial(14, i)
            B[vi] = A[vi] + 1.0
    for i in T.serial(12):
        with T.block("C"):
            vi = T.axis.spatial(12, i)
            C[vi] = B[vi] + B[vi + 1] + B[vi + 2]
