"""References to blocks and loops (StmtSRef), tir.ScheduleState and the dependences of a block scope
(BlockScope, DepKind), derived by hand for small functions."""

from __future__ import annotations

import pytest

import kernels as tvm
from kernels.script import tir as T
from kernels.tir.schedule import DepKind
from kernels.tir.schedule.state import CachedFlags


@T.prim_func
def matmul(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32")
    B = T.match_buffer(b, (16, 16), "float32")
    C = T.match_buffer(c, (16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("init"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = 0.0
        for k in T.serial(16):
            with T.block("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


@T.prim_func
def war(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (8,), "float32")
    B = T.match_buffer(b, (8,), "float32")
    C = T.alloc_buffer((8,), "float32")
    for i in T.serial(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + 1.0
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * 2.0


def test_sref_follows_the_schedule():
    sch = tvm.tir.Schedule(matmul)
    upd = sch.get_block("update")
    sref = sch.get_sref(upd)
    assert sref.stmt is sch.get(upd) and sref.stmt.name_hint == "update"
    assert sch.get_sref(upd) is sref and sch.state.get_sref(sch.get(upd)) is sref
    i, j, k = sch.get_loops(upd)
    k_sref = sch.get_sref(k)
    assert k_sref.stmt.extent.value == 16 and sref.parent is k_sref
    sch.split(k, [None, 4])
    assert k_sref.stmt is None  # the loop was split away
    assert sref.stmt is sch.get(upd)


def test_copies_have_their_own_srefs():
    sch = tvm.tir.Schedule(matmul)
    i, _, _ = sch.get_loops(sch.get_block("update"))
    other = sch.copy()
    assert sch.get_sref(i) is not other.get_sref(i)
    assert sch.get_sref(i).stmt is other.get_sref(i).stmt


def test_matmul_dependences_raw_and_waw():
    st = tvm.tir.ScheduleState(matmul)
    root = st.get_sref(st.mod["main"].body.block)
    sch = tvm.tir.Schedule(matmul)
    init = st.get_sref(sch.get(sch.get_block("init")))
    update = st.get_sref(sch.get(sch.get_block("update")))
    scope = st.get_block_scope(root)
    deps = scope.get_deps_by_src(init)
    assert sorted(d.kind for d in deps) == [DepKind.RAW, DepKind.WAW]
    assert all(d.src is init and d.dst is update for d in deps)
    assert sorted(d.kind for d in scope.get_deps_by_dst(update)) == [DepKind.RAW, DepKind.WAW]
    assert scope.get_deps_by_dst(init) == []


def test_write_after_read():
    st = tvm.tir.ScheduleState(war)
    sch = tvm.tir.Schedule(war)
    c = st.get_sref(sch.get(sch.get_block("C")))
    b = st.get_sref(sch.get(sch.get_block("B")))
    (dep,) = st.get_block_scope(st.get_sref(st.mod["main"].body.block)).get_deps_by_src(c)
    assert dep.kind == DepKind.WAR and dep.dst is b


def test_block_scope_of_a_loop_is_refused():
    sch = tvm.tir.Schedule(matmul)
    i, _, _ = sch.get_loops(sch.get_block("update"))
    with pytest.raises(tvm.tir.ScheduleError, match="not a block"):
        sch.state.get_block_scope(sch.get_sref(i))


@T.prim_func
def two_producers(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16,), "float32")
    B = T.match_buffer(b, (16,), "float32")
    X = T.alloc_buffer((16,), "float32")
    for i in T.serial(7):
        with T.block("X0"):
            vi = T.axis.spatial(7, i)
            X[vi] = A[vi]
    for i in T.serial(8):
        with T.block("X1"):
            vi = T.axis.spatial(16, i + 8)
            X[vi] = A[vi] * 2.0
    for i in T.serial(16):
        with T.block("Y"):
            vi = T.axis.spatial(16, i)
            B[vi] = X[vi]


@T.prim_func
def carried(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16,), "float32")
    C = T.match_buffer(c, (16,), "float32")
    B = T.alloc_buffer((16,), "float32")
    for i in T.serial(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * 2.0
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[(vi + 15) % 16]


def _flags(func, name):
    sch = tvm.tir.Schedule(func)
    blk = sch.get(sch.get_block(name)) if name != "root" else sch.mod["main"].body.block
    return sch.state._get_cached_flags(sch.state.get_sref(blk))


def test_cached_flags_gap_between_producers_is_not_covered():
    # X0 writes X[0:7], X1 writes X[8:16]: X[7] is never produced
    assert _flags(two_producers, "Y") == CachedFlags(True, False, True)
    assert _flags(two_producers, "root").stage_pipeline is False
    assert _flags(two_producers, "X1") == CachedFlags(True, True, True)


def test_cached_flags_loop_carried_read_is_not_covered():
    # inside one iteration of i, C reads an element B wrote in another iteration
    assert _flags(carried, "C").region_cover is False
    assert _flags(carried, "B") == CachedFlags(True, True, True)
    assert _flags(carried, "root") == CachedFlags(True, True, False)
    assert _flags(matmul, "root") == CachedFlags(True, True, True)
