"""int4 operands widened to int8 in shared memory (``matmul_tensorcore/warp_tile`` with ``widen=1``):
the CUDA build of a 4096^3 TN configuration uses int8 WMMA fragments (16x16x16 ``signed char``, no
``precision::s4``) and compiles with nvcc; the same schedules built for OpenCL (PoCL: plain code)
compute the int64 reference exactly; the widening copy of kernels.lower.subbyte (one load a packed
word, its elements stored as bytes) is exact on the C target too, where the word's elements are
whole, half a word, or not aligned at all (element by element); the fuzzer draws ``widen`` for int4."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kbtest import opencl_available, run

import kernels as tvm
from kernels import te, workloads
from kernels.build_module import build_spec
from kernels.contrib import nvcc
from kernels.contrib.packing import pack
from kernels.workloads.tensorcore_schedule import tensorcore_matmul

W = workloads.get("matmul_tensorcore")
needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")

#: a 4096^3 configuration as the probe suite times them: 4 x 4 fragments of 16x16x16 a warp
BIG = dict(bx=8, by=16, step_k=2, v=16, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1, widen=1)

#: knob sets run on OpenCL: several fragments a warp, the tutorial's fetch and the flat one, a fetch of
#: half a word a thread (v=4), one of four words (v=32), double buffering and three copies, rastering
SMALL = {
    "2x2 flat": dict(bx=4, by=8, step_k=2, v=16, ty=4, tx=8, warp_m=16, flat_fetch=1, align_all=1),
    "4x2 tutorial fetch": dict(bx=8, by=8, step_k=1, v=8, ty=4, tx=8, warp_m=32),
    "half words, double-buffered": dict(bx=4, by=8, step_k=4, v=4, ty=2, tx=8, warp_m=16, double_buffer=1),
    "four words, 3 copies, raster": dict(bx=4, by=16, step_k=2, v=32, ty=2, tx=16, warp_m=32, flat_fetch=1,
                                         double_buffer=3, raster=2),
}


def _p(n, m, l):  # noqa: E741
    return {"n": n, "m": m, "l": l, "layout": "TN"}


def _cuda_source(knobs, shape=(4096, 4096, 4096), arch="sm_90"):
    s, args = W.build("warp_tile", _p(*shape), "int4", knobs)
    return build_spec(s, args, f"cuda -arch={arch}").source


def test_widened_int4_takes_int8_fragments_on_cuda():
    src = _cuda_source(BIG)
    frag = "nvcuda::wmma::fragment<nvcuda::wmma::{}, 16, 16, 16, signed char, nvcuda::wmma::{}> " \
           "{}_int8_frag[4];"
    assert frag.format("matrix_a", "row_major", "A") in src
    assert frag.format("matrix_b", "col_major", "B") in src
    assert "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, int> C_local_frag[16];" in src
    assert src.count("nvcuda::wmma::mma_sync(") == 16
    assert "precision::s4" not in src and "experimental" not in src
    # the shared tiles are int8, rows of 2 * 16 k padded by 16 bytes (storage_align(32, 16)): 128 x 48
    assert "__shared__ __align__(32) signed char A_int8[6144];" in src
    assert "load_matrix_sync(A_int8_frag[0], (&A_int8[" in src and "]), 48);" in src
    # the operands stay packed int4 words in global memory: each thread reads 16 elements of A and B
    # per fetch round as two 32-bit words each, and stores them as four 4-byte vectors
    assert "int* __restrict__ A, int* __restrict__ B, int* __restrict__ C" in src
    for X in "AB":
        assert len(re.findall(rf"int {X}_word\d* = {X}\[", src)) == 2
    assert src.count("*(char4*)(A_int8 + ") == 4 and src.count("*(char4*)(B_int8 + ") == 4


def test_without_widen_the_same_knobs_keep_the_s4_fragments():
    # the knob is what changes the fragments: int4 without it is WMMA's experimental s4 (8x8x32)
    knobs = dict(BIG, widen=0, step_k=1, v=8)
    src = _cuda_source(knobs)
    assert "precision::s4" in src and "signed char>" not in src and "A_int8" not in src


@needs_nvcc
def test_widened_fragments_compile():
    out = nvcc.compile_cuda(_cuda_source(BIG), target_format="cubin", arch="sm_90")
    assert out[:4] == b"\x7fELF"


@needs_opencl
@pytest.mark.parametrize("name, shape", [(name, [(64, 64, 128), (128, 64, 256)][k % 2])
                                         for k, name in enumerate(SMALL)])
def test_widened_schedules_are_exact_on_opencl(name, shape):
    p = _p(*shape)
    s, args = W.build("warp_tile", p, "int4", dict(SMALL[name], widen=1))
    f = tvm.build(s, args, "opencl")
    src = f.imported_modules[0].get_source()
    assert "A_int8" in src and "A_word" in src  # the int8 tiles, filled a packed word at a time
    a, b, c = W.make_args(p, "int4", np.random.default_rng(sum(shape)))
    assert (c == np.iinfo(np.int32).min).all()
    _, _, got = run(f, "opencl", a, b, c)
    (ref,) = W.reference_of([a, b, c], p, "int4")
    np.testing.assert_array_equal(got.astype(np.int64), ref)


@needs_opencl
def test_a_ragged_k_is_exact_on_opencl():
    # l = 200: the last 32-long k tile is guarded (its fetch moves elements one by one)
    p = _p(64, 64, 200)
    s, args = W.build("warp_tile", p, "int4", dict(SMALL["2x2 flat"], widen=1))
    f = tvm.build(s, args, "opencl")
    a, b, c = W.make_args(p, "int4", np.random.default_rng(9))
    _, _, got = run(f, "opencl", a, b, c)
    np.testing.assert_array_equal(got.astype(np.int64), W.reference_of([a, b, c], p, "int4")[0])


@pytest.mark.parametrize("dtype, split, words", [
    ("int4", 8, True),    # a whole word a vector
    ("int4", 16, True),   # two words a vector
    ("int4", 4, True),    # half a word a vector
    ("int4", 3, False),   # across words: element by element
    ("int1", 32, True),   # one word of 32 bits
])
def test_the_widening_copy_is_exact_on_c(dtype, split, words):
    bits = 4 if dtype == "int4" else 1
    N, L = 6, 96
    A = te.placeholder((N, L), name="A", dtype=dtype)
    A8 = te.compute((N, L), lambda i, k: A[i, k].astype("int8"), name="A8")
    s = te.create_schedule(A8.op)
    ko, ki = s[A8].split(A8.op.axis[1], factor=split)
    s[A8].vectorize(ki)
    f = tvm.build(s, [A, A8], "c")
    assert ("A_word" in f.get_source()) == words
    rng = np.random.default_rng(split)
    x = rng.integers(-8, 8, (N, L)) if dtype == "int4" else rng.integers(0, 2, (N, L))
    out = np.full((N, L), 99, np.int8)
    f(pack(x.astype(np.int32), bits), out)
    np.testing.assert_array_equal(out, x)


def test_the_fuzzer_draws_widen_for_int4_only():
    from kernels.testing.fuzz.spaces import draw_samples

    seen = {}
    for sample, _ in zip(draw_samples("opencl", 5, ["tc_warp_tile"]), range(400)):
        seen.setdefault(sample["dtype"], set()).add(sample["knobs"]["widen"])
    assert seen["int4"] == {0, 1}
    assert all(v == {0} for d, v in seen.items() if d != "int4") and len(seen) > 1


def test_widened_product_is_over_int8_copies():
    A, B, C = tensorcore_matmul(16, 32, 8, "int4", "TN", widen=1)
    copies = C.op.input_tensors
    assert [t.op.name for t in copies] == ["A.int8", "B.int8"] and all(t.dtype == "int8" for t in copies)
    assert copies[0].op.input_tensors[0] is A and copies[1].op.input_tensors[0] is B
