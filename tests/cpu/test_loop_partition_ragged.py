"""Loop partitioning at the point where a loop's bound checks start to fail
(kernels.lower.loop_partition): a ragged reduction loop runs its full tiles without checks and its
last iteration with them. Checked four ways: the proof itself on random checks against enumeration;
the split point never naming a thread index, and pipelined CUDA kernels left whole; ragged matrix
products, row sums and a TensorIR split reduction built for c and for OpenCL (PoCL), run and
compared with numpy in float64; and the CUDA source of the 3000 x 2000 x 1500 product, whose
interior reduction loop holds no ``if`` any more (compiled to PTX by nvcc where it is installed)."""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np
import pytest
from kbtest import opencl_available, row_sum

import kernels as tvm
from kernels import te, workloads
from kernels.build_module import build_spec
from kernels.contrib import nvcc
from kernels.lower import LOOP_PARTITION, TARGET_PASSES, lower
from kernels.lower.loop_partition import _Context, _split_point, partition_loops
from kernels.script import tir as T
from kernels.tir import attr, call_intrin, likely
from kernels.tir import expr as E
from kernels.tir.buffer import decl_buffer
from kernels.tir.expr import GE, GT, LE, LT, BufferLoad, FloorDiv, FloorMod, Var, const
from kernels.tir.functor import collect
from kernels.tir.printer import stmt_str
from kernels.tir.stmt import AttrStmt, BufferStore, Evaluate, For, ForKind, IfThenElse, ThreadIndex, seq

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")


def _target_func(sch, args, target, partition=True):
    """The function after the target passes (the loop partitioning left out with ``partition=False``)."""
    func = lower(sch, args)["main"]
    for p in TARGET_PASSES:
        if p is not LOOP_PARTITION or partition:
            func = p(func, target)
    return func


def _loops(func) -> int:
    return len(collect(func.body, lambda n: isinstance(n, For)))


def _assert_split(sch, args, target):
    """The pass changed something: more loops than without it (a main loop and its tail)."""
    assert _loops(_target_func(sch, args, target)) > _loops(_target_func(sch, args, target, False))


def _run(f, host, target):
    dev = tvm.opencl(0) if target == "opencl" else tvm.cpu(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    f(*nd)
    return [x.numpy() for x in nd]


def _check_matmul(s, args, n, m, k, target):
    f = tvm.build(s, args, target)
    rng = np.random.default_rng(n * 7 + m * 3 + k)
    a, b = rng.uniform(-1, 1, (n, k)).astype(np.float32), rng.uniform(-1, 1, (k, m)).astype(np.float32)
    got = _run(f, [a, b, np.full((n, m), np.nan, np.float32)], target)[2]
    rtol, atol = workloads.get("matmul").tolerance_for("float32", {"n": n, "m": m, "k": k})
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=rtol, atol=atol)


def _cpu_matmul(n, m, k, tile_k, tile=32):
    """A CPU matmul: output tiles of ``tile`` x ``tile``, the reduction split by ``tile_k`` (all three
    ragged, so every loop of the nest holds a bound check)."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], tile, tile)
    ko, ki = s[C].split(r, factor=tile_k)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    return s, [A, B, C]


# -- the generated code ----------------------------------------------------------------------------

_RAGGED = dict(local_y=8, local_x=4, block_y=16, block_x=16, tile_k=16, double_buffer=0)


@functools.lru_cache(maxsize=1)
def _ragged_cuda_source() -> str:
    s, args = workloads.get("matmul").build("shared_blocked", {"n": 3000, "m": 2000, "k": 1500},
                                            "float32", _RAGGED)
    return build_spec(s, args, "cuda").source


def _block(src: str, start: int) -> str:
    """The text between the brace that opens at or after ``start`` and the one that closes it."""
    i = src.index("{", start)
    depth = 0
    for j in range(i, len(src)):
        depth += {"{": 1, "}": -1}.get(src[j], 0)
        if depth == 0:
            return src[i + 1:j]
    raise AssertionError("unbalanced braces")


def test_interior_reduction_loop_of_a_ragged_matmul_has_no_checks():
    # k = 1500 = 93 * 16 + 12: the interior thread blocks' reduction loop runs 93 full tiles without
    # a check (fetches vectorized, no scalar fallback), then its last iteration keeps them
    src = _ragged_cuda_source()
    interior = _block(src, src.index("__global__"))  # the first kernel: the interior blocks' launch
    head = re.search(r"for \(int r_outer = 0; r_outer < (\d+); \+\+r_outer\)", interior)
    assert head and int(head.group(1)) == 93, head
    main = _block(interior, head.start())
    assert "if (" not in main and "else" not in main and "float4" in main
    assert main.count("__syncthreads()") == 2
    last = interior[head.start() + len(main):]
    assert "< 1500)" in last and "1488" in last  # r_outer = 93: rows 1488.. of B, checked
    assert not re.search(r"\br_outer\b", last)


def test_a_split_that_does_not_pay_is_not_made():
    # k = 20 in tiles of 16: the checks hold in the first iteration only (main part < 2)
    s, args = _cpu_matmul(40, 40, 20, 16)
    text = stmt_str(_target_func(s, args, "c").body)
    assert text.count("for (r.outer") == 1


@pytest.mark.parametrize("wname, variant, params, dtype, knobs", [
    ("matmul", "shared_blocked", {"n": 300, "m": 200, "k": 150}, "float32",
     dict(local_y=8, local_x=4, block_y=16, block_x=16, tile_k=16, double_buffer=1)),
    ("matmul_tensorcore", "warp_tile", dict(n=549, m=317, l=78, layout="NN"), "int8",
     dict(bx=4, by=32, step_k=1, v=16, ty=2, tx=2, warp_m=64, double_buffer=1, flat_fetch=0, align_all=0, raster=0)),
])
def test_pipelined_cuda_kernels_are_left_whole(wname, variant, params, dtype, knobs):
    # the ptxas fault of kernels.lower.block_partition's docstring: no loop of such a kernel is split
    s, args = workloads.get(wname).build(variant, params, dtype, knobs)
    assert stmt_str(_target_func(s, args, "cuda").body) == stmt_str(_target_func(s, args, "cuda", False).body)


def _barrier_kernel(thread_extent):
    """``for v in [0, ceildiv(n, 32)): barrier; if (v * 32 + tx < n) B[v * 32 + tx] = A[...]`` under
    4 blocks of ``thread_extent`` threads: the check's split point depends on the thread index
    unless its range is known."""
    n = Var("n", "int32")
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((n,), "float32", "B")
    bx, tx, v = Var("bx", "int32"), Var("tx", "int32"), Var("v", "int32")
    i = v * 32 + tx
    body = seq(Evaluate(call_intrin("int32", "tir.tvm_storage_sync", E.StringImm("shared"))),
               IfThenElse(likely(LT(i, n)), BufferStore(B, BufferLoad(A, (i,)), (i,))))
    stmt = For(v, const(0, "int32"), FloorDiv(n + 31, const(32, "int32")), ForKind.SERIAL, body)
    stmt = AttrStmt(ThreadIndex(tx, "threadIdx.x"), attr.THREAD_EXTENT, thread_extent, stmt)
    return AttrStmt(ThreadIndex(bx, "blockIdx.x"), attr.THREAD_EXTENT, const(4, "int32"), stmt)


def test_split_point_never_names_a_thread_index():
    # a known thread range: the split is uniform over the block (the largest tx is taken)
    kernel = _barrier_kernel(const(32, "int32"))
    out = partition_loops(kernel, "cuda")
    loops = collect(out, lambda n: isinstance(n, For))
    assert len(loops) == 2
    for f in loops:
        assert not any(x.name == "tx" for x in collect(f.extent, lambda n: isinstance(n, Var)))
    assert "likely" not in stmt_str(loops[0].body) and "likely" in stmt_str(loops[1].body)
    # an unknown one (symbolic extent): the split point would differ between threads; no split
    kernel = _barrier_kernel(Var("m", "int32"))
    assert len(collect(partition_loops(kernel, "cuda"), lambda n: isinstance(n, For))) == 1


# -- the proof, on random checks -------------------------------------------------------------------


def _value(e, env):
    """An integer expression's value (an evaluator of the test's own, floor division as the IR's)."""
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, E.Call):
        return _value(e.args[0], env)  # likely
    a, b = _value(e.a, env), _value(e.b, env)
    ops = {E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b, E.FloorDiv: lambda: a // b,
           E.FloorMod: lambda: a % b, E.Min: lambda: min(a, b), E.Max: lambda: max(a, b),
           LT: lambda: a < b, LE: lambda: a <= b, GT: lambda: a > b, GE: lambda: a >= b,
           E.And: lambda: a and b}
    return ops[type(e)]()


def _random_clause(rng, v, u, t, bx, n):
    """A random check over the loop variable ``v``, an inner loop ``u``, a thread index ``t``, a
    block index ``bx`` and a size ``n``, with floordiv/floormod terms as split and fuse write them
    (and now and then one not linear in ``v``, or one only an enclosing condition proves)."""
    c = lambda lo, hi: const(int(rng.integers(lo, hi)), "int32")  # noqa: E731
    if rng.random() < 0.2:  # holds where bx * 16 + 15 < n, the enclosing condition, when u, t < 8
        return LT(bx * 16 + FloorMod(u * c(1, 3) + t, const(8, "int32")) + c(0, 11), n)
    terms = [v * (c(1, 6) if rng.random() < 0.8 else c(-2, 1)), u * c(-3, 5), t * c(-3, 5),
             FloorDiv(t * c(-3, 7) + u, c(1, 6)), FloorMod(u * c(-3, 7) + t, c(1, 6)),
             bx * c(1, 17), FloorDiv(v + u, c(2, 4))]
    lhs = terms[0]
    for x, p in zip(terms[1:], (0.5, 0.5, 0.4, 0.4, 0.25, 0.1)):
        if rng.random() < p:
            lhs = lhs + x
    rhs = n if rng.random() < 0.4 else c(0, 90)
    op = [LT, LE, GT, GE][int(rng.integers(4))]
    return op(lhs, rhs) if op in (LT, LE) else op(rhs, lhs)


def _pure_clause(rng, u, t):
    """A check over the thread index and the inner loop alone (as a fetch's thread guard is)."""
    c = lambda lo, hi: const(int(rng.integers(lo, hi)), "int32")  # noqa: E731
    lhs = [t * c(1, 4) + FloorDiv(u, const(2, "int32")), FloorDiv(t * 4 + u, c(2, 9)), t][int(rng.integers(3))]
    return LT(lhs, c(1, 12))


def test_proven_checks_hold_before_the_split_point():
    """Soundness on 40 random loops of 4 ``if``s of 1 to 3 checks each (some of them thread guards
    that the other checks of their ``if`` may assume): wherever an ``if``'s checks that stay in the
    main part hold, the ones the pass takes out hold too, at the first and last iterations before
    the split point, for every thread and inner iteration (enumerated), at every block index and
    size tried where the enclosing condition holds; and the proof is not vacuous."""
    rng = np.random.default_rng(2027)
    v, u, t, bx, n = (Var(x, "int32") for x in ("v", "u", "t", "bx", "n"))
    B = decl_buffer((64,), "float32", "B")
    known = bx * 16 + 15 - n  # an enclosing if: bx * 16 + 15 < n
    proven_total = checked = 0
    for _ in range(40):
        ulo, uext, text = int(rng.integers(0, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 9))
        conds = []
        for _ in range(4):
            cl = [_random_clause(rng, v, u, t, bx, n) for _ in range(int(rng.integers(1, 3)))]
            conds.append(cl + [_pure_clause(rng, u, t)] if rng.random() < 0.4 else cl)
        inner = seq(*[IfThenElse(likely(E.And(cl[0], cl[1]) if len(cl) > 1 else cl[0]) if len(cl) < 3 else
                                 likely(E.And(E.And(cl[0], cl[1]), cl[2])),
                                 BufferStore(B, const(1.0, "float32"), (const(k, "int32"),)))
                      for k, cl in enumerate(conds)])
        extent = const(int(rng.integers(3, 40)), "int32") if rng.random() < 0.6 else n
        loop = For(v, const(0, "int32"), extent, ForKind.SERIAL,
                   For(u, const(ulo, "int32"), const(uext, "int32"), ForKind.SERIAL, inner))
        got = _split_point(loop, _Context(known=(known,), threads=((t, 0, text - 1),)), {bx, n})
        if got is None:
            continue
        split, proven = got
        taken = [[c for c in cl if id(c) in proven] for cl in conds]
        kept = [[c for c in cl if id(c) not in proven] for cl in conds]
        proven_total += sum(map(len, taken))
        for b, size in itertools.product(range(5), (48, 90)):  # 48: tight at bx = 2
            outer = {bx: b, n: size}
            if not _value(known, outer) < 0:
                continue
            stop = min(_value(split, outer), _value(extent, outer))
            # the first iterations and the last ones before the split (the checks are linear in v)
            first_last = sorted(set(range(min(3, stop))) | set(range(max(0, stop - 4), stop)))
            for iv, uv, tv in itertools.product(first_last, range(ulo, ulo + uext), range(text)):
                env = {**outer, v: iv, u: uv, t: tv}
                for out, stay in zip(taken, kept):
                    if out and all(_value(c, env) for c in stay):
                        checked += 1
                        assert all(_value(c, env) for c in out), (out, stay, split, env)
    assert proven_total >= 50 and checked >= 3000, (proven_total, checked)


# -- run against numpy -----------------------------------------------------------------------------


@pytest.mark.parametrize("n, m, k, tile_k", [(300, 200, 150, 16), (300, 200, 150, 8), (61, 47, 37, 8),
                                             (61, 47, 37, 16)])
def test_ragged_matmul_on_c_matches_numpy(n, m, k, tile_k):
    s, args = _cpu_matmul(n, m, k, tile_k)
    _assert_split(s, args, "c")
    _check_matmul(s, args, n, m, k, "c")


@needs_opencl
@pytest.mark.parametrize("variant, shape, tile_k, local", [("shared_blocked", (300, 200, 150), 16, 2),
                                                           ("shared_blocked", (61, 47, 37), 8, 4),
                                                           ("local_blocked", (300, 200, 150), 8, 4),
                                                           ("local_blocked", (61, 47, 37), 16, 4)])
def test_ragged_gpu_matmul_on_opencl_matches_numpy(variant, shape, tile_k, local):
    n, m, k = shape
    knobs = dict(local_y=local, local_x=local, block_y=8, block_x=8, tile_k=tile_k)
    if variant == "shared_blocked":
        knobs["double_buffer"] = 0
    s, args = workloads.get("matmul").build(variant, {"n": n, "m": m, "k": k}, "float32", knobs)
    _assert_split(s, args, "opencl")
    _check_matmul(s, args, n, m, k, "opencl")


@pytest.mark.parametrize("variant, target", [("split", "c"),
                                             pytest.param("bind", "opencl", marks=needs_opencl)])
def test_ragged_row_sum_matches_numpy(variant, target):
    # symbolic n and m: the split point is computed at run time; one build serves every size
    s, args = row_sum(variant)
    _assert_split(s, args, target)
    f = tvm.build(s, args, target)
    for n, m in ((37, 45), (3, 200), (64, 16), (70, 15), (1, 1)):
        a = np.random.default_rng(n * m).uniform(-1, 1, (n, m)).astype(np.float32)
        got = _run(f, [a, np.full(n, np.nan, np.float32)], target)[1]
        np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_a_split_point_known_below_the_tile_count_is_not_clamped_by_min():
    # the row loop runs over ceildiv(n, 32) tiles and its checks hold before n // 32: the main part
    # runs n >> 5 times, not min((n + 31) >> 5, n >> 5) (the tail then runs the difference)
    s, args = row_sum("split")
    func = _target_func(s, args, "c")
    extents = [f.extent for f in collect(func.body, lambda n: isinstance(n, For))]
    assert not any(collect(e, lambda n: isinstance(n, E.Min)) for e in extents), \
        [stmt_str(e) for e in extents]
    assert any(isinstance(e, FloorDiv) and isinstance(e.a, Var) for e in extents)


@T.prim_func
def _tir_row_sum(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (37, 150), "float32")
    B = T.match_buffer(b, (37,), "float32")
    for i, k in T.grid(37, 150):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=needs_opencl)])
def test_tensor_ir_ragged_split_reduction_matches_numpy(target):
    sch = tvm.tir.Schedule(_tir_row_sum)
    i, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, 16])  # 150 = 9 * 16 + 6: the reduction's last tile is partial
    if target == "opencl":
        io, ii = sch.split(i, [None, 8])
        sch.bind(io, "blockIdx.x")
        sch.bind(ii, "threadIdx.x")
    else:
        sch.unroll(k1)
    f = tvm.build(sch.mod, target=target)
    src = f.imported_modules[0].get_source() if target == "opencl" else f.get_source()
    assert re.search(r"k_0 < 9;", src) and "< 150" not in src  # 9 full tiles, then the 6 left
    a = np.random.default_rng(3).uniform(-1, 1, (37, 150)).astype(np.float32)
    got = _run(f, [a, np.full(37, np.nan, np.float32)], target)[1]
    np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


@needs_nvcc
def test_partitioned_cuda_source_compiles(tmp_path):
    # a smaller product than the one above (nvcc takes 3 s on that one), partitioned the same way
    s, args = workloads.get("matmul").build("shared_blocked", {"n": 300, "m": 200, "k": 150}, "float32",
                                            dict(local_y=4, local_x=4, block_y=8, block_x=8, tile_k=8))
    src = build_spec(s, args, "cuda").source
    assert re.search(r"for \(int r_outer = 0; r_outer < 18; \+\+r_outer\)", src)  # 150 = 18 * 8 + 6
    nvcc.compile_cuda(src, target="ptx", arch="sm_90", path_target=str(tmp_path / "k.ptx"))
