"""The "tensor_core" pragma on CUDA: the tutorial's template (tests/tutorials/auto_tensorcore.py,
imports changed) becomes warp-wide WMMA code where the tile allows it, plain code elsewhere; the
sources compile with nvcc for every architecture CUDA 13 builds (no GPU needed: running them is
tests/gpu/test_tensorcore_gpu.py)."""

from __future__ import annotations

import logging
import re

import pytest
from kbtest import tensorcore_tutorial

from kernels.build_module import build_spec
from kernels.contrib import nvcc

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")

#: (bx, by, step_k, v) -> the fragment shape the warps of that configuration get
WMMA_CONFIGS = {(4, 16, 2, 8): "16, 16, 16", (4, 8, 1, 4): "8, 32, 16", (8, 32, 4, 16): "16, 16, 16",
                (2, 64, 2, 8): "16, 16, 16"}


@pytest.fixture(scope="module")
def tutorial():
    return tensorcore_tutorial()


#: generated sources by (dtype, layout, config, size): the text does not depend on the architecture
#: (int1's sm_75 path is an #if in the source), so each is made once and compiled for every one
_SOURCES: dict = {}


def _source(tutorial, dtype, layout, cfg, n=None, arch="sm_80", fresh=False):
    # int1 steps 128 along k: a reduction of 256 would make the pragma'd loop a single step
    n = n or (512 if dtype == "int1" else 256)
    key = (dtype, layout, cfg, n)
    if key in _SOURCES and not fresh:
        return _SOURCES[key]
    autotvm = tutorial["autotvm"]
    tutorial.update(N=n, L=n, M=n)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, dtype, layout),
                               target="cuda")
    bx, by, step_k, v = cfg
    s, bufs = task.instantiate(task.config_space.index_of(dict(bx=bx, by=by, step_k=step_k, v=v)))
    _SOURCES[key] = build_spec(s, bufs, f"cuda -arch={arch}").source
    return _SOURCES[key]


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("cfg", list(WMMA_CONFIGS))
def test_float16_becomes_wmma(tutorial, layout, cfg):
    src = _source(tutorial, "float16", layout, cfg)
    assert "#include <mma.h>" in src and src.count("nvcuda::wmma::mma_sync") == 1, src
    shape = WMMA_CONFIGS[cfg]
    assert f"nvcuda::wmma::fragment<nvcuda::wmma::accumulator, {shape}, float>" in src
    # layouts as the tutorial's transposes make them: NT transposes A, TN B, TT both
    a_major = "col_major" if layout[1] == "T" else "row_major"
    b_major = "col_major" if layout[0] == "T" else "row_major"
    assert f"matrix_a, {shape}, half, nvcuda::wmma::{a_major}>" in src
    assert f"matrix_b, {shape}, half, nvcuda::wmma::{b_major}>" in src
    # the per-thread register copies and multiply-adds are gone; the shared tiles stay, aligned
    assert "_local[" not in src and src.count("__shared__ __align__(32)") == 2
    # one barrier after the cooperative fetch, one before the next fetch overwrites the tiles
    assert src.count("__syncthreads()") == 2


#: one configuration a layout for int8: the tutorial's shared tiles padded by 16 bytes (storage_align
#: offset 16) and k steps of 16 bytes; (layout, (bx, by, step_k, v), fragment shape)
INT8_CONFIGS = [("NN", (4, 16, 2, 8), "16, 16, 16"), ("NT", (4, 16, 2, 8), "16, 16, 16"),
                ("TN", (2, 32, 4, 16), "16, 16, 16"), ("TT", (8, 32, 4, 16), "16, 16, 16"),
                ("NN", (4, 8, 1, 4), "8, 32, 16")]


@pytest.mark.parametrize("layout, cfg, shape", INT8_CONFIGS)
def test_int8_becomes_wmma_in_every_layout(tutorial, layout, cfg, shape):
    src = _source(tutorial, "int8", layout, cfg)
    assert src.count("nvcuda::wmma::mma_sync") == 1, src
    a_major = "col_major" if layout[1] == "T" else "row_major"
    b_major = "col_major" if layout[0] == "T" else "row_major"
    assert f"fragment<nvcuda::wmma::matrix_a, {shape}, signed char, nvcuda::wmma::{a_major}>" in src
    assert f"fragment<nvcuda::wmma::matrix_b, {shape}, signed char, nvcuda::wmma::{b_major}>" in src
    assert f"fragment<nvcuda::wmma::accumulator, {shape}, int>" in src
    assert "_local[" not in src


#: int4 / int1 in layout TN: (bx, by, step_k, v) -> how the fetch moves the packed words
SUBBYTE_CONFIGS = [(4, 16, 2, 8), (8, 32, 1, 32), (4, 32, 2, 16)]


@pytest.mark.parametrize("cfg", SUBBYTE_CONFIGS)
def test_int4_becomes_wmma_8x8x32_s4(tutorial, cfg):
    src = _source(tutorial, "int4", "TN", cfg)
    assert src.count("nvcuda::wmma::mma_sync") == 1 and "bmma" not in src, src
    s4 = "nvcuda::wmma::experimental::precision::s4"
    assert f"fragment<nvcuda::wmma::matrix_a, 8, 8, 32, {s4}, nvcuda::wmma::row_major>" in src
    assert f"fragment<nvcuda::wmma::matrix_b, 8, 8, 32, {s4}, nvcuda::wmma::col_major>" in src
    assert "fragment<nvcuda::wmma::accumulator, 8, 8, 32, int>" in src
    # the shared tiles hold packed words (8 elements a word): by rows of step_k * 32 elements, the row
    # stride raised to 32 modulo 64 (storage_align(factor 64, offset 32))
    _bx, by, step_k, _v = cfg
    row = step_k * 32
    assert f"__shared__ __align__(32) int A_shared[{by * (row + (32 - row % 64) % 64) // 8}];" in src
    assert "_local[" not in src


@pytest.mark.parametrize("dtype, cfg, moves", [("int4", (4, 16, 2, 4), "ushort"),
                                               ("int1", (4, 16, 2, 8), "uchar")])
def test_fetches_of_less_than_a_word_move_bytes_or_half_words(tutorial, dtype, cfg, moves):
    # 4 int4 or 8 int1 elements a thread: the packed words are filled a half word / byte at a time
    src = _source(tutorial, dtype, "TN", cfg)
    assert "mma_sync" in src
    assert f"(({moves}*)A_shared)[" in src and f"(({moves}*)A)[" in src
    assert f"(({moves}*)B_shared)[" in src and f"(({moves}*)B)[" in src


@pytest.mark.parametrize("cfg", SUBBYTE_CONFIGS)
def test_int1_becomes_bmma_8x8x128_b1(tutorial, cfg):
    src = _source(tutorial, "int1", "TN", cfg)
    b1 = "nvcuda::wmma::experimental::precision::b1"
    assert f"fragment<nvcuda::wmma::matrix_a, 8, 8, 128, {b1}, nvcuda::wmma::row_major>" in src
    assert f"fragment<nvcuda::wmma::matrix_b, 8, 8, 128, {b1}, nvcuda::wmma::col_major>" in src
    assert "nvcuda::wmma::mma_sync" not in src
    # AND on sm_80 and newer; XOR and the popcount correction on sm_75, chosen when nvcc compiles
    assert src.count("bmmaBitOpAND") == 1 and src.count("__CUDA_ARCH__ < 800") == 1
    assert src.count("nvcuda::wmma::bmma_sync(") == 4
    assert "(kb_pa1.x[kb_t] + kb_pb1.x[kb_t] - kb_x1.x[kb_t]) / 2" in src


@pytest.mark.parametrize("dtype, layout, cfg, why", [
    ("float16", "NN", (2, 8, 2, 8), "16 threads a block is not whole warps"),
    ("int8", "NT", (4, 8, 1, 4), "leading dimensions 8, 48 are not multiples of 16"),
    ("int4", "TN", (2, 8, 2, 8), "16 threads a block is not whole warps"),
    ("int1", "TN", (4, 16, 1, 4),
     "the shared tile A.shared is not filled by copies of whole bytes of packed int1"),
])
def test_configurations_wmma_cannot_take_stay_plain_and_say_why(tutorial, caplog, dtype, layout, cfg, why):
    with caplog.at_level(logging.DEBUG, logger="kernels.tensor_core"):
        src = _source(tutorial, dtype, layout, cfg, fresh=True)
    assert "wmma" not in src and "_local[" in src
    assert any(why in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_the_pragma_is_plain_code_off_cuda(tutorial):
    autotvm = tutorial["autotvm"]
    tutorial.update(N=64, L=64, M=64)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(64, 64, 64, "float16", "NN"),
                               target="opencl")
    s, bufs = task.instantiate(task.config_space.index_of(dict(bx=4, by=16, step_k=2, v=8)))
    assert "wmma" not in build_spec(s, bufs, "opencl").source


#: what each architecture builds: (dtype, layout, config); int4 / int1 WMMA exist from sm_75 on, and
#: CUDA 13's nvcc builds them for every architecture it supports
COMPILED = [("float16", "TN", (4, 16, 2, 8)), ("int8", "NN", (4, 8, 1, 4)), ("int8", "TT", (8, 32, 4, 16)),
            ("int4", "TN", (4, 16, 2, 8)), ("int1", "TN", (4, 16, 2, 8))]


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"])
def test_wmma_sources_compile_for_every_architecture(tutorial, arch):
    for dtype, layout, cfg in COMPILED:
        src = _source(tutorial, dtype, layout, cfg, arch=arch)
        assert re.search(r"b?mma_sync", src), (dtype, layout)
        out = nvcc.compile_cuda(src, target_format="cubin", arch=arch)
        assert out[:4] == b"\x7fELF", (dtype, layout)
