"""Double buffering (``s[T].double_buffer()``, kernels/lower/double_buffer.py) in the lowered IR:
the allocation holds two padded halves, the first tile is fetched before the loop, each iteration
fetches the next tile into the idle half and computes on the other, the last tile is computed
after the loop. Numbers checked on the device-free IR; results are checked in tests/cpu."""

from __future__ import annotations

from kbvector import matmul_shared

from kernels import te
from kernels.lower import PASSES, lower, schedule_to_primfunc, simplify_stmt
from kernels.lower.double_buffer import DOUBLE_BUFFER_SCOPE, inject_double_buffer, mark_double_buffer
from kernels.lower.storage_sync import DOUBLE_BUFFER_WRITE
from kernels.tir.functor import collect
from kernels.tir.printer import stmt_str
from kernels.tir.stmt import Allocate, AttrStmt, For


def _allocs(func):
    return {a.buffer.name: a for a in collect(func.body, lambda n: isinstance(n, Allocate))}


def test_matmul_tiles_are_double_buffered():
    func = lower(*matmul_shared(double_buffer=True))["main"]
    allocs = _allocs(func)
    assert allocs["A.shared"].extent.value == 1024 and allocs["B.shared"].extent.value == 1024  # 2 x 512
    loops = [f for f in collect(func.body, lambda n: isinstance(n, For)) if f.loop_var.name == "r.outer"]
    assert len(loops) == 1 and loops[0].extent.value == 7  # 8 tiles: the loop fetches tiles 1..7
    text = stmt_str(func.body)
    # the next tile goes to half (r + 1) % 2, the current one is read from half r % 2
    assert "(floormod((r.outer + 1), 2) * 512)" in text and "(floormod(r.outer, 2) * 512)" in text
    # the prologue fetches tile 0 into half 0, the epilogue computes on half 1 (tile 7)
    before_loop = text[:text.index("for (r.outer")]
    assert before_loop.count("A.shared[") == 1 and "512)" not in before_loop
    after_loop = text[text.rindex("}\n", 0, text.rindex("for (r.inner")) :]
    assert "A.shared[((((threadIdx.y * 64) + (i.inner.inner * 8)) + r.inner) + 512)]" in after_loop
    assert DOUBLE_BUFFER_SCOPE not in text and DOUBLE_BUFFER_WRITE in text


def test_halves_are_padded_to_16_bytes():
    n = 1000
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    xo, xi = s[B].split(B.op.axis[0], factor=100)
    s[AA].compute_at(s[B], xo)
    s[AA].double_buffer()
    allocs = _allocs(lower(s, [A, B])["main"])
    assert allocs["A.shared"].extent.value == 2 * 104  # 102 elements, padded to a multiple of 4


def test_symbolic_tile_count_guards_the_first_fetch():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    xo, xi = s[B].split(B.op.axis[0], factor=64)
    s[AA].compute_at(s[B], xo)
    s[AA].double_buffer()
    text = stmt_str(lower(s, [A, B])["main"].body)
    assert text.lstrip().startswith("allocate(A.shared") and "if (floordiv((n + 63), 64) >= 1) {" in text


def _writes(s):
    return collect(s, lambda n: isinstance(n, AttrStmt) and n.attr_key == DOUBLE_BUFFER_WRITE)


def test_passes_run_alone():
    func = schedule_to_primfunc(*matmul_shared(double_buffer=True), "main")
    marked = mark_double_buffer(func.body)
    assert len(collect(marked, lambda n: isinstance(n, AttrStmt) and n.attr_key == DOUBLE_BUFFER_SCOPE)) == 2
    flat = next(p for p in PASSES if p.name == "storage_flatten")(func.with_body(marked)).body
    injected = inject_double_buffer(flat)
    assert not collect(injected, lambda n: isinstance(n, AttrStmt) and n.attr_key == DOUBLE_BUFFER_SCOPE)
    # in the loop and (dead: tile 8 does not exist) in the copy of the body after it
    assert len(_writes(injected)) == 4 and len(_writes(simplify_stmt(injected))) == 2
    assert inject_double_buffer(flat) is not flat
    plain = schedule_to_primfunc(*matmul_shared(), "main").body
    assert mark_double_buffer(plain) is plain or stmt_str(mark_double_buffer(plain)) == stmt_str(plain)


def test_single_iteration_loop_is_left_alone():
    func = lower(*matmul_shared(16, 16, 8, double_buffer=True))["main"]  # one tile of k
    # the block's 64 rows (8 threads of 8 rows: as in TVM, a split part that a thread index derives
    # from keeps its factor; the rows past the 16 there are are guarded) x 8 columns, not doubled
    assert _allocs(func)["A.shared"].extent.value == 64 * 8
    assert DOUBLE_BUFFER_WRITE not in stmt_str(func.body)


# -- multi_buffer(stages) --------------------------------------------------------------------------


def test_multi_buffer_keeps_that_many_copies_and_fetches_ahead():
    from kernels.lower.double_buffer import ASYNC_COMMIT, ASYNC_WAIT

    func = lower(*matmul_shared(double_buffer=3))["main"]
    allocs = _allocs(func)
    assert allocs["A.shared"].extent.value == 3 * 512 and allocs["B.shared"].extent.value == 3 * 512
    loop = next(f for f in collect(func.body, lambda n: isinstance(n, For)) if f.loop_var.name == "r.outer")
    assert loop.extent.value == 8  # every tile computed in the loop: no peeled last iteration
    text = stmt_str(func.body)
    # tiles 0 and 1 before the loop (slots 0 and 1), tile r + 2 into slot (r + 2) % 3 in it
    before_loop = text[:text.index("for (r.outer")]
    assert before_loop.count("A.shared[") == 2 and before_loop.count(ASYNC_COMMIT) == 4
    assert "(floormod((r.outer + 2), 3) * 512)" in text and "(floormod(r.outer, 3) * 512)" in text
    assert text.count("if ((r.outer + 2) < 8) {") == 2  # the last two iterations fetch nothing
    waits = [a for a in collect(func.body, lambda n: isinstance(n, AttrStmt) and n.attr_key == ASYNC_WAIT)]
    assert len(waits) == 1 and int(waits[0].value) == 2 and waits[0].body is loop  # 2 fetches x (3 - 2)


def test_multi_buffer_errors_name_the_stage():
    import pytest

    from kernels.errors import LoweringError, ScheduleError

    s, (A, B, C) = matmul_shared()
    AA = next(t for t in s.stages if t.op.name == "A.shared")
    with pytest.raises(ScheduleError, match=r"stage A.shared: multi_buffer: stages=1 must be an integer"):
        AA.multi_buffer(1)
    s, args = matmul_shared()
    for t in s.stages:
        if t.op.name == "A.shared":
            t.multi_buffer(3)
        if t.op.name == "B.shared":
            t.double_buffer()
    with pytest.raises(LoweringError, match=r"A.shared, B.shared: multi_buffer: .*different numbers of "
                                            r"copies \(\[2, 3\]\)"):
        lower(s, args)
