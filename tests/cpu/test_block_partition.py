"""Block partitioning (kernels.lower.block_partition): interior thread blocks run a copy of the kernel
without bound checks, edge blocks the checked copy -- as two launches where the interior is a box of
the grid, else behind a block condition in one kernel. Checked three ways: the interior launch's grid
and the blocks the edge launch visits (each once), or the condition that picks the copy, against
hand-derived block sets; the checks that must stay (data-dependent, symbolic loops, a
ragged reduction axis) staying; ragged kernels of both front ends on OpenCL (PoCL) against numpy in
float64, and their CUDA source compiled by nvcc."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels import te, workloads
from kernels.contrib import nvcc
from kernels.lower import TARGET_PASSES, run_passes, schedule_to_primfunc
from kernels.lower.block_partition import partition_blocks
from kernels.script import tir as T
from kernels.tir import attr
from kernels.tir import likely
from kernels.tir.expr import LT, BufferLoad, Cast, Var, const
from kernels.tir.functor import collect, substitute
from kernels.tir.simplify import simplify
from kernels.tir.stmt import Allocate, AttrStmt, BufferStore, For, ForKind, IfThenElse, LetStmt, SeqStmt, ThreadIndex

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")


def _target_body(sch, args, kind="cuda"):
    """The function after every target pass up to and including block partitioning."""
    func = run_passes(schedule_to_primfunc(sch, args, "main"))
    for p in TARGET_PASSES:
        func = p(func, kind)
        if p.name == "block_partition":
            return func.body
    raise AssertionError("no block_partition pass in TARGET_PASSES")


def _launches(body):
    """The top-level kernels of ``body``, each as (grid: tag -> extent, body below the launch)."""
    out = []
    for k in (list(body.seq) if isinstance(body, SeqStmt) else [body]):
        grid = {}
        while isinstance(k, AttrStmt) and k.attr_key == attr.THREAD_EXTENT:
            if k.node.thread_tag.startswith("blockIdx"):
                grid[k.node.thread_tag] = k.value.value
            k = k.body
        out.append((grid, k))
    return out


def _edge_blocks(grid, body):
    """The (blockIdx.y, blockIdx.x) of the original grid each block of an edge launch computes, in
    order (its lets, evaluated at every index of its one-dimensional grid)."""
    lets = {}
    # the shared arrays are declared above the mark of a concurrent launch, and that above the lets
    while isinstance(body, (LetStmt, Allocate)) or (isinstance(body, AttrStmt)
                                                    and body.attr_key == attr.CONCURRENT_LAUNCH):
        if isinstance(body, LetStmt):
            lets[body.var.name] = (body.var, body.value)
        body = body.body
    e = next(v for v in collect(list(lets.values())[0][1], lambda n: isinstance(n, Var)))
    out = []
    for b in range(grid["blockIdx.x"]):
        val = {name: simplify(substitute(x, {e: const(b, e.dtype)})).value for name, (_, x) in lets.items()}
        out.append((val.get("blockIdx.y", 0), val["blockIdx.x"]))
    return out


def _likely(stmt) -> int:
    return len(collect(stmt, lambda n: getattr(getattr(n, "op", None), "name", "") == "tir.likely"))


def _add_one(n, threads, items=4):
    """``B = A + 1``, ``items`` consecutive elements a thread in a serial loop (``items=1``: one)."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, rest = s[B].split(B.op.axis[0], factor=threads * items)
    tx, _ = s[B].split(rest, factor=items)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def test_interior_blocks_are_the_hand_derived_ones():
    # 1000 elements, 64 threads of 4: 256 a block, 4 blocks; block b is whole when
    # 256 b + 255 < 1000, i.e. b <= 2
    s, args = _add_one(1000, 64)
    (grid0, interior), (grid1, edge) = _launches(_target_body(s, args))
    assert grid0 == {"blockIdx.x": 3} and grid1 == {"blockIdx.x": 1}
    assert _edge_blocks(grid1, edge) == [(0, 3)]
    assert _likely(interior) == 0
    assert _likely(edge) == 1
    if opencl_available():  # the two launches write every element once
        f = tvm.build(s, args, "opencl")
        a = np.arange(1000, dtype=np.float32)
        got = _run(f, [a, np.full(1000, np.nan, np.float32)])[1]
        np.testing.assert_array_equal(got, a.astype(np.float64) + 1.0)


def test_divisible_extent_is_not_split():
    s, args = _add_one(1024, 64)
    body = _target_body(s, args)
    assert not collect(body, lambda n: isinstance(n, IfThenElse))


def test_one_check_a_thread_is_not_worth_a_second_copy():
    # one element a thread: the check is outside any loop; the kernel stays whole
    s, args = _add_one(1000, 64, items=1)
    body = _target_body(s, args)
    assert not collect(body, lambda n: isinstance(n, IfThenElse) and n.else_case is not None)
    assert _likely(body) == 1


def test_ragged_matmul_tiles_in_two_dimensions():
    # 300 x 200 outputs in 128 x 128 tiles (8 x 8 a thread, 16 x 16 threads): row blocks 0-1 and
    # column block 0 are whole; the reduction (k = 104, tile_k 8) divides and needs no check
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", {"n": 300, "m": 200, "k": 104}, "float32",
                      dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8, reg_cache=1))
    (grid0, interior), (grid1, edge) = _launches(_target_body(s, args))
    assert grid0 == {"blockIdx.y": 2, "blockIdx.x": 1}  # blocks (0, 0) and (1, 0)
    # the other four, each once: the column right of the box (every row), then the row below it
    assert _edge_blocks(grid1, edge) == [(0, 1), (1, 1), (2, 1), (2, 0)]
    assert _likely(interior) == 0 and _likely(edge) > 0


@pytest.mark.parametrize("n, m, tile, want_box", [(1000, 700, 64, (15, 10)), (64, 700, 64, (1, 10)),
                                                  (1000, 64, 64, (15, 1)), (100, 100, 64, (1, 1))])
def test_edge_launch_visits_every_block_outside_the_box_once(n, m, tile, want_box):
    # C = A + 1 over n x m in tile x tile blocks, 8 x 8 elements a thread in serial loops
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    by, i = s[B].split(B.op.axis[0], factor=tile)
    bx, j = s[B].split(B.op.axis[1], factor=tile)
    ty, ii = s[B].split(i, factor=8)
    tx, ji = s[B].split(j, factor=8)
    s[B].reorder(by, bx, ty, tx, ii, ji)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        s[B].bind(ax, te.thread_axis(tag))
    launches = _launches(_target_body(s, [A, B]))
    rows, cols = -(-n // tile), -(-m // tile)
    box = {(y, x) for y in range(want_box[0]) for x in range(want_box[1])}
    if len(box) == rows * cols:  # every block is whole: one launch, no checks
        assert len(launches) == 1 and _likely(launches[0][1]) == 0
        return
    (grid0, _), (grid1, edge) = launches
    assert (grid0["blockIdx.y"], grid0["blockIdx.x"]) == want_box
    visited = _edge_blocks(grid1, edge)
    assert len(visited) == len(set(visited))
    assert set(visited) == {(y, x) for y in range(rows) for x in range(cols)} - box
    if opencl_available():  # and the two launches compute every element
        f = tvm.build(s, [A, B], "opencl")
        a = np.random.default_rng(n + m).uniform(-1, 1, (n, m)).astype(np.float32)
        got = _run(f, [a, np.full((n, m), np.nan, np.float32)])[1]
        np.testing.assert_allclose(got, a.astype(np.float64) + 1.0, rtol=1e-6, atol=0)


def test_ragged_reduction_axis_keeps_its_check_in_both_copies():
    # k = 100 with tile_k 8: the last k tile is partial in every block, so its check stays
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", {"n": 300, "m": 200, "k": 100}, "float32",
                      dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8))
    (_, interior), (_, edge) = _launches(_target_body(s, args))
    k_checks = lambda st: [c for c in collect(st, lambda n: isinstance(n, IfThenElse))  # noqa: E731
                           if not {v.name for v in collect(c.condition, lambda n: isinstance(n, Var))}
                           & {"blockIdx.y", "blockIdx.x"}]
    assert k_checks(interior) and len(k_checks(interior)) == len(k_checks(edge))


def _kernel(cond, body_extent=None):
    """``blockIdx.x`` (8) x ``threadIdx.x`` (32): ``if cond: B[i] = A[i]`` (inside a loop over j of
    extent ``body_extent`` when given)."""
    from kernels.tir.buffer import decl_buffer

    A = decl_buffer((1 << 20,), "float32", "A")
    B = decl_buffer((1 << 20,), "float32", "B")
    bx, tx, j = Var("bx", "int32"), Var("tx", "int32"), Var("j", "int32")
    i = bx * 32 + tx
    store = BufferStore(B, BufferLoad(A, (i,)), (i,))
    c = cond(bx, tx, j, A)
    stmt = IfThenElse(c, store)
    if body_extent is not None:
        stmt = For(j, const(0, "int32"), body_extent, ForKind.SERIAL, stmt)
    stmt = AttrStmt(ThreadIndex(tx, "threadIdx.x"), attr.THREAD_EXTENT, const(32, "int32"), stmt)
    return AttrStmt(ThreadIndex(bx, "blockIdx.x"), attr.THREAD_EXTENT, const(8, "int32"), stmt)


def _likely_lt(a, b):
    return likely(LT(a, b))


def test_checks_that_are_not_about_the_block_stay():
    n = Var("n", "int32")
    m = Var("m", "int32")
    kept = [
        # a value loaded from memory
        _kernel(lambda bx, tx, j, A: _likely_lt(bx * 32 + tx, Cast("int32", BufferLoad(A, (tx,))))),
        # a loop of symbolic extent
        _kernel(lambda bx, tx, j, A: _likely_lt(bx * 32 + tx + j, n), body_extent=m),
        # a check no block passes: tx + 40 < 41 fails for tx = 31 in every block
        _kernel(lambda bx, tx, j, A: _likely_lt(tx + 40, const(41, "int32"))),
    ]
    for k in kept:
        assert partition_blocks(k) is k
    # a size argument and a constant loop: the block condition names only bx and n
    got = partition_blocks(_kernel(lambda bx, tx, j, A: _likely_lt(bx * 32 + tx + j, n), body_extent=const(4, "int32")))
    branch = collect(got, lambda x: isinstance(x, IfThenElse) and x.else_case is not None)[0]
    names = {v.name for v in collect(branch.condition, lambda x: isinstance(x, Var))}
    assert names == {"bx", "n"}
    # bx = 2, n = 100: 64 + 31 + 3 = 98 < 100 holds; n = 98 it does not
    bx = next(v for v in collect(branch.condition, lambda x: isinstance(x, Var)) if v.name == "bx")
    for size, want in ((100, 1), (98, 0)):
        val = simplify(substitute(branch.condition, {bx: const(2, "int32"), n: const(size, "int32")}))
        assert val.value == want


@needs_nvcc
def test_cuda_declares_each_shared_array_once_and_compiles(tmp_path):
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", {"n": 4000, "m": 3000, "k": 1000}, "float32",
                      dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8, reg_cache=1))
    f = tvm.build(s, args, "cuda")
    src = f.imported_modules[0].get_source()
    # two launches, each declaring A_shared and B_shared once
    assert src.count("__global__") == 2 and src.count("__shared__") == 4
    # interior: block rows y with 128 y + 127 < 4000 (31) and columns x with 128 x + 127 < 3000 (23);
    # the edge: the 32 blocks of column 23, then the 23 blocks of row 31
    grids = [k.grid.dims for k in f.spec.kernels]
    assert grids == [(23, 31, 1), (55, 1, 1)]
    assert "int blockIdx_x = " in src and "int blockIdx_y = " in src
    nvcc.compile_cuda(src, target="ptx", arch="sm_90", path_target=str(tmp_path / "k.ptx"))


def test_the_edge_launch_may_run_beside_the_interior_one(tmp_path):
    """The edge launch holds the rest of the interior launch's grid: it is marked concurrent (the
    runtime runs the two on two streams at once), the interior one is not, and the mark survives
    export and load; a description written before the mark existed reads as not concurrent."""
    from kernels.runtime.serialize import spec_from_json, spec_to_json

    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", {"n": 300, "m": 200, "k": 104}, "float32",
                      dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8, reg_cache=1))
    (_, interior), (_, edge) = _launches(_target_body(s, args))
    marks = lambda b: collect(b, lambda n: isinstance(n, AttrStmt) and n.attr_key == attr.CONCURRENT_LAUNCH)  # noqa: E731
    assert len(marks(edge)) == 1 and not marks(interior)
    f = tvm.build(s, args, "cuda")
    assert [k.concurrent for k in f.spec.kernels] == [False, True]
    data = spec_to_json(f.spec)
    assert [k.concurrent for k in spec_from_json(data).kernels] == [False, True]
    for k in data["kernels"]:
        del k["concurrent"]
    assert [k.concurrent for k in spec_from_json(data).kernels] == [False, False]
    data["kernels"][1]["concurrent"] = "yes"
    with pytest.raises(tvm.TVMError, match="concurrent must be true or false"):
        spec_from_json(data)
    # a kernel split behind a block condition (one launch) and an unsplit one are never concurrent
    s, args = w.build("shared_blocked", {"n": 256, "m": 256, "k": 64}, "float32",
                      dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8))
    assert [k.concurrent for k in tvm.build(s, args, "cuda").spec.kernels] == [False]


def test_concurrent_launches_pair_with_the_one_before():
    from kernels.runtime.cuda import _pairs

    a, b, c, d = (("a", False), ("b", True), ("c", False), ("d", True))
    assert _pairs([a, b, c, d]) == [[a, b], [c, d]]
    assert _pairs([a, None, b]) == [[a, b]]  # an empty launch between them is skipped
    assert _pairs([None, b, c]) == [[b], [c]]  # the interior launch empty: the edge runs alone
    assert _pairs([a, c, b, d]) == [[a], [c, b], [d]]  # never three at once


def _run(f, host, target="opencl"):
    dev = tvm.opencl(0) if target == "opencl" else tvm.cpu(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    f(*nd)
    return [x.numpy() for x in nd]


@needs_opencl
@pytest.mark.parametrize("shape", [(300, 200, 104), (257, 129, 40), (129, 257, 100), (100, 60, 24)])
@pytest.mark.parametrize("knobs", [dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8, reg_cache=1),
                                   dict(local_y=4, local_x=4, block_y=8, block_x=8, tile_k=8, double_buffer=1),
                                   dict(local_y=4, local_x=2, block_y=8, block_x=8, tile_k=4, vthread=2)])
def test_ragged_matmul_on_opencl_matches_numpy(shape, knobs):
    n, m, k = shape
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", {"n": n, "m": m, "k": k}, "float32", knobs)
    f = tvm.build(s, args, "opencl")
    rng = np.random.default_rng(n + m + k)
    a, b = rng.uniform(-1, 1, (n, k)).astype(np.float32), rng.uniform(-1, 1, (k, m)).astype(np.float32)
    got = _run(f, [a, b, np.full((n, m), np.nan, np.float32)])[2]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@needs_opencl
def test_symbolic_size_picks_the_copy_at_run_time():
    n = te.var("n")
    s, args = _add_one(n, 32)
    f = tvm.build(s, args, "opencl")
    assert "} else {" in f.imported_modules[0].get_source()
    for size in (1, 31, 32, 127, 128, 129, 1000, 1024):
        a = np.arange(size, dtype=np.float32)
        got = _run(f, [a, np.full(size, np.nan, np.float32)])[1]
        np.testing.assert_allclose(got, a.astype(np.float64) + 1.0, rtol=1e-6, atol=0)


@T.prim_func
def _tir_add(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (1000,), "float32")
    B = T.match_buffer(b, (1000,), "float32")
    for i in T.serial(1000):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * 2.0


@needs_opencl
def test_tensor_ir_split_with_a_predicate_is_partitioned_and_correct():
    sch = tvm.tir.Schedule(_tir_add)
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx, inner = sch.split(i, [None, 64, 4])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    f = tvm.build(sch.mod, target="opencl")
    src = f.imported_modules[0].get_source()
    assert src.count("__kernel") == 2  # the checked copy for the last block, as a launch of its own
    a = np.random.default_rng(0).random(1000, dtype=np.float32)
    got = _run(f, [a, np.full(1000, np.nan, np.float32)])[1]
    np.testing.assert_array_equal(got, a.astype(np.float64) * 2.0)


def test_opencl_keeps_kernels_with_barriers_whole():
    # PoCL miscompiles some barriers inside a branch all work-items take (a serial fill loop of a
    # shared stage, then a barrier: tests/cpu/test_attach_bounds.py); CUDA allows them there
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", {"n": 300, "m": 200, "k": 104}, "float32",
                      dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8))
    split = lambda body: (len(_launches(body)) > 1 or  # noqa: E731
                          collect(body, lambda n: isinstance(n, IfThenElse) and n.else_case is not None))
    assert split(_target_body(s, args, "cuda"))
    assert not split(_target_body(s, args, "opencl"))
    # without shared memory OpenCL kernels are split too
    s, args = _add_one(1000, 64)
    assert split(_target_body(s, args, "opencl"))


@pytest.mark.parametrize("wname, variant, params, dtype, knobs", [
    ("matmul", "shared_blocked", {"n": 300, "m": 200, "k": 104}, "float32",
     dict(local_y=8, local_x=4, block_y=16, block_x=16, tile_k=16, double_buffer=1)),
    ("matmul_tensorcore", "warp_tile", dict(n=549, m=317, l=78, layout="NN"), "int8",
     dict(bx=4, by=32, step_k=1, v=16, ty=2, tx=2, warp_m=64, double_buffer=1, flat_fetch=0, align_all=0, raster=0)),
])
def test_pipelined_kernels_are_left_whole(wname, variant, params, dtype, knobs):
    # the int8 case gave wrong results on an H200 once split (block_partition's docstring)
    s, args = workloads.get(wname).build(variant, params, dtype, knobs)
    body = _target_body(s, args, "cuda")
    assert not collect(body, lambda n: isinstance(n, IfThenElse) and n.else_case is not None
                       and _likely(n.then_case) < _likely(n.else_case))
    assert _likely(body) > 0


# -- the proof itself, on random checks ------------------------------------------------------------

def _random_check(rng):
    """A random check ``lhs OP rhs`` over a block index, two thread/loop variables of small constant
    ranges and a size argument, with floordiv/floormod terms as split and fuse write them."""
    from kernels.tir.expr import GE, GT, LE, FloorDiv, FloorMod

    bx, t, u, n = Var("bx", "int32"), Var("t", "int32"), Var("u", "int32"), Var("n", "int32")
    ranges = {t: (0, int(rng.integers(0, 8))), u: (int(rng.integers(0, 4)), int(rng.integers(4, 10)))}
    c = lambda: const(int(rng.integers(-3, 7)), "int32")  # noqa: E731
    d = lambda: const(int(rng.integers(1, 6)), "int32")  # noqa: E731
    terms = [bx * const(int(rng.integers(1, 17)), "int32"), t * c(), u * c(),
             FloorDiv(t * c() + u, d()), FloorMod(u * c() + t, d())]
    lhs = terms[0]
    for x in terms[1:]:
        if rng.random() < 0.5:
            lhs = lhs + x
    rhs = n if rng.random() < 0.5 else const(int(rng.integers(0, 61)), "int32")
    op = [LT, LE, GT, GE][int(rng.integers(4))]
    cond = op(lhs, rhs) if op in (LT, LE) else op(rhs, lhs)
    return cond, bx, n, ranges


def test_block_condition_implies_the_check_for_every_thread():
    """Soundness on 150 random checks: wherever the block condition holds, the check holds for every
    value of the variables it was lifted over (enumerated), at every block index and size tried; and
    the proof is not vacuous (many checks are lifted, and hold for some blocks)."""
    import itertools

    from kernels.lower.block_partition import _Prover

    rng = np.random.default_rng(2026)
    lifted = used = 0
    for _ in range(150):
        cond, bx, n, ranges = _random_check(rng)
        got = _Prover(ranges, {bx}, set(ranges)).block_condition(cond)
        if got is None:
            continue  # refused: the check stays, nothing to prove
        lifted += 1
        names = list(ranges)
        for b in range(0, 8):
            for size in (7, 41, 60):
                outer = {bx: const(b, "int32"), n: const(size, "int32")}
                if not all(simplify(substitute(g, outer)).value for g in got):
                    continue
                used += 1
                for vals in itertools.product(*[range(lo, hi + 1) for lo, hi in ranges.values()]):
                    inner = {v: const(x, "int32") for v, x in zip(names, vals)}
                    assert simplify(substitute(cond, {**outer, **inner})).value, (cond, got, b, size, vals)
    assert lifted >= 100 and used >= 500, (lifted, used)


def test_simplify_keeps_a_launchs_thread_range_inside_it():
    # the interior launch binds blockIdx.x to [0, 1); the edge launch that follows names a variable of
    # the same identity in a let (bx = e + 3): its check bx < 4 must not be "proven" from the first
    from kernels.lower.simplify import simplify_stmt
    from kernels.tir.buffer import decl_buffer
    from kernels.tir.stmt import seq

    B = decl_buffer((8,), "float32", "B")
    bx, e = Var("bx", "int32"), Var("e", "int32")
    store = BufferStore(B, const(1.0, "float32"), (bx,))
    first = AttrStmt(ThreadIndex(bx, "blockIdx.x"), attr.THREAD_EXTENT, const(1, "int32"),
                     IfThenElse(LT(bx, const(4, "int32")), store))
    second = AttrStmt(ThreadIndex(e, "blockIdx.x"), attr.THREAD_EXTENT, const(2, "int32"),
                      LetStmt(bx, e + const(3, "int32"), IfThenElse(LT(bx, const(4, "int32")), store)))
    got = simplify_stmt(seq(first, second))
    ifs = collect(got, lambda n: isinstance(n, IfThenElse))
    assert len(ifs) == 1  # the first launch's check is proven (bx = 0); the second's stays
    assert collect(got.seq[1], lambda n: isinstance(n, IfThenElse))


def test_no_barrier_is_planned_between_the_two_launches():
    # fuzz --target cuda --lower-only --seed 31: shared tiles written by the interior launch and read
    # by the edge launch made storage_sync put a barrier between them, on the host ("a loop nest ...
    # is not bound to any GPU thread"); each launch is its own scope for barriers
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", {"n": 475, "m": 393, "k": 1}, "float32",
                      dict(local_y=8, local_x=8, block_y=2, block_x=16, tile_k=4, vector=1, reg_cache=1))
    f = tvm.build(s, args, "cuda")
    assert [k.grid.dims for k in f.spec.kernels] == [(3, 29, 1), (33, 1, 1)]
    src = f.imported_modules[0].get_source()
    assert src.count("__syncthreads()") % 2 == 0  # the same barriers in each launch


def test_tensor_core_kernels_keep_one_launch():
    w = workloads.get("matmul_tensorcore")
    knobs = dict(bx=8, by=16, step_k=4, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1)
    s, args = w.build("warp_tile", {"n": 600, "m": 600, "l": 256, "layout": "NN"}, "float16", knobs)
    body = _target_body(s, args)
    assert len(_launches(body)) == 1
    assert collect(body, lambda n: isinstance(n, IfThenElse) and n.else_case is not None)


def test_a_block_index_bound_again_inside_keeps_one_launch():
    # blockIdx.x of extent 8 bound twice by the launch: a launch over a smaller box would still carry
    # the other binding's extent, so the kernel keeps its two copies behind the block condition
    k = _kernel(lambda bx, tx, j, A: _likely_lt(bx * 32 + tx + j, const(200, "int32")), body_extent=const(4, "int32"))
    bx = k.node.var
    inner = AttrStmt(ThreadIndex(bx, "blockIdx.x"), attr.THREAD_EXTENT, const(8, "int32"), k.body.body)
    twice = AttrStmt(k.node, attr.THREAD_EXTENT, k.value, AttrStmt(k.body.node, attr.THREAD_EXTENT, k.body.value, inner))
    got = partition_blocks(twice)
    assert len(_launches(got)) == 1
    assert collect(got, lambda n: isinstance(n, IfThenElse) and n.else_case is not None)
    # the same kernel without the second binding: two launches, the box 6 blocks (32 b + 31 + 3 < 200)
    (grid0, _), (grid1, _) = _launches(partition_blocks(_kernel(
        lambda bx, tx, j, A: _likely_lt(bx * 32 + tx + j, const(200, "int32")), body_extent=const(4, "int32"))))
    assert grid0 == {"blockIdx.x": 6} and grid1 == {"blockIdx.x": 2}


def _guarded_stores(stmt, name):
    """The stores into the buffer ``name`` that sit inside an ``if`` (at any depth below it)."""
    out = []
    for node in collect(stmt, lambda n: isinstance(n, IfThenElse)):
        out += [s for s in collect(node.then_case, lambda n: isinstance(n, BufferStore)) if s.buffer.name == name]
    return out


def test_register_tiles_compute_their_padding_instead_of_testing_it():
    """In the edge copy of a ragged product, the register stages (C.local and the operand slices,
    which read only shared and local memory inside their realized regions) compute the positions of
    their tile past the shape instead of testing each (ScheduleLowering.computes_padding); the
    stages that touch global memory keep their tests, and so does a ragged reduction axis."""
    w = workloads.get("matmul")
    knobs = dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8, reg_cache=1)
    s, args = w.build("shared_blocked", {"n": 300, "m": 200, "k": 104}, "float32", knobs)
    (_, interior), (_, edge) = _launches(_target_body(s, args))
    for name in ("C.local", "A.shared.local", "B.shared.local"):
        assert collect(edge, lambda n: isinstance(n, BufferStore) and n.buffer.name == name)
        assert not _guarded_stores(edge, name), name
    assert _guarded_stores(edge, "C") and _guarded_stores(edge, "A.shared")  # global memory: tested
    # k = 100 in tiles of 8: the reduction's test stays around the multiply-add of the last tile
    s, args = w.build("shared_blocked", {"n": 300, "m": 200, "k": 100}, "float32", knobs)
    body = _target_body(s, args)
    assert _guarded_stores(body, "C.local")
    tests = [str(i.condition) for i in collect(body, lambda n: isinstance(n, IfThenElse))
             if any(st.buffer.name == "C.local" for st in collect(i.then_case, lambda n: isinstance(n, BufferStore)))]
    # the unrolled steps 4-7 of the last tile (8 * 12 + 3 < 100 always holds), on the reduction only
    assert sorted(tests) == [f"@tir.likely((((r.outer * 8) + {j}) < 100), dtype=bool)" for j in range(4, 8)]


def test_pipelined_and_tensor_core_schedules_keep_their_register_tests():
    """A schedule with double-buffered stages or the tensor_core pragma keeps every test (an int8
    warp tile with double buffering went wrong on an H200 without them)."""
    s, args = workloads.get("matmul").build("shared_blocked", {"n": 300, "m": 200, "k": 104}, "float32",
                                            dict(local_y=4, local_x=4, block_y=8, block_x=8, tile_k=8, double_buffer=1))
    assert _guarded_stores(_target_body(s, args), "C.local")
    knobs = dict(bx=4, by=32, step_k=1, v=16, ty=2, tx=2, warp_m=64, double_buffer=0)
    s, args = workloads.get("matmul_tensorcore").build("warp_tile", dict(n=549, m=317, l=78, layout="NN"), "int8", knobs)
    body = _target_body(s, args)
    assert _guarded_stores(body, "A.shared.local") and _guarded_stores(body, "B.shared.local")


def test_a_register_stage_reading_global_memory_keeps_its_tests():
    """A local stage that loads straight from global memory (no shared stage between) would read
    past the operand: its tests stay."""
    n = 100
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AL = s.cache_read(A, "local", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AL].compute_at(s[B], tx)
    body = run_passes(schedule_to_primfunc(s, [A, B], "main")).body
    assert _guarded_stores(body, "A.local")
    if opencl_available():
        f = tvm.build(s, [A, B], "opencl")
        a = np.random.default_rng(3).uniform(-1, 1, (n, n)).astype(np.float32)
        got = _run(f, [a, np.full((n, n), np.nan, np.float32)])[1]
        np.testing.assert_array_equal(got, a.astype(np.float64) * 2.0)
