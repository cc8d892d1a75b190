"""Bounds of attached stages at every storage scope x attach loop x thread binding, checked against
numpy on OpenCL (PoCL) and C.

A producer ``P[i, j] = 2 * A[i, j] + 1`` feeds ``C[i, j] = P[i, j] + P[i, j + 1]`` (a halo of one
column), on a ragged 10 x 19 output. C is tiled 4 x 8 and, on OpenCL, bound as
``(blockIdx.x, blockIdx.y, threadIdx.y, threadIdx.x)``. P is computed at each of C's loops (or at
root) in each storage scope, with its own loops left serial or shared out among the threads:

- shared memory is shared by a block's threads, so P's region there spans every thread's needs;
- warp memory is shared by the lanes (threadIdx.x) and private per threadIdx.y;
- local memory is private per thread: an axis bound to a thread there takes its minimum (TVM's
  rule), which computes only part of the region: where a reader needs the rest it is a clear error
  (never unwritten elements), as is global memory allocated inside a kernel.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from kbtest import gpu_target_params, run

import kernels as tvm
from kernels import te
from kernels.errors import TVMError

N, M = 10, 19
ROWS, COLS = 4, 8
ATTACH = ["root", "io", "jo", "ii", "ji"]


def _reference(a: np.ndarray) -> np.ndarray:
    p = 2.0 * a.astype(np.float64) + 1.0
    return p[:, :-1] + p[:, 1:]


def _schedule(attach: str, scope: str, mode: str, gpu: bool):
    A = te.placeholder((N, M + 1), name="A")
    P = te.compute((N, M + 1), lambda i, j: A[i, j] * 2.0 + 1.0, name="P")
    C = te.compute((N, M), lambda i, j: P[i, j] + P[i, j + 1], name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], ROWS, COLS)
    loops = {"io": io, "jo": jo, "ii": ii, "ji": ji}
    tx, ty = te.thread_axis("threadIdx.x"), te.thread_axis("threadIdx.y")
    if gpu:
        s[C].bind(io, te.thread_axis("blockIdx.x"))
        s[C].bind(jo, te.thread_axis("blockIdx.y"))
        s[C].bind(ii, ty)
        s[C].bind(ji, tx)
    if scope != "default":
        s[P].set_scope(scope)
    if attach == "root":
        if gpu:  # a kernel of its own
            po, pi = s[P].split(s[P].fuse(*P.op.axis), factor=64)
            s[P].bind(po, te.thread_axis("blockIdx.x"))
            s[P].bind(pi, te.thread_axis("threadIdx.x"))
        return s, [A, C]
    s[P].compute_at(s[C], loops[attach])
    fused = s[P].fuse(*s[P].op.axis)
    if mode == "coop_x":
        _, lane = s[P].split(fused, factor=COLS)
        s[P].bind(lane, tx)
    elif mode == "coop_xy":
        _, inner = s[P].split(fused, factor=COLS * ROWS)
        row, lane = s[P].split(inner, factor=COLS)
        s[P].bind(row, ty)
        s[P].bind(lane, tx)
    return s, [A, C]


def _expectation(attach: str, scope: str, mode: str) -> str:
    """'ok', or the error a schedule must give."""
    if attach == "root":
        return "ok"
    if scope == "global":
        return "global"
    if scope == "local" and mode != "serial":
        return "binding"
    if scope == "warp" and mode == "coop_xy":
        return "binding"
    return "ok"


GPU_CASES = [c for c in itertools.product(ATTACH, ["global", "shared", "warp", "local"],
                                          ["serial", "coop_x", "coop_xy"])
             if not (c[0] == "root" and (c[1] != "global" or c[2] != "serial"))]


GPU_TARGETS = gpu_target_params()


@pytest.mark.parametrize("target", GPU_TARGETS)
@pytest.mark.parametrize("attach, scope, mode", GPU_CASES)
def test_attached_stage_on_gpu_targets(attach, scope, mode, target):
    s, args = _schedule(attach, scope, mode, gpu=True)
    want = _expectation(attach, scope, mode)
    if want == "binding":
        with pytest.raises(TVMError, match=r"stage P: .* -> threadIdx\.[xy] binds a thread index its "
                                          r"(local|warp) buffer is not shared by.*also reads offset"):
            tvm.build(s, args, target)
        return
    if want == "global":
        with pytest.raises(TVMError, match="global memory"):
            tvm.build(s, args, target)
        return
    f = tvm.build(s, args, target)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((N, M + 1)).astype("float32")
    c = np.full((N, M), np.nan, dtype="float32")
    _, out = run(f, target, a, c)
    np.testing.assert_allclose(out, _reference(a), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("attach", ATTACH)
def test_attached_stage_on_c(attach):
    s, args = _schedule(attach, "default", "serial", gpu=False)
    f = tvm.build(s, args, "c")
    a = np.random.default_rng(3).standard_normal((N, M + 1)).astype("float32")
    c = np.full((N, M), np.nan, dtype="float32")
    _, out = run(f, "c", a, c)
    np.testing.assert_allclose(out, _reference(a), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("attach, region", [("io", (4, 25)), ("jo", (4, 9)), ("ii", (1, 9)),
                                            ("ji", (1, 2))])
def test_region_of_a_root_scoped_stage_on_c(attach, region):
    """On C (no threads) the region is what one iteration of the attach loop reads; at the row loop
    that is 4 rows of every column C's tiles can touch (3 tiles of 8 and the halo: 25, as TVM infers;
    P's own bound checks keep it to the 20 columns that exist)."""
    s, args = _schedule(attach, "default", "serial", gpu=False)
    text = str(tvm.lower(s, args, simple_mode=True))
    rows, cols = region
    assert f"allocate(P: Pointer(global float32), float32, [{rows * cols}])" in text, text


@pytest.mark.parametrize("scope, attach, size", [
    ("shared", "jo", 4 * 9),  # the block's tile and its halo
    ("shared", "ji", 4 * 9),  # attached inside the thread loops, still the block's whole tile
    ("warp", "jo", 4 * 9),    # one row (lanes share it) per threadIdx.y value: 4 copies of 9
    ("local", "ji", 2),       # one output's two inputs, per thread
    ("local", "jo", 2),       # per thread even when attached at the block loop
])
def test_region_size_by_scope(scope, attach, size):
    s, args = _schedule(attach, scope, "serial", gpu=True)
    mod = tvm.lower(s, args, simple_mode=True)
    from kernels.build_module import build_spec

    src = build_spec(s, args, "opencl").source
    assert f"P[{size}]" in src, (str(mod), src)


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_local_stage_bound_to_the_thread_that_owns_it(target):
    """TVM's cooperative pattern on local memory: each thread loads, into its own buffer, exactly the
    elements it will read (a stride of the thread count), so binding the load's inner axis to
    threadIdx.x leaves that axis at its minimum and nothing unread or unwritten (the region is 97
    elements, 4 of which are loaded and read)."""
    A = te.placeholder((128,), name="A")
    B = te.compute((128,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((128,), lambda i: B[i] + 2.0, name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [B])
    s[B].set_scope("shared")
    tx = te.thread_axis((0, 32), "threadIdx.x")
    oc, ic = s[C].split(s[C].op.axis[0], factor=64)
    ooc, ioc = s[C].split(oc, factor=2)
    _, iic = s[C].split(ic, factor=32)
    s[C].bind(ooc, te.thread_axis("blockIdx.x"))
    s[C].bind(iic, tx)
    s[B].compute_at(s[C], ioc)
    _, ib = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(ib, tx)
    s[AA].compute_at(s[C], ooc)
    _, iaa = s[AA].split(s[AA].op.axis[0], factor=32)
    s[AA].bind(iaa, tx)
    text = str(tvm.lower(s, [A, C], simple_mode=True))
    assert "allocate(A.local: Pointer(local float32), float32, [97])" in text, text
    f = tvm.build(s, [A, C], target)
    a = np.random.default_rng(1).standard_normal(128).astype("float32")
    _, c = run(f, target, a, np.full(128, np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) + 3.0, rtol=1e-6)
