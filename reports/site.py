"""The whole result store as a static site (``kbench publish``): pages that open from disk, with no
server and no external asset.

- ``index.html``: per suite, the latest run on each GPU generation with its verdicts against recent
  history, the GPU models (generations) seen, the workloads and the cases, and every run with a link
  to its report;
- ``cases/<id>.html``: per case (workload, variant, knobs, shape, dtype, target), the trend of its
  median with the 95 % CI over the runs on each GPU model, the steps that
  :func:`harness.stats.detect_steps` finds in it and the runs named baselines point to;
- ``workloads/<id>.html``: per workload and (shape, dtype), a variants x GPU generations matrix of
  the latest results: median, GB/s or GFLOP/s, % of that GPU's measured peak and each variant's rank
  on each GPU, highlighted where the best variant differs between generations;
- ``runs/run<ID>-report.html``: each run's HTML report (:mod:`reports.html`), written when missing
  (or when its run was still running when it was written).

The site is read through the :class:`harness.store.Store` API only (``list_runs``,
``results_frame``, ``list_baselines``, :func:`harness.judge.judge`), so it works on any store
backend. A case's GPU generation is its ``gpu_model`` (the Ray label the planner gave it), else the
device that ran it. Calibration runs and ``kbench ab`` sides (``NOT_HISTORY``) are listed with their
reports but are no part of trends or matrices.

Pages carry a Content-Security-Policy that allows no script and no load from anywhere: inline CSS
and inline SVG charts (matplotlib) only. Text from data is escaped by jinja2's autoescape.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from harness import __version__
from harness import judge as judging
from harness.errors import KbenchError
from harness.model import VERDICTS
from harness.stats import detect_steps
from harness.stats.peaks import ops_unit, pct_peak_text, peak_share_text, rate_text
from harness.store import NOT_HISTORY
from reports import site_plots
from reports.data import collect, fmt_time, pairs_text, short_commit
from reports.html import VERDICT_HELP, write_html

if TYPE_CHECKING:
    from harness.store import Store

__all__ = ["INDEX_RUNS", "INDEX_STEPS", "MANIFEST", "PEER_PREFIX", "SiteSummary", "case_id", "generation_of",
           "publish"]

#: variants of library peers ("peer:torch.sum(dim=1)") are shown in the matrix but not ranked
PEER_PREFIX = "peer:"
#: run statuses after which a run's report is final (a report of a running run is written again)
_FINAL = ("done", "failed", "interrupted")
#: the index lists this many runs, newest first (the reports of all are under runs/)
INDEX_RUNS = 200
#: the index lists at most this many detected steps, newest first
INDEX_STEPS = 50
#: the site's record of the run reports it holds (which run, in which state, each was written for)
MANIFEST = "kbench-site.json"
_REPORT_NAME = re.compile(r"run\d+-report\.html")
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_env = Environment(loader=PackageLoader("reports", "templates"),
                   autoescape=select_autoescape(enabled_extensions=("html", "j2", "html.j2"),
                                                default_for_string=True, default=True),
                   trim_blocks=True, lstrip_blocks=True)


@dataclass(frozen=True)
class SiteSummary:
    """What :func:`publish` wrote.

    Attributes
    ----------
    out : pathlib.Path
        The site's folder; ``out / "index.html"`` is its front page.
    runs, cases, workloads : int
        Runs listed, case pages and workload pages the site has.
    reports_written : tuple of int
        Runs whose report was (re)written into ``out / "runs"``; the others were there already.
    seconds : float
        Wall time of the publication.
    notes : tuple of str
        What could not be done (a run that could not be judged...), also shown on the index.
    case_pages_written : int
        Case pages (re)written; the others showed the same data already.
    """

    out: Path
    runs: int
    cases: int
    workloads: int
    reports_written: tuple[int, ...]
    seconds: float
    notes: tuple[str, ...] = ()
    case_pages_written: int = 0

    @property
    def index(self) -> Path:
        """The site's front page."""
        return self.out / "index.html"


def generation_of(gpu_model: Any, device: Any) -> str:
    """The GPU generation a result belongs to: its case's ``gpu_model``, else its device's name."""
    for x in (gpu_model, device):
        if isinstance(x, str) and x.strip():
            return x.strip()
    return "unknown device"


def case_id(case_key: str, gpu_model: Any) -> str:
    """A case key without its ``@MODEL`` suffix: the same case on every GPU generation."""
    if isinstance(gpu_model, str) and gpu_model and case_key.endswith("@" + gpu_model):
        return case_key[:-len(gpu_model) - 1]
    return case_key


def _slug(text: str, prefix: str) -> str:
    """A file name for ``text``: readable head and a hash (names hold any character)."""
    head = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:40].strip("-.") or prefix
    return f"{head}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:10]}"


def publish(store: Store, out_dir: str | Path, *, reports: bool = True, judge: bool = True,
            on_progress: Callable[[str], None] | None = None) -> SiteSummary:
    """Write the static site of everything in ``store`` into ``out_dir``.

    Parameters
    ----------
    store : harness.store.Store
        An open result store (any backend of the Store API).
    out_dir : path
        The site's folder (created if missing). Pages written before are replaced, and those of
        cases and workloads the store does not hold are removed. A run report already there is kept
        while its run is unchanged and finished (:data:`MANIFEST` records the run each report was
        written for), so publishing after every nightly run writes the new runs' reports only.
    reports : bool
        Write the missing run reports into ``out_dir / "runs"``.
    judge : bool
        Judge each suite's latest run (and each run whose report is written) against its recent
        history (:func:`harness.judge.judge`, baseline "auto").
    on_progress : callable, optional
        Called with a short text as each part is written.

    Returns
    -------
    SiteSummary
    """
    t0 = time.perf_counter()
    say = on_progress or (lambda text: None)
    out = Path(out_dir)
    for sub in ("cases", "workloads", "runs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    runs = store.list_runs(limit=None)
    frame = _frame(store.results_frame())
    baselines = store.list_baselines()
    base_runs: dict[int, list[str]] = {}
    for b in baselines:
        base_runs.setdefault(int(b["run_id"]), []).append(str(b["name"]))
    history = frame[~frame["run_kind"].isin(NOT_HISTORY)]

    judgements: dict[int, Any] = {}

    def judgement_of(run: dict[str, Any]) -> Any:
        rid = int(run["id"])
        if rid not in judgements:
            judgements[rid] = None
            if judge and run.get("kind", "run") not in NOT_HISTORY and run.get("n_results"):
                try:
                    judgements[rid] = judging.judge(store, rid, "auto")
                except KbenchError as exc:
                    notes.append(f"run {rid} could not be judged: {exc}")
        return judgements[rid]

    case_pages = _case_pages(history, base_runs)
    workload_pages = _workload_pages(history)
    latest = _latest_per_suite(runs, frame)
    written: list[int] = []
    manifest = _read_manifest(out)
    kept = _drop_stale_reports(out, runs, manifest)
    if reports:
        for run in runs:
            path = out / "runs" / f"run{run['id']}-report.html"
            if path.name in kept:
                continue
            j = judgement_of(run)
            data = collect(store, int(run["id"]), j.verdicts if j else (),
                           baseline_label=j.baseline_label if j else None)
            write_html(data, path)
            written.append(int(run["id"]))
            say(f"report of run {run['id']}")
    for per_gen in latest.values():
        for _, run in per_gen:
            judgement_of(run)

    # link each point and matrix cell to its run's report where the site has it
    have = {int(r["id"]) for r in runs if (out / "runs" / f"run{r['id']}-report.html").is_file()}
    for page in case_pages:
        for g in page["generations"]:
            for p in g["points"]:
                p["report"] = f"../runs/run{p['run_id']}-report.html" if p["run_id"] in have else ""
    for page in workload_pages:
        for grp in page["groups"]:
            for row in grp["rows"]:
                for cell in row["cells"].values():
                    rid = cell["run_id"]
                    cell["report"] = f"../runs/run{rid}-report.html" if rid in have else ""

    common = {"css": Markup(_css()), "csp": _CSP, "kbench_version": __version__,
              "generated": datetime.now().astimezone().isoformat(timespec="seconds")}
    old_pages = manifest.get("pages", {}) if isinstance(manifest.get("pages"), dict) else {}
    page_keys: dict[str, str] = {}
    fresh = 0
    for page in case_pages:
        name = f"cases/{page['slug']}.html"
        page_keys[name] = _page_key(page)
        if old_pages.get(name) == page_keys[name] and (out / name).is_file():
            continue  # the same points, steps and baselines as when it was written
        fresh += 1
        charts = []
        for i, g in enumerate(page["generations"]):
            svg = site_plots.case_trend(g["points"], g["steps"], title=page["title"],
                                        subtitle=f"{page['subtitle']} · {g['name']}",
                                        chart_id=f"trend-{i}")
            charts.append(Markup(svg))
        html = _env.get_template("site_case.html.j2").render(page=page, charts=charts, root="../",
                                                             **common)
        (out / "cases" / f"{page['slug']}.html").write_text(html, encoding="utf-8")
    say(f"{len(case_pages)} case pages ({fresh} changed)")
    case_links = {p["id"]: f"../cases/{p['slug']}.html" for p in case_pages}
    for page in workload_pages:
        for i, grp in enumerate(page["groups"]):
            svg = site_plots.relative_speed(grp["rows"], grp["generations"], title=str(page["workload"]),
                                            subtitle=f"{grp['shape']} · {grp['dtype']}",
                                            chart_id=f"speed-{i}")
            grp["chart"] = Markup(svg) if svg else None
        html = _env.get_template("site_workload.html.j2").render(page=page, case_links=case_links,
                                                                 root="../", **common)
        (out / "workloads" / f"{page['slug']}.html").write_text(html, encoding="utf-8")
    say(f"{len(workload_pages)} workload pages")
    index = _index_view(runs, frame, history, latest, judgements, case_pages, workload_pages, baselines, out)
    html = _env.get_template("site_index.html.j2").render(index=index, notes=notes, root="", **common)
    (out / "index.html").write_text(html, encoding="utf-8")
    _drop_stale_pages(out, {f"{p['slug']}.html" for p in case_pages},
                      {f"{p['slug']}.html" for p in workload_pages})
    _write_manifest(out, runs, page_keys)
    return SiteSummary(out=out, runs=len(runs), cases=len(case_pages), workloads=len(workload_pages),
                       reports_written=tuple(written), seconds=time.perf_counter() - t0, notes=tuple(notes),
                       case_pages_written=fresh)


def _read_manifest(out: Path) -> dict[str, Any]:
    try:
        data = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _report_stamp(run: dict[str, Any]) -> list[Any]:
    """What a written report of ``run`` depends on: the run's identity and its final state."""
    return [str(run.get("started_at")), str(run.get("status")), int(run.get("n_results") or 0)]


def _drop_stale_reports(out: Path, runs: list[dict[str, Any]], manifest: dict[str, Any]) -> set[str]:
    """Remove the run reports of ``out/runs`` that belong to no run of the store, to another run of
    the same id (another store published into the same folder) or to a run that has changed since
    (it was running); return the names of those kept."""
    stamps = manifest.get("reports", {}) if isinstance(manifest.get("reports"), dict) else {}
    wanted = {f"run{r['id']}-report.html": r for r in runs}
    kept = set()
    for path in (out / "runs").glob("run*-report.html"):
        if not _REPORT_NAME.fullmatch(path.name):
            continue
        run = wanted.get(path.name)
        if run is not None and run.get("status") in _FINAL and stamps.get(path.name) == _report_stamp(run):
            kept.add(path.name)
        else:
            path.unlink()
    return kept


def _drop_stale_pages(out: Path, cases: set[str], workloads: set[str]) -> None:
    """Remove case and workload pages this publication did not write (left by another store)."""
    for folder, names in (("cases", cases), ("workloads", workloads)):
        for path in (out / folder).glob("*.html"):
            if path.name not in names:
                path.unlink()


def _write_manifest(out: Path, runs: list[dict[str, Any]], pages: dict[str, str]) -> None:
    reports = {f"run{r['id']}-report.html": _report_stamp(r) for r in runs
               if (out / "runs" / f"run{r['id']}-report.html").is_file()}
    data = {"kbench_version": __version__, "written_at": datetime.now().astimezone().isoformat(),
            "reports": reports, "pages": pages}
    (out / MANIFEST).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _page_key(page: dict[str, Any]) -> str:
    """What a case page shows, as a hash: its data, this kbench's version and the page's templates
    (an unchanged case keeps its page: its charts are most of a publication's time)."""
    h = hashlib.sha1(json.dumps(page, sort_keys=True, default=repr).encode("utf-8"))
    h.update(__version__.encode("utf-8"))
    files = resources.files("reports").joinpath("templates")
    for name in ("report.css", "site.css", "site_base.html.j2", "site_case.html.j2"):
        h.update(files.joinpath(name).read_bytes())
    h.update(Path(site_plots.__file__).read_bytes())
    return h.hexdigest()


def _css() -> str:
    files = resources.files("reports").joinpath("templates")
    return (files.joinpath("report.css").read_text(encoding="utf-8") + "\n"
            + files.joinpath("site.css").read_text(encoding="utf-8"))


def _frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Every stored result with its generation and case id (``gen``, ``case_id``)."""
    f = frame.copy()
    if len(f) == 0:
        f["gen"] = pd.Series(dtype=object)
        f["case_id"] = pd.Series(dtype=object)
        return f
    f["gen"] = [generation_of(m, d) for m, d in zip(f["gpu_model"], f["device"])]
    f["case_id"] = [case_id(k, m) for k, m in zip(f["case_key"], f["gpu_model"])]
    return f


def _when(text: Any, fmt: str = "%Y-%m-%d %H:%M") -> str:
    if not text:
        return ""
    try:
        return datetime.fromisoformat(str(text)).strftime(fmt)
    except ValueError:
        return str(text)


def _text(x: Any) -> str:
    """A stored text, '' for None or NaN (missing in a frame)."""
    return x if isinstance(x, str) else ""


def _variant_label(variant: Any, knobs: Any) -> str:
    kn = pairs_text(knobs)
    return f"{variant} [{kn}]" if kn else str(variant)


# ---------------------------------------------------------------------------------------------
# case pages
# ---------------------------------------------------------------------------------------------


def _case_pages(history: pd.DataFrame, base_runs: dict[int, list[str]]) -> list[dict[str, Any]]:
    pages = []
    for cid, g in history.groupby("case_id", sort=True):
        first = g.iloc[0]
        gens = []
        for gen, h in g.groupby("gen", sort=True):
            ok = h[(h["outcome"] == "ok") & h["median_s"].notna()]
            ok = ok.sort_values(["run_started_at", "run_id", "result_id"], kind="stable")
            points = [{
                "run_id": int(r.run_id), "date": _when(r.run_started_at),
                "commit": short_commit(r.git_commit),
                "median_s": float(r.median_s),
                "ci_low_s": float(r.ci_low_s) if pd.notna(r.ci_low_s) else float(r.median_s),
                "ci_high_s": float(r.ci_high_s) if pd.notna(r.ci_high_s) else float(r.median_s),
                "median": fmt_time(r.median_s), "ci": f"{fmt_time(r.ci_low_s)} – {fmt_time(r.ci_high_s)}",
                "baselines": base_runs.get(int(r.run_id), []), "device": _text(r.device),
            } for r in ok.itertuples(index=False)]
            steps = list(detect_steps([p["median_s"] for p in points])) if len(points) >= 3 else []
            for s in steps:
                p = points[s.index]
                p["step"] = f"{(s.ratio - 1) * 100:+.1f} %"
            failed = h[h["outcome"] != "ok"]
            gens.append({"name": gen, "points": points, "steps": steps,
                         "step_texts": [_step_text(s, points) for s in steps],
                         "failed": [{"run_id": int(r.run_id), "outcome": r.outcome,
                                     "message": _text(r.message)}
                                    for r in failed.itertuples(index=False)]})
        shape = pairs_text(first["params"])
        pages.append({
            "id": cid, "slug": _slug(cid, "case"), "workload": first["workload"],
            "variant": _variant_label(first["variant"], first["knobs"]), "shape": shape,
            "dtype": first["dtype"], "target": first["target"],
            "title": f"{first['workload']}/{_variant_label(first['variant'], first['knobs'])}",
            "subtitle": " ".join(x for x in (shape, first["dtype"], first["target"]) if x),
            "generations": gens, "n_steps": sum(len(x["steps"]) for x in gens),
            "n_points": sum(len(x["points"]) for x in gens),
        })
    return pages


def _step_text(step: Any, points: list[dict[str, Any]]) -> str:
    p = points[step.index]
    where = f"from run {p['run_id']}" + (f" (commit {p['commit']}, {p['date']})" if p["commit"] else
                                         f" ({p['date']})")
    return f"{fmt_time(step.before)} → {fmt_time(step.after)} ({(step.ratio - 1) * 100:+.1f} %) {where}"


# ---------------------------------------------------------------------------------------------
# workload pages: variants x generations
# ---------------------------------------------------------------------------------------------


def _workload_pages(history: pd.DataFrame) -> list[dict[str, Any]]:
    pages = []
    if len(history) == 0:
        return pages
    # the latest result of each case on each generation
    latest = history.sort_values(["run_id", "result_id"], kind="stable").groupby(
        ["case_id", "gen"], sort=False).tail(1)
    for wl, w in latest.groupby("workload", sort=True):
        groups = []
        for (params, dtype), g in w.groupby(["params", "dtype"], sort=True):
            groups.append(_matrix(g, pairs_text(params), str(dtype)))
        pages.append({"workload": wl, "slug": _slug(str(wl), "workload"), "groups": groups,
                      "generations": sorted(w["gen"].unique().tolist()),
                      "n_variants": int(w["case_id"].nunique()),
                      "n_differs": sum(1 for g in groups if g["best_differs"])})
    return pages


def _metric(r: Any) -> tuple[str, str, float | None]:
    """(throughput text, % of peak text, % value) of a result: FLOP/s where the kernel is nearer its
    FLOP peak than its bandwidth peak, else GB/s (of the read or copy peak: harness.stats.peaks)."""
    bw, fl = r.pct_peak_bw, r.pct_peak_flops
    bw = None if pd.isna(bw) else float(bw)
    fl = None if pd.isna(fl) else float(fl)
    unit = ops_unit(getattr(r, "dtype", None))
    if fl is not None and (bw is None or fl > bw) and pd.notna(r.gflops):
        share = peak_share_text(None, fl, None, getattr(r, "peak_flops_kind", None))
        return rate_text(float(r.gflops), unit), share, fl
    if pd.notna(r.gbps):
        return rate_text(float(r.gbps)), pct_peak_text(bw, getattr(r, "peak_bw_kind", None)), bw
    if pd.notna(r.gflops):
        return rate_text(float(r.gflops), unit), "", None
    return "", "", None


def _matrix(g: pd.DataFrame, shape: str, dtype: str) -> dict[str, Any]:
    gens = sorted(g["gen"].unique().tolist())
    rows: dict[str, dict[str, Any]] = {}
    for r in g.sort_values(["variant", "case_id"]).itertuples(index=False):
        row = rows.setdefault(r.case_id, {"case_id": r.case_id, "cells": {},
                                          "label": _variant_label(r.variant, r.knobs), "target": r.target,
                                          "peer": str(r.variant).startswith(PEER_PREFIX)})
        ok = r.outcome == "ok" and pd.notna(r.median_s)
        thr, pct, pct_v = _metric(r) if ok else ("", "", None)
        row["cells"][r.gen] = {"ok": ok, "median_s": float(r.median_s) if ok else None,
                               "median": fmt_time(r.median_s) if ok else "", "throughput": thr, "pct": pct,
                               "pct_value": pct_v, "outcome": r.outcome, "run_id": int(r.run_id),
                               "rank": None, "best": False, "message": _text(r.message)}
    best: dict[str, str] = {}
    for gen in gens:
        ranked = sorted((row["cells"][gen]["median_s"], cid) for cid, row in rows.items()
                        if gen in row["cells"] and row["cells"][gen]["ok"] and not row["peer"])
        for rank, (_, cid) in enumerate(ranked, 1):
            rows[cid]["cells"][gen]["rank"] = rank
        if ranked:
            best[gen] = ranked[0][1]
            rows[ranked[0][1]]["cells"][gen]["best"] = True
    differs = len(set(best.values())) > 1
    n_ranked = {gen: _n_ranked(rows, gen) for gen in gens}
    for row in rows.values():
        for gen, cell in row["cells"].items():
            cell["rank_text"] = f"{cell['rank']} of {n_ranked[gen]}" if cell["rank"] else ""
    return {"shape": shape, "dtype": dtype, "generations": gens,
            "rows": sorted(rows.values(), key=lambda row: (row["peer"], row["label"], row["case_id"])),
            "best": {gen: rows[cid]["label"] for gen, cid in best.items()}, "best_differs": differs}


def _n_ranked(rows: dict[str, dict[str, Any]], gen: str) -> int:
    return sum(1 for row in rows.values() if gen in row["cells"] and row["cells"][gen]["rank"])


# ---------------------------------------------------------------------------------------------
# index
# ---------------------------------------------------------------------------------------------


def _latest_per_suite(runs: Iterable[dict[str, Any]], frame: pd.DataFrame
                      ) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """suite -> [(generation, its newest ordinary run with results on it)], by generation (``runs``
    come newest first). Machines of different generations storing into one store each keep their
    latest run on the index."""
    gens_of_run = {int(rid): set(g["gen"]) for rid, g in frame.groupby("run_id")} if len(frame) else {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        if run.get("kind", "run") in NOT_HISTORY or not run.get("n_results"):
            continue
        per_gen = out.setdefault(str(run.get("suite_name") or ""), {})
        for gen in gens_of_run.get(int(run["id"]), ()):
            per_gen.setdefault(gen, run)
    return {suite: sorted(per_gen.items()) for suite, per_gen in out.items()}


def _index_view(runs, frame, history, latest, judgements, case_pages, workload_pages, baselines,
                out: Path) -> dict[str, Any]:
    report_of = {int(r["id"]): f"runs/run{r['id']}-report.html" for r in runs
                 if (out / "runs" / f"run{r['id']}-report.html").is_file()}
    gens_of_run = {int(rid): sorted(g["gen"].unique().tolist()) for rid, g in frame.groupby("run_id")}
    gen_of_key = dict(zip(frame["case_key"], frame["gen"])) if len(frame) else {}
    suites = []
    for name in sorted({str(r.get("suite_name") or "") for r in runs}):
        of_suite = [r for r in runs if str(r.get("suite_name") or "") == name]
        latest_rows = []
        for gen, run in latest.get(name, []):
            j = judgements.get(int(run["id"]))
            counts: dict[str, int] = {}
            for v in (j.verdicts if j else ()):
                if gen_of_key.get(v.case_key, v.device) == gen:
                    counts[v.verdict] = counts.get(v.verdict, 0) + 1
            latest_rows.append({
                "generation": gen, "run": _run_row(run, report_of, gens_of_run), "judged": j is not None,
                "verdicts": [{"name": k, "count": counts[k], "help": VERDICT_HELP.get(k, "")}
                             for k in VERDICTS if counts.get(k)],
                "baseline_label": j.baseline_label if j else "",
            })
        suites.append({
            "name": name or "(unnamed)", "n_runs": len(of_suite),
            "first": _when(of_suite[-1].get("started_at")), "last": _when(of_suite[0].get("started_at")),
            "latest": latest_rows,
        })
    gens = []
    for gen, g in history.groupby("gen", sort=True):
        gens.append({"name": gen, "devices": sorted({str(d) for d in g["device"].dropna() if d}),
                     "runs": int(g["run_id"].nunique()), "results": len(g),
                     "cases": int(g["case_id"].nunique()), "first": _when(g["run_started_at"].min()),
                     "last": _when(g["run_started_at"].max())})
    return {
        "suites": suites, "generations": gens,
        "workloads": [{"name": p["workload"], "href": f"workloads/{p['slug']}.html",
                       "variants": p["n_variants"], "generations": ", ".join(p["generations"]),
                       "differs": p["n_differs"], "groups": len(p["groups"])} for p in workload_pages],
        "cases": [{"id": p["id"], "href": f"cases/{p['slug']}.html", "points": p["n_points"],
                   "steps": p["n_steps"], "generations": ", ".join(x["name"] for x in p["generations"])}
                  for p in case_pages],
        "steps": _recent_steps(case_pages),
        "runs": [_run_row(r, report_of, gens_of_run) for r in runs[:INDEX_RUNS]],
        "older_runs": max(0, len(runs) - INDEX_RUNS),
        "baselines": [{"name": b["name"], "run_id": b["run_id"], "set_at": _when(b["set_at"]),
                       "note": b.get("note") or ""} for b in baselines],
        "n_results": len(frame),
        "medians_ok": int(np.sum(frame["outcome"] == "ok")) if len(frame) else 0,
    }


def _recent_steps(case_pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every detected step, the newest first (by the run that starts its level), at most
    :data:`INDEX_STEPS`."""
    out = []
    for p in case_pages:
        for g in p["generations"]:
            for st, text in zip(g["steps"], g["step_texts"]):
                first = g["points"][st.index]
                out.append({"case": p["id"], "href": f"cases/{p['slug']}.html", "generation": g["name"],
                            "run_id": first["run_id"], "commit": first["commit"], "date": first["date"],
                            "change": f"{(st.ratio - 1) * 100:+.1f} %", "slower": st.ratio > 1, "text": text})
    out.sort(key=lambda x: (-x["run_id"], x["case"], x["generation"]))
    return out[:INDEX_STEPS]


def _run_row(run: dict[str, Any], report_of: dict[int, str], gens_of_run: dict[int, list[str]]
             ) -> dict[str, Any]:
    rid = int(run["id"])
    outcomes = run.get("outcomes") or {}
    return {"id": rid, "suite": run.get("suite_name") or "", "kind": run.get("kind") or "run",
            "status": run.get("status") or "", "started": _when(run.get("started_at")),
            "commit": short_commit(run.get("git_commit")) or "unknown", "n": run.get("n_results", 0),
            "outcomes": ", ".join(f"{v} {k}" for k, v in sorted(outcomes.items(),
                                                                key=lambda kv: kv[0] != "ok")),
            "generations": ", ".join(gens_of_run.get(rid, [])), "report": report_of.get(rid)}
