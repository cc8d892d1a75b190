"""reports/ on a real SQLite store with several runs of history: HTML, Markdown, JUnit, pytest-benchmark
JSON, CSV/Parquet. No device: the results are synthetic, written through harness.store as the
harness writes them (two GPUs, a wrong case, a slower case, a step in a history, hostile names)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness import __version__, env
from harness.model import Case, MeasureConfig, Result, Timing, Verdict
from harness.stats import detect_steps
from harness.store import Store, UnknownRun
from reports import collect, junit_xml, markdown_summary, pybench_json, write_all
from reports import html as report_html
from reports.data import case_history, case_rows
from reports.markdown import md_escape
from reports.plots import device_peaks, roofline_chart, variant_bars
from reports.pybench_json import sample_stats

HOSTILE = "<script>alert(1)</script>"
HOSTILE_VARIANT = "\"&'|pipe $\\notamacro{$"  # quotes, a table pipe and broken mathtext
HOSTILE_DEVICE = "<b>Evil GPU</b> \"&' | x"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
N_RUNS = 8  # runs 1..8; the report is of run 8, judged against run 7
COMMITS = [f"{i:x}" * 40 for i in range(1, N_RUNS)] + ["c0ffee" * 6 + "abcd-dirty"]
PEAKS = {H100: (3000.0, 50000.0), A100: (1700.0, 19500.0), HOSTILE_DEVICE: (900.0, 8000.0)}
N_SAMPLES = 40


@dataclass(frozen=True)
class FakeSuite:
    name: str = "nightly"
    path: str = "suites/nightly.toml"
    sha256: str = "cd" * 32


def fingerprint(gpu: str, uuid: str, sm: int, cc: str, clock: float) -> dict:
    fp = {f: None for f in env.FIELDS}
    fp.update(fingerprint_version=1, gpu_name=gpu, gpu_uuid=uuid, gpu_sm_count=sm, gpu_compute_capability=cc,
              gpu_memory_total_bytes=80 * 2**30, gpu_driver_version="560.35.03", cuda_version="12.6",
              gpu_max_sm_clock_mhz=clock, host="gpu-node-1", cpu_model="AMD EPYC 9654 96-Core Processor",
              cpu_count=192, cpu_physical_cores=96, os="Linux 6.8.0-45-generic", python_version="3.11.7",
              kbench_version=__version__, device="cuda", gpu_index=0, gpu_l2_cache_bytes=50 * 2**20,
              gpu_power_limit_w=700.0, host_memory_bytes=1024 * 2**30, arch="x86_64",
              python_implementation="CPython")
    return fp


ENVS = {H100: fingerprint(H100, "GPU-h100", 132, "9.0", 1980.0),
        A100: fingerprint(A100, "GPU-a100", 108, "8.0", 1410.0),
        HOSTILE_DEVICE: fingerprint(HOSTILE_DEVICE, "GPU-evil", 46, "8.9", 2520.0)}

# (workload, variant, knobs, params, flops, bytes, base median seconds on H100)
SPECS = [
    ("row_sum", "default", (), (("m", 4096), ("n", 4096)), 4096 * 4096, 4 * 4096 * 4097, 60e-6),
    ("row_sum", "split", (("factor", 16),), (("m", 4096), ("n", 4096)), 4096 * 4096, 4 * 4096 * 4097, 30e-6),
    ("row_sum", "rfactor_crossthread", (("factor", 32),), (("m", 4096), ("n", 4096)), 4096 * 4096,
     4 * 4096 * 4097, 25e-6),
    ("matmul", "naive", (), (("k", 2048), ("m", 2048), ("n", 2048)), 2 * 2048**3, 3 * 4 * 2048**2, 9e-3),
    ("matmul", "shared_blocked", (("tile", 32),), (("k", 2048), ("m", 2048), ("n", 2048)), 2 * 2048**3,
     3 * 4 * 2048**2, 1.2e-3),
    ("vector_add", "default", (), (("n", 1 << 24),), 1 << 24, 12 * (1 << 24), 80e-6),
]
MISSING_SPEC = ("row_sum", "bind", (("factor", 16),), (("m", 4096), ("n", 4096)), 4096 * 4096,
                4 * 4096 * 4097, 40e-6)
HOSTILE_SPEC = (HOSTILE, HOSTILE_VARIANT, (("tag", "<i>"),), (("n", 1024),), 1 << 20, 1 << 22, 5e-6)


def make_case(spec, device: str) -> Case:
    workload, variant, knobs, params, *_ = spec
    model = {H100: "H100", A100: "A100"}.get(device, "")
    return Case(suite="nightly", workload=workload, variant=variant, params=params, knobs=knobs,
                dtype="float32", target="cuda", rtol=1e-4, atol=1e-5, gpu_model=model)


def timed(rng, median: float, clock: float) -> Timing:
    samples = median * (1.0 + 0.01 * rng.standard_normal(N_SAMPLES))
    samples[5] *= 1.3  # one outlier
    clocks = np.full(N_SAMPLES, clock)
    clocks[10:14] = clock * 0.9
    med = float(np.median(samples))
    lo, hi = np.quantile(samples, [0.4, 0.6])
    return Timing(samples=tuple(float(s) for s in samples), discarded=1, clocks_mhz=tuple(clocks.tolist()),
                  median=med, ci_low=float(lo), ci_high=float(hi), mode="cold", stop_reason="converged",
                  telemetry=(("timer", "cuda_event"), ("batch", 1)))


def result(rng, spec, device: str, factor: float, outcome: str = "ok", message: str = "") -> Result:
    case = make_case(spec, device)
    base = spec[6] * {H100: 1.0, A100: 1.7}.get(device, 2.5)
    if outcome != "ok":
        return Result(case=case, outcome=outcome, message=message, device=device,
                      env_id=env.fingerprint_id(ENVS[device]), worker="node-1/pid-7")
    timing = timed(rng, base * factor, ENVS[device]["gpu_max_sm_clock_mhz"])
    gbps = spec[5] / timing.median / 1e9
    gflops = spec[4] / timing.median / 1e9
    bw, fl = PEAKS[device]
    return Result(case=case, outcome="ok", timing=timing, gbps=gbps, gflops=gflops,
                  pct_peak_bw=100 * gbps / bw, pct_peak_flops=100 * gflops / fl, device=device,
                  env_id=env.fingerprint_id(ENVS[device]), worker="node-1/pid-7", build_s=0.5,
                  nvcc_calls=1)


def factor(spec, device: str, run: int) -> float:
    """The planted changes: row_sum/split on H100 8 % slower in the last run; matmul/shared_blocked
    on H100 12 % faster from run 4 on (a step in its history); row_sum/default on H100 5 % faster
    in the last run."""
    if device == H100 and spec[1] == "split" and run == N_RUNS:
        return 1.08
    if device == H100 and spec[1] == "shared_blocked" and run >= 4:
        return 0.88
    if device == H100 and spec[:2] == ("row_sum", "default") and run == N_RUNS:
        return 0.95
    return 1.0


def build_store(path: Path) -> tuple[Store, int, list[Verdict]]:
    """N_RUNS runs of the nightly suite (the A100 joins for the last three); returns the store,
    the last run's id and its verdicts against the run before (hand-made: the statistics module is
    tested on its own)."""
    rng = np.random.default_rng(7)
    store = Store.open(path)
    ids: dict[tuple, int] = {}
    for run in range(1, N_RUNS + 1):
        rid = store.begin_run(FakeSuite(), ["run", "suites/nightly.toml"], "local", MeasureConfig(),
                              git_commit=COMMITS[run - 1])
        for spec in SPECS:
            for device in (H100, A100):
                if device == A100 and run < N_RUNS - 2:
                    continue
                if device == A100 and spec[0] == "vector_add" and run == N_RUNS:
                    r = result(rng, spec, device, 1.0, outcome="wrong",
                               message="max |err| 3.1e-02 at [17] (expected <2.0> | got 2.031)")
                else:
                    r = result(rng, spec, device, factor(spec, device, run))
                ids[(run, r.case.key)] = store.record_result(rid, r, env=ENVS[device])
        if run < N_RUNS:
            r = result(rng, MISSING_SPEC, H100, 1.0)
            ids[(run, r.case.key)] = store.record_result(rid, r, env=ENVS[H100])
        else:
            r = result(rng, HOSTILE_SPEC, HOSTILE_DEVICE, 1.0)
            ids[(run, r.case.key)] = store.record_result(rid, r, env=ENVS[HOSTILE_DEVICE])
        store.finish_run(rid, "done")
    last = rid
    base_run = N_RUNS - 1
    frame = store.results_frame([base_run, last])
    med = {(int(r.run_id), r.case_key): r.median_s for r in frame.itertuples()}
    verdicts = []
    for r in store.results_frame(last).itertuples():
        v = {"case_key": r.case_key, "workload": r.workload, "variant": r.variant, "target": r.target,
             "device": r.device, "env_id": r.env_id, "new_outcome": r.outcome, "new_result_id": r.result_id,
             "n_new": N_SAMPLES}
        base_id = ids.get((base_run, r.case_key))
        if base_id is None:
            verdicts.append(Verdict(verdict="NEW", **v))
            continue
        v.update(base_outcome="ok", base_median_s=med[(base_run, r.case_key)], base_result_ids=(base_id,),
                 base_run_ids=(base_run,), n_base=N_SAMPLES)
        if r.outcome != "ok":
            verdicts.append(Verdict(verdict="WRONG", message=f"was correct in run {base_run}", **v))
            continue
        ratio = r.median_s / med[(base_run, r.case_key)]
        name = "SAME"
        if ratio > 1.03:
            name = "SLOWER"
        elif ratio < 0.97:
            name = "FASTER"
        elif r.workload == "matmul" and r.variant == "naive" and r.device == A100:
            name = "AMBIGUOUS"
        p = 1e-6 if name in ("SLOWER", "FASTER") else 0.2
        verdicts.append(Verdict(verdict=name, new_median_s=r.median_s, ratio=ratio,
                                ratio_ci=(ratio * 0.99, ratio * 1.01), p_value=p, q_value=min(1.0, p * 3),
                                **v))
    gone = make_case(MISSING_SPEC, H100)
    verdicts.append(Verdict(case_key=gone.key, verdict="MISSING", workload="row_sum", variant="bind",
                            target="cuda", device=H100, base_outcome="ok", base_run_ids=(base_run,),
                            base_result_ids=(ids[(base_run, gone.key)],), base_median_s=40e-6))
    return store, last, verdicts


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[Verdict]]:
    """The store of :func:`build_store` (closed again) and the last run's verdicts."""
    path = tmp_path_factory.mktemp("reports") / "k.db"
    store, _, verdicts = build_store(path)
    store.close()
    return path, verdicts


@pytest.fixture(scope="module")
def report(built):
    """(ReportData, HTML text, CPU seconds to render it) of the last run against the one before."""
    db, verdicts = built
    with Store.open(db, create=False) as store:
        data = collect(store, N_RUNS, verdicts, baseline_label="run 7")
    t0 = time.process_time()  # CPU time: a busy CI machine must not fail this
    path = report_html.write_html(data, db.parent / "out" / "report.html")
    took = time.process_time() - t0
    return data, path.read_text(encoding="utf-8"), took


# -- data -------------------------------------------------------------------------------------


def test_collect_gathers_run_environments_history_and_baseline_samples(report):
    data, _, _ = report
    assert data.run_id == N_RUNS and data.run["suite_name"] == "nightly"
    assert len(data.results) == len(SPECS) * 2 + 1
    assert {fp["gpu_name"] for fp in data.environments.values()} == {H100, A100, HOSTILE_DEVICE}
    assert list(data.history.columns) == ["run_id", "run_started_at", "git_commit", "case_key", "env_id",
                                          "device", "median_s", "ci_low_s", "ci_high_s", "outcome"]
    assert data.history["run_id"].is_monotonic_increasing and data.history["run_id"].max() == N_RUNS
    key = make_case(SPECS[4], H100).key
    assert len(case_history(data, key, H100)) == N_RUNS
    assert len(case_history(data, make_case(SPECS[0], A100).key, A100)) == 3
    # the WRONG case has no timing in the last run: its ok history stops the run before
    assert case_history(data, make_case(SPECS[5], A100).key)["run_id"].tolist() == [6, 7]
    slow = make_case(SPECS[1], H100).key
    assert len(data.baseline_samples[slow]["samples"]) == N_SAMPLES
    assert data.baseline_samples[slow]["clocks"][0] == 1980.0


def test_steps_come_from_harness_stats(report):
    data, _, _ = report
    key = make_case(SPECS[4], H100).key
    hist = case_history(data, key, H100)
    assert data.steps[key] == list(detect_steps(hist["median_s"].tolist()))
    (step,) = data.steps[key]
    assert step.index == 3 and hist["run_id"][step.index] == 4 and step.ratio == pytest.approx(0.88, rel=0.02)
    assert not any("Step detection is not available" in n for n in data.notes)
    # the step is marked on the trend chart and named in its caption
    _, html, _ = report
    assert ("−12.0 % at run 4" in html or "-12.0 % at run 4" in html
            or re.search(r"-1[12]\.\d % at run 4", html))


def test_collect_without_verdicts(built):
    with Store.open(built[0], create=False) as store:
        data = collect(store, N_RUNS)
    assert data.verdicts == [] and data.baseline_label is None and data.baseline_samples == {}
    html = report_html.render_html(data)
    assert "there is no baseline" in html
    md = markdown_summary(data)
    assert "did not finish correctly" in md and "wrong" in md
    root = ET.fromstring(junit_xml(data))
    assert root.get("failures") == "1" and root.get("skipped") == "0"


# -- HTML -------------------------------------------------------------------------------------


def test_html_is_self_contained(report):
    _, html, _ = report
    low = html.lower()
    for bad in ('src="http', "src='http", "<link", "@import", "url(http", 'href="http', "<iframe",
                "<img", "xlink:href=\"http"):
        assert bad not in low, bad
    # the only <script> is the page's own, allowed by hash in the CSP
    assert low.count("<script") == 1
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert "default-src &#39;none&#39;" in csp and "script-src &#39;sha256-" in csp


def test_html_has_one_chart_per_expected_figure(report):
    data, html, _ = report
    rows = case_rows(data)
    workloads = {r["workload"] for r in rows}
    eligible = sum(1 for r in rows if len(case_history(data, r["case_key"], r["device"])) >= 3)
    trends = min(eligible, report_html.MAX_TREND_CHARTS)
    slow = sum(1 for r in rows if r["verdict"] in ("SLOWER", "AMBIGUOUS"))
    assert eligible == 11 and slow == 2
    expected = len(workloads) + 1 + trends + 2 * slow  # bars, roofline, trends, histogram + clock trace
    assert html.count("<svg") == expected
    assert len(re.findall(r'data-chart="bars-\d+"', html)) == len(workloads)
    assert len(re.findall(r'data-chart="trend-\d+"', html)) == trends
    assert html.count('data-chart="roofline"') == 1
    assert len(re.findall(r'data-chart="hist-\d+"', html)) == slow
    assert len(re.findall(r'data-chart="clock-\d+"', html)) == slow


def test_svg_ids_are_unique_and_references_resolve(report):
    _, html, _ = report
    ids = re.findall(r'\bid="([^"]+)"', html)
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes, sorted(dupes)[:10]
    refs = set(re.findall(r"url\(#([^)]+)\)", html)) | set(re.findall(r'href="#([^"]+)"', html))
    assert refs and refs <= set(ids), sorted(refs - set(ids))[:10]
    assert "<!--" not in html  # matplotlib's text comments are dropped


def test_html_table_has_one_row_per_case(report):
    data, html, _ = report
    table = re.search(r'<table id="cases">(.*?)</table>', html, re.DOTALL).group(1)
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.DOTALL).group(1)
    assert body.count("<tr") == len(data.results)
    head = re.search(r"<thead>(.*?)</thead>", table, re.DOTALL).group(1)
    cols = re.findall(r"<th[^>]*>(.*?)</th>", head)
    assert cols == ["workload", "variant", "knobs", "shape", "dtype", "target", "device", "verdict",
                    "Δ vs baseline", "outcome", "median", "95 % CI", "bandwidth", "compute", "% of peak", "p / q"]
    # rates in units for people: every bandwidth cell a number and a scaled unit, never raw GB/s
    for cell in re.findall(r'<td class="num" data-sort="[^"]*">([^<]*B/s)</td>', body):
        value, unit = cell.split(" ")
        assert unit in ("kB/s", "MB/s", "GB/s", "TB/s") and 1.0 <= float(value) < 1000.0, cell
    # most urgent first: the WRONG case, then the SLOWER one
    chips = re.findall(r'<td data-sort="\d">(?:<span class="chip (\w+)")?', body)
    assert chips[:2] == ["WRONG", "SLOWER"] and chips[-1] == "SAME"
    for row in re.findall(r"<tr\b.*?</tr>", body, re.DOTALL):
        assert len(re.findall(r"<td\b", row)) == len(cols)


def test_html_summary_and_header(report):
    data, html, _ = report
    assert "1 case slower than run 7 by more than 3 %" in html
    for name, n in (("SLOWER", 1), ("WRONG", 1), ("FASTER", 1), ("AMBIGUOUS", 1), ("NEW", 1),
                    ("MISSING", 1), ("SAME", len(data.results) - 5)):
        assert re.search(rf'class="chip big {name}"[^>]*><span class="n">{n}</span>{name}', html), name
    assert COMMITS[-1] in html
    assert H100 in html and A100 in html and "560.35.03" in html and "12.6" in html
    assert ">132<" in html and "1980 MHz" in html
    assert "How to read this report" in html and "Mann-Whitney" in html and "Benjamini-Hochberg" in html


def test_hostile_names_are_escaped_everywhere(report):
    _, html, _ = report
    assert HOSTILE not in html and "<b>Evil GPU</b>" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;Evil GPU&lt;/b&gt;" in html
    # in attributes (title=, aria-label=) quotes are escaped too
    assert re.search(r'title="[^"]*&lt;script&gt;alert\(1\)&lt;/script&gt;[^"]*"', html)
    assert "&#34;&amp;&#39;|pipe $\\notamacro{$" in html  # jinja2: " -> &#34;, ' -> &#39;
    # the SVG charts carry the names as escaped text too
    svgs = re.findall(r"<svg.*?</svg>", html, re.DOTALL)
    assert any("&lt;script&gt;alert(1)&lt;/script&gt;" in s for s in svgs)
    assert not any("<script" in s.lower() for s in svgs)
    assert any("&#34;&amp;&#39;|pipe $\\notamacro{$" in s or "\"&amp;'|pipe $\\notamacro{$" in s
               for s in svgs)


def test_svg_guard_rejects_active_content():
    from reports.plots import _active_content

    assert _active_content('<svg viewBox="0 0 1 1"><use xlink:href="#a"/>'
                           '<text>once = &lt;b&gt;</text></svg>') is None
    assert _active_content('<svg aria-label="x on="><g/></svg>') is None
    assert _active_content('<svg><g onload="x"/></svg>') == "onload"
    assert _active_content('<svg><use href="http://e/x.svg#a"/></svg>') == "href"
    assert _active_content("<svg><script>x</script></svg>") == "script"


def test_html_renders_fast(report):
    _, _, took = report
    assert took < 10, f"rendering took {took:.1f} s of CPU time"


def test_variant_bars_and_roofline_directly(report):
    data, _, _ = report
    svg = variant_bars(data.results, "row_sum", chart_id="t")
    assert svg.startswith("<svg") and 'id="t-' in svg and "GB/s" in svg
    assert H100 in svg and A100 in svg and "rfactor_crossthread" in svg
    peaks = device_peaks(data.results)
    assert (peaks[H100]["gbps"] == pytest.approx(3000.0)
            and peaks[A100]["gflops"]["float32"] == pytest.approx(19500.0))
    assert "FLOP / byte" in roofline_chart(data.results, chart_id="r")
    assert roofline_chart(data.results[data.results["gflops"].isna()], chart_id="r") is None


# -- Markdown ---------------------------------------------------------------------------------


def test_markdown_summary(report):
    data, _, _ = report
    md = markdown_summary(data)
    assert md.startswith("### kbench run 8 · suite nightly · commit c0ffeec0-dirty · vs run 7")
    assert "SLOWER 1" in md and "WRONG 1" in md and "SAME" in md
    table = [line for line in md.splitlines() if line.startswith("| ")]
    header, rows = table[0], table[1:]
    ncols = header.count(" | ") + 1
    assert len(rows) == 5  # the non-SAME cases present in the run: FASTER, SLOWER, WRONG, AMBIGUOUS, NEW
    for row in rows:  # escaped pipes never split a cell
        assert len(re.split(r"(?<!\\)\|", row.strip().strip("|"))) == ncols
    assert "+8." in md and "WRONG" in md and "\\| got 2.031" in md
    assert HOSTILE not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "<b>" not in md and "&lt;b&gt;Evil GPU&lt;/b&gt;" in md
    assert "http" not in md and "](" not in md  # link-free
    assert "#### In the baseline but not in this run" in md and "row\\_sum/bind" in md


def test_md_escape():
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("<x> & *y*\nz") == "&lt;x&gt; &amp; \\*y\\* z"
    assert md_escape("`code` [l](u) $x$") == "\\`code\\` \\[l\\](u) \\$x\\$"
    assert md_escape("see https://e.com and www.e.com") == "see https\\://e.com and www\\.e.com"
    assert md_escape("x" * 300, limit=10) == "x" * 9 + "…"


# -- JUnit ------------------------------------------------------------------------------------

# A subset of the Ant/Jenkins JUnit schema (the shape Jenkins' junit-10.xsd and GitLab/GitHub
# reporters accept): one testsuite, properties, testcases with skipped/error/failure/system-out.
JUNIT_XSD = """<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" elementFormDefault="qualified">
  <xs:simpleType name="nonNegativeDecimal">
    <xs:restriction base="xs:decimal"><xs:minInclusive value="0"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="isoDateTimeNoZone">
    <xs:restriction base="xs:dateTime">
      <xs:pattern value="[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"/>
    </xs:restriction>
  </xs:simpleType>
  <xs:complexType name="outcomeType">
    <xs:simpleContent>
      <xs:extension base="xs:string">
        <xs:attribute name="message" type="xs:string"/>
        <xs:attribute name="type" type="xs:string"/>
      </xs:extension>
    </xs:simpleContent>
  </xs:complexType>
  <xs:element name="property">
    <xs:complexType>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="value" type="xs:string" use="required"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="properties">
    <xs:complexType><xs:sequence>""" \
    """<xs:element ref="property" minOccurs="0" maxOccurs="unbounded"/></xs:sequence>
    </xs:complexType>
  </xs:element>
  <xs:element name="testcase">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="skipped" minOccurs="0" type="outcomeType"/>
        <xs:element name="error" minOccurs="0" maxOccurs="unbounded" type="outcomeType"/>
        <xs:element name="failure" minOccurs="0" maxOccurs="unbounded" type="outcomeType"/>
        <xs:element name="system-out" minOccurs="0" maxOccurs="unbounded" type="xs:string"/>
        <xs:element name="system-err" minOccurs="0" maxOccurs="unbounded" type="xs:string"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="classname" type="xs:string" use="required"/>
      <xs:attribute name="time" type="nonNegativeDecimal" use="required"/>
      <xs:attribute name="assertions" type="xs:string"/>
      <xs:attribute name="status" type="xs:string"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuite">
    <xs:complexType>
      <xs:sequence>
        <xs:element ref="properties" minOccurs="0"/>
        <xs:element ref="testcase" minOccurs="0" maxOccurs="unbounded"/>
        <xs:element name="system-out" minOccurs="0" type="xs:string"/>
        <xs:element name="system-err" minOccurs="0" type="xs:string"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="time" type="nonNegativeDecimal" use="required"/>
      <xs:attribute name="timestamp" type="isoDateTimeNoZone"/>
      <xs:attribute name="hostname" type="xs:string"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""


@pytest.fixture(scope="module")
def junit_schema():
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(JUNIT_XSD)


def test_junit_validates_and_fails_only_slower_and_wrong(report, junit_schema):
    data, _, _ = report
    text = junit_xml(data)
    junit_schema.validate(text)  # raises XMLSchemaValidationError with the reason
    root = ET.fromstring(text)
    cases = root.findall("testcase")
    assert root.tag == "testsuite" and root.get("name") == "kbench.nightly"
    assert int(root.get("tests")) == len(cases) == len(data.results) + 1  # + the MISSING case
    failed = {tc.get("name"): tc.find("failure") for tc in cases if tc.find("failure") is not None}
    assert set(failed) == {make_case(SPECS[1], H100).key, make_case(SPECS[5], A100).key}
    assert root.get("failures") == "2" and root.get("errors") == "0"
    slow = failed[make_case(SPECS[1], H100).key]
    assert (slow.get("type") == "SLOWER"
            and re.search(r"1\.0[6-9]\d*x the median of run 7", slow.get("message")))
    assert "95 % CI" in slow.get("message")
    wrong = failed[make_case(SPECS[5], A100).key]
    assert wrong.get("message").startswith("wrong: max |err|") and wrong.get("type") == "wrong"
    skipped = {tc.get("name") for tc in cases if tc.find("skipped") is not None}
    assert skipped == {make_case(HOSTILE_SPEC, HOSTILE_DEVICE).key, make_case(MISSING_SPEC, H100).key}
    assert root.get("skipped") == "2"
    by_name = {tc.get("name"): tc for tc in cases}
    tc = by_name[make_case(SPECS[0], H100).key]
    assert tc.get("classname") == "row_sum.default"
    med = data.results.set_index("case_key").loc[tc.get("name"), "median_s"]
    assert float(tc.get("time")) == pytest.approx(med, rel=1e-6)
    # hostile names survive the round trip exactly (ElementTree escaped them)
    assert (by_name[make_case(HOSTILE_SPEC, HOSTILE_DEVICE).key].get("classname")
            == f"{HOSTILE}.{HOSTILE_VARIANT}")
    assert HOSTILE not in text


def test_junit_strips_characters_xml_cannot_hold(report, junit_schema):
    data, _, _ = report
    res = data.results.copy()
    res.loc[res["outcome"] != "ok", "message"] = "nvcc: \x1b[31merror\x1b[0m \x00 bad"
    text = junit_xml(type(data)(**{**data.__dict__, "results": res}))
    junit_schema.validate(text)
    assert "\x1b" not in text and "\ufffd[31merror" in text


# -- pytest-benchmark JSON --------------------------------------------------------------------


def test_pybench_json_layout_and_stats(report):
    data, _, _ = report
    doc = json.loads(json.dumps(pybench_json(data), allow_nan=False))
    assert set(doc) >= {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    mi = doc["machine_info"]
    assert set(mi) >= {"node", "processor", "machine", "python_implementation", "python_version", "release",
                       "system", "cpu"}
    assert mi["node"] == "gpu-node-1" and mi["system"] == "Linux" and mi["release"] == "6.8.0-45-generic"
    ci = doc["commit_info"]
    assert set(ci) >= {"id", "time", "author_time", "dirty", "project", "branch"}
    assert ci["dirty"] is True and ci["id"] == COMMITS[-1][:40]
    ok = data.results[data.results["outcome"] == "ok"]
    assert len(doc["benchmarks"]) == len(ok)
    stat_keys = {"min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
                 "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total", "data", "iterations"}
    samples = {f"kbench::{r.case_key}": np.asarray(r.samples, dtype=np.float64) for r in ok.itertuples()}
    for b in doc["benchmarks"]:
        assert set(b) >= {"group", "name", "fullname", "params", "param", "extra_info", "options", "stats"}
        st = b["stats"]
        assert set(st) >= stat_keys
        x = samples[b["fullname"]]
        # float64 by hand
        assert st["rounds"] == x.size == N_SAMPLES and st["data"] == x.tolist()
        assert st["min"] == x.min() and st["max"] == x.max()
        assert st["mean"] == pytest.approx(x.sum() / x.size, rel=1e-12)
        assert st["stddev"] == pytest.approx(math.sqrt(((x - x.mean()) ** 2).sum() / (x.size - 1)), rel=1e-9)
        s = np.sort(x)
        assert st["median"] == pytest.approx((s[19] + s[20]) / 2, rel=1e-15)
        assert st["q1"] == pytest.approx(np.median(s[:20])) and st["q3"] == pytest.approx(np.median(s[20:]))
        assert st["total"] == pytest.approx(x.sum(), rel=1e-12)
        assert st["ops"] == pytest.approx(x.size / x.sum(), rel=1e-12)
        assert st["iqr_outliers"] >= 1  # the planted outlier
        assert st["outliers"] == f"{st['stddev_outliers']};{st['iqr_outliers']}"
        assert b["extra_info"]["gbps"] > 0 and b["params"]["dtype"] == "float32"


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 9, 40, 41, 43])
def test_sample_stats_match_pytest_benchmark(n):
    stats_mod = pytest.importorskip("pytest_benchmark.stats")
    rng = np.random.default_rng(n)
    x = rng.lognormal(-10, 0.3, n)
    ref = stats_mod.Stats()
    for v in x.tolist():
        ref.update(v)
    got = sample_stats(x)
    for field in stats_mod.Stats.fields:
        want = getattr(ref, field)
        if isinstance(want, str):
            assert got[field] == want, field
        else:
            assert got[field] == pytest.approx(want, rel=1e-9, abs=1e-300), field


def test_pytest_benchmark_compare_reads_the_file(report, tmp_path):
    """pytest-benchmark's own loader and table renderer accept the file (its `compare` command)."""
    pytest.importorskip("pytest_benchmark")
    data, _, _ = report
    path = tmp_path / "0001_kbench.json"
    path.write_text(json.dumps(pybench_json(data)))
    proc = subprocess.run([sys.executable, "-m", "pytest_benchmark", "--storage", str(tmp_path / "storage"),
                           "compare", str(path), "--columns=min,median,max,mean,ops,rounds",
                           "--csv", str(tmp_path / "cmp.csv")],
                          check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Failed to load" not in proc.stdout + proc.stderr
    assert "row_sum/split[factor=16]" in proc.stdout and "benchmark 'row_sum" in proc.stdout
    csv = pd.read_csv(tmp_path / "cmp.csv")
    assert len(csv) == int((data.results["outcome"] == "ok").sum())


# -- write_all --------------------------------------------------------------------------------


def test_write_all_writes_every_output(report, tmp_path):
    data, _, _ = report
    out = tmp_path / "kbench-out" / "nested"
    paths = write_all(data, out)
    assert set(paths) == {"html", "markdown", "junit", "pybench", "csv", "parquet"}
    for kind, name in (("html", "report.html"), ("markdown", "summary.md"), ("junit", "junit.xml"),
                       ("pybench", "benchmarks.json"), ("csv", "results.csv"),
                       ("parquet", "results.parquet")):
        assert paths[kind] == out / f"run8-{name}" and paths[kind].stat().st_size > 0
    csv = pd.read_csv(paths["csv"])
    assert len(csv) == len(data.results)
    assert json.loads(csv["samples"].dropna().iloc[0])[0] > 0
    pq = pd.read_parquet(paths["parquet"])
    assert len(pq) == len(data.results) and len(pq["samples"].iloc[0]) in (0, N_SAMPLES)
    json.loads(paths["pybench"].read_text())


# -- edge cases -------------------------------------------------------------------------------


def test_reports_of_an_empty_run_and_of_cpu_only_failures(tmp_path):
    """A run with no results, and one whose cases failed or ran on a CPU without peaks: every
    writer still produces a valid file (no chart where there is nothing to draw)."""
    with Store.open(tmp_path / "k.db") as store:
        empty = store.begin_run(FakeSuite(), [], "local", MeasureConfig())
        store.finish_run(empty, "failed")
        run = store.begin_run(FakeSuite(), [], "local", MeasureConfig())
        cpu = {f: None for f in env.FIELDS}
        cpu.update(fingerprint_version=1, host="laptop", cpu_model="Test CPU", cpu_count=8, device="cpu",
                   kbench_version=__version__)
        case = Case("nightly", "row_sum", "default", (("m", 64), ("n", 64)), (), "float32", "c")
        samples = tuple(1e-4 * (1 + 0.01 * i) for i in range(12))
        timing = Timing(samples=samples, median=float(np.median(samples)), ci_low=min(samples),
                        ci_high=max(samples))
        store.record_result(run, Result(case, "ok", timing=timing, gbps=2.0, device="Test CPU"), env=cpu)
        broken = Case("nightly", "row_sum", "split", (("m", 64), ("n", 64)), (("factor", 3),), "float32", "c")
        store.record_result(run, Result(broken, "build_error", message="cc: error\x07 <oops>"))
        store.finish_run(run, "done")
        datas = [collect(store, empty), collect(store, run)]
    with Store.open(tmp_path / "k.db") as store, pytest.raises(UnknownRun, match="no run 99"):
        collect(store, 99)
    for data in datas:
        html = report_html.render_html(data)
        assert html.count("<svg") == data.results["workload"].nunique()  # bars only: no roofline, no history
        assert "<oops>" not in html
        ET.fromstring(junit_xml(data))
        markdown_summary(data)
        json.dumps(pybench_json(data), allow_nan=False)
        paths = write_all(data, tmp_path / f"out{data.run_id}")
        assert paths["html"].name == f"run{data.run_id}-report.html"
    root = ET.fromstring(junit_xml(datas[1]))
    assert root.get("tests") == "2" and root.get("failures") == "1"
    assert root.find("testcase/failure").get("message").startswith("build_error: cc: error\ufffd <oops>")
    assert len(pybench_json(datas[1])["benchmarks"]) == 1


def test_no_ci_of_a_median_from_fewer_samples_than_the_run_asked_for(tmp_path):
    with Store.open(tmp_path / "k.db") as store:
        run = store.begin_run(FakeSuite(), [], "local", MeasureConfig(min_samples=5))
        for n, variant in ((2, "default"), (5, "split")):
            case = Case("nightly", "row_sum", variant, (("m", 64), ("n", 64)), (), "float32", "c")
            samples = tuple(1e-4 * (1 + 0.01 * i) for i in range(n))
            timing = Timing(samples=samples, median=float(np.median(samples)), ci_low=min(samples),
                            ci_high=max(samples))
            store.record_result(run, Result(case, "ok", timing=timing, device="Test CPU"))
        store.finish_run(run, "done")
        data = collect(store, run)
    rows = {r["variant"]: r for r in case_rows(data)}
    assert rows["default"]["n_samples"] == 2 and rows["default"]["ci_low_s"] is None
    assert rows["default"]["median_s"] == pytest.approx(1.005e-4)  # the median is still shown
    assert rows["split"]["ci_low_s"] == pytest.approx(1e-4)
    assert rows["split"]["ci_high_s"] == pytest.approx(1.04e-4)
    assert list(data.results["run_min_samples"]) == [5, 5]


def test_a_tuned_case_shows_the_tunings_cost_next_to_the_runs_median(tmp_path):
    """The report's row of a tuned case that ran its stored best carries the cost the tuning stored
    for it and run/tune (here 2.04e-5 / 2e-5 = 1.02); the tuning section names the sessions' clock
    (fill_tuning's sessions recorded none)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
    try:
        from store_data import fill_tuning, tuned_case
    finally:
        sys.path.pop(0)
    from harness.model import TuningRef

    with Store.open(tmp_path / "k.db") as store:
        fill_tuning(store)
        case = tuned_case()
        best = store.best_config(case.tuning_key, "H100")
        run = store.begin_run(FakeSuite(), [], "local", MeasureConfig(min_samples=3))
        samples = (2.03e-5, 2.04e-5, 2.05e-5)
        timing = Timing(samples=samples, median=2.04e-5, ci_low=2.03e-5, ci_high=2.05e-5)
        ref = TuningRef("best", "H100", best["session_id"], best["trial_id"], best["cost_s"])
        store.record_result(run, Result(case, "ok", timing=timing, device="H100", tuning=ref))
        store.finish_run(run, "done")
        data = collect(store, run)
    (row,) = case_rows(data)
    assert row["tuning_cost_s"] == pytest.approx(2e-5) and best["cost_s"] == pytest.approx(2e-5)
    page = report_html.render_html(data)
    assert page.count("run/tune 1.02x") == 2  # in the case's row and in its tuning section
    assert "timed with an unrecorded clock" in page
