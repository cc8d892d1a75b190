"""Loop and memory features of lowered candidates (kernels.tuning.features): values derived by hand
for small schedules, the fixed-length vectors, caching, failures, and the tuners that learn on them."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from kernels import autotvm, te
from kernels.lower import PASSES, TARGET_PASSES
from kernels.tuning import features as F
from kernels.tuning.tir_task import TIRTask
from kernels.workloads import tensorir as notes


def log2p(x):
    return math.log2(1 + x)


def shared_matmul(n=64, rows=8, cols=16, kstep=16):
    """C = A @ B (n x n): a block computes rows x cols outputs, one per thread (threadIdx.y x
    threadIdx.x); k split by kstep; A's rows x kstep tile and B's kstep x cols tile are fetched into
    shared memory at k.outer by all the block's threads."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    i, j = C.op.axis
    bi, ti = s[C].split(i, factor=rows)
    bj, tj = s[C].split(j, factor=cols)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=kstep)
    s[C].reorder(bi, bj, ti, tj, ko, ki)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(ti, te.thread_axis("threadIdx.y"))
    s[C].bind(tj, te.thread_axis("threadIdx.x"))
    for T in (AA, BB):
        s[T].compute_at(s[C], ko)
        fused = s[T].fuse(*s[T].op.axis)
        rest, tx = s[T].split(fused, factor=cols)
        _, ty = s[T].split(rest, factor=rows)
        s[T].bind(ty, te.thread_axis("threadIdx.y"))
        s[T].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


@pytest.fixture(scope="module")
def matmul_features():
    s, args = shared_matmul()
    func, vthreads = F.lower_for_features(s, args, "cuda")
    return F.analyze(func, vthreads)


def one(accesses, buffer, store=False, depth=None):
    got = [a for a in accesses
           if a.buffer == buffer and a.store == store and (depth is None or a.depth == depth)]
    assert len(got) == 1, got
    return got[0]


def test_launch_allocations_and_barriers_of_a_shared_memory_matmul(matmul_features):
    pf = matmul_features
    # 64 / 8 = 8 row blocks, 64 / 16 = 4 column blocks; 8 x 16 threads each
    assert dict(pf.thread_extents) == {"blockIdx.x": 4, "blockIdx.y": 8, "threadIdx.x": 16, "threadIdx.y": 8}
    assert pf.threads_per_block == 128 and pf.blocks == 32 and pf.vthreads == 1
    # A's 8 x 16 tile and B's 16 x 16 tile of float32
    assert pf.shared_bytes == (8 * 16 + 16 * 16) * 4 == 1536
    # the accumulator: each k.inner loop sums into a one-float local (C_acc), written back after it
    assert pf.local_bytes == 4 and pf.fragments == 0 and pf.mma == 0
    # a barrier before the fetches and one after, at each of the 64 / 16 = 4 k.outer steps
    assert pf.static_barriers == 2 and pf.barriers == 8
    # 2048 threads a multiprocessor / 128 = 16 blocks; 1536 shared bytes and 16 registers do not bind
    assert pf.blocks_per_sm == 16 and pf.occupancy == 1.0


def test_loop_nest_of_the_main_store(matmul_features):
    pf = matmul_features
    assert [(lp.kind, lp.extent) for lp in pf.loops] == [
        ("blockIdx.y", 8), ("blockIdx.x", 4), ("threadIdx.y", 8), ("threadIdx.x", 16), ("serial", 4),
        ("serial", 16)]
    assert [lp.category for lp in pf.loops] == ["block", "block", "thread", "thread", "serial", "serial"]
    assert pf.main_count == 4 * 16  # C += A * B: k.outer x k.inner per thread
    # one multiply and one add per step, per thread
    assert pf.arith_count("float_mul") == 64 and pf.arith_count("float_addsub") == 64
    assert pf.arith_count("float_divmod") == 0 and pf.arith_count("float_math") == 0


def test_buffer_accesses_of_the_shared_memory_matmul(matmul_features):
    acc = matmul_features.accesses
    a_sh = one(acc, "A.shared", depth=6)  # A.shared[ty * 16 + k.inner]
    assert (a_sh.scope, a_sh.count, a_sh.touch_thread, a_sh.touch_block) == ("shared", 64, 16, 128)
    assert a_sh.stride_inner == 1 and a_sh.stride_tx == 0  # a row along k; one address for a warp row
    b_sh = one(acc, "B.shared", depth=6)  # B.shared[k.inner * 16 + tx]
    assert (b_sh.count, b_sh.touch_thread, b_sh.touch_block) == (64, 16, 256)
    assert b_sh.stride_inner == 16 and b_sh.stride_tx == 1
    # the fetches: A's tile is 128 elements, one per thread per k.outer; B's is 256, two per thread
    a = one(acc, "A")
    assert (a.scope, a.count, a.touch_thread, a.touch_block) == ("global", 4, 4, 8 * 64)
    assert a.stride_inner == 16 and a.stride_tx == 1  # k.outer moves 16 columns; threads coalesce
    b = one(acc, "B")
    assert (b.count, b.touch_thread, b.touch_block) == (8, 8, 64 * 16)
    assert b.stride_inner == 8 * 64 and b.stride_tx == 1  # the second fetch round: 8 rows down
    # the accumulation: C_acc read and written 64 times; C[...] read before and written after each of
    # the 4 k.inner loops, one element a thread, 128 a block
    c_acc = one(acc, "C_acc", store=True, depth=6)
    assert (c_acc.scope, c_acc.count, c_acc.touch_thread) == ("local", 64, 1)
    c = one(acc, "C", store=True, depth=5)
    assert (c.count, c.touch_thread, c.touch_block, c.stride_inner, c.stride_tx) == (4, 1, 128, 0, 1)
    assert one(acc, "C", depth=5).count == 4
    assert c.vector_lanes == 1 and a.element_bytes == 4


def test_named_vector_entries_are_log_scaled(matmul_features):
    for kind in F.FEATURE_TYPES:
        v = F.feature_vector(matmul_features, kind)
        names = F.feature_names(kind)
        assert v.shape == (len(names),) == (F.feature_length(kind),) and len(set(names)) == len(names)
        assert v.dtype == np.float32 and np.all(np.isfinite(v))
    v = dict(zip(F.feature_names("itervar"), F.feature_vector(matmul_features, "itervar")))
    assert v["threads_per_block"] == pytest.approx(log2p(128))
    assert v["shared_bytes"] == pytest.approx(log2p(1536))
    assert v["barriers"] == pytest.approx(log2p(8))
    assert v["loop5.extent"] == pytest.approx(log2p(16)) and v["loop5.is_serial"] == 1.0
    assert v["loop3.is_thread"] == 1.0 and v["loop0.is_block"] == 1.0
    assert v["loop5.topdown"] == pytest.approx(log2p(8 * 4 * 8 * 16 * 4 * 16))
    assert v["loop4.bottomup"] == pytest.approx(log2p(4 * 16))
    assert v["loop6.extent"] == 0.0  # six levels: the seventh slot is empty
    # argument A: 4 loads of 4 distinct floats; its hottest access has k.outer stride 16
    assert v["arg0.loads"] == pytest.approx(log2p(4)) and v["arg0.bytes_thread"] == pytest.approx(log2p(16))
    assert v["arg0.stride_inner"] == pytest.approx(log2p(16))
    # C: stored 4 + 1 (the zero) times over one element (the sum runs in a local)
    assert v["arg2.stores"] == pytest.approx(log2p(5)) and v["arg2.bytes_thread"] == pytest.approx(log2p(4))
    # shared memory per block: both tiles whole (A.shared 128, B.shared 256 floats)
    assert v["shared.bytes_block"] == pytest.approx(log2p(1536))
    c = dict(zip(F.feature_names("curve"), F.feature_vector(matmul_features, "curve")))
    # innermost level (k.inner): A.shared and B.shared each touch 16 floats in 16 accesses
    assert c["curve.shared.0.bytes"] == pytest.approx(log2p(2 * 16 * 4))
    assert c["curve.shared.0.accesses"] == pytest.approx(log2p(32))


def vector_vthread_schedule():
    """B = A * 2 + 1 over 1024: 2 blocks of 512; two virtual threads of 256; 64 threads of 4
    vectorized lanes."""
    A = te.placeholder((1024,), name="A")
    B = te.compute((1024,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, r = s[B].split(B.op.axis[0], factor=512)
    vt, r = s[B].split(r, nparts=2)
    tx, v = s[B].split(r, factor=4)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(vt, te.thread_axis("vthread"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    return s, [A, B]


def test_vectorized_loops_and_virtual_threads_stay_visible():
    s, args = vector_vthread_schedule()
    pf = F.analyze(*F.lower_for_features(s, args, "cuda"))
    assert pf.vthreads == 2 and pf.threads_per_block == 64 and pf.blocks == 2
    assert [(lp.kind, lp.extent) for lp in pf.loops] == [("blockIdx.x", 2), ("threadIdx.x", 64),
                                                          ("vectorized", 4)]
    loads = [a for a in pf.accesses if a.buffer == "A"]
    assert len(loads) == 2  # one per virtual thread, 256 elements apart
    assert all((a.count, a.stride_inner, a.stride_tx, a.vector_lanes) == (4, 1, 4, 4) for a in loads)
    v = dict(zip(F.feature_names(), F.feature_vector(pf)))
    assert v["vthreads"] == pytest.approx(log2p(2)) and v["max_vector"] == pytest.approx(log2p(4))
    assert v["arg0.bytes_thread"] == pytest.approx(log2p(2 * 4 * 4))  # 8 floats a thread
    assert pf.arith_count("float_mul") == 8 and pf.arith_count("float_addsub") == 8


def test_unrolled_loops_are_kept_as_loops():
    A = te.placeholder((64, 8), name="A")
    B = te.compute((64,), lambda i: A[i, 0] + A[i, 7], name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].unroll(xi)
    pf = F.analyze(*F.lower_for_features(s, [A, B], "c"))
    assert [(lp.kind, lp.extent) for lp in pf.loops] == [("serial", 8), ("unrolled", 8)]
    assert pf.threads_per_block == 1 and pf.barriers == 0
    a = [x for x in pf.accesses if x.buffer == "A"]
    assert len(a) == 2 and all(x.stride_inner == 8 and x.count == 64 for x in a)
    v = dict(zip(F.feature_names(), F.feature_vector(pf)))
    assert v["unrolled_loops"] == 1.0 and v["max_unroll"] == pytest.approx(log2p(8))


def test_tensorir_candidates_multi_level_tiling():
    """The GPU design space of tune_tir: tile_y x tile_x outputs a thread, threads_y x threads_x
    threads (fused into threadIdx.x), both inputs staged in shared memory per tile_k step."""
    task = TIRTask(notes.matmul_module({"n": 128}), "cuda")
    index = next(i for i in range(len(task.config_space)) if task.config_space.get(i).to_values() == {
        "tile_y": [-1, 4, 4], "tile_x": [-1, 4, 2], "tile_k": [-1, 4], "vector": 1, "unroll_k": 0})
    pf = F.candidate_features(task, index)
    assert pf.threads_per_block == 16
    # a block: 16 rows x 8 columns; 128 / 16 = 8 by 128 / 8 = 16 blocks
    assert (pf.extent("blockIdx.y"), pf.extent("blockIdx.x")) == (8, 16)
    assert pf.local_bytes == 4 * 2 * 4  # C_local: the thread's 4 x 2 tile
    assert pf.shared_bytes == (16 * 4 + 4 * 8) * 4  # A's 16 x 4 and B's 4 x 8 tiles
    assert pf.barriers == 2 * (128 // 4)  # around the fetches at each of the 32 k steps
    c = one(pf.accesses, "C", store=True)
    assert (c.touch_thread, c.touch_block) == (8, 128)
    assert c.stride_tx == 2  # fused thread index: neighbours are tile_x columns apart
    assert [lp.extent for lp in pf.loops if lp.per_thread] == [32, 4, 4, 2]  # k.0, k.1, tile_y, tile_x


def test_vectors_have_one_length_and_are_deterministic():
    task = TIRTask(notes.matmul_module({"n": 64}), "cuda")
    ex = F.FeatureExtractor(task, "itervar", n_workers=1)
    rows = ex.get_many([0, 5, 40, 333])
    assert rows.shape == (4, F.feature_length("itervar")) and not ex.failures
    assert len({r.tobytes() for r in rows}) == 4  # different schedules, different vectors
    again = F.FeatureExtractor(task, "itervar", n_workers=1).get_many([333, 0])
    np.testing.assert_array_equal(again, rows[[3, 0]])
    curve = F.FeatureExtractor(task, "curve", n_workers=1).get_many([0, 5])
    assert curve.shape == (2, F.feature_length("curve"))


@autotvm.template("test/features_picky")
def features_picky(n):
    """Elementwise; the split factor 0 makes the template itself fail (a refused configuration)."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("split", [4, 0, 8, 16])
    cfg.define_knob("pad", list(range(5)))
    s[B].split(B.op.axis[0], factor=cfg["split"].val)
    return s, [A, B]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_extraction_is_logged_and_gives_zeros(caplog, workers):
    task = autotvm.task.create("test/features_picky", args=(64,), target="c")
    ex = F.FeatureExtractor(task, "itervar", n_workers=workers)
    ex.pool_min = 4
    indices = list(range(len(task.config_space)))  # 20 configurations, 5 with split 0
    with caplog.at_level(logging.INFO, logger="autotvm"):
        rows = ex.get_many(indices)
    bad = [i for i in indices if task.config_space.get(i).to_values()["split"] == 0]
    assert sorted(ex.failures) == bad and len(bad) == 5
    assert all("split" in ex.failures[i] or "factor" in ex.failures[i] for i in bad)
    assert not rows[bad].any() and all(rows[i].any() for i in indices if i not in bad)
    logged = [r.getMessage() for r in caplog.records if "extraction failed" in r.getMessage()]
    assert len(logged) == 5 and f"configuration {bad[0]}" in logged[0]
    # cached: a second request extracts nothing
    n = ex.extracted
    ex.get_many(indices[::-1])
    assert ex.extracted == n


def test_the_passes_left_out_exist():
    names = {p.name for p in PASSES} | {p.name for p in TARGET_PASSES}
    assert set(F.SKIPPED_PASSES) <= names


def test_tensor_core_fragments_when_the_pragma_fires():
    """The auto-tensor-core tutorial's template: on CUDA, warp-wide WMMA fragments replace the
    per-thread tile where the warp tile is 16 x 16; on OpenCL the pragma does nothing."""
    from kbtest import tensorcore_tutorial

    n = 256
    ns = tensorcore_tutorial()
    ns.update(N=n, L=n, M=n)
    for target in ("cuda", "opencl"):
        task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, "float16", "NN"),
                                   target=target)
        index = next(i for i in range(len(task.config_space)) if task.config_space.get(i).to_values() ==
                     {"bx": 8, "by": 16, "step_k": 1, "v": 4})
        pf = F.candidate_features(task, index)
        if target == "cuda":
            assert pf.fragments == 3  # matrix_a, matrix_b, accumulator
            assert pf.mma == n // 16  # one 16 x 16 tile a warp, one mma_sync per 16 of k
        else:
            assert pf.fragments == 0 and pf.mma == 0 and pf.local_bytes > 0


def test_xgb_tuner_feature_types():
    task = TIRTask(notes.matmul_module({"n": 64}), "cuda")
    tuner = autotvm.tuner.XGBTuner(task, plan_size=8, seed=0)
    assert tuner.feature_type == "itervar"  # autotvm's default
    x = tuner._features(7)
    knobs = 3 + 3 + 2 + 1 + 1  # tile_y, tile_x (3 factors each), tile_k (2), vector, unroll_k
    assert x.shape == (F.feature_length("itervar") + knobs,)
    assert tuner.extractor.extracted == 1
    tuner._features(7)
    assert tuner.extractor.extracted == 1  # cached per configuration index
    np.testing.assert_array_equal(x[-knobs:], tuner._knobs(7))
    knob = autotvm.tuner.XGBTuner(task, feature_type="knob")
    assert knob.extractor is None and knob._features(7).shape == (knobs,)
    curve = autotvm.tuner.XGBTuner(task, feature_type="curve", num_threads=1)
    assert curve._features(7).shape == (F.feature_length("curve") + knobs,)
    assert curve.extractor.n_workers == 1


def test_proposals_respect_the_feature_budget():
    """A proposal scores at most feature_budget configurations it has no features for."""
    task = TIRTask(notes.matmul_module({"n": 64}), "cuda")
    tuner = autotvm.tuner.XGBTuner(task, plan_size=4, seed=0, feature_budget=6, n_sa_iter=3, sa_chains=4,
                                   n_workers=1)
    tuner.extractor.get_many(range(8))
    tuner.xs, tuner.ys = list(range(8)), [float(i + 1) for i in range(8)]
    tuner._fit()
    assert tuner.model is not None
    before = tuner.extractor.extracted
    batch = tuner.next_batch(4)
    assert len(batch) == 4 and len({c.index for c in batch}) == 4
    assert tuner.extractor.extracted - before <= 6


def test_occupancy_follows_the_architecture(matmul_features):
    """128 threads a block: 2048 / 128 = 16 blocks on sm_90, but Turing holds 1024 threads (8 blocks)
    and sm_86 1536 threads and 16 blocks (12)."""
    import dataclasses

    from kernels.target import Target

    for arch, blocks in (("sm_90", 16), ("sm_75", 8), ("sm_86", 12), ("sm_80", 16)):
        limits = F.DeviceLimits.of_target(Target(f"cuda -arch={arch}"))
        pf = dataclasses.replace(matmul_features, limits=limits)
        assert pf.blocks_per_sm == blocks, arch
        assert pf.occupancy == pytest.approx(blocks * 128 / limits.max_threads)
    assert F.DeviceLimits.of_target(Target("c")) == F.DeviceLimits()
    # shared memory binds: 64 KiB a block leaves room for 3 blocks in sm_90's 228 KiB
    big = dataclasses.replace(matmul_features, shared_bytes=64 * 1024)
    assert big.blocks_per_sm == 3 and big.occupancy == pytest.approx(3 * 128 / 2048)
