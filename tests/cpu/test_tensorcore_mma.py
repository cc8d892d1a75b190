"""The tensor_core pragma's ``mma`` implementation (``pragma(ko, "tensor_core", "mma")``, the
warp-tile schedule's knob ``mma=1``): the same fragment code as WMMA, printed as ldmatrix +
mma.sync PTX (kernels.codegen.cuda_mma). Here: what it is printed as, where it stays plain code and
why, and that nvcc takes the sources for sm_80 and sm_90 (no GPU needed; the numbers are
tests/gpu/test_tensorcore_mma_gpu.py, the errors tests/error/test_tensorcore_impl_errors.py)."""

from __future__ import annotations

import logging

import pytest

from kernels.build_module import build_spec
from kernels.contrib import nvcc
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")

WARP_4X4 = dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64)
WARP_2X2_INT8 = dict(bx=4, by=16, step_k=1, v=16, ty=2, tx=16, warp_m=32)


def _source(knobs, layout="NN", dtype="float16", arch="sm_80", shape=(256, 256, 256), caplog=None, **kw):
    A, B, C = tensorcore_matmul(*shape, dtype=dtype, layout=layout, widen=kw.get("widen", 0))
    s, args = tensorcore_schedule(A, B, C, dtype, layout, **knobs, **kw)
    if caplog is None:
        return build_spec(s, args, f"cuda -arch={arch}").source
    with caplog.at_level(logging.DEBUG, logger="kernels.tensor_core"):
        return build_spec(s, args, f"cuda -arch={arch}").source


def _loads(src: str) -> dict:
    return {name: src.count(f"{name}(A_") + src.count(f"{name}(B_")
            for name in ("kb_mma_load_a_row", "kb_mma_load_a_col", "kb_mma_load_b_row", "kb_mma_load_b_col")}


@pytest.mark.parametrize("layout, a, b", [("NN", "row", "row"), ("NT", "col", "row"), ("TN", "row", "col"),
                                          ("TT", "col", "col")])
def test_float16_fragments_are_ldmatrix_and_mma_sync_in_every_layout(layout, a, b):
    src = _source(WARP_4X4, layout, mma=1)
    assert "nvcuda::wmma" not in src and "#include <mma.h>" not in src
    # a 4 x 4 block of fragments a warp: 4 + 4 loads and 16 products a k step, 16 stores
    assert src.count("kb_mma_sync(C_local_frag[") == 16
    assert _loads(src) == {f"kb_mma_load_a_{a}": 4, f"kb_mma_load_b_{b}": 4,
                           **{k: 0 for k in _loads(src) if k not in (f"kb_mma_load_a_{a}", f"kb_mma_load_b_{b}")}}
    assert src.count("kb_mma_store_row((&C[") == 16 and src.count("kb_mma_fill(C_local_frag[") == 16
    assert "kb_mma_ab16 A_shared_frag[4];" in src and "kb_mma_acc<float> C_local_frag[16];" in src


def test_the_wmma_implementation_is_unchanged_without_the_knob():
    src = _source(WARP_4X4, "NN")
    assert "kb_mma" not in src and src.count("nvcuda::wmma::mma_sync(") == 16


def test_int8_takes_the_mma_implementation_in_layout_tn():
    src = _source(WARP_2X2_INT8, "TN", "int8", mma=1)
    assert "kb_mma_ab8<signed char> A_shared_frag[2];" in src and "kb_mma_acc<int> C_local_frag[4];" in src
    assert src.count("kb_mma_sync(") - src.count("void kb_mma_sync(") == 4


def test_int4_widened_to_int8_takes_the_mma_implementation():
    knobs = dict(bx=8, by=16, step_k=2, v=16, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1)
    src = _source(knobs, "TN", "int4", widen=1, mma=1)
    assert "kb_mma_ab8<signed char> A_int8_frag[4];" in src, src[-3000:]


@pytest.mark.parametrize("layout", ["NN", "NT", "TT"])
def test_int8_outside_layout_tn_stays_plain_code_and_says_why(layout, caplog):
    src = _source(WARP_2X2_INT8, layout, "int8", mma=1, caplog=caplog)
    assert "kb_mma" not in src and "wmma" not in src and "C_local[" in src
    assert any("ldmatrix transposes 16-bit elements" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]


def test_a_fragment_shape_other_than_16x16x16_stays_plain_code_and_says_why(caplog):
    # int8 in a 32 x 8 warp block: WMMA's 32x8x16 fragments, which mma.sync m16n8k16 does not tile here
    knobs = dict(bx=4, by=16, step_k=1, v=16, ty=2, tx=4, warp_m=8)
    wmma = _source(knobs, "TN", "int8", shape=(256, 256, 128))
    assert "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 32, 8, 16" in wmma
    src = _source(knobs, "TN", "int8", shape=(256, 256, 128), mma=1, caplog=caplog)
    assert "kb_mma" not in src and "wmma" not in src
    assert any("takes 16x16x16 fragments; the warp's block needs 32x8x16" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_int1_stays_plain_code_under_the_mma_implementation(caplog):
    knobs = dict(bx=8, by=16, step_k=1, v=32, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1)
    src = _source(knobs, "TN", "int1", shape=(256, 1024, 256), mma=1, caplog=caplog)
    assert "kb_mma" not in src and "bmma_sync" not in src
    assert any("mma implementation" in r.getMessage() for r in caplog.records)


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_sources_compile(arch):
    for knobs, layout, dtype in ((WARP_4X4, "NN", "float16"), (WARP_4X4, "NT", "float16"),
                                 (dict(WARP_4X4, double_buffer=3, step_k=1, flat_fetch=1, align_all=1), "TT",
                                  "float16"), (WARP_2X2_INT8, "TN", "int8")):
        src = _source(knobs, layout, dtype, arch=arch, mma=1)
        assert "kb_mma_sync(C_local_frag[0]" in src
        out = nvcc.compile_cuda(src, target_format="cubin", arch=arch)
        assert out[:4] == b"\x7fELF"
