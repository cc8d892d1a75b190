"""reports.site on hand-made stores and frames: generations, case ids, the matrix's ranks (peers and
failed cases not ranked, ties by median only), an empty store's site."""

from __future__ import annotations

import re

import pandas as pd
from null.test_reports import build_store

from harness.store import Store
from reports.site import _matrix, case_id, generation_of, publish


def test_generation_and_case_id():
    assert generation_of("H100", "NVIDIA H100 80GB HBM3") == "H100"
    assert generation_of("", "AMD EPYC 9654") == "AMD EPYC 9654"
    assert generation_of(None, None) == "unknown device"
    assert case_id("row_sum/default[]/n=4/float32/cuda@H100", "H100") == "row_sum/default[]/n=4/float32/cuda"
    assert case_id("row_sum/default[]/n=4/float32/c", "") == "row_sum/default[]/n=4/float32/c"
    # a suffix that is not the case's own model stays
    assert case_id("x/v[]/n=4/float32/cuda@A100", "H100") == "x/v[]/n=4/float32/cuda@A100"


def _row(variant, gen, median, outcome="ok", gbps=100.0, pct_bw=50.0, gflops=None, pct_fl=None, bw_kind=None):
    return {"case_id": f"w/{variant}", "variant": variant, "knobs": "{}", "target": "cuda", "gen": gen,
            "outcome": outcome, "median_s": median, "gbps": gbps, "pct_peak_bw": pct_bw, "gflops": gflops,
            "pct_peak_flops": pct_fl, "run_id": 1, "message": "", "peak_bw_kind": bw_kind,
            "peak_flops_kind": None}


def test_matrix_ranks_skip_peers_and_failures():
    f = pd.DataFrame([
        _row("a", "A100", 3e-3), _row("b", "A100", 2e-3), _row("c", "A100", None, outcome="wrong"),
        _row("peer:torch.sum", "A100", 1e-3),
        _row("a", "H100", 1e-3), _row("b", "H100", 1.5e-3, bw_kind="read"),
        _row("c", "H100", 0.5e-3, gflops=900.0, pct_fl=90.0),
        _row("peer:torch.sum", "H100", 0.1e-3),
    ])
    m = _matrix(f, "n=4", "float32")
    assert m["generations"] == ["A100", "H100"]
    cells = {(r["label"], g): c for r in m["rows"] for g, c in r["cells"].items()}
    assert [cells[(v, "A100")]["rank"] for v in ("a", "b", "c", "peer:torch.sum")] == [2, 1, None, None]
    assert [cells[(v, "H100")]["rank"] for v in ("a", "b", "c", "peer:torch.sum")] == [2, 3, 1, None]
    assert m["best"] == {"A100": "b", "H100": "c"} and m["best_differs"]
    assert cells[("b", "A100")]["rank_text"] == "1 of 2" and cells[("c", "H100")]["rank_text"] == "1 of 3"
    # nearer its FLOP peak than its bandwidth peak: FLOP/s shown
    assert cells[("c", "H100")]["throughput"] == "900.0 GFLOP/s" and "FLOP peak" in cells[("c", "H100")]["pct"]
    assert cells[("a", "H100")]["throughput"] == "100.0 GB/s"
    # the bandwidth peak the result was measured against: copy (a result without the note: copy), read
    assert cells[("a", "H100")]["pct"] == "50 % of copy peak"
    assert cells[("b", "H100")]["pct"] == "50 % of read peak"
    assert not cells[("c", "A100")]["ok"] and cells[("c", "A100")]["outcome"] == "wrong"
    # peers are listed last
    assert m["rows"][-1]["peer"]
    same = _matrix(f[f["variant"] != "c"], "n=4", "float32")
    assert same["best"] == {"A100": "b", "H100": "a"} and same["best_differs"]
    one = _matrix(f[f["gen"] == "H100"], "n=4", "float32")
    assert not one["best_differs"]


def test_empty_store_site(tmp_path):
    with Store.open(tmp_path / "k.db") as st:
        s = publish(st, tmp_path / "site")
    assert (s.runs, s.cases, s.workloads, s.reports_written) == (0, 0, 0, ())
    assert "The store holds no run yet." in s.index.read_text(encoding="utf-8")


def test_hostile_names_are_text(tmp_path):
    store, _, _ = build_store(tmp_path / "k.db")
    with store:
        s = publish(store, tmp_path / "site", reports=False, judge=False)
    pages = [s.index, *(tmp_path / "site").glob("*/*.html")]
    assert len(pages) == 1 + s.cases + s.workloads
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script>alert(1)</script>" not in text and "<b>Evil GPU</b>" not in text, page
    index = s.index.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in index
    assert not re.search(r'href="runs/', index)  # reports=False: none written, none linked



def test_wrong_result_shown_in_trend_and_matrix(tmp_path):
    from null.test_reports import N_RUNS

    store, _, _ = build_store(tmp_path / "k.db")
    with store:
        s = publish(store, tmp_path / "site", reports=False, judge=False)
    case = next((tmp_path / "site" / "cases").glob("vector_add-default-*.html")).read_text(encoding="utf-8")
    a100 = re.search(r'<section class="generation" data-generation="A100".*?</section>', case,
                     re.DOTALL).group(0)
    # A100 ran the last three runs; the last was wrong: two points, the failure listed with its message
    assert 'data-points="2"' in a100 and f"run {N_RUNS}: wrong max |err| 3.1e-02" in a100.replace("&lt;", "<")
    matrix = next((tmp_path / "site" / "workloads").glob("vector_add-*.html")).read_text(encoding="utf-8")
    assert f'<td class="cell failed" data-gen="A100">wrong<span class="sub">run {N_RUNS}</span>' in matrix
    assert s.cases == 8
