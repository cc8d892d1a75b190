"""The matmul_tensorcore workload: registration, layouts, operands (int4/int1 packed), references
against hand-worked products, op and byte counts, the tutorial's schedule through its template, and
suites/tensorcore.toml expanded into cases keyed by dtype and layout with the right peers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from kbtest import tensorcore_tutorial

import kernels as tvm
from harness.execute.inputs import case_data, clear, device_array
from harness.model import Case, pairs
from harness.execute.peers import applies_to
from harness.plan import peer_cases
from harness.suite import load_suite
from kernels import workloads
from kernels.contrib.packing import pack, unpack
from kernels.tuning.space import SpaceError

ROOT = Path(__file__).resolve().parents[2]
W = workloads.get("matmul_tensorcore")


def _p(n, m, l, layout):  # noqa: E741
    return {"n": n, "m": m, "l": l, "layout": layout}


def test_registered_with_the_tutorials_dtypes_layouts_and_knobs():
    assert W.params == ("n", "m", "l", "layout")
    assert W.dtypes == ("float16", "int8", "int4", "int1", "float32")
    assert W.choices == {"layout": ("NN", "NT", "TN", "TT")}
    assert set(W.variants) >= {"tutorial", "plain", "default"}
    for v in ("tutorial", "plain"):
        assert W.variant(v).knob_defaults() == {"bx": 4, "by": 16, "step_k": 2, "v": 8}
        assert W.variant(v).targets == ("cuda", "opencl")
    assert W.variant("default").targets == ("c",)
    assert set(W.peers) == {"torch.matmul(fp16)", "torch._int_mm", "torch.matmul(tf32)", "torch.matmul(tf32=off)"}
    assert W.peak_dtype == {"float32": "tf32"}  # float32 cases: a share of the TF32 matmul peak


@pytest.mark.parametrize("layout, shape_a, shape_b", [("NN", (5, 16), (16, 3)), ("NT", (16, 5), (16, 3)),
                                                      ("TN", (5, 16), (3, 16)), ("TT", (16, 5), (3, 16))])
def test_operand_shapes_follow_the_tutorial(layout, shape_a, shape_b):
    args = W.make_args(_p(5, 3, 16, layout), "int8", np.random.default_rng(0))
    assert [a.shape for a in args] == [shape_a, shape_b, (5, 3)]
    assert [a.dtype for a in args] == [np.int8, np.int8, np.int32]
    assert (args[2] == np.iinfo(np.int32).min).all()  # C poisoned


def test_float16_operands_and_float32_output():
    a, b, c = W.make_args(_p(4, 8, 32, "TT"), "float16", np.random.default_rng(1))
    assert a.dtype == b.dtype == np.float16 and c.dtype == np.float32 and np.isnan(c).all()
    assert a.min() >= -1 and a.max() <= 1 and a.min() < 0 < a.max()


@pytest.mark.parametrize("dtype, per, lo, hi", [("int4", 8, -8, 7), ("int1", 32, 0, 1)])
def test_packed_operands_are_int32_words(dtype, per, lo, hi):
    a, b, c = W.make_args(_p(6, 4, 64, "TN"), dtype, np.random.default_rng(2))
    assert a.dtype == b.dtype == np.int32 and a.shape == (6, 64 // per) and b.shape == (4, 64 // per)
    vals = unpack(a, 4 if dtype == "int4" else 1)
    assert vals.shape == (6, 64) and vals.min() == lo and vals.max() == hi
    assert c.dtype == np.int32


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_int8_reference_is_the_sum_of_products(layout):
    """Against the definition, element by element in Python integers."""
    p = _p(3, 2, 5, layout)
    a, b, _ = W.make_args(p, "int8", np.random.default_rng(3))
    (ref,) = W.reference_of([a, b, None], p, "int8")
    assert ref.dtype == np.int64
    for i in range(3):
        for j in range(2):
            want = sum(int(a[k, i] if layout[1] == "T" else a[i, k])
                       * int(b[j, k] if layout[0] == "T" else b[k, j]) for k in range(5))
            assert ref[i, j] == want


def test_int4_reference_from_hand_packed_words():
    # A row 0 = 1..7, 0 (0x12345670); row 1 = -1 x 8 (0xFFFFFFFF). B row 0 = 1 x 8, row 1 = 0, 1, 0...
    a = np.array([[0x12345670], [-1]], dtype=np.int32)
    b = np.array([[0x11111111], [0x01000000]], dtype=np.int32)
    (ref,) = W.reference_of([a, b, None], _p(2, 2, 8, "TN"), "int4")
    assert ref.tolist() == [[28, 2], [-8, -1]]


def test_int1_reference_counts_common_bits():
    a = np.array([[np.uint32(0xF0000001).view(np.int32)]], dtype=np.int32)
    b = np.array([[np.uint32(0x30000003).view(np.int32)], [0]], dtype=np.int32)
    (ref,) = W.reference_of([a, b, None], _p(1, 2, 32, "TN"), "int1")
    assert ref.tolist() == [[3, 0]]  # bits 30, 31 and 0 in common; none with a zero row


def test_float32_operands_output_and_reference():
    p = _p(5, 7, 24, "TT")
    a, b, c = W.make_args(p, "float32", np.random.default_rng(6))
    assert a.shape == (24, 5) and b.shape == (7, 24)
    assert a.dtype == b.dtype == c.dtype == np.float32 and np.isnan(c).all()
    assert a.min() >= -1 and a.max() <= 1 and a.min() < 0 < a.max()
    (ref,) = W.reference_of([a, b, None], p, "float32")
    assert ref.dtype == np.float64
    assert np.allclose(ref, a.astype(np.float64).T @ b.astype(np.float64).T, rtol=0, atol=1e-12)


def test_float16_reference_is_float64():
    p = _p(4, 3, 16, "NT")
    a, b, _ = W.make_args(p, "float16", np.random.default_rng(4))
    (ref,) = W.reference_of([a, b, None], p, "float16")
    assert ref.dtype == np.float64
    assert np.array_equal(ref, a.astype(np.float64).T @ b.astype(np.float64))


def test_op_and_byte_counts():
    assert W.flops(_p(64, 32, 128, "NN")) == 2 * 64 * 32 * 128
    assert W.bytes(_p(64, 32, 128, "NN"), "float16") == (64 * 128 + 32 * 128) * 2 + 64 * 32 * 4
    assert W.bytes(_p(64, 32, 128, "NN"), "int8") == (64 * 128 + 32 * 128) + 64 * 32 * 4
    assert W.bytes(_p(64, 32, 128, "TN"), "int4") == (64 * 128 + 32 * 128) / 2 + 64 * 32 * 4
    assert W.bytes(_p(64, 32, 128, "TN"), "int1") == (64 * 128 + 32 * 128) / 8 + 64 * 32 * 4


def test_tolerances():
    assert W.tolerance_for("int8", _p(8, 8, 64, "NN")) == (0.0, 0.0)
    assert W.tolerance_for("int4", _p(8, 8, 64, "TN")) == (0.0, 0.0)
    assert W.tolerance_for("float16", _p(8, 8, 64, "NN")) == (1e-3, 1e-3)
    rtol, atol = W.tolerance_for("float16", _p(8, 8, 8192, "NN"))
    assert rtol == 1e-3 and atol == pytest.approx(16 * 8192 / 2 ** 24)
    # TF32: operands rounded to 11 significant bits (u = 2^-11): relative 2u; absolute the smaller of
    # the worst case 2u l and 8 sqrt(l) u, plus the float32 sums' 16 l ulp(1), at least 1e-3
    # l = 4: the worst case 2u * 4 = 2^-8 is below 8 * 2 * u = 2^-7; the sums add 16 * 4 * 2^-24
    assert W.tolerance_for("float32", _p(8, 8, 4, "NN")) == (2.0 ** -10, 2.0 ** -8 + 2.0 ** -18)
    rtol, atol = W.tolerance_for("float32", _p(8, 8, 4096, "NN"))
    assert rtol == 2.0 ** -10 and atol == pytest.approx(8 * 64 / 2048 + 16 * 4096 / 2 ** 24)


def test_logical_and_array_dtypes():
    assert workloads.array_dtype("int4") == np.int32 and workloads.array_dtype("int1") == np.int32
    assert workloads.array_dtype("float16") == np.float16
    assert workloads.element_bits("int4") == 4 and workloads.element_bits("int1") == 1
    assert workloads.element_bits("int8") == 8 and workloads.storage_bytes("int4", 10) == 5.0
    assert W.logical_shape(0, np.zeros((6, 2), np.int32), "int4") == (6, 16)
    assert W.logical_shape(1, np.zeros((6, 2), np.int32), "int1") == (6, 64)
    assert W.logical_shape(2, np.zeros((6, 2), np.int32), "int4") is None  # C holds int32 sums
    assert W.logical_shape(0, np.zeros((6, 2), np.int8), "int8") is None


def test_case_data_and_device_arrays_of_a_packed_case():
    clear()
    case = Case("s", "matmul_tensorcore", "default", pairs(_p(8, 8, 64, "TN")), (), "int4", "c", 0.0, 0.0)
    data = case_data(W, case, seed=5)
    a, b, c = data.args
    assert a.shape == (8, 8) and a.dtype == np.int32 and c.dtype == np.int32
    assert np.array_equal(data.reference[0], unpack(a, 4).astype(np.int64) @ unpack(b, 4).astype(np.int64).T)
    nd = device_array(W, case, 0, a, tvm.cpu(0))
    assert nd.dtype == "int4" and nd.shape == (8, 64)
    assert np.array_equal(nd.numpy().view(np.int32), a)  # the words, unchanged
    out = device_array(W, case, 2, c, tvm.cpu(0))
    assert out.dtype == "int32" and out.shape == (8, 8)
    clear()


def test_invalid_combinations():
    assert W.invalid(_p(8, 8, 64, "TN"), "int4") is None
    assert "int4 takes layout TN only" in W.invalid(_p(8, 8, 64, "NN"), "int4")
    assert "l must be a multiple of 32" in W.invalid(_p(8, 8, 48, "TN"), "int1")
    assert "layout must be one of NN, NT, TN, TT" in W.invalid(_p(8, 8, 64, "XY"), "int8")
    assert W.invalid(_p(8, 8, 48, "NT"), "int8") is None


def _lowered(s, bufs) -> str:
    return str(tvm.lower(s, bufs, simple_mode=True))


@pytest.mark.parametrize("dtype, layout", [("float16", "NT"), ("int8", "TT"), ("int8", "NN"), ("int4", "TN"),
                                           ("int1", "TN")])
def test_tutorial_variant_is_the_tutorials_schedule(dtype, layout):
    """Lowered, the tutorial variant is the tutorial's test_gemm under the same configuration, down
    to the output's name (the tutorial leaves its compute unnamed)."""
    ns = tensorcore_tutorial()
    N, L, M = 64, 256, 32
    ns.update(N=N, L=L, M=M)
    task = ns["autotvm"].task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, dtype, layout),
                                     target="cuda")
    cfg = {"bx": 2, "by": 8, "step_k": 2, "v": 8}
    theirs = _lowered(*task.instantiate(task.config_space.index_of(cfg)))
    ours = _lowered(*W.build("tutorial", _p(N, M, L, layout), dtype, cfg))
    assert ours == re.sub(r"\bcompute", "C", theirs)


def test_plain_variant_drops_only_the_pragma():
    from kernels.build_module import build_spec

    p, cfg = _p(256, 256, 256, "TN"), {"bx": 4, "by": 16, "step_k": 2, "v": 8}
    wmma = build_spec(*W.build("tutorial", p, "float16", cfg), "cuda -arch=sm_80").source
    plain = build_spec(*W.build("plain", p, "float16", cfg), "cuda -arch=sm_80").source
    assert "mma_sync" in wmma and "wmma" not in plain and "_local[" in plain
    # the same launch: blocks and threads
    dims = re.compile(r"__launch_bounds__\((\d+)\)")
    assert dims.findall(wmma) == dims.findall(plain)


def test_knobs_come_from_the_templates_space():
    with pytest.raises(SpaceError, match=r"knob 'bx' has no candidate 3; candidates: \[2, 4, 8\]"):
        W.build("tutorial", _p(64, 64, 64, "NN"), "int8", {"bx": 3})


# -- the suite ---------------------------------------------------------------------------------------


def _suite():
    return load_suite(ROOT / "suites" / "tensorcore.toml")


def test_tensorcore_suite_covers_every_dtype_and_layout_on_cuda():
    suite = _suite()
    kernels = [c for c in suite.cases if not c.peer]
    assert kernels and all(c.target == "cuda" for c in suite.cases)
    covered = {(c.dtype, c.param_dict["layout"]) for c in kernels}
    assert covered == {(d, lay) for d in ("float16", "int8", "float32") for lay in ("NN", "NT", "TN", "TT")} | {
        ("int4", "TN"), ("int1", "TN")}
    # the tutorial's template and the plain schedule, at 4096^3 for every dtype and layout
    for d, lay in covered:
        at = {c.variant for c in kernels if (c.dtype, c.param_dict["layout"]) == (d, lay)
              and c.param_dict["n"] == c.param_dict["m"] == c.param_dict["l"] == 4096}
        assert {"tutorial", "plain"} <= at, (d, lay, at)
    # a hand-picked grid at 8192^3 in float16
    big = [c for c in kernels if c.param_dict["n"] == 8192]
    assert big and {c.dtype for c in big} == {"float16"} and len({c.knobs for c in big}) >= 4
    # every case has its own key: dtype and layout are in it
    assert len({c.key for c in suite.cases}) == len(suite.cases)
    assert all(f"layout={c.param_dict['layout']}" in c.key and f"/{c.dtype}/" in c.key for c in kernels)
    for c in kernels:
        assert (c.rtol, c.atol) == W.tolerance_for(c.dtype, c.param_dict)


def test_tensorcore_suite_peers_pair_with_their_dtypes():
    suite = _suite()
    kernels = [c for c in suite.cases if not c.peer]
    peers = peer_cases(kernels, suite.peers, applies_to)
    by = {}
    for c in peers:
        by.setdefault(c.peer, set()).add((c.dtype, c.param_dict["layout"], c.param_dict["n"]))
    assert {d for d, _, _ in by["torch.matmul(fp16)"]} == {"float16"}
    assert {d for d, _, _ in by["torch._int_mm"]} == {"int8"}
    for tf32 in ("torch.matmul(tf32)", "torch.matmul(tf32=off)"):  # every float32 layout, TF32 on and off
        assert by[tf32] == {("float32", lay, 4096) for lay in ("NN", "NT", "TN", "TT")}
    assert {lay for _, lay, _ in by["torch._int_mm"]} == {"NN", "NT", "TN", "TT"}
    assert (("float16", "NN", 8192) in by["torch.matmul(fp16)"])
    assert not any(c.dtype in ("int4", "int1") for c in peers)


def test_pack_then_reference_matches_a_direct_product():
    rng = np.random.default_rng(9)
    x = rng.integers(-8, 8, size=(4, 64))
    y = rng.integers(-8, 8, size=(3, 64))
    (ref,) = W.reference_of([pack(x, 4), pack(y, 4), None], _p(4, 3, 64, "TN"), "int4")
    assert np.array_equal(ref, x @ y.T)



def test_the_template_is_an_autotvm_task_with_the_tutorials_space():
    from kernels import autotvm
    from kernels.workloads.tensorcore import TEMPLATE

    task = autotvm.task.create(TEMPLATE, args=(64, 128, 32, "int8", "NN", True), target="cuda")
    assert len(task.config_space) == 288
    assert list(task.config_space.space_map) == ["bx", "by", "step_k", "v"]
    assert task.flop == 2 * 64 * 128 * 32


def test_warp_tile_variant_where_the_schedule_is_present():
    """With kernels.workloads.tensorcore_schedule in the checkout, `warp_tile` is a variant whose
    defaults are the tutorial's warp tile (one 16x16 fragment a warp, WMMA on CUDA)."""
    pytest.importorskip("kernels.workloads.tensorcore_schedule")
    from kernels.build_module import build_spec

    v = W.variant("warp_tile")
    assert v.knob_defaults() == {"bx": 4, "by": 16, "step_k": 2, "v": 8, "ty": 1, "tx": 8, "warp_m": 16,
                                 "double_buffer": 0, "flat_fetch": 0, "align_all": 0,
                                 "raster": 0, "widen": 0, "mma": 0}
    assert v.targets == ("cuda", "opencl")
    src = build_spec(*W.build("warp_tile", _p(256, 256, 256, "NN"), "float16"), "cuda -arch=sm_90").source
    assert "mma_sync" in src


def test_integer_reference_is_exact_at_the_extremes():
    """The int8 reference (summed through float64 BLAS while that is exact) gives hand-derived values:
    (-128) * (-128) summed over l = 64 is 64 * 16384 everywhere, and mixed signs cancel exactly."""
    from kernels.workloads.tensorcore import _reference

    a = np.full((8, 64), -128, np.int8)
    b = np.full((64, 4), -128, np.int8)
    (c,) = _reference([a, b], {"layout": "NN"}, "int8")
    assert c.dtype == np.int64 and (c == 64 * 16384).all()
    b[::2] = 127
    (c,) = _reference([a, b], {"layout": "NN"}, "int8")
    assert (c == 32 * 16384 + 32 * (-128 * 127)).all()
