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


def _source(tutorial, dtype, layout, cfg, n=256, arch="sm_80"):
    autotvm = tutorial["autotvm"]
    tutorial.update(N=n, L=n, M=n)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, dtype, layout),
                               target="cuda")
    bx, by, step_k, v = cfg
    s, bufs = task.instantiate(task.config_space.index_of(dict(bx=bx, by=by, step_k=step_k, v=v)))
    return build_spec(s, bufs, f"cuda -arch={arch}").source


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


def test_int8_becomes_wmma_where_its_tiles_are_aligned(tutorial):
    src = _source(tutorial, "int8", "NN", (4, 8, 1, 4))
    assert "fragment<nvcuda::wmma::matrix_a, 8, 32, 16, signed char, nvcuda::wmma::row_major>" in src
    assert "fragment<nvcuda::wmma::accumulator, 8, 32, 16, int>" in src


@pytest.mark.parametrize("dtype, layout, cfg, why", [
    ("float16", "NN", (2, 8, 2, 8), "16 threads a block is not whole warps"),
    ("int8", "NN", (4, 16, 2, 8), "not 32-byte aligned"),
    ("int8", "NT", (4, 8, 1, 4), "leading dimensions 8, 48 are not multiples of 16"),
])
def test_configurations_wmma_cannot_take_stay_plain_and_say_why(tutorial, caplog, dtype, layout, cfg, why):
    with caplog.at_level(logging.DEBUG, logger="kernels.tensor_core"):
        src = _source(tutorial, dtype, layout, cfg)
    assert "wmma" not in src and "_local[" in src
    assert any(why in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_the_pragma_is_plain_code_off_cuda(tutorial):
    autotvm = tutorial["autotvm"]
    tutorial.update(N=64, L=64, M=64)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(64, 64, 64, "float16", "NN"),
                               target="opencl")
    s, bufs = task.instantiate(task.config_space.index_of(dict(bx=4, by=16, step_k=2, v=8)))
    assert "wmma" not in build_spec(s, bufs, "opencl").source


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"])
def test_wmma_sources_compile_for_every_architecture(tutorial, arch, tmp_path):
    for dtype, layout, cfg in (("float16", "TN", (4, 16, 2, 8)), ("int8", "NN", (4, 8, 1, 4))):
        src = _source(tutorial, dtype, layout, cfg, arch=arch)
        path = tmp_path / f"{dtype}_{arch}.cu"
        path.write_text(src)
        out = nvcc.compile_cuda(src, target_format="cubin", arch=arch)
        assert out[:4] == b"\x7fELF"
        assert re.search(r"mma_sync", src)
