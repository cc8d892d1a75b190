"""Virtual threads (inject_virtual_thread): a ``vthread`` axis runs its iterations interleaved in one
real thread; what does not depend on it is done once, buffers that do get one slice per virtual
thread. Results against numpy float64 on OpenCL (PoCL) and C; the structure of the CUDA source."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels import te, workloads
from kernels.build_module import build_spec

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

VT = dict(local_y=4, local_x=4, block_y=8, block_x=8, tile_k=8, vector=4, vthread=2, reg_cache=1)


def _run_matmul(params, knobs, target="opencl"):
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", params, "float32", knobs)
    f = tvm.build(s, args, target)
    host = w.make_args(params, "float32", np.random.default_rng(5))
    dev = tvm.opencl(0) if target == "opencl" else tvm.cpu(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    f(*nd)
    ref = host[0].astype(np.float64) @ host[1].astype(np.float64)
    np.testing.assert_allclose(nd[2].numpy(), ref, rtol=1e-4, atol=1e-4)


@needs_opencl
@pytest.mark.parametrize("params", [{"n": 128, "m": 128, "k": 64}, {"n": 100, "m": 77, "k": 53}])
@pytest.mark.parametrize("knobs", [VT, dict(VT, reg_cache=0, double_buffer=1), dict(VT, vthread=4, local_y=2,
                                                                                    local_x=2)])
def test_shared_matmul_with_virtual_threads(params, knobs):
    _run_matmul(params, knobs)


def test_virtual_threads_share_the_k_loop_and_the_fetch():
    """With 2 x 2 virtual threads the k loop and the cooperative fetch appear once; the register
    tile (4 x 4 a thread) is one buffer of 4 slices; no vthread loop is left for the printer."""
    s, args = workloads.get("matmul").build("shared_blocked", {"n": 1024, "m": 1024, "k": 1024}, "float32",
                                            dict(VT, local_y=4, local_x=4, block_y=16, block_x=16))
    src = build_spec(s, args, "cuda -arch=sm_80").source
    assert src.count("for (int r_outer") == 1, src
    assert len(re.findall(r"float C_local\w*\[", src)) == 1 and "float C_local[16]" in src, src
    assert src.count("__syncthreads()") == 2, src
    assert "vthread" not in str(tvm.lower(s, args, simple_mode=True))


def test_cthread_gives_every_virtual_thread_its_own_buffers():
    """On C: a vthread axis around a stage with a local cache, each virtual thread summing its own
    rows; and a dependent local temporary in every virtual thread."""
    n, m = 8, 6
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k] * 2.0, axis=k), name="B")
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    vo, vi = s[B].split(B.op.axis[0], nparts=2)
    s[B].bind(vo, te.thread_axis("vthread", name="vt"))
    s[BL].compute_at(s[B], vi)
    f = tvm.build(s, [A, B], "c")
    a = np.random.default_rng(1).uniform(-1, 1, (n, m)).astype("float32")
    b = tvm.nd.array(np.full(n, np.nan, "float32"))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), 2.0 * a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
