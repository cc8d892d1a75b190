"""Shared builders for the tests: the tutorial's schedules, sizes and numpy float64 references."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest

import kernels as tvm
from kernels import te, workloads


@contextlib.contextmanager
def private_cache(folder):
    """``KBENCH_CACHE_DIR`` pointed at ``folder`` (builds, inputs and loop features go there) for the
    block, the settings reloaded on the way in and again after the variable is restored."""
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("KBENCH_CACHE_DIR", str(folder))
            # function-level: the runtime's settings, read from the environment
            from kernels.runtime.config import reload_config

            reload_config()
            yield Path(folder)
    finally:
        reload_config()


#: (n, m): the tutorial size, ragged sizes (not multiples of 16/32), fewer rows than threads, 1x1
ROW_SUM_SIZES = [(128, 128), (37, 45), (3, 200), (1, 1), (70, 16)]


def row_sum(variant: str, factor: int = 16, rows: int = 32):
    """The reduction tutorial's row sum with one of its schedules; returns (s, [A, B]).

    The tutorial's own schedules come from the workload registry (kernels.workloads); ``rfactor``
    (B.rf at root) and ``direct_crossthread`` (the reduce axis bound without rfactor) are test-only.
    """
    w = workloads.get("row_sum")
    registry = {"default": ("default", {}), "split": ("split", {"factor": factor, "rows": rows}),
                "bind": ("bind", {"factor": factor, "rows": rows}),
                "crossthread": ("rfactor_crossthread", {"factor": factor, "rows": rows})}
    if variant in registry:
        name, knobs = registry[variant]
        return w.build(name, {}, "float32", knobs)
    s, (A, B) = w.build("default", {}, "float32")
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
    if variant == "rfactor":
        s.rfactor(B, ki)
    elif variant == "direct_crossthread":
        # bind the inner reduce axis itself (no rfactor): per-thread partial sums then an all-reduce
        xo, xi = s[B].split(B.op.axis[0], factor=rows)
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.y"))
        s[B].bind(ki, te.thread_axis("threadIdx.x"))
    else:
        raise ValueError(variant)
    return s, [A, B]


def row_sum_rfactor_two_kernels(factor: int = 16):
    """B.rf at root in global memory, each stage bound to blocks of 64 threads: two GPU kernels and a
    workspace the runtime allocates; returns (s, [A, B])."""
    s, (A, B) = row_sum("rfactor", factor=factor)
    BF = s.stages[1].op.output(0)
    xo, xi = s[BF].split(s[BF].op.axis[1], factor=64)
    s[BF].bind(xo, te.thread_axis("blockIdx.x"))
    s[BF].bind(xi, te.thread_axis("threadIdx.x"))
    bo, bi = s[B].split(s[B].op.axis[0], factor=64)
    s[B].bind(bo, te.thread_axis("blockIdx.x"))
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def conv2d_3x3(bind: bool = False):
    return workloads.get("conv2d_3x3").build("tiled" if bind else "default", {}, "float32",
                                             {"tile": 8} if bind else {})


def conv2d_ref(inp: np.ndarray, filt: np.ndarray) -> np.ndarray:
    inp = inp.astype(np.float64)
    filt = filt.astype(np.float64)
    n = inp.shape[0]
    out = np.zeros((n - 2, n - 2))
    for di in range(3):
        for dj in range(3):
            out += inp[di:di + n - 2, dj:dj + n - 2] * filt[di, dj]
    return out


def product_reduce():
    return workloads.get("product_reduce").build("default", {}, "float32")


def device_for(target: str):
    return {"c": tvm.cpu(0), "opencl": tvm.opencl(0), "cuda": tvm.cuda(0)}[target]


def run(f, target: str, *arrays):
    """Copy numpy arrays to the target's device, call ``f``, return the outputs as numpy."""
    dev = device_for(target)
    nd = [tvm.nd.array(a, dev) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


def opencl_available() -> bool:
    try:
        return tvm.opencl(0).exist
    except Exception:
        return False


def gpu_target_params():
    """pytest params for the GPU-style targets: OpenCL (PoCL here, skipped without a device) and CUDA
    (marked ``gpu``: it runs where a GPU is, e.g. ``pytest -m gpu`` on the device)."""
    import pytest

    return [pytest.param("opencl", marks=pytest.mark.skipif(not opencl_available(), reason="no OpenCL")),
            pytest.param("cuda", marks=pytest.mark.gpu)]


def tensorcore_tutorial() -> dict:
    """The auto-tensor-core tutorial's definitions (tests/tutorials/auto_tensorcore.py, imports
    changed, everything before its GPU checks) as a namespace: ``tvm``, ``autotvm``, ``test_gemm``."""
    from pathlib import Path

    path = Path(__file__).resolve().parent / "tutorials" / "auto_tensorcore.py"
    src = path.read_text()
    ns: dict = {}
    exec(compile(src[:src.index("# check whether the gpu has tensorcore")], str(path), "exec"), ns)
    return ns


def tensorcore_operands(dtype: str, layout: str, N: int, L: int, M: int, rng, lo: float = 0.0):
    """(a, b, float64 reference) for the tutorial's layouts: NN A(N, L) B(L, M); NT A(L, N);
    TN B(M, L); TT both transposed. int8 in [-128, 127), floats in [lo, 1)."""
    a_t, b_t = layout[1] == "T", layout[0] == "T"
    shape_a = (L, N) if a_t else (N, L)
    shape_b = (M, L) if b_t else (L, M)
    if dtype == "int8":
        a = rng.integers(-128, 127, shape_a).astype("int8")
        b = rng.integers(-128, 127, shape_b).astype("int8")
    else:
        a = rng.uniform(lo, 1, shape_a).astype(dtype)
        b = rng.uniform(lo, 1, shape_b).astype(dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a, b, (a64.T if a_t else a64) @ (b64.T if b_t else b64)


def pack_bits(x: np.ndarray, bits: int, word_dtype: str = "int32") -> np.ndarray:
    """The tutorial's packing, written independently: 32 // bits elements a word, element 0 in the
    highest bits (each element masked to its bits)."""
    per = 32 // bits
    rows, cols = x.shape
    out = np.zeros((rows, cols // per), np.uint64)
    for t in range(per):
        part = (x[:, t::per].astype(np.int64) & ((1 << bits) - 1)).astype(np.uint64)
        out |= part << np.uint64(32 - bits * (t + 1))
    return out.astype(np.uint32).view(word_dtype)


def subbyte_operands(dtype: str, N: int, L: int, M: int, rng):
    """Random A (N, L) and B (M, L) of int4 (-8..7) or int1 (0/1, about half of the bits set), and
    A @ B.T in int64."""
    lo, hi = (-8, 8) if dtype == "int4" else (0, 2)
    a = rng.integers(lo, hi, (N, L))
    b = rng.integers(lo, hi, (M, L))
    return a, b, a.astype(np.int64) @ b.astype(np.int64).T


def assert_int8_gemm_on_opencl(s, bufs, N: int, L: int, M: int, layout: str = "NN", seed: int = 0) -> None:
    """Build the tensor-core tutorial's int8 product ``(s, bufs)`` for OpenCL, run it on operands from
    :func:`tensorcore_operands` and compare it exactly with numpy's (int64 sums)."""
    f = tvm.build(s, bufs, "opencl")
    a, b, ref = tensorcore_operands("int8", layout, N, L, M, np.random.default_rng(seed))
    _, _, c = run(f, "opencl", a, b, np.zeros((N, M), "int32"))
    np.testing.assert_array_equal(c, ref.astype(np.int64))


def notes_check_source(target: str, rtol: float) -> str:
    """Python source of ``_check(sch)``, inserted into the GPU notes' code by the tests that run it:
    builds ``sch.mod`` for ``target``, runs it on random inputs (output poisoned with NaN) and
    compares with numpy float64 (vector add, window sum or matmul, told apart by the buffers'
    shapes); prints ``CHECKED <number of kernels in the source>``."""
    dev = {"opencl": "tvm.opencl(0)", "cuda": "tvm.cuda(0)"}[target]
    marker = {"opencl": "__kernel", "cuda": "__global__"}[target]
    return f'''
def _check(sch):
    import numpy as _np
    _mod = sch.mod
    _f = tvm.build(_mod, target="{target}")
    _dev = {dev}
    _rng = _np.random.default_rng(0)
    _shapes = [tuple(int(s) for s in b.shape) for b in _mod["main"].buffers]
    _arrays = [_rng.uniform(-1, 1, size=s).astype("float32") for s in _shapes]
    _arrays[-1][...] = _np.nan
    _nd = [tvm.nd.array(a, _dev) for a in _arrays]
    _f(*_nd)
    _out = _nd[-1].numpy()
    if len(_shapes) == 3 and len(_shapes[0]) == 1:
        _ref = _arrays[0].astype("float64") + _arrays[1]
    elif len(_shapes) == 2:
        _a = _arrays[0].astype("float64")
        _ref = _a[:-2] + _a[1:-1] + _a[2:]
    else:
        _ref = _arrays[0].astype("float64") @ _arrays[1].astype("float64")
    _np.testing.assert_allclose(_out, _ref, rtol={rtol!r}, atol=1e-4)
    print("CHECKED", _f.imported_modules[0].get_source().count("{marker}"))
'''
