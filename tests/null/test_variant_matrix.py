"""reports.data.variant_matrix and the variant bars: one workload's variants (knob configurations
told apart, peers last) side by side per device and shape, the fastest kernel of each row, its speed
next to the peers, and FLOP/s for compute-heavy workloads."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from reports.data import throughput_metric, variant_labels, variant_matrix
from reports.plots import variant_bars

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
FLOPS = 2 * 4096 ** 3
BYTES = 3 * 2 * 4096 ** 2


def _row(variant, knobs, layout, device, median, outcome="ok", dtype="float16"):
    params = json.dumps({"l": 4096, "layout": layout, "m": 4096, "n": 4096})
    kn = json.dumps(knobs)
    ok = outcome == "ok"
    return {"workload": "matmul_tensorcore", "variant": variant, "knobs": kn, "params": params,
            "dtype": dtype, "target": "cuda", "device": device, "outcome": outcome,
            "median_s": median if ok else None, "ci_low_s": median * 0.99 if ok else None,
            "ci_high_s": median * 1.01 if ok else None,
            "gflops": FLOPS / median / 1e9 if ok else None, "gbps": BYTES / median / 1e9 if ok else None,
            "case_key": f"{variant}{kn}{layout}{device}"}


A = {"bx": 4, "by": 16, "step_k": 2, "v": 8}
B = {"bx": 8, "by": 32, "step_k": 4, "v": 8}
FRAME = pd.DataFrame([
    _row("tutorial", A, "NN", H100, 2.0e-3),
    _row("tutorial", B, "NN", H100, 1.0e-3),
    _row("plain", A, "NN", H100, 8.0e-3),
    _row("peer:torch.matmul(fp16)", {}, "NN", H100, 0.5e-3),
    _row("tutorial", A, "TN", H100, 3.0e-3),
    _row("tutorial", B, "TN", H100, 0.0, outcome="wrong"),
    _row("plain", A, "TN", H100, 6.0e-3),
    _row("tutorial", A, "NN", H200, 1.5e-3),
    _row("peer:torch.matmul(fp16)", {}, "NN", H200, 0.3e-3),
    {**_row("tutorial", A, "NN", H100, 1e-3), "workload": "row_sum", "case_key": "other"},
])


def test_labels_name_knobs_only_where_a_variant_has_several():
    df = FRAME[FRAME["workload"] == "matmul_tensorcore"]
    labels = variant_labels(df)
    assert labels[0] == "tutorial [bx=4, by=16, step_k=2, v=8]"
    assert labels[1] == "tutorial [bx=8, by=32, step_k=4, v=8]"
    assert labels[2] == "plain" and labels[3] == "peer:torch.matmul(fp16)"


def test_matrix_columns_rows_and_best():
    m = variant_matrix(FRAME, "matmul_tensorcore")
    assert m.metric == "GFLOP/s"  # 2 n^3 / (6 n^2) operations per byte: compute-heavy
    assert m.columns == ["tutorial [bx=4, by=16, step_k=2, v=8]", "tutorial [bx=8, by=32, step_k=4, v=8]",
                         "plain", "peer:torch.matmul(fp16)"]
    assert [(r.device, r.shape) for r in m.rows] == [
        (H100, "l=4096, layout=NN, m=4096, n=4096 · float16 · cuda"),
        (H100, "l=4096, layout=TN, m=4096, n=4096 · float16 · cuda"),
        (H200, "l=4096, layout=NN, m=4096, n=4096 · float16 · cuda")]
    nn, tn, h200 = m.rows
    assert nn.dtype == "float16"
    # the peer is faster but never the row's best: the best is the fastest kernel
    assert nn.best == "tutorial [bx=8, by=32, step_k=4, v=8]"
    assert nn.cells[nn.best].best and nn.cells[nn.best].vs_best == 1.0
    assert nn.cells["plain"].vs_best == pytest.approx(8.0)
    assert nn.cells["tutorial [bx=4, by=16, step_k=2, v=8]"].rate == pytest.approx(FLOPS / 2e-3 / 1e9)
    assert nn.vs_peers == {"peer:torch.matmul(fp16)": pytest.approx(0.5)}
    # a wrong case keeps its cell (outcome shown), without a time
    wrong = tn.cells["tutorial [bx=8, by=32, step_k=4, v=8]"]
    assert wrong.outcome == "wrong" and wrong.median_s is None and not wrong.best
    assert tn.best == "tutorial [bx=4, by=16, step_k=2, v=8]" and tn.vs_peers == {}
    assert set(h200.cells) == {"tutorial [bx=4, by=16, step_k=2, v=8]", "peer:torch.matmul(fp16)"}
    assert h200.vs_peers["peer:torch.matmul(fp16)"] == pytest.approx(0.2)


def test_bandwidth_workloads_keep_gbps():
    df = FRAME.copy()
    df["gflops"] = df["gbps"] / 4  # 0.25 operations per byte (a row sum)
    assert throughput_metric(df) == "GB/s"
    df["gflops"] = None
    assert throughput_metric(df) == "GB/s"
    df["gbps"] = None
    assert throughput_metric(df) is None
    assert variant_matrix(FRAME, "no_such_workload").rows == []


def test_variant_bars_draw_tflops_for_a_matmul():
    svg = variant_bars(FRAME, "matmul_tensorcore", chart_id="tc")
    assert "TFLOP/s" in svg and "GB/s" not in svg
    assert "tutorial [bx=8, by=32, step_k=4, v=8]" in svg and "torch.matmul(fp16)" in svg


def test_rates_in_the_table_read_tflops_or_tops():
    from reports.html import _rate_text

    assert _rate_text(33700.0, "GFLOP/s", "float16") == "33.7 TFLOP/s"
    assert _rate_text(20000.0, "GFLOP/s", "int8") == "20.0 TOP/s"
    assert _rate_text(512.0, "GFLOP/s", "int4") == "512.0 GOP/s"
    assert _rate_text(900.0, "GB/s", "float32") == "900.0 GB/s"
    assert _rate_text(None, "GB/s", "float32") == ""


def test_columns_of_cuda_source_and_callable_variants_name_their_kind():
    """A result of a CUDA-source or callable variant carries its kind (Result.variant_kind);
    the side-by-side table names it under the column, next to the schedules and the peer."""
    def row(variant, median, kind=None):
        r = _row(variant, {}, "NN", H100, median, dtype="float32")
        r["variant_kind"] = kind or ""
        return r

    frame = pd.DataFrame([row("te_bind", 2e-3), row("cuda_source", 1.5e-3, "cuda_source"),
                          row("triton", 1e-3, "callable:torch"), row("cupy_raw", 1.2e-3, "callable:cupy"),
                          row("peer:torch.matmul(fp16)", 0.9e-3)])
    m = variant_matrix(frame, "matmul_tensorcore")
    assert m.columns == ["te_bind", "cuda_source", "triton", "cupy_raw", "peer:torch.matmul(fp16)"]
    assert m.kinds == {"cuda_source": "cuda_source", "triton": "callable:torch", "cupy_raw": "callable:cupy"}
    assert m.rows[0].best == "triton"  # a callable variant is a kernel of the row, the peer is not

    from reports.html import _variant_table

    table = _variant_table(m)
    assert table["kinds"] == ["", "CUDA source", "callable (torch)", "callable (cupy)", ""]
