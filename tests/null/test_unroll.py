"""The unroll pass (kernels/lower/unroll.py): unrolled loops of constant extent become copies of
their body with the loop variable replaced; long or symbolic loops stay loops (#pragma unroll)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import run

import kernels as tvm
from kernels import te
from kernels.build_module import build_spec
from kernels.lower import lower
from kernels.lower.unroll import MAX_EXTENT, unroll_loop, unroll_loops
from kernels.tir.expr import Buffer, BufferLoad, Var, const
from kernels.tir.functor import collect
from kernels.tir.printer import stmt_str
from kernels.tir.stmt import Allocate, BufferStore, For, ForKind

A = Buffer("A", "float32", (const(64),))
C = Buffer("C", "float32", (const(64),))


def _loop(extent, kind=ForKind.UNROLLED, body=None):
    j = Var("j")
    return For(j, const(0), extent, kind, body(j) if body else BufferStore(C, BufferLoad(A, (j * 2,)), (j,)))


def test_constant_loop_becomes_copies():
    out = unroll_loops(_loop(const(3)))
    assert stmt_str(out).splitlines() == ["C[0] = A[(0 * 2)]", "C[1] = A[(1 * 2)]", "C[2] = A[(2 * 2)]"]


def test_only_unrolled_loops_are_touched():
    loop = _loop(const(3), ForKind.SERIAL)
    assert unroll_loops(loop) is loop


def test_long_and_symbolic_loops_stay_loops():
    long = _loop(const(MAX_EXTENT + 1))
    assert unroll_loops(long) is long
    sym = _loop(Var("n"))
    assert unroll_loops(sym) is sym
    with pytest.raises(ValueError, match="symbolic extent n"):
        unroll_loop(sym)


def test_statement_budget_keeps_big_bodies_as_loops():
    # the inner loop is unrolled first (16 statements); 200 copies of those would be 3200 > 2048
    outer = For(Var("i"), const(0), const(200), ForKind.UNROLLED, _loop(const(16)))
    out = unroll_loops(outer)
    assert isinstance(out, For) and out.kind == ForKind.UNROLLED
    assert len(collect(out, lambda n: isinstance(n, BufferStore))) == 16
    small = For(Var("i"), const(0), const(16), ForKind.UNROLLED, _loop(const(4)))
    assert len(stmt_str(unroll_loops(small)).splitlines()) == 64  # 16 copies of 4 stores


def test_each_copy_allocates_its_own_buffer():
    def body(j):
        tmp = Buffer("tmp", "float32", (const(1),), "local")
        return Allocate(tmp, const(1), BufferStore(tmp, BufferLoad(A, (j,)), (const(0),)))

    out = unroll_loops(_loop(const(2), body=body))
    bufs = [a.buffer for a in collect(out, lambda n: isinstance(n, Allocate))]
    stores = [s.buffer for s in collect(out, lambda n: isinstance(n, BufferStore))]
    assert len(bufs) == 2 and bufs[0] is not bufs[1] and stores == bufs


def test_schedule_unroll_in_generated_code():
    A_ = te.placeholder((64, 4), name="A")
    B = te.compute((64, 4), lambda i, j: A_[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].unroll(B.op.axis[1])
    text = str(lower(s, [A_, B]))
    assert "for (j" not in text and text.count("B[((i * 4) + 3)]") == 1
    src = build_spec(s, [A_, B], "c").source
    assert "#pragma GCC unroll" not in src and src.count("B[") == 4


def test_symbolic_unrolled_loop_keeps_its_pragma():
    n = te.var("n")
    A_ = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A_[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], nparts=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].unroll(tx)
    src = build_spec(s, [A_, B], "cuda").source
    assert "#pragma unroll" in src


def test_unrolled_local_cache_runs_on_c():
    """A cache stage computed inside an unrolled loop: each copy declares its own array."""
    A_ = te.placeholder((16, 8), name="A")
    B = te.compute((16, 8), lambda i, j: A_[i, j] + 1.0, name="B")
    C_ = te.compute((16, 8), lambda i, j: B[i, j] * 3.0, name="C")
    s = te.create_schedule(C_.op)
    io, ii = s[C_].split(C_.op.axis[0], factor=4)
    s[B].compute_at(s[C_], ii)
    s[C_].unroll(ii)
    f = tvm.build(s, [A_, C_], "c")
    a = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")
    (_, c) = run(f, "c", a, np.zeros((16, 8), "float32"))
    np.testing.assert_allclose(c, (a.astype(np.float64) + 1) * 3, rtol=1e-6)
