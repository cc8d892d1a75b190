"""Block partitioning on a real CUDA GPU: ragged matrix products whose interior blocks run the copy of
the kernel without bound checks (barriers inside a branch the whole block takes) and whose edge
blocks run the checked copy, against numpy in float64; the float16 tensor-core shape takes WMMA in
the interior copy."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import run

import kernels as tvm
from kernels import workloads

pytestmark = pytest.mark.gpu


def _check(wname, variant, params, dtype, knobs):
    w = workloads.get(wname)
    s, args = w.build(variant, params, dtype, knobs)
    f = tvm.build(s, args, "cuda")
    src = f.imported_modules[0].get_source()
    host = w.make_args(params, dtype, np.random.default_rng(5))
    out = run(f, "cuda", *host)
    rtol, atol = w.tolerance_for(dtype, params)
    for idx, ref in zip(w.outputs, w.reference_of(host, params, dtype)):
        np.testing.assert_allclose(out[idx], ref, rtol=rtol, atol=atol)
    return src


@pytest.mark.parametrize("shape", [(300, 200, 104), (1000, 700, 300), (129, 257, 100), (4000, 3000, 1000)])
@pytest.mark.parametrize("knobs", [dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8, reg_cache=1),
                                   dict(local_y=8, local_x=4, block_y=16, block_x=16, tile_k=16, double_buffer=1),
                                   dict(local_y=4, local_x=4, block_y=8, block_x=8, tile_k=8, vthread=2)])
def test_ragged_sgemm_on_cuda(shape, knobs):
    n, m, k = shape
    _check("matmul", "shared_blocked", {"n": n, "m": m, "k": k}, "float32", knobs)


def test_ragged_float16_tensor_cores_on_cuda():
    knobs = dict(bx=8, by=16, step_k=4, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1)
    src = _check("matmul_tensorcore", "warp_tile", {"n": 600, "m": 600, "l": 256, "layout": "NN"}, "float16", knobs)
    # one launch (tensor-core kernels are not split in two): the kernel-level branch, interior copy
    # with WMMA, then the edge copy without
    assert src.count("__global__") == 1
    edge = src.index("\n  } else {")
    assert "mma_sync" in src[:edge] and "mma_sync" not in src[edge:]


@pytest.mark.parametrize("double_buffer", [0, 1])
def test_ragged_int8_warp_tile_on_cuda(double_buffer):
    """The fuzzer's find (seed 5): wrong once split with double_buffer=1, so pipelined kernels are left
    whole; both must match numpy."""
    knobs = dict(bx=4, by=32, step_k=1, v=16, ty=2, tx=2, warp_m=64, double_buffer=double_buffer, flat_fetch=0,
                 align_all=0, raster=0)
    _check("matmul_tensorcore", "warp_tile", dict(n=549, m=317, l=78, layout="NN"), "int8", knobs)


def test_concurrent_edge_launch_is_joined_before_the_next_work():
    """The edge launch runs on a side stream beside the interior one: the next launch on the null
    stream must see its outputs. The ragged product is chained, C2 = C1 @ B2 reading every C1 the
    call before wrote (the edge blocks' columns and rows included), 20 times with no host
    synchronisation in between, then checked against numpy in float64."""
    w = workloads.get("matmul")
    n = 1000
    params = {"n": n, "m": n, "k": n}
    s, args = w.build("shared_blocked", params, "float32",
                      dict(local_y=4, local_x=4, block_y=16, block_x=16, tile_k=16, vector=4, reg_cache=1))
    f = tvm.build(s, args, "cuda")
    assert [k.concurrent for k in f.spec.kernels] == [False, True]
    rng = np.random.default_rng(7)
    dev = tvm.cuda(0)
    # B scaled so that the chained products stay near 1 in size
    a = rng.uniform(-1, 1, (n, n)).astype("float32")
    b = (rng.uniform(-1, 1, (n, n)) * np.sqrt(3.0 / n)).astype("float32")
    bufs = [tvm.nd.array(a, dev), tvm.nd.array(np.full((n, n), np.nan, "float32"), dev)]
    bd = tvm.nd.array(b, dev)
    ref = a.astype(np.float64)
    for i in range(20):
        f(bufs[i % 2], bd, bufs[(i + 1) % 2])
        ref = ref @ b.astype(np.float64)
    got = bufs[0].numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
