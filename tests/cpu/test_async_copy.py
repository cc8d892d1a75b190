"""Asynchronous copies into shared memory (``cp.async``) for double-buffered stages on CUDA: the
fetches of the first and the next tile are printed as ``kb_cp_async_{16,8,4}`` (``cp.async`` on sm_80
and newer, a plain copy before), every barrier of such a kernel first waits for them, and the source
builds with nvcc for sm_75 .. sm_90. Results are checked on the GPU (tests/gpu/test_vector_gpu.py,
tests/gpu/test_tensorcore_warptile_gpu.py run the same schedules) and on OpenCL here."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kbtest import opencl_available, run
from kbvector import matmul_shared

import kernels as tvm
from kernels.contrib.nvcc import compile_cuda
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule


def _source(s, args) -> str:
    return tvm.build(s, args, target="cuda").imported_modules[0].get_source()


def _kernel_text(src: str) -> str:
    return src[src.index('extern "C"'):]


def test_double_buffered_fetches_are_asynchronous_copies():
    src = _source(*matmul_shared(double_buffer=True))
    body = _kernel_text(src)
    # A and B: the first tile before the loop, the next tile in it (float4 pieces, 16 bytes)
    assert body.count("kb_cp_async_16(") == 4 and "kb_cp_async_8(" not in body
    syncs = body.count("__syncthreads();")
    assert syncs == 2 and body.count("kb_cp_async_wait_all(); __syncthreads();") == syncs
    # the shared side of the copy is the idle half inside the loop
    assert re.search(r"kb_cp_async_16\(A_shared \+ .*\(\(r_outer \+ 1\) & 1\) \* 512\)\), A \+", body)


def test_plain_stages_keep_synchronous_copies():
    body = _kernel_text(_source(*matmul_shared(double_buffer=False)))
    assert "kb_cp_async" not in body and "kb_cp_async" not in _source(*matmul_shared())


def test_piece_size_follows_the_vector_width():
    body = _kernel_text(_source(*matmul_shared(width=2, double_buffer=True)))  # float2: 8 bytes
    assert body.count("kb_cp_async_8(") == 4 and "kb_cp_async_16(" not in body
    body = _kernel_text(_source(*matmul_shared(width=1, double_buffer=True)))  # scalar: a plain store
    assert "kb_cp_async_" not in body.replace("kb_cp_async_wait_all", "")
    assert "kb_cp_async_wait_all(); __syncthreads();" in body  # still safe to wait (nothing pending)


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_builds_for_every_architecture_with_cp_async_from_sm_80(arch):
    src = _source(*matmul_shared(double_buffer=True))
    ptx = compile_cuda(src, target="ptx", arch=arch).decode()
    if arch == "sm_75":
        assert "cp.async" not in ptx  # the fallback copy
    else:
        assert ptx.count("cp.async.ca.shared.global") >= 4 and "cp.async.wait_all" in ptx  # (unrolled)
    assert compile_cuda(src, target="cubin", arch=arch)


def test_tensor_core_warp_tile_with_asynchronous_fetches():
    A, B, C = tensorcore_matmul(512, 512, 512, "float16", "NN")
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", bx=8, by=16, step_k=2, v=8, ty=8, tx=16,
                                  warp_m=64, double_buffer=1, flat_fetch=1)
    body = _kernel_text(_source(s, args))
    assert "mma_sync" in body and body.count("kb_cp_async_16(") == 4
    ptx = compile_cuda(_source(s, args), target="ptx", arch="sm_90").decode()
    assert "cp.async.ca.shared.global" in ptx and "mma.sync" in ptx


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
def test_double_buffered_matmul_on_opencl_is_unchanged():
    # OpenCL has no asynchronous copy here: the same lowering prints plain copies and stays correct
    s, (A, B, C) = matmul_shared(n=100, m=90, k=70, double_buffer=True)
    f = tvm.build(s, [A, B, C], target="opencl")
    assert "kb_cp_async" not in f.imported_modules[0].get_source()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((100, 70)).astype("float32")
    b = rng.standard_normal((70, 90)).astype("float32")
    _, _, c = run(f, "opencl", a, b, np.zeros((100, 90), "float32"))
    np.testing.assert_allclose(c, a.astype("float64") @ b.astype("float64"), rtol=1e-4, atol=1e-4)


# -- multi_buffer: tiles several steps ahead ------------------------------------------------------


@pytest.mark.parametrize("stages", [3, 4])
def test_multi_buffered_loop_waits_for_its_own_tile_only(stages):
    body = _kernel_text(_source(*matmul_shared(double_buffer=stages)))
    # the first stages - 1 tiles of A and B before the loop, one group each; then one group each
    # per iteration, so the current tile is complete when 2 * (stages - 2) newer groups may be in flight
    head, loop = body.split("for (int r_outer", 1)
    assert head.count("kb_cp_async_16(") == 2 * (stages - 1) and head.count("kb_cp_async_commit();") == \
        2 * (stages - 1)
    assert f"kb_cp_async_wait_group<{2 * (stages - 2)}>(); __syncthreads();" in loop
    assert loop.count("kb_cp_async_commit();") == 2 and "kb_cp_async_wait_all" not in loop
    # slot (r + stages - 1) % stages of 512 elements (a power of two: a mask)
    assert (f"% {stages}) * 512)" if stages == 3 else f"& {stages - 1}) * 512)") in loop
    ptx = compile_cuda(_source(*matmul_shared(double_buffer=stages)), target="ptx", arch="sm_80").decode()
    assert f"cp.async.wait_group {2 * (stages - 2)};" in ptx and "cp.async.commit_group" in ptx


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("n, m, k", [(100, 90, 70), (64, 64, 8), (3, 5, 7), (33, 65, 17)])
def test_multi_buffered_matmul_on_opencl(stages, n, m, k):
    # fewer tiles than stages (k=8, 7: one tile) and ragged edges included
    f = tvm.build(*matmul_shared(n=n, m=m, k=k, double_buffer=stages), target="opencl")
    rng = np.random.default_rng(stages)
    a = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal((k, m)).astype("float32")
    _, _, c = run(f, "opencl", a, b, np.full((n, m), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype("float64") @ b.astype("float64"), rtol=1e-4, atol=1e-4)


def test_tensor_core_tiles_three_stages_ahead():
    A, B, C = tensorcore_matmul(512, 512, 512, "float16", "NN")
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", bx=8, by=16, step_k=1, v=8, ty=8, tx=16,
                                  warp_m=64, double_buffer=3, flat_fetch=1, align_all=1)
    body = _kernel_text(_source(s, args))
    assert body.count("mma_sync(") == 16  # no peeled last step: one copy of the warp's 4 x 4 products
    assert "kb_cp_async_wait_group<2>(); __syncthreads();" in body
    # 3 copies of A's 128 x (16 + 8 padding) tile and of B's 16 x (128 + 8) tile
    assert "half A_shared[9216];" in body and "half B_shared[6528];" in body


def test_rastered_blocks_cover_the_same_tiles():
    # raster=4: one blockIdx.x, 4 block rows at a time; the C tile of each block is the one of
    # (row, column) = (bid % 4 + 4 * (bid // (4 * columns)), (bid // 4) % columns)
    A, B, C = tensorcore_matmul(1024, 256, 512, "float16", "NN")
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", bx=8, by=16, step_k=2, v=4, ty=8, tx=16,
                                  warp_m=64, flat_fetch=1, double_buffer=3, align_all=1, raster=4)
    body = _kernel_text(_source(s, args))
    assert "blockIdx.y" not in body and body.count("mma_sync(") == 16
    f = tvm.lower(s, args)["main"]
    from kernels.tir.functor import collect
    from kernels.tir.stmt import AttrStmt

    ext = {a.node.thread_tag: int(a.value.value) for a in collect(f.body, lambda n: isinstance(n, AttrStmt)
                                                                   and n.attr_key == "thread_extent")}
    assert ext["blockIdx.x"] == (1024 // 128) * (512 // 128)  # every tile once
    with pytest.raises(tvm.TVMError, match=r"raster=3 must divide the 8 block rows"):
        tensorcore_schedule(A, B, C, "float16", "NN", bx=8, by=16, step_k=2, v=4, ty=8, tx=16, warp_m=64,
                            raster=3)


def test_multi_buffered_prefetch_with_a_fallback_is_built_with_ptxas_o1():
    """A prefetch into a stage of three copies whose vector copies fall back to element copies (a
    ragged float32 warp tile, rows of 351: 8-byte copies only on even rows) is marked for ptxas -O1
    (at -O3 ptxas computed a block row of it wrong on an H200, right at -O1: docs/PERF.md); a
    double-buffered one, and one without a fallback, are not. The mark changes the cubin."""
    from kernels.target import CUDA_PTXAS_O1
    from kernels.workloads import get

    w = get("matmul_tensorcore")
    knobs = dict(bx=8, by=4, step_k=4, v=2, ty=8, tx=2, warp_m=16, double_buffer=3)
    ragged = dict(n=351, m=509, l=512, layout="TT")
    src = _source(*w.build("warp_tile", ragged, "float32", knobs))
    assert src.startswith(CUDA_PTXAS_O1 + "\n")
    assert not _source(*w.build("warp_tile", ragged, "float32", dict(knobs, double_buffer=1))).startswith("//")
    assert not _source(*w.build("warp_tile", dict(ragged, n=352, m=512), "float32", knobs)).startswith("//")
    # the same source without the mark: ptxas at -O3, a different cubin
    plain = src[len(CUDA_PTXAS_O1) + 1:]
    assert compile_cuda(src, arch="sm_90") != compile_cuda("\n" + plain, arch="sm_90")
    assert compile_cuda(src, arch="sm_90") == compile_cuda(plain, arch="sm_90", options=["-Xptxas", "-O1"])
