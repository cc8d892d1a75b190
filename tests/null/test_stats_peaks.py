"""harness.stats.peaks: which measured peak a result is a percentage of, worked out by hand; the
workloads' read/write split of their bytes; harness.measure.derived with a traffic split."""

from __future__ import annotations

import pytest

from harness.measure.peaks import derived
from harness.model import Timing
from harness.stats.peaks import (
    MIN_FLOP_INTENSITY,
    READ_MOSTLY_SHARE,
    bandwidth_peak,
    flops_peak_key,
    needs_flops_peak,
    ops_unit,
    pct_peak_text,
    peak_bw_kind,
    peak_flops_kind,
    peak_share_text,
    rate_text,
)
from kernels.workloads import get

PEAKS = {"copy_gbps": 2500.0, "read_gbps": 3000.0, "matmul_fp32_gflops": 50_000.0}


def test_a_kernel_that_only_reads_is_measured_against_the_read_peak():
    # a row sum of 16384 x 16384 float32: reads 16384^2 * 4 bytes, writes 16384 * 4 (1/16385 of it)
    w = get("row_sum")
    read, written = w.traffic({"n": 16384, "m": 16384}, "float32")
    assert (read, written) == (16384 * 16384 * 4.0, 16384 * 4.0)
    assert bandwidth_peak(PEAKS, read, written) == ("read", 3000.0)
    # exp reads and writes as many bytes: a copy's traffic
    read, written = get("exp").traffic({"n": 1 << 26}, "float32")
    assert read == written == 4.0 * (1 << 26)
    assert bandwidth_peak(PEAKS, read, written) == ("copy", 2500.0)
    # vector_add: 2 reads, 1 write
    assert get("vector_add").traffic({"n": 10}, "float32") == (80.0, 40.0)
    assert bandwidth_peak(PEAKS, 80.0, 40.0)[0] == "copy"


def test_the_read_mostly_boundary_and_the_fallbacks():
    total = 1000.0
    at = READ_MOSTLY_SHARE * total  # 50 bytes of 1000 written: still read-mostly
    assert bandwidth_peak(PEAKS, total - at, at) == ("read", 3000.0)
    assert bandwidth_peak(PEAKS, total - at - 1, at + 1) == ("copy", 2500.0)
    assert bandwidth_peak(PEAKS, 1000.0, None) == ("copy", 2500.0)  # split unknown
    assert bandwidth_peak({"copy_gbps": 2500.0}, 1000.0, 0.0) == ("copy", 2500.0)  # no read peak
    assert bandwidth_peak({"copy_gbps": 2500.0, "read_gbps": None}, 1000.0, 0.0) == ("copy", 2500.0)
    assert bandwidth_peak(None, 1000.0, 0.0) == ("copy", None)
    assert bandwidth_peak(PEAKS, 0.0, 0.0) == ("copy", 2500.0)


def test_derived_uses_the_peak_of_the_traffic():
    t = Timing(samples=(1e-3,), median=1e-3)
    # 3e9 bytes in 1 ms = 3000 GB/s: 100 % of the read peak, 120 % of the copy peak
    d = derived(t, flops=None, nbytes=3e9, peaks=PEAKS, traffic=(3e9 - 1e6, 1e6))
    assert d["peak_bw"] == "read" and d["gbps"] == pytest.approx(3000.0)
    assert d["pct_peak_bw"] == pytest.approx(100.0)
    d = derived(t, flops=None, nbytes=3e9, peaks=PEAKS, traffic=(1.5e9, 1.5e9))
    assert d["peak_bw"] == "copy" and d["pct_peak_bw"] == pytest.approx(120.0)
    d = derived(t, flops=None, nbytes=3e9, peaks=PEAKS)  # no split given: the copy peak, as before
    assert d["peak_bw"] == "copy" and d["pct_peak_bw"] == pytest.approx(120.0)


def test_the_flop_peak_is_worked_out_from_one_operation_per_byte():
    assert MIN_FLOP_INTENSITY == 1.0
    row_sum = get("row_sum")
    p = {"n": 16384, "m": 16384}
    assert not needs_flops_peak(row_sum.flops(p), row_sum.bytes(p, "float32"))  # 1 add per 4 bytes
    matmul = get("matmul")
    p = {"n": 1024, "m": 1024, "k": 1024}
    # 2 * 1024^3 operations over 3 * 1024^2 * 4 bytes: 170.7 per byte
    assert needs_flops_peak(matmul.flops(p), matmul.bytes(p, "float32"))
    assert needs_flops_peak(100.0, 100.0) and not needs_flops_peak(99.0, 100.0)
    assert needs_flops_peak(5.0, 0.0) and not needs_flops_peak(None, 10.0) and not needs_flops_peak(0, 10)
    assert [flops_peak_key(d) for d in ("float16", "bfloat16", "float64", "float32", None)] == [
        "matmul_fp16_gflops", "matmul_fp16_gflops", "matmul_fp64_gflops", "matmul_fp32_gflops",
        "matmul_fp32_gflops"]


def test_stored_results_say_which_peak():
    # the peak_bw_kind column (Result.peaks.bandwidth); NULL (NaN in a frame): stored before the read
    # peak existed, when every percentage was of the copy peak
    assert peak_bw_kind("read") == "read" and peak_bw_kind("copy") == "copy"
    assert peak_bw_kind(None) == "copy" and peak_bw_kind(float("nan")) == "copy"
    assert pct_peak_text(93.14, "read") == "93.1 % of read peak"
    assert pct_peak_text(120.0, None) == "120 % of copy peak"
    assert pct_peak_text(None, "read") == "" and pct_peak_text(float("nan"), "read") == ""
    # a table shows the nearer peak: FLOP where the kernel is nearer it
    assert peak_share_text(0.58, 61.24) == "61.2 % of FLOP peak"
    assert peak_share_text(93.14, 0.5, "read") == "93.1 % of read peak"
    assert peak_share_text(None, None, "read") == ""
    assert peak_share_text(float("nan"), 3.0) == "3 % of FLOP peak"


# -- peaks per dtype class ------------------------------------------------------------------------

TC = get("matmul_tensorcore")
TC_PARAMS = {"n": 8192, "m": 8192, "l": 8192, "layout": "TN"}


def test_an_integer_matmul_is_never_a_share_of_the_copy_peak():
    assert [flops_peak_key(d) for d in ("int8", "uint8", "int4", "int1", "int32")] == [
        "matmul_int8_gops", "matmul_int8_gops", None, None, None]
    # 2 * 8192^3 operations in 3.2 ms: 343.6 TOP/s; 8192^2 * (1 + 1 + 4) bytes: 125.8 GB/s
    t = Timing(samples=(3.2e-3,), median=3.2e-3)
    flops, nbytes = TC.flops(TC_PARAMS), TC.bytes(TC_PARAMS, "int8")
    assert flops == 2.0 * 8192 ** 3 and needs_flops_peak(flops, nbytes)
    no_int_peak = {"copy_gbps": 3000.0, "read_gbps": 3300.0, "matmul_fp16_gflops": 700_000.0,
                   "matmul_int8_gops": None}
    d = derived(t, flops, nbytes, no_int_peak, dtype="int8", traffic=TC.traffic(TC_PARAMS, "int8"))
    assert d["gflops"] == pytest.approx(flops / 3.2e-3 / 1e9)
    assert d["pct_peak_bw"] is None and d["pct_peak_flops"] is None  # not "4.2 % of copy peak"
    with_int_peak = {**no_int_peak, "matmul_int8_gops": 1_000_000.0}
    d = derived(t, flops, nbytes, with_int_peak, dtype="int8")
    assert d["pct_peak_flops"] == pytest.approx(100.0 * flops / 3.2e-3 / 1e9 / 1e6)  # 34.4 %
    assert d["pct_peak_bw"] == pytest.approx(100.0 * nbytes / 3.2e-3 / 1e9 / 3000.0)
    # int4 and int1 have no peak of their own: no percentage, even with the int8 peak measured
    for dtype in ("int4", "int1"):
        d = derived(t, flops, TC.bytes(TC_PARAMS, dtype), with_int_peak, dtype=dtype)
        assert d["pct_peak_bw"] is None and d["pct_peak_flops"] is None
    # a memory-bound integer kernel keeps its bandwidth share
    d = derived(t, flops=1e6, nbytes=4e9, peaks=no_int_peak, dtype="int32")
    assert d["pct_peak_bw"] == pytest.approx(100.0 * 4e9 / 3.2e-3 / 1e9 / 3000.0)


def test_a_stored_int8_share_is_labelled_with_its_peak():
    assert peak_flops_kind("matmul_int8_gops") == "matmul_int8_gops"
    assert peak_flops_kind(None) is None and peak_flops_kind(float("nan")) is None
    assert peak_share_text(4.2, 34.36, "copy", "matmul_int8_gops") == "34.4 % of int8 matmul peak"
    assert peak_share_text(4.2, 34.36, "copy", None) == "34.4 % of FLOP peak"


def test_rates_are_scaled_for_people():
    assert rate_text(362534.72, "FLOP/s") == "362.5 TFLOP/s"
    assert rate_text(2450.3) == "2.5 TB/s" and rate_text(999.94) == "999.9 GB/s"
    assert rate_text(1000.0) == "1.0 TB/s" and rate_text(1.5e6, "OP/s") == "1.5 POP/s"
    assert rate_text(0.25) == "250.0 MB/s" and rate_text(2e-5) == "20.0 kB/s"
    assert rate_text(3e-10) == "0.3 B/s"
    assert rate_text(None) == "" and rate_text(float("nan")) == ""
    assert ops_unit("int8") == "OP/s" and ops_unit("uint4") == "OP/s" and ops_unit("float16") == "FLOP/s"
    assert ops_unit(None) == "FLOP/s"


def test_a_tf32_matmul_is_a_share_of_the_tf32_peak():
    """matmul_tensorcore's float32 cases run on the TF32 tensor cores (its ``peak_dtype``): a share of
    the TF32 matmul peak, never of the FFMA float32 one they would exceed several times over."""
    assert TC.peak_dtype["float32"] == "tf32" and flops_peak_key("tf32") == "matmul_tf32_gflops"
    assert flops_peak_key("float32") == "matmul_fp32_gflops"  # the matmul workload's FFMA kernels
    # 2 * 8192^3 flop in 3.2 ms: 343.6 TFLOP/s; TF32 peak 450 TFLOP/s, FFMA peak 50 TFLOP/s
    t = Timing(samples=(3.2e-3,), median=3.2e-3)
    flops, nbytes = TC.flops(TC_PARAMS), TC.bytes(TC_PARAMS, "float32")
    peaks = {**PEAKS, "matmul_tf32_gflops": 450_000.0}
    d = derived(t, flops, nbytes, peaks, dtype="tf32")
    assert d["pct_peak_flops"] == pytest.approx(100.0 * 2 * 8192 ** 3 / 3.2e-3 / 1e9 / 450_000.0)  # 76.4 %
    assert derived(t, flops, nbytes, PEAKS, dtype="tf32")["pct_peak_flops"] is None  # not measured
    assert peak_share_text(0.1, 76.36, "copy", "matmul_tf32_gflops") == "76.4 % of TF32 matmul peak"
