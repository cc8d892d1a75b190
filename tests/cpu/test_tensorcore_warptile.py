"""Warp tiles of several WMMA fragments: kernels.workloads.tensorcore_schedule with a thread tile of
``ty`` x ``tx`` outputs gives each warp an Fm x Fn block of 16 x 16 fragments, which the tensor-core
rewrite turns into fragment arrays with Fm + Fn loads and Fm * Fn mma_sync per k step. The sources
compile with nvcc (no GPU needed; running them is tests/gpu/test_tensorcore_warptile_gpu.py), and the
plain code the same schedules build off CUDA computes the product exactly (OpenCL on PoCL)."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from kbtest import opencl_available, run, tensorcore_operands

import kernels as tvm
from kernels.build_module import build_spec
from kernels.contrib import nvcc
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule, warp_tile

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")

#: name -> (knobs, fragments per warp (Fm, Fn), block tile (rows, columns))
CONFIGS = {
    "2x2": (dict(bx=4, by=16, step_k=2, v=8, ty=2, tx=16, warp_m=32), (2, 2), (32, 64)),
    "4x2": (dict(bx=8, by=16, step_k=2, v=8, ty=4, tx=16, warp_m=32), (4, 2), (64, 128)),
    "4x4": (dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64), (4, 4), (128, 128)),
    "2x2 double-buffered": (dict(bx=4, by=16, step_k=2, v=8, ty=2, tx=16, warp_m=32, double_buffer=1), (2, 2),
                            (32, 64)),
    "4x2 flat fetch": (dict(bx=8, by=16, step_k=2, v=8, ty=4, tx=16, warp_m=32, flat_fetch=1), (4, 2),
                       (64, 128)),
}


def _source(name, layout="NN", dtype="float16", shape=(256, 256, 256), arch="sm_80", caplog=None):
    knobs = CONFIGS[name][0]
    A, B, C = tensorcore_matmul(*shape, dtype=dtype, layout=layout)
    s, args = tensorcore_schedule(A, B, C, dtype, layout, **knobs)
    return build_spec(s, args, f"cuda -arch={arch}").source


def _k_loop(src: str) -> str:
    """The text of the outer k loop (from its header to the first store of a fragment)."""
    start = src.index("for (int k_outer")
    return src[start:src.index("store_matrix_sync", start)]


def test_warp_tile_is_what_the_knobs_say():
    assert warp_tile(bx=4, by=16) == (16, 16)  # the tutorial's: one fragment
    for knobs, (fm, fn), _ in CONFIGS.values():
        rows, cols = warp_tile(knobs["bx"], knobs["by"], knobs["ty"], knobs["tx"], knobs["warp_m"])
        assert (rows, cols) == (16 * fm, 16 * fn)


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("name", ["2x2", "4x2", "4x2 flat fetch"])
def test_several_fragments_a_warp(name, layout):
    fm, fn = CONFIGS[name][1]
    src = _source(name, layout)
    loop = _k_loop(src)
    # per k step: Fm matrix_a and Fn matrix_b loads feed Fm * Fn mma_sync, all inside the k loop
    assert loop.count("nvcuda::wmma::mma_sync(") == src.count("nvcuda::wmma::mma_sync(") == fm * fn
    assert loop.count("load_matrix_sync(A_shared_frag[") == fm
    assert loop.count("load_matrix_sync(B_shared_frag[") == fn
    assert f"float> C_local_frag[{fm * fn}];" in src
    a_major = "col_major" if layout[1] == "T" else "row_major"
    b_major = "col_major" if layout[0] == "T" else "row_major"
    assert f"matrix_a, 16, 16, 16, half, nvcuda::wmma::{a_major}> A_shared_frag[{fm}];" in src
    assert f"matrix_b, 16, 16, 16, half, nvcuda::wmma::{b_major}> B_shared_frag[{fn}];" in src
    # every accumulator is zeroed once and stored once, each pair (i, j) multiplied exactly once
    assert src.count("fill_fragment(C_local_frag[") == src.count("store_matrix_sync(") == fm * fn
    pairs = re.findall(r"mma_sync\(C_local_frag\[(\d+)\], A_shared_frag\[(\d+)\], B_shared_frag\[(\d+)\], "
                       r"C_local_frag\[(\d+)\]\)", loop)
    assert sorted((int(a), int(b), int(c), int(d)) for a, b, c, d in pairs) == \
        [(i * fn + j, i, j, i * fn + j) for i in range(fm) for j in range(fn)]
    assert "_local[" not in src  # the per-thread register tiles are gone


def _offsets(src: str, frag: str, buf: str):
    """The constant offset of each ``load_matrix_sync(frag[i], &buf[...])`` from fragment 0's."""
    out = {}
    for i, idx in re.findall(rf"load_matrix_sync\({frag}\[(\d+)\], \(&{buf}\[(.*?)\]\), \d+\)", src):
        m = re.fullmatch(r"\((.*) \+ (\d+)\)", idx)
        out[int(i)] = (m.group(1), int(m.group(2))) if m else (idx, 0)
    base = out[0][0]
    assert all(b == base for b, _ in out.values()), out
    return [out[i][1] for i in sorted(out)]


def test_fragments_are_read_and_written_where_the_tile_lies():
    # 4x2 NN at 256^3: A.shared is 64 rows of step_k * 16 = 32 k, padded by storage_align(16, 8) to
    # 40 elements a row; B.shared is 32 k rows of the block's 128 columns; C rows are 256 long
    src = _source("4x2", "NN")
    assert _offsets(src, "A_shared_frag", "A_shared") == [0, 16 * 40, 32 * 40, 48 * 40]
    assert _offsets(src, "B_shared_frag", "B_shared") == [0, 16]
    assert "load_matrix_sync(A_shared_frag[0], (&A_shared[(k_inner_outer * 16)]), 40)" in src
    stores = re.findall(r"store_matrix_sync\(\(&C\[(.*?)\]\), C_local_frag\[(\d+)\], 256,", src)
    offs = {}
    for idx, f in stores:
        m = re.fullmatch(r"\((.*) \+ (\d+)\)", idx)
        offs[int(f)] = int(m.group(2)) if m else 0
    assert offs == {i * 2 + j: i * 16 * 256 + j * 16 for i in range(4) for j in range(2)}


def test_the_tutorials_thread_tile_stays_one_fragment():
    A, B, C = tensorcore_matmul(256, 256, 256)
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", bx=4, by=16, step_k=2, v=8)
    src = build_spec(s, args, "cuda -arch=sm_80").source
    assert src.count("mma_sync(") == 1 and "C_local_frag[1];" in src


def test_a_warp_block_no_fragment_tiles_stays_plain_and_says_why(caplog):
    # tx=4 over warp_m=8 columns: two thread columns, 16 thread rows: a 16 x 8 block per warp
    A, B, C = tensorcore_matmul(128, 128, 128)
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", bx=4, by=16, step_k=1, v=4, tx=4, warp_m=8)
    with caplog.at_level(logging.DEBUG, logger="kernels.tensor_core"):
        src = build_spec(s, args, "cuda -arch=sm_80").source
    assert "wmma" not in src and "C_local[" in src
    assert any("16 x 8 block of outputs, which no WMMA fragment shape" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_analysis_of_a_large_warp_tile_is_quick():
    import time

    t0 = time.perf_counter()
    src = _source("4x4", "TN", shape=(1024, 1024, 1024))
    assert src.count("mma_sync(") == 16
    assert time.perf_counter() - t0 < 30


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_fragment_arrays_compile(arch):
    for name, layout in (("2x2", "NT"), ("4x2", "NN"), ("4x2", "TT"), ("2x2 double-buffered", "TN")):
        src = _source(name, layout, arch=arch)
        out = nvcc.compile_cuda(src, target_format="cubin", arch=arch)
        assert out[:4] == b"\x7fELF"


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("layout", ["NN", "TN", "NT", "TT"])
@pytest.mark.parametrize("name", ["2x2", "4x2", "2x2 double-buffered", "4x2 flat fetch"])
def test_plain_code_of_the_same_schedules_is_exact_on_opencl(name, layout):
    # int8 operands and int32 sums: exact whatever the order of the additions (and PoCL on the CPU
    # builds no half-precision programs); the schedules are the float16 ones, knob for knob
    knobs, _, (rows, cols) = CONFIGS[name]
    N, L, M = rows, 64, 2 * cols  # one block row, two block columns, two k steps of 32
    A, B, C = tensorcore_matmul(N, L, M, "int8", layout)
    s, args = tensorcore_schedule(A, B, C, "int8", layout, **knobs)
    f = tvm.build(s, args, "opencl")
    assert "wmma" not in f.imported_modules[0].get_source()
    a, b, ref = tensorcore_operands("int8", layout, N, L, M, np.random.default_rng(3))
    _, _, c = run(f, "opencl", a, b, np.full((N, M), -7, "int32"))
    np.testing.assert_array_equal(c, ref.astype(np.int64))


@pytest.mark.parametrize("layout, shape, grid", [(lay, "16, 16, 16", 2 * 2) for lay in ("NN", "NT", "TN", "TT")])
def test_int8_takes_the_fragment_shape_whose_fragments_are_aligned(layout, shape, grid):
    # 32 x 32 a warp; 16 int8 columns are 16 bytes, which is the alignment PTX asks of int8 operand
    # tiles (one thread's share of a fragment, at least 16 bytes here), so 16x16 fragments fit every layout
    A, B, C = tensorcore_matmul(256, 256, 256, "int8", layout)
    s, args = tensorcore_schedule(A, B, C, "int8", layout, bx=4, by=16, step_k=1, v=16, ty=2, tx=16,
                                  warp_m=32)
    src = build_spec(s, args, "cuda -arch=sm_80").source
    assert f"accumulator, {shape}, int> C_local_frag[{grid}];" in src
    assert src.count("mma_sync(") == grid


def test_fetches_of_eight_halves_are_128_bit_copies():
    # v=8 float16 elements a thread: one uint4 load from global memory and one uint4 store to shared
    # memory each (16-byte aligned: rows of A.shared are 40 halves = 80 bytes), no half2 pieces
    src = _source("4x2", "NN")
    copies = re.findall(r"\*\(uint4\*\)\((A|B)_shared \+ .*?\) = \*\(uint4\*\)\((A|B) \+ ", src)
    assert sorted({a for a, _ in copies}) == ["A", "B"] and all(a == b for a, b in copies)
    assert "half2" not in src
    A, B, C = tensorcore_matmul(256, 256, 256)
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", bx=8, by=16, step_k=4, v=4, ty=4, tx=16,
                                  warp_m=32)
    assert "uint4" not in build_spec(s, args, "cuda -arch=sm_80").source  # 8 bytes: not a whole word


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_double_buffered_tiles_take_fragments_in_the_loop_and_in_the_last_step(layout):
    # the next step's tiles go to the idle half while the fragments read the other: one barrier an
    # iteration, one before the last step (after the loop) which reads the half the loop filled last
    src = _source("2x2 double-buffered", layout)
    loop, last = src[src.index("for (int k_outer"):].rsplit("__syncthreads();", 1)
    assert loop.count("mma_sync(") == 4 and last.count("mma_sync(") == 4
    assert src.count("__syncthreads()") == 2
    # the loop reads the half of step k (k & 1), the last step the half after the loop's last fetch
    # (256 / 32 = 8 steps: the last one in half 1)
    halves = re.findall(r"load_matrix_sync\(A_shared_frag1?\[0\], \(&A_shared\[(.*?)\]\)", src)
    assert len(halves) == 2 and "(k_outer & 1) * " in halves[0] and "k_outer" not in halves[1]
    assert "fill_fragment" in src and src.count("store_matrix_sync(") == 4


def test_a_flat_fetch_keeps_every_thread_busy():
    # the 64 x 32 tile of A (rows padded to 40) and the 32 x 128 tile of B, 8 halves a thread: 128
    # threads fetch A in two rounds and B in four, none guarded (the tutorial's fetch idles half the
    # threads on A: its rows of 32 are narrower than bx * v = 64)
    src = _source("4x2 flat fetch", "NN")
    start = src.index("__syncthreads();", src.index("for (int k_outer"))
    fetch = src[start:src.index("for (int k_inner_outer")]
    assert "if (" not in fetch and fetch.count("*(uint4*)") == 4
    assert re.findall(r"_outer\d* < (\d+); \+\+", fetch) == ["2", "4"]
    tutorial = _source("4x2", "NN")
    assert "if (" in tutorial[tutorial.index("for (int k_outer"):tutorial.index("for (int k_inner_outer")]
