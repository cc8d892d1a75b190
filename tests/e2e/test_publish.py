"""``kbench publish``: the static site over a store of real runs made by the harness on the C target
(and, in one test, the OpenCL target on PoCL),
on two fake GPU generations ("H100" and "H200": the local executor runs every case on this CPU under
that model's label, as a fake GPU node of a Ray cluster does).

The planted difference: on "H200", the variant that was fastest on "H100" gets injected work (the
calibration mechanism, ``MeasureConfig.slowdown``: dependent work of 9x its own time in each sample)
from its fourth run on, so its best variant differs between generations and its H200 trend has one
step. Expected ranks, steps and verdict counts are computed from the store independently of the site.
The pages are opened in headless Chromium (console errors, non-blank screenshots)."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from html import unescape
from pathlib import Path

import numpy as np
import pytest
from null.test_reports import FakeSuite
from test_cli import kbench
from test_report_html import CHROMIUM, browser, console_errors

from harness import judge
from harness.execute.local import LocalExecutor
from harness.model import MeasureConfig
from harness.run import RunRequest, run_suite
from harness.store import Store
from reports.site import publish

SUITE = """
[suite]
name = "site"
description = "two row-sum schedules on the C target"
targets = ["c"]
timeout_s = 60

[measure]
min_samples = 5
min_time_s = 0.01
max_time_s = 0.06

[[workload]]
name = "row_sum"
params = { n = [256], m = [128] }
dtypes = ["float32"]
variants = ["default", "split"]
"""
H100_RUNS, H200_PLAIN, H200_SLOW = 3, 3, 3
SLOWDOWN = 9.0


class LabelledExecutor(LocalExecutor):
    """This machine as a node of GPU model ``label``: each case runs here with ``gpu_model = label``;
    the variants in ``slow`` get ``SLOWDOWN`` injected work."""

    def __init__(self, label: str, slow: tuple[str, ...] = ()):
        super().__init__()
        self.label, self.slow = label, slow

    def run(self, batches, config, on_result, side_specs=None):
        for batch in batches:
            for case in batch:
                cfg = replace(config, slowdown=SLOWDOWN if case.variant in self.slow else 0.0)
                super().run([[replace(case, gpu_model=self.label)]], cfg, on_result, side_specs=side_specs)


def _latest(db: Path, label: str) -> dict[str, float]:
    with Store.open(db, create=False) as st:
        f = st.results_frame(gpu_model=label)
    f = f.sort_values("run_id").groupby("variant").tail(1)
    return dict(zip(f["variant"], f["median_s"]))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("publish")
    suite, db = tmp / "site.toml", tmp / "k.db"
    suite.write_text(SUITE)
    req = RunRequest(str(suite), db, executor_kind="local")
    # one executor (one warm child) per machine, for all of its runs, as a nightly job's machine
    with LabelledExecutor("H100") as h100_machine, LabelledExecutor("H200") as h200_machine:
        for _ in range(H100_RUNS):
            assert run_suite(req, executor=h100_machine).counts["ok"] == 2
        h100 = _latest(db, "H100")
        best = min(h100, key=h100.get)
        for i in range(H200_PLAIN + H200_SLOW):
            h200_machine.slow = (best,) if i >= H200_PLAIN else ()
            assert run_suite(req, executor=h200_machine).counts["ok"] == 2
    with Store.open(db, create=False) as st:
        st.set_baseline("nightly", 2)
    site = tmp / "site"
    with Store.open(db, create=False) as st:
        summary = publish(st, site)
    return {"db": db, "site": site, "summary": summary, "best_h100": best, "tmp": tmp}


def _page(site: Path, folder: str, name: str) -> str:
    pages = [p for p in (site / folder).glob("*.html") if p.name.startswith(name)]
    assert len(pages) == 1, pages
    return pages[0].read_text(encoding="utf-8")


def _sections(html: str, cls: str) -> list[str]:
    return re.findall(rf'<section class="{cls}[^"]*".*?</section>', html, re.DOTALL)


def test_summary_and_files(store):
    s, site = store["summary"], store["site"]
    n_runs = H100_RUNS + H200_PLAIN + H200_SLOW
    assert (s.runs, s.workloads, s.cases) == (n_runs, 1, 2)
    assert sorted(s.reports_written) == list(range(1, n_runs + 1))
    for rid in range(1, n_runs + 1):
        report = site / "runs" / f"run{rid}-report.html"
        assert report.is_file() and f"kbench run {rid}" in report.read_text(encoding="utf-8")
    index = (site / "index.html").read_text(encoding="utf-8")
    assert all(f'href="runs/run{rid}-report.html"' in index for rid in range(1, n_runs + 1))
    # no page loads anything (no http(s) URL in src/href, no script) and every link leads to a page
    links = 0
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r'(src|href)="(https?:)?//', text), page
        if page.parent.name == "runs":
            continue
        assert "<script" not in text, page
        for href in re.findall(r'href="([^"#][^"]*)"', text):
            assert (page.parent / unescape(href)).resolve().is_file(), (page, href)
            links += 1
    assert links >= n_runs + 2 + 1 + 2 * 2  # reports, cases, workload, and the pages' links back


def test_index_lists_suite_generations_and_latest_verdicts(store):
    index = (store["site"] / "index.html").read_text(encoding="utf-8")
    gens = re.findall(r'<tr class="generation"><td><b>([^<]*)</b>', index)
    assert gens == ["H100", "H200"]
    suite = re.search(r'<div class="suite" data-suite="site">.*?</section>', index, re.DOTALL).group(0)
    latest = dict(re.findall(r'<div class="latest" data-generation="([^"]*)" data-run="(\d+)">', suite))
    # each machine (generation) keeps its latest run on the index
    assert latest == {"H100": str(H100_RUNS), "H200": str(H100_RUNS + H200_PLAIN + H200_SLOW)}
    blocks = dict(re.findall(r'<div class="latest" data-generation="([^"]*)".*?(<div class="chips.*?</div>)',
                             suite, re.DOTALL))
    for gen, run in latest.items():
        shown = {v: int(n) for v, n in re.findall(r'data-verdict="(\w+)" data-count="(\d+)"', blocks[gen])}
        with Store.open(store["db"], create=False) as st:
            verdicts = judge.judge(st, int(run), "auto").verdicts
        expected: dict[str, int] = {}
        for v in verdicts:
            if v.case_key.endswith("@" + gen):
                expected[v.verdict] = expected.get(v.verdict, 0) + 1
        assert shown == expected and sum(shown.values()) == 2, (gen, shown, expected)
    assert 'href="workloads/row_sum-' in index and index.count('<tr class="case">') == 2
    # the planted step in the index's list of steps, once. The runs are real timings on this machine:
    # a shared CI machine that slows down for a few runs makes a real (small) step of its own, which
    # the list rightly shows, so only the planted one is required here; that flat noise gives no step
    # is tests/null/test_stats.py's (hand-made series)
    steps = re.findall(r'<tr class="step">(.*?)</tr>', index, re.DOTALL)
    planted = [s for s in steps if "<td>H200</td>" in s and "worse" in s
               and f'<td class="num">{H100_RUNS + H200_PLAIN + 1}</td>' in s]
    assert len(planted) == 1, steps
    assert f"row_sum/{store['best_h100']}" in planted[0]


def test_matrix_has_both_generations_ranks_and_the_differing_best(store):
    html = _page(store["site"], "workloads", "row_sum-")
    (group,) = _sections(html, "group")
    assert re.findall(r'<th class="gen">([^<]*)</th>', group) == ["H100", "H200"]
    cells = re.findall(r'<tr class="variant" data-case="([^"]*)">(.*?)</tr>', group, re.DOTALL)
    assert len(cells) == 2
    ranks: dict[tuple[str, str], int] = {}
    best_cells = []
    for case, row in cells:
        variant = case.split("/")[1].split("[")[0]
        for cls, gen, rank, median in re.findall(
                r'<td class="cell([^"]*)" data-gen="([^"]*)" data-rank="(\d+)" data-median="([^"]*)"', row):
            ranks[(variant, gen)] = int(rank)
            if "best-differs" in cls:
                best_cells.append((variant, gen))
    # independent reference: the latest median of each variant on each generation, ranked by numpy
    for gen in ("H100", "H200"):
        latest = _latest(store["db"], gen)
        names = sorted(latest)
        order = np.argsort([latest[n] for n in names], kind="stable")
        for rank, i in enumerate(order, 1):
            assert ranks[(names[i], gen)] == rank, (gen, names[i], latest)
    best = store["best_h100"]
    other = "split" if best == "default" else "default"
    assert ranks[(best, "H100")] == 1 and ranks[(other, "H200")] == 1
    assert sorted(best_cells) == sorted([(best, "H100"), (other, "H200")])
    assert 'class="differs"' in group and "The best variant differs between generations" in group
    assert "GB/s" in group and "% of read peak" in group  # row sums only read: the read peak
    # the relative-speed chart: one bar colour per generation, in the legend
    chart = re.search(r'<figure class="speed">(<svg.*?</svg>)', group, re.DOTALL).group(1)
    assert "H100" in chart and "H200" in chart and "speed relative to the best variant" in chart


def test_case_pages_trends_steps_and_baseline(store):
    best = store["best_h100"]
    html = _page(store["site"], "cases", f"row_sum-{best}-")
    sections = {re.search(r'data-generation="([^"]*)"', s).group(1): s for s in _sections(html, "generation")}
    assert sorted(sections) == ["H100", "H200"]
    h100, h200 = sections["H100"], sections["H200"]
    assert 'data-points="3"' in h100 and h100.count('<tr class="point') == H100_RUNS
    assert h200.count('<tr class="point') == H200_PLAIN + H200_SLOW
    assert 'data-steps="0"' in h100 and 'data-steps="1"' in h200
    # the step starts at the first slowed run; its size is the ratio of the two levels' medians
    step = unescape(re.search(r'<li class="step">(.*?)</li>', h200).group(1))
    assert f"from run {H100_RUNS + H200_PLAIN + 1} " in step
    pct = float(re.search(r"\(\+([\d.]+) %\)", step).group(1))
    with Store.open(store["db"], create=False) as st:
        f = st.results_frame(gpu_model="H200", variant=best).sort_values("run_id")
    medians = f["median_s"].to_numpy(float)
    ratio = np.median(medians[H200_PLAIN:]) / np.median(medians[:H200_PLAIN])
    assert pct == pytest.approx((ratio - 1) * 100, abs=0.06), step
    assert ratio > 3.0  # the injected 9x of work shows
    # the baseline "nightly" points to run 2: marked in the table and on the chart
    assert h100.count('<tr class="point baseline') == 1 and "baseline nightly" in h100
    assert "<svg" in h100 and "baseline run" in h100
    other = _page(store["site"], "cases", f"row_sum-{'split' if best == 'default' else 'default'}-")
    assert 'data-steps="0"' in other


def test_cli_publish_again_keeps_reports(store, tmp_path):
    out = store["tmp"] / "site"
    before = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    r = kbench("publish", "--db", store["db"], "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    n_runs = H100_RUNS + H200_PLAIN + H200_SLOW
    assert f"({n_runs} runs, 1 workload, 2 cases; 0 reports and 0 case pages written;" in r.stdout, r.stdout
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()} == before


def test_republish_keeps_finished_reports_and_drops_stale_files(store, tmp_path):
    db, site = tmp_path / "k.db", tmp_path / "site"
    shutil.copy(store["db"], db)
    shutil.copytree(store["site"], site)
    n_runs = H100_RUNS + H200_PLAIN + H200_SLOW
    with Store.open(db, create=False) as st:
        s = publish(st, site, judge=False)
        assert s.reports_written == () and (s.cases, s.case_pages_written) == (2, 0)
        # a new baseline changes the pages whose trend holds its run: both cases ran in run 5
        st.set_baseline("release", 5)
        s = publish(st, site, judge=False)
        assert s.case_pages_written == 2 and s.reports_written == ()
        assert all("baseline release" in p.read_text(encoding="utf-8") for p in (site / "cases").iterdir())
        running = st.begin_run(FakeSuite(), [], "local", MeasureConfig())
        # the running run's report is written, and written again while the run runs
        assert publish(st, site, judge=False).reports_written == (running,)
        assert publish(st, site, judge=False).reports_written == (running,)
        st.finish_run(running, "done")
        assert publish(st, site, judge=False).reports_written == (running,)
        assert publish(st, site, judge=False).reports_written == ()
    assert len(list((site / "runs").iterdir())) == n_runs + 1
    # another store published into the same folder: its run 1 is not this store's run 1
    with Store.open(tmp_path / "other.db") as other:
        rid = other.begin_run(FakeSuite(), [], "local", MeasureConfig())
        other.finish_run(rid, "done")
        s = publish(other, site, judge=False)
    assert s.reports_written == (rid,) and [p.name for p in (site / "runs").iterdir()] == ["run1-report.html"]
    assert list((site / "cases").iterdir()) == [] and list((site / "workloads").iterdir()) == []


@pytest.mark.opencl
def test_opencl_runs_on_two_generations(tmp_path):
    """The OpenCL target (PoCL on this CPU) under both labels: the matrix has its row on both."""
    suite, db = tmp_path / "ocl.toml", tmp_path / "k.db"
    suite.write_text(SUITE.replace('targets = ["c"]', 'targets = ["opencl"]')
                     .replace('variants = ["default", "split"]', 'variants = ["bind"]'))
    req = RunRequest(str(suite), db, executor_kind="local")
    for label in ("H100", "H200"):
        assert run_suite(req, executor=LabelledExecutor(label)).counts["ok"] == 1
    with Store.open(db, create=False) as st:
        s = publish(st, tmp_path / "site", reports=False)
        f = st.results_frame()
    assert (s.cases, s.workloads) == (1, 1)
    html = _page(tmp_path / "site", "workloads", "row_sum-")
    (row,) = re.findall(r'<tr class="variant" data-case="([^"]*)">(.*?)</tr>', html, re.DOTALL)
    assert row[0].startswith("row_sum/bind[") and row[0].endswith("/m=128,n=256/float32/opencl")
    assert "opencl" in row[1]
    medians = dict(re.findall(r'data-gen="([^"]*)" data-rank="1" data-median="([^"]*)"', row[1]))
    expected = dict(zip(f["gpu_model"], f["median_s"]))
    assert {g: float(m) for g, m in medians.items()} == pytest.approx(expected, rel=1e-12)
    assert "differs" not in re.search(r'<section class="group[^"]*"', html).group(0)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")
@pytest.mark.parametrize("page", ["index.html", "workloads"])
def test_pages_render_in_chromium(store, tmp_path, page):
    path = store["site"] / page
    if path.is_dir():
        path = next(path.glob("row_sum-*.html"))
    proc = browser(tmp_path, "--dump-dom", path.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_errors(proc.stderr) == [], proc.stderr[-3000:]
    assert "H200" in proc.stdout
    shot = tmp_path / "page.png"
    proc = browser(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", path.as_uri())
    assert proc.returncode == 0 and console_errors(proc.stderr) == [], proc.stderr[-3000:]
    from matplotlib import image

    img = image.imread(shot)
    assert img.shape[:2] == (900, 1200)
    grey = img[..., :3].mean(axis=2)
    assert float(np.std(grey)) > 0.05 and float(np.mean(grey < 0.9)) > 0.01
    if page == "workloads":  # the outlined best cells (#fff3cd background) are on screen
        rgb = (img[..., :3] * 255).round().astype(int)
        assert np.any(np.all(np.abs(rgb - np.array([0xFF, 0xF3, 0xCD])) <= 4, axis=-1))
