"""The run report as ONE self-contained HTML file: inline CSS, inline SVG charts, a small inline
script that sorts and filters the case table. No external asset, no network access: the page
carries a Content-Security-Policy that allows only its own style and (by hash) its own script.

Everything that comes from data (workload, variant, suite and device names, messages) is escaped
by jinja2's autoescape; only the package's own CSS/JS and the SVG produced by
:mod:`reports.plots` (whose text matplotlib escapes) are inserted as markup.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from harness import __version__
from harness.stats.peaks import FLOP_PEAK_LABELS, PEAK_LABELS, ops_unit, rate_text
from reports import plots, tuning_plots
from reports.data import (
    PEER_PREFIX,
    ReportData,
    VariantMatrix,
    case_history,
    case_rows,
    fmt_p,
    fmt_pct,
    fmt_time,
    missing_verdicts,
    outcome_counts,
    short_commit,
    summary_sentence,
    threshold_pct,
    variant_matrix,
    verdict_counts,
)

#: at most this many trend charts (cases with a verdict other than SAME first, then detected steps)
MAX_TREND_CHARTS = 12
#: at most this many SLOWER/AMBIGUOUS cases get sample histograms and clock traces
MAX_DETAIL_CASES = 10
#: a case needs at least this many ok runs in its history for a trend chart
MIN_TREND_RUNS = 3

#: what each verdict means, for the legend and the chips' tooltips
VERDICT_HELP = {
    "SAME": "no change the statistics can confirm beyond the threshold",
    "FASTER": "faster than the baseline: significant and beyond the threshold",
    "SLOWER": "slower than the baseline: significant and beyond the threshold",
    "AMBIGUOUS": "the tests disagree or the change is within the noise; re-measure",
    "WRONG": "the case did not finish correctly (wrong output, crash, timeout or build error)",
    "NEW": "not in the baseline: nothing to compare with",
    "MISSING": "in the baseline but not in this run",
}

#: sort rank of verdicts in the table (most urgent first)
_VERDICT_RANK = {"WRONG": 0, "SLOWER": 1, "AMBIGUOUS": 2, "MISSING": 3, "FASTER": 4, "NEW": 5, "SAME": 6,
                 "": 7}

_env = Environment(loader=PackageLoader("reports", "templates"),
                   autoescape=select_autoescape(enabled_extensions=("html", "j2", "html.j2"),
                                                default_for_string=True, default=True),
                   trim_blocks=True, lstrip_blocks=True)


def _asset(name: str) -> str:
    return resources.files("reports").joinpath("templates", name).read_text(encoding="utf-8")


def write_html(data: ReportData, path: str | Path) -> Path:
    """Write the report of ``data`` to ``path`` (parent folders are created); return the path.

    Parameters
    ----------
    data : ReportData
        From :func:`reports.data.collect`.
    path : path
        The HTML file to write.

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path


def render_html(data: ReportData) -> str:
    """The report of ``data`` as HTML text (see :func:`write_html`)."""
    t0 = time.perf_counter()
    css = _asset("report.css")
    js = _asset("report.js")
    script_hash = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
           f"script-src 'sha256-{script_hash}'")
    rows = case_rows(data)
    ctx: dict[str, Any] = {
        "css": Markup(css),
        "js": Markup(js),
        "csp": csp,
        "run": _run_view(data),
        "environments": _env_views(data),
        "summary": _summary_view(data),
        "rows": [_row_view(r) for r in sorted(rows, key=lambda r: _VERDICT_RANK.get(r["verdict"], 7))],
        "has_verdicts": bool(data.verdicts),
        "missing": [_missing_view(v) for v in missing_verdicts(data)],
        "verdict_help": VERDICT_HELP,
        "threshold": f"{threshold_pct(data):g} %",
        "notes": list(data.notes),
        "kbench_version": __version__,
        "max_trends": MAX_TREND_CHARTS,
        "min_trend_runs": MIN_TREND_RUNS,
    }
    ctx["variant_charts"] = _variant_charts(data)
    roof = plots.roofline_chart(data.results, chart_id="roofline")
    ctx["roofline"] = Markup(roof) if roof else None
    ctx["trends"], ctx["trends_total"] = _trend_charts(data, rows)
    ctx["details"], ctx["details_total"] = _detail_charts(data, rows)
    ctx["tuning"] = _tuning_charts(data, rows)
    ctx["render_s"] = f"{time.perf_counter() - t0:.1f}"
    ctx["generated"] = datetime.now().astimezone().isoformat(timespec="seconds")
    return _env.get_template("report.html.j2").render(**ctx)


# ---------------------------------------------------------------------------------------------
# views: plain dicts of display strings (the template formats nothing itself)
# ---------------------------------------------------------------------------------------------


def _run_view(data: ReportData) -> dict[str, Any]:
    run = data.run
    return {
        "id": data.run_id,
        "suite": run.get("suite_name") or "",
        "suite_path": run.get("suite_path") or "",
        "started": _when(run.get("started_at")),
        "ended": _when(run.get("ended_at")) or "not finished",
        "duration": _duration(run.get("started_at"), run.get("ended_at")),
        "commit": run.get("git_commit") or "unknown",
        "commit_short": short_commit(run.get("git_commit")) or "unknown",
        "kbench_version": run.get("kbench_version") or "",
        # schema version 8: the commits of kbench itself and of the suite file's repository
        "kbench_commit": run.get("kbench_commit") or "unknown",
        "suite_commit": run.get("suite_commit") or "unknown",
        "status": run.get("status") or "",
        "executor": run.get("executor") or "",
        "argv": " ".join(str(a) for a in (run.get("argv") or [])),
        "n_results": run.get("n_results", len(data.results)),
        "outcomes": outcome_counts(data),
    }


def _when(text: Any) -> str:
    if not text:
        return ""
    try:
        return datetime.fromisoformat(str(text)).strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    except ValueError:
        return str(text)


def _duration(start: Any, end: Any) -> str:
    try:
        s = (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except (TypeError, ValueError):
        return ""
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _bytes(n: Any) -> str:
    try:
        v = float(n)
    except (TypeError, ValueError):
        return ""
    return f"{v / 2**30:.0f} GiB"


def _env_views(data: ReportData) -> list[dict[str, Any]]:
    devices = {}
    for env_id, dev in zip(data.results["env_id"], data.results["device"]):
        if isinstance(env_id, str):
            devices.setdefault(env_id, set()).add(dev or "")
    out = []
    for env_id, fp in data.environments.items():
        gpu = fp.get("gpu_name")
        facts = []
        if gpu:
            facts += [
                ("GPU", gpu),
                ("compute capability", fp.get("gpu_compute_capability")),
                ("SMs", fp.get("gpu_sm_count")),
                ("max SM clock", f"{fp['gpu_max_sm_clock_mhz']:g} MHz" if fp.get("gpu_max_sm_clock_mhz")
                 else None),
                ("GPU memory", _bytes(fp.get("gpu_memory_total_bytes")) or None),
                ("L2 cache", f"{fp['gpu_l2_cache_bytes'] / 2**20:g} MiB" if fp.get("gpu_l2_cache_bytes")
                 else None),
                ("power limit", f"{fp['gpu_power_limit_w']:g} W" if fp.get("gpu_power_limit_w") else None),
                ("driver", fp.get("gpu_driver_version")),
                ("CUDA (driver)", fp.get("cuda_version")),
            ]
        facts += [
            ("CPU", fp.get("cpu_model")),
            ("CPU cores", _cores(fp)),
            ("host memory", _bytes(fp.get("host_memory_bytes")) or None),
            ("host", fp.get("host")),
            ("OS", fp.get("os")),
            ("Python", " ".join(str(x) for x in (fp.get("python_implementation"), fp.get("python_version"))
                                if x)),
            ("kbench", fp.get("kbench_version")),
        ]
        out.append({
            "id": env_id,
            "title": gpu or fp.get("cpu_model") or "unknown device",
            "kind": "GPU" if gpu else "CPU",
            "devices": sorted(devices.get(env_id, ())),
            "facts": [(k, str(v)) for k, v in facts if v not in (None, "")],
            "all": sorted((k, json.dumps(v) if not isinstance(v, str) else v) for k, v in fp.items()),
        })
    return out


def _cores(fp: dict[str, Any]) -> str | None:
    logical, physical = fp.get("cpu_count"), fp.get("cpu_physical_cores")
    if logical and physical and logical != physical:
        return f"{physical} physical / {logical} logical"
    return str(logical or physical) if (logical or physical) else None


def _summary_view(data: ReportData) -> dict[str, Any]:
    counts = verdict_counts(data)
    return {
        "sentence": summary_sentence(data),
        "baseline": data.baseline_label,
        "verdicts": [{"name": k, "count": v, "help": VERDICT_HELP.get(k, "")} for k, v in counts.items()],
        "outcomes": [{"name": k, "count": v} for k, v in outcome_counts(data).items()],
        "n_cases": len(data.results),
        "regressions": sum(1 for v in data.verdicts if v.regression),
    }


def _row_view(r: dict[str, Any]) -> dict[str, Any]:
    def num(x):  # data-sort value: "" sorts last
        return "" if x is None else repr(float(x))

    ci = _ci_text(r["ci_low_s"], r["ci_high_s"])
    parts = []
    if r["pct_peak_bw"] is not None:
        parts.append(f"{r['pct_peak_bw']:.3g} % {PEAK_LABELS.get(r.get('peak_bw') or 'copy')}")
    if r["pct_peak_flops"] is not None:
        label = FLOP_PEAK_LABELS.get(r.get("peak_flops") or "", "of FLOP peak")
        parts.append(f"{r['pct_peak_flops']:.3g} % {label}")
    pct = "; ".join(parts) or "—"
    pct_sort = max((x for x in (r["pct_peak_bw"], r["pct_peak_flops"]) if x is not None), default=None)
    delta = fmt_pct(r["delta_pct"], signed=True)
    if r["ratio_lo"] is not None and r["ratio_hi"] is not None:
        delta_ci = f"CI {(r['ratio_lo'] - 1) * 100:+.1f} … {(r['ratio_hi'] - 1) * 100:+.1f} %"
    else:
        delta_ci = ""
    return {
        **{k: r[k] for k in ("case_key", "workload", "variant", "knobs", "shape", "dtype", "target",
                             "device", "outcome", "message", "verdict", "verdict_message")},
        "anchor": _anchor(r["case_key"]),
        "median": fmt_time(r["median_s"]),
        "median_sort": num(r["median_s"]),
        "ci": ci,
        "ci_sort": num(None if r["ci_high_s"] is None or not r["median_s"]
                       else (r["ci_high_s"] - r["ci_low_s"]) / r["median_s"]),
        "gbps": rate_text(r["gbps"]) or "—",
        "gbps_sort": num(r["gbps"]),
        "gflops": rate_text(r["gflops"], ops_unit(r["dtype"])) or "—",
        "gflops_sort": num(r["gflops"]),
        "pct": pct,
        "pct_sort": num(pct_sort),
        "delta": delta,
        "delta_ci": delta_ci,
        "delta_sort": num(r["delta_pct"]),
        "delta_class": ("worse" if (r["delta_pct"] or 0) > 0 else "better") if r["verdict"] in
                       ("SLOWER", "FASTER") else "",
        "verdict_rank": _VERDICT_RANK.get(r["verdict"], 7),
        "verdict_help": VERDICT_HELP.get(r["verdict"], ""),
        "pq": f"{fmt_p(r['p_value'])} / {fmt_p(r['q_value'])}" if r["p_value"] is not None else "—",
        "pq_sort": num(r["q_value"] if r["q_value"] is not None else r["p_value"]),
        "n": r["n_samples"] or 0,
        # a tuned case: the tuning's cost of its configuration and the run's median over it
        "tuned": _tuned_text(r["median_s"], r.get("tuning_cost_s")),
    }


def _tuned_text(median_s: float | None, cost_s: float | None) -> str:
    """``"tuned 63.6 µs · run/tune 1.02x"``; "" for a case that ran no stored best."""
    if cost_s is None:
        return ""
    ratio = f" · run/tune {median_s / cost_s:.2f}x" if median_s is not None and cost_s > 0 else ""
    return f"tuned {fmt_time(cost_s)}{ratio}"


def _ci_text(lo: float | None, hi: float | None) -> str:
    """'32.3–32.5 µs' (one unit) or '998 µs – 1.01 ms'; '—' when unknown."""
    if lo is None or hi is None:
        return "—"
    a, b = fmt_time(lo), fmt_time(hi)
    ua, ub = a.rsplit(" ", 1)[-1], b.rsplit(" ", 1)[-1]
    if ua == ub:
        return f"{a.rsplit(' ', 1)[0]}–{b}"
    return f"{a} – {b}"


def _missing_view(v) -> dict[str, Any]:
    return {"case_key": v.case_key, "device": v.device, "base_median": fmt_time(v.base_median_s),
            "base_runs": ", ".join(map(str, v.base_run_ids))}


def _anchor(case_key: str) -> str:
    """A stable, HTML-id-safe anchor for a case (a hash: case keys hold any characters)."""
    return "case-" + hashlib.sha1(case_key.encode("utf-8")).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------
# charts
# ---------------------------------------------------------------------------------------------


def _variant_charts(data: ReportData) -> list[dict[str, Any]]:
    """Per workload: its variant bar chart and the table of its variants side by side."""
    out = []
    workloads = sorted(data.results["workload"].unique().tolist())
    for i, wl in enumerate(workloads):
        svg = plots.variant_bars(data.results, wl, chart_id=f"bars-{i}")
        table = _variant_table(variant_matrix(data.results, wl))
        out.append({"workload": wl, "svg": Markup(svg), "table": table})
    return out


def _rate_text(rate: float | None, metric: str | None, dtype: str = "") -> str:
    """'12.3 TFLOP/s', '456.0 GB/s' (harness.stats.peaks.rate_text); integer workloads count
    operations, not floating-point ones ('12.3 TOP/s')."""
    if rate is None or metric is None:
        return ""
    return rate_text(rate, "B/s" if metric == "GB/s" else ops_unit(dtype))


#: how the table names the variants that are not kbench schedules (Result.variant_kind)
_KINDS = {"cuda_source": "CUDA source", "callable:torch": "callable (torch)",
          "callable:cupy": "callable (cupy)"}


def _variant_table(m: VariantMatrix) -> dict[str, Any] | None:
    """The display strings of a :class:`reports.data.VariantMatrix`: one row per device and shape, a
    cell per variant (median, throughput, time relative to the row's fastest kernel), the best
    kernel's speed next to each peer. None when the workload has a single variant and no peer."""
    if len(m.columns) < 2:
        return None
    peers = [c for c in m.columns if c.startswith(PEER_PREFIX)]
    rows = []
    for r in m.rows:
        cells = []
        for col in m.columns:
            c = r.cells.get(col)
            if c is None:
                cells.append({"text": "", "sub": "", "cls": "none", "anchor": ""})
            elif c.median_s is None:
                cells.append({"text": c.outcome, "sub": "", "cls": "failed", "anchor": _anchor(c.case_key)})
            else:
                rel = "" if c.vs_best is None else ("fastest" if c.best else f"{c.vs_best:.2f}× the time")
                sub = " · ".join(x for x in (_rate_text(c.rate, m.metric, r.dtype), rel) if x)
                cells.append({"text": fmt_time(c.median_s), "sub": sub, "cls": "best" if c.best else "",
                              "anchor": _anchor(c.case_key)})
        vs = [f"{r.vs_peers[p]:.2f}× {p[len(PEER_PREFIX):]}" for p in peers if p in r.vs_peers]
        rows.append({"device": r.device or "?", "shape": r.shape, "cells": cells, "vs_peers": ", ".join(vs),
                     "best": r.best or ""})
    kinds = [m.kinds.get(c, "") for c in m.columns]
    return {"columns": m.columns, "kinds": [_KINDS.get(k, k) for k in kinds], "rows": rows,
            "has_peers": bool(peers), "metric": m.metric or "median time"}


def _trend_order(data: ReportData, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def rank(r):
        urgent = 0 if r["verdict"] not in ("", "SAME") else 1
        stepped = 0 if data.steps.get(r["case_key"]) else 1
        return (urgent, _VERDICT_RANK.get(r["verdict"], 7), stepped, r["workload"], r["case_key"])

    return sorted(rows, key=rank)


def _trend_charts(data: ReportData, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    eligible = []
    for r in _trend_order(data, rows):
        hist = case_history(data, r["case_key"], r["device"])
        if len(hist) >= MIN_TREND_RUNS:
            eligible.append((r, hist))
    out = []
    for i, (r, hist) in enumerate(eligible[:MAX_TREND_CHARTS]):
        steps = data.steps.get(r["case_key"], [])
        title, sub = _case_titles(r)
        svg = plots.trend_chart(hist, steps, title=title, subtitle=sub, chart_id=f"trend-{i}",
                                current_run=data.run_id)
        out.append({"row": _row_view(r), "svg": Markup(svg), "runs": len(hist),
                    "steps": [_step_view(s, hist) for s in steps]})
    return out, len(eligible)


def _case_titles(r: dict[str, Any]) -> tuple[str, str]:
    """(title, subtitle) of a case's charts: workload/variant[knobs]; shape dtype target · device."""
    title = f"{r['workload']}/{r['variant']}" + (f" [{r['knobs']}]" if r["knobs"] else "")
    sub = " ".join(x for x in (r["shape"], r["dtype"], r["target"]) if x) + f" · {r['device'] or '?'}"
    return title, sub


def _step_view(step: Any, hist) -> str:
    idx = int(getattr(step, "index", -1))
    ratio = getattr(step, "ratio", None)
    where = ""
    if 0 <= idx < len(hist):
        row = hist.iloc[idx]
        where = f"at run {int(row['run_id'])}"
        if short_commit(row["git_commit"]):
            where += f" (commit {short_commit(row['git_commit'])})"
    change = ""
    if ratio is not None and math.isfinite(float(ratio)):
        change = f"{(float(ratio) - 1) * 100:+.1f} %"
    return " ".join(x for x in (change, where) if x) or "step"


def _detail_charts(data: ReportData, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    picked = [r for r in rows if r["verdict"] in ("SLOWER", "AMBIGUOUS")]
    picked.sort(key=lambda r: (_VERDICT_RANK[r["verdict"]], -(r["delta_pct"] or 0)))
    out = []
    for i, r in enumerate(picked[:MAX_DETAIL_CASES]):
        base = data.baseline_samples.get(r["case_key"], {})
        title, sub = _case_titles(r)
        hist_svg = plots.sample_histogram(r["samples"], base.get("samples", ()), title="samples: " + title,
                                          subtitle=sub, chart_id=f"hist-{i}")
        trace_svg = plots.clock_trace(r["samples"], r["clocks"], base.get("samples", ()),
                                      base.get("clocks", ()), title="in order: " + title, subtitle=sub,
                                      chart_id=f"clock-{i}")
        out.append({"row": _row_view(r), "hist": Markup(hist_svg), "trace": Markup(trace_svg),
                    "has_base": bool(base)})
    return out, len(picked)


def _tuning_charts(data: ReportData, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A best-so-far curve per tuned case of the run that has stored trials (ReportData.tuning)."""
    if data.tuning.empty:
        return []
    by_key = {r["case_key"]: r for r in rows}
    out = []
    for i, (key, trials) in enumerate(data.tuning.groupby("case_key", sort=False)):
        r = by_key.get(key)
        title, sub = _case_titles(r) if r is not None else (key, "")
        svg = tuning_plots.best_so_far_chart(trials, title=title, subtitle=sub, chart_id=f"tuning-{i}")
        sessions = trials["session_id"].nunique()
        failed = int((trials["error_no"] != 0).sum())
        clocks = sorted({c if isinstance(c, str) else "an unrecorded clock"
                         for c in (trials["clock"] if "clock" in trials.columns else ())})
        out.append({"row": _row_view(r) if r is not None else None, "case_key": key, "svg": Markup(svg),
                    "sessions": sessions, "trials": len(trials), "failed": failed,
                    "clocks": [f"the {c} clock" if c in ("harness", "time_evaluator") else c
                               for c in clocks]})
    return out


__all__ = ["MAX_DETAIL_CASES", "MAX_TREND_CHARTS", "MIN_TREND_RUNS", "VERDICT_HELP", "render_html",
           "write_html"]
