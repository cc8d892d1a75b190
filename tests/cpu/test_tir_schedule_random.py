"""Random sequences of TensorIR primitives on small functions, built for C and compared with numpy in
float64: every schedule a primitive accepts computes the right numbers (a refusal is a
ScheduleError, anything else fails the test). Seeded and bounded; the functions cover a chain of
stages, a matrix product, a window, a buffer produced and consumed inside one loop and two
reductions in a row."""

from __future__ import annotations

import random
from typing import Callable, Dict, List, Tuple

import numpy as np
import pytest
from kbtir import window3

import kernels as tvm
from kernels.script import tir as T
from kernels.tir.block import Block, walk


@T.prim_func
def chain(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (12, 10), "float32")
    C = T.match_buffer(c, (12, 10), "float32")
    B = T.alloc_buffer((12, 10), "float32")
    for i, j in T.grid(12, 10):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(12, 10):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


@T.prim_func
def matmul(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (12, 9), "float32")
    B = T.match_buffer(b, (9, 10), "float32")
    C = T.match_buffer(c, (12, 10), "float32")
    for i, j, k in T.grid(12, 10, 9):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def shared_loop(x: T.handle, b: T.handle, c: T.handle) -> None:
    X = T.match_buffer(x, (24,), "float32")
    B = T.match_buffer(b, (24,), "float32")
    C = T.match_buffer(c, (24,), "float32")
    A = T.alloc_buffer((24,), "float32")
    for i in T.serial(4):
        for j in T.serial(6):
            with T.block("A"):
                vi = T.axis.spatial(24, i * 6 + j)
                A[vi] = X[vi] * 3.0
        for j in T.serial(6):
            with T.block("B"):
                vi = T.axis.spatial(24, i * 6 + j)
                B[vi] = A[vi] + 1.0
    for i in T.serial(24):
        with T.block("C"):
            vi = T.axis.spatial(24, i)
            C[vi] = A[vi] + B[vi]


@T.prim_func
def two_reductions(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (6, 8, 5), "float32")
    B = T.match_buffer(b, (6,), "float32")
    P = T.alloc_buffer((6, 8), "float32")
    for i, j, k in T.grid(6, 8, 5):
        with T.block("P"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                P[vi, vj] = 0.0
            P[vi, vj] = P[vi, vj] + A[vi, vj, vk]
    for i, j in T.grid(6, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + P[vi, vj] * 2.0


def _window_ref(x: List[np.ndarray]) -> np.ndarray:
    b = x[0] + 1
    return b[:-2] + b[1:-1] + b[2:]


#: function, shapes of the arguments (the last is the output compared), reference in float64
CASES: Dict[str, Tuple[object, List[tuple], Callable[[List[np.ndarray]], np.ndarray]]] = {
    "chain": (chain, [(12, 10), (12, 10)], lambda x: x[0] * 2 + 1),
    "matmul": (matmul, [(12, 9), (9, 10), (12, 10)], lambda x: x[0] @ x[1]),
    "window": (window3, [(14,), (12,)], _window_ref),
    "shared_loop": (shared_loop, [(24,), (24,), (24,)], lambda x: x[0] * 6 + 1),
    "two_reductions": (two_reductions, [(6, 8, 5), (6,)], lambda x: x[0].sum(axis=(1, 2)) * 2),
}

PRIMITIVES = ["split", "split", "reorder", "fuse", "cache_read", "cache_write", "compute_at",
              "reverse_compute_at", "compute_inline", "reverse_compute_inline", "rfactor",
              "decompose_reduction", "parallel", "vectorize", "unroll"]


def random_step(sch: tvm.tir.Schedule, rng: random.Random) -> None:
    """One primitive on a random block and loop (it may refuse with a ScheduleError)."""
    names = [b.name_hint for b in walk(sch.mod["main"].body)
             if isinstance(b, Block) and b.name_hint != "root"]
    block = sch.get_block(rng.choice(names))
    loops = sch.get_loops(block)
    op = rng.choice(PRIMITIVES)
    if op == "split" and loops:
        f = rng.choice([2, 3, 4, 5, 7, 16])
        sch.split(rng.choice(loops), [None, f] if rng.random() < 0.5 else [f, None])
    elif op == "reorder" and len(loops) >= 2:
        a, b = rng.sample(loops, 2)
        sch.reorder(b, a)
    elif op == "fuse" and len(loops) >= 2:
        k = rng.randrange(len(loops) - 1)
        sch.fuse(loops[k], loops[k + 1])
    elif op == "cache_read" and sch.get(block).reads:
        sch.cache_read(block, rng.randrange(len(sch.get(block).reads)), rng.choice(["global", "local"]))
    elif op == "cache_write":
        sch.cache_write(block, 0, rng.choice(["global", "local"]))
    elif op in ("compute_at", "reverse_compute_at"):
        other = sch.get_loops(sch.get_block(rng.choice(names)))
        if other:
            getattr(sch, op)(block, rng.choice(other))
    elif op in ("compute_inline", "reverse_compute_inline"):
        getattr(sch, op)(block)
    elif op == "rfactor" and loops:
        sch.rfactor(rng.choice(loops), 0)
    elif op == "decompose_reduction" and loops:
        sch.decompose_reduction(block, rng.choice(loops))
    elif op in ("parallel", "vectorize", "unroll") and loops:
        getattr(sch, op)(rng.choice(loops))


@pytest.mark.parametrize("seed", range(48))
def test_random_schedule_computes_numpys_answer(seed):
    rng = random.Random(seed)
    name = sorted(CASES)[seed % len(CASES)]
    func, shapes, reference = CASES[name]
    sch = tvm.tir.Schedule(func)
    for _ in range(rng.randint(2, 6)):
        try:
            random_step(sch, rng)
        except tvm.tir.ScheduleError:
            pass
    data = np.random.default_rng(seed)
    args = [data.uniform(-1, 1, s).astype("float32") for s in shapes[:-1]]
    args.append(np.full(shapes[-1], np.nan, "float32"))
    f = tvm.build(sch.mod, target="c")
    nd = [tvm.nd.array(x, tvm.cpu(0)) for x in args]
    f(*nd)
    want = reference([x.astype(np.float64) for x in args[:-1]])
    np.testing.assert_allclose(nd[-1].numpy(), want, rtol=1e-4, atol=1e-4,
                               err_msg=f"{name}: {sch.trace}")
