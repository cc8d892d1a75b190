"""The report's charts, drawn with matplotlib (Agg, no pyplot state) and returned as SVG text.

Each function returns one ``<svg>`` element ready to be inlined into an HTML page:

- text stays text (``svg.fonttype = "none"``): no embedded glyphs, no external fonts; the page's
  sans-serif font draws it;
- every ``id`` and every reference to it (``url(#...)``, ``href="#..."``) is prefixed with the
  chart's id, so several charts on one page never share an id (matplotlib's ids are deterministic
  and would clash: ``figure_1``, clip paths, markers);
- the XML prolog, DOCTYPE, ``<metadata>``, ``<style>`` (a page-wide ``*`` rule once inlined; the
  page's CSS carries it for ``svg.chart``) and comments are dropped (matplotlib repeats every text
  as a comment, unescaped as far as HTML is concerned);
- mathtext is off (``text.parse_math = False``): a workload called ``$x$`` is printed as is.

Text from data (workload, variant, device names) is escaped by matplotlib's SVG writer; the
result is checked for ``<script`` and event-handler attributes before it is returned.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
import re
from collections.abc import Sequence
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from harness.stats.peaks import peak_bw_kind
from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from reports.data import pairs_text, short_commit, throughput_metric, time_unit, variant_labels

#: colours: a colour-blind-friendly cycle (Okabe-Ito), then matplotlib's tab10
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
NEW_COLOUR = "#0072B2"
BASE_COLOUR = "#999999"
STEP_COLOUR = "#D55E00"

_RC = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "text.usetex": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],  # metrics from DejaVu (matplotlib ships it)
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "legend.frameon": False,
    "legend.fontsize": 8,
    "svg.image_inline": True,
}

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
# matplotlib's "*{stroke-linejoin: round; stroke-linecap: butt}" would apply to the whole page once
# inlined; the page's CSS scopes the same rule to svg.chart (report.css)
_STYLE = re.compile(r"<style\b[^>]*>.*?</style>\s*", re.DOTALL)
_TAG = re.compile(r"<[^<>]*>")
_ID = re.compile(r'\bid="([^"]*)"')
_URL = re.compile(r"url\(#([^)]*)\)")
_HREF = re.compile(r'href="#([^"]*)"')
_SIZE = re.compile(r'\A<svg\b[^>]*?\swidth="[^"]*"\s+height="[^"]*"')
_UNSAFE_TAGS = frozenset({"script", "foreignobject", "iframe", "object", "embed", "a"})
_TAG_NAME = re.compile(r"<\s*/?\s*([A-Za-z][\w:.-]*)")
_ATTR = re.compile(r"""\s*([^\s=/>]+)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+))?""")

_counter = itertools.count(1)


def _chart_id(chart_id: str | None) -> str:
    """A valid, page-unique id prefix (letters, digits, '-')."""
    if chart_id:
        cid = re.sub(r"[^A-Za-z0-9-]", "-", chart_id)
        return cid if cid[:1].isalpha() else "c" + cid
    return f"chart{next(_counter)}"


def _styled(fn):
    """Run a chart function under the report's rcParams (they apply when artists are created)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with rc_context(_RC):
            return fn(*args, **kwargs)

    return wrapper


def _figure(plot_w: float, plot_h: float, *, nrows: int = 1, sharex: bool = False, left: float = 0.8,
            right: float = 0.25, top: float = 0.4, bottom: float = 0.55, gap: float = 0.3
            ) -> tuple[Figure, Any]:
    """A figure whose axes area is ``plot_w`` x ``plot_h`` inches with fixed margins (inches).

    Fixed margins instead of constrained layout: a layout engine lays every text out an extra
    time, which tripled the rendering time of a report.
    """
    width = left + plot_w + right
    height = top + plot_h * nrows + gap * (nrows - 1) + bottom
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                        bottom=bottom / height, hspace=gap / plot_h if nrows > 1 else 0.2)
    axes = fig.subplots(nrows, 1, sharex=sharex, squeeze=True)
    return fig, axes


def _legend_room(labels: Sequence[str], fontsize: float = 8.0, title: str = "") -> float:
    """Inches to keep right of the axes for a legend of ``labels`` (a generous estimate)."""
    longest = max([len(str(x)) for x in labels] + [len(title), 4])
    return 0.55 + longest * fontsize * 0.58 / 72.0


def _svg(fig: Figure, chart_id: str, title: str) -> str:
    """``fig`` as cleaned SVG text with ids prefixed by ``chart_id`` (see the module docstring)."""
    buf = io.StringIO()
    with rc_context({"svg.hashsalt": chart_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None,
                                                 "Type": None})
    text = buf.getvalue()
    text = _PROLOG.sub("", text, count=1)
    text = _METADATA.sub("", text)
    text = _STYLE.sub("", text)
    text = _COMMENT.sub("", text)
    prefix = chart_id + "-"

    def fix(m: re.Match) -> str:
        tag = m.group(0)
        tag = _ID.sub(lambda i: f'id="{prefix}{i.group(1)}"', tag)
        tag = _URL.sub(lambda u: f"url(#{prefix}{u.group(1)})", tag)
        return _HREF.sub(lambda h: f'href="#{prefix}{h.group(1)}"', tag)

    text = _TAG.sub(fix, text)
    # scale with the page: drop the fixed size (the viewBox keeps the aspect ratio)
    text = _SIZE.sub(lambda m: "<svg", text, count=1)
    label = escape(title, quote=True)
    text = text.replace("<svg", f'<svg class="chart" role="img" aria-label="{label}" '
                                f'data-chart="{chart_id}"', 1)
    bad = _active_content(text)
    if bad:  # never expected: matplotlib escapes text; refuse rather than inline
        raise ValueError(f"chart {chart_id}: SVG output contains active content ({bad})")
    return text.strip() + "\n"


def _active_content(svg: str) -> str | None:
    """The first element or attribute of ``svg`` that could run code or load something, or None.

    Only markup is inspected (text between tags is escaped and inert): element names against
    :data:`_UNSAFE_TAGS`, attribute names ``on*`` and any ``href`` that is neither a local
    ``#fragment`` nor an inline ``data:image/`` (``<use>``/``<image>`` could load external files).
    """
    for m in _TAG.finditer(svg):
        tag = m.group(0)
        if tag.startswith(("<!", "<?")):
            return tag[:40]
        name = _TAG_NAME.match(tag)
        if name is None:
            continue
        if name.group(1).lower() in _UNSAFE_TAGS:
            return name.group(1)
        rest = tag[name.end():].rstrip("/>")
        for attr in _ATTR.finditer(rest):
            aname = attr.group(1).lower()
            value = attr.group(0).split("=", 1)[1].strip().strip("\"'") if "=" in attr.group(0) else ""
            if aname.startswith("on") or (aname.endswith("href")
                                          and not value.startswith(("#", "data:image/"))):
                return aname
    return None


def _titles(ax: Any, main: str, sub: str = "", width_in: float = 5.0) -> None:
    """A bold title over the axes and, under it, a smaller grey subtitle (both cut to fit)."""
    chars = max(20, int(width_in * 72 / (10 * 0.62)))  # bold 10 pt: ~0.62 em per character
    ax.set_title(_short(main, chars), loc="left", y=1.0, pad=17 if sub else 8)
    if sub:
        ax.annotate(_short(sub, max(24, int(width_in * 72 / (8 * 0.52)))), (0, 1),
                    xycoords="axes fraction", xytext=(0, 5),
                    textcoords="offset points", fontsize=8, color="#555", ha="left", va="bottom")


def _label_number(v: float, _pos: Any = None) -> str:
    """Tick labels of log axes as plain numbers (mathtext is off): 0.01, 1, 1,000, 1e+06."""
    if not v > 0 or not math.isfinite(v):
        return ""
    if 1e-3 <= v < 1e6:
        return f"{v:,.6g}"
    return f"{v:.0e}" if abs(math.log10(v) - round(math.log10(v))) < 1e-9 else f"{v:.2g}"


def _plain_log(axis: Any) -> None:
    axis.set_major_formatter(FuncFormatter(_label_number))
    axis.set_minor_formatter(NullFormatter())


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["outcome"] == "ok") & frame["median_s"].notna()]


def _short(text: str, n: int = 40) -> str:
    text = str(text)
    return text if len(text) <= n else text[:n - 1] + "…"


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _pairs(text: Any) -> str:
    return pairs_text(text)


# ---------------------------------------------------------------------------------------------
# variant bars
# ---------------------------------------------------------------------------------------------


@_styled
def variant_bars(frame: pd.DataFrame, workload: str, chart_id: str | None = None,
                 max_groups: int = 16) -> str:
    """Schedule variants of one workload side by side, one bar group per device (and shape).

    Parameters
    ----------
    frame : pandas.DataFrame
        Rows of :meth:`harness.store.Store.results_frame` (one run); rows of other workloads are
        ignored, failed cases are marked with a red cross where their bar would be.
    workload : str
        The workload to draw.
    chart_id : str, optional
        Prefix of the SVG's ids (unique per page); default a fresh counter value.
    max_groups : int
        At most this many bar groups (the first ones in device/shape order).

    Returns
    -------
    str
        One ``<svg>`` element. Bars show throughput (higher is better) when every timed case has
        it -- FLOP/s for compute-heavy workloads, GB/s for the others
        (:func:`reports.data.throughput_metric`) -- else the median time (lower is better);
        whiskers are the 95 % CI of the median.
    """
    cid = _chart_id(chart_id)
    df = frame[frame["workload"] == workload].copy()
    df["shape_label"] = [" ".join(x for x in (_pairs(p), d, t) if x)
                         for p, d, t in zip(df["params"], df["dtype"], df["target"])]
    df["variant_label"] = variant_labels(df)
    df["device"] = df["device"].fillna("").replace("", "(unknown device)")
    ok = _ok(df)
    metric = throughput_metric(df)  # GB/s, GFLOP/s (compute-heavy workloads) or None: median time
    use_rate = metric is not None
    rate_col = "gflops" if metric == "GFLOP/s" else "gbps"
    several_shapes = df["shape_label"].nunique() > 1
    groups = list(dict.fromkeys(zip(df["device"], df["shape_label"])))
    dropped = max(0, len(groups) - max_groups)
    groups = groups[:max_groups]
    variants = list(dict.fromkeys(df["variant_label"]))
    nv = max(1, len(variants))
    width = 0.8 / nv
    legend_labels = [_short(v, 48) for v in variants]
    plot_w = min(8.0, max(4.2, 0.3 * nv * len(groups) + 0.5 * len(groups)))
    fig, ax = _figure(plot_w, 2.6, right=_legend_room(legend_labels, title="variant"), top=0.6,
                      bottom=0.75 if several_shapes else 0.55)
    if use_rate and metric == "GFLOP/s" and ok["gflops"].max() >= 1000:
        scale, unit = 1000.0, "TFLOP/s"
    elif use_rate:
        scale, unit = 1.0, str(metric)
    else:
        scale, unit = time_unit(ok["median_s"])
    heights = []
    for vi, var in enumerate(variants):
        xs, ys, lo, hi, fails = [], [], [], [], []
        for gi, (dev, shape) in enumerate(groups):
            rows = df[(df["device"] == dev) & (df["shape_label"] == shape) & (df["variant_label"] == var)]
            if rows.empty:
                continue
            r = rows.iloc[0]
            x = gi - 0.4 + width * (vi + 0.5)
            if r["outcome"] != "ok" or pd.isna(r["median_s"]):
                fails.append((x, str(r["outcome"])))
                continue
            med, cl, ch = float(r["median_s"]), r["ci_low_s"], r["ci_high_s"]
            cl = med if pd.isna(cl) else float(cl)
            ch = med if pd.isna(ch) else float(ch)
            if use_rate:
                y = float(r[rate_col]) / scale
                ylo, yhi = y * med / ch if ch > 0 else y, y * med / cl if cl > 0 else y
            else:
                y, ylo, yhi = med / scale, cl / scale, ch / scale
            xs.append(x)
            ys.append(y)
            lo.append(max(0.0, y - ylo))
            hi.append(max(0.0, yhi - y))
        heights += ys
        ax.bar(xs, ys, width=width * 0.92, color=_colour(vi), label=legend_labels[vi],
               yerr=[lo, hi] if xs else None, capsize=2, error_kw={"elinewidth": 0.8, "ecolor": "#333"})
        for x, outcome in fails:  # at the foot of the axes, whatever the y scale
            ax.plot([x], [0.0], marker="x", color="#C62828", markersize=7, mew=2, linestyle="none",
                    transform=ax.get_xaxis_transform(), clip_on=False)
            ax.annotate(outcome, (x, 0.0), xycoords=("data", "axes fraction"), xytext=(0, 7),
                        textcoords="offset points", rotation=90, ha="center", va="bottom", fontsize=7,
                        color="#C62828")
    if heights and not use_rate and max(heights) / max(min(heights), 1e-30) > 50:
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
    ax.set_xticks(range(len(groups)))
    labels = [_short(dev, 28) + ("\n" + _short(shape, 34) if several_shapes else "") for dev, shape in groups]
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(f"throughput ({unit}), higher is better" if use_rate
                  else f"median time ({unit}), lower is better")
    sub = "schedule variants by device"
    if not several_shapes and groups:
        sub += f" · {groups[0][1]}"
    if dropped:
        sub += f" · first {max_groups} of {max_groups + dropped} groups"
    _titles(ax, str(workload), sub, plot_w)
    title = f"{workload}: {sub}"
    ax.grid(axis="x", visible=False)
    if variants:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="variant", title_fontsize=8)
    return _svg(fig, cid, title)


# ---------------------------------------------------------------------------------------------
# trend over history
# ---------------------------------------------------------------------------------------------


@_styled
def trend_chart(history: pd.DataFrame, steps: Sequence[Any] = (), title: str = "",
                chart_id: str | None = None, max_points: int = 60, current_run: int | None = None,
                subtitle: str = "") -> str:
    """Median (with its 95 % CI band) of one case over the runs of its history.

    Parameters
    ----------
    history : pandas.DataFrame
        :func:`reports.data.case_history` of the case: ok results in run order with run_id,
        git_commit, median_s, ci_low_s, ci_high_s.
    steps : sequence of Step
        ``harness.stats.detect_steps`` on the medians: each ``index`` (position in ``history``)
        is marked by a vertical line labelled with its ratio.
    title, subtitle : str
        Chart title (the case) and a smaller line under it (shape, device).
    max_points : int
        Only the last this many runs are drawn (steps before them are left out).
    current_run : int, optional
        The reported run: its point is highlighted when it is in ``history``.
    """
    cid = _chart_id(chart_id)
    h = history.reset_index(drop=True)
    start = max(0, len(h) - max_points)
    h = h.iloc[start:].reset_index(drop=True)
    scale, unit = time_unit(h["median_s"])
    x = np.arange(len(h))
    med = h["median_s"].to_numpy(float) / scale
    lo = h["ci_low_s"].fillna(h["median_s"]).to_numpy(float) / scale
    hi = h["ci_high_s"].fillna(h["median_s"]).to_numpy(float) / scale
    fig, ax = _figure(5.4, 2.0, right=_legend_room(["detected step"]), bottom=0.75,
                      top=0.6 if subtitle else 0.4)
    ax.fill_between(x, lo, hi, color=NEW_COLOUR, alpha=0.18, linewidth=0, label="95 % CI")
    ax.plot(x, med, color=NEW_COLOUR, marker="o", markersize=3.5, linewidth=1.4, label="median")
    if len(h) and current_run is not None and int(h["run_id"].iloc[-1]) == int(current_run):
        ax.plot([x[-1]], [med[-1]], marker="o", markersize=7, color=STEP_COLOUR, linestyle="none",
                label="this run")
    for i, st in enumerate(steps):
        idx = int(getattr(st, "index", 0)) - start
        if not 0 < idx < len(h) + 1:
            continue
        ratio = getattr(st, "ratio", None)
        ax.axvline(idx - 0.5, color=STEP_COLOUR, linestyle="--", linewidth=1.0,
                   label="detected step" if i == 0 else None)
        if ratio is not None and math.isfinite(float(ratio)):
            ax.annotate(f"×{float(ratio):.3g}", (idx - 0.5, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -10), textcoords="offset points", color=STEP_COLOUR, fontsize=8)
    labels = [f"{int(r)}\n{short_commit(c)[:7]}" for r, c in zip(h["run_id"], h["git_commit"])]
    every = max(1, math.ceil(len(h) / 14))
    ax.set_xticks(x[::every])
    ax.set_xticklabels(labels[::every], fontsize=7)
    ax.set_xlim(-0.5, max(len(h) - 0.5, 0.5))
    ax.set_xlabel("run id / commit")
    ax.set_ylabel(f"median time ({unit})")
    ax.yaxis.set_major_locator(MaxNLocator(5))
    _titles(ax, title, subtitle, 5.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, cid, title)


# ---------------------------------------------------------------------------------------------
# roofline
# ---------------------------------------------------------------------------------------------


def device_peaks(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Measured peaks per device, derived from the results: ``{"gbps": float|None, "read_gbps":
    float|None, "gflops": {dtype: float}}``.

    kbench stores ``pct_peak_bw = 100 * gbps / bandwidth peak`` (the copy peak, or the read peak for
    kernels that only read, as the result's ``peak_bw_kind`` says: harness.stats.peaks) and ``pct_peak_flops
    = 100 * gflops / matmul_peak(dtype)`` (harness.measure.derived), so the peaks are ``gbps /
    (pct_peak_bw / 100)`` over the results of each kind and ``gflops / (pct_peak_flops / 100)``; the
    median over the device's cases is taken (they agree up to rounding).
    """
    out: dict[str, dict[str, Any]] = {}
    ok = _ok(frame)
    if "peak_bw_kind" in ok.columns:
        kinds = ok["peak_bw_kind"].map(peak_bw_kind)
    else:
        kinds = pd.Series("copy", index=ok.index)
    for dev, g in ok.groupby(ok["device"].fillna(""), sort=True):
        bw = g[(g["pct_peak_bw"] > 0) & (g["gbps"] > 0)]
        peak = {}
        for kind in ("copy", "read"):
            sel = bw[kinds.loc[bw.index] == kind]
            peak[kind] = float(np.median(sel["gbps"] / (sel["pct_peak_bw"] / 100.0))) if len(sel) else None
        peak_bw = peak["copy"]
        fl = g[(g["pct_peak_flops"] > 0) & (g["gflops"] > 0)]
        flops = {}
        for dtype, gd in fl.groupby("dtype", sort=True):
            flops[str(dtype)] = float(np.median(gd["gflops"] / (gd["pct_peak_flops"] / 100.0)))
        out[str(dev)] = {"gbps": peak_bw, "read_gbps": peak["read"], "gflops": flops}
    return out


@_styled
def roofline_chart(frame: pd.DataFrame, chart_id: str | None = None) -> str | None:
    """Roofline of the run: achieved GFLOP/s against arithmetic intensity (FLOP per byte).

    One point per timed case with both GB/s and GFLOP/s (colour = workload, marker = device); per
    device the measured copy (and read) bandwidth slopes and FLOP/s ceilings (per dtype) from
    :func:`device_peaks`. Returns None when no case has both figures.
    """
    cid = _chart_id(chart_id)
    ok = _ok(frame)
    pts = ok[(ok["gbps"] > 0) & (ok["gflops"] > 0)]
    if pts.empty:
        return None
    ai = (pts["gflops"] / pts["gbps"]).to_numpy(float)
    peaks = device_peaks(frame)
    workloads = sorted(pts["workload"].unique().tolist())
    devices = sorted(pts["device"].fillna("").unique().tolist())
    labels = [f"{_short(d, 30)}: 00,000 GB/s copy" for d in devices]
    labels += [_short(w, 30) + (f" · {_short(d, 20)}" if len(devices) > 1 else "") for w in workloads
               for d in devices]
    fig, ax = _figure(6.2, 3.4, right=_legend_room(labels, fontsize=7))
    ax.set_xscale("log")
    ax.set_yscale("log")
    xmin, xmax = float(ai.min()) / 4, float(ai.max()) * 4
    markers = "osD^vP*X"
    for di, dev in enumerate(devices):
        p = peaks.get(dev, {})
        fls = p.get("gflops") or {}
        style = ("-", "--", ":", "-.")[di % 4]
        # the copy roof, and the read roof where read-only kernels were measured against it
        for kind, bw, colour in (("copy", p.get("gbps"), "#555"), ("read", p.get("read_gbps"), "#999")):
            if not bw:
                continue
            top = max(fls.values()) if fls else float(pts["gflops"].max()) * 4
            ridge = top / bw
            xmin, xmax = min(xmin, ridge / 8), max(xmax, ridge * 8)
            xs = np.geomspace(xmin, xmax, 64)
            ax.plot(xs, np.minimum(xs * bw, top if fls else np.inf), color=colour, linestyle=style,
                    linewidth=1.1, label=f"{_short(dev, 30)}: {bw:,.0f} GB/s {kind}")
        for dtype, fl in fls.items():
            ax.axhline(fl, color="#888", linestyle=style, linewidth=0.8)
            ax.annotate(f"{_short(dev, 24)} {dtype}: {fl:,.0f} GFLOP/s", (1.0, fl),
                        xycoords=("axes fraction", "data"), xytext=(-4, 3), textcoords="offset points",
                        ha="right", fontsize=7, color="#555")
    for wi, wl in enumerate(workloads):
        for di, dev in enumerate(devices):
            sel = (pts["workload"] == wl) & (pts["device"].fillna("") == dev)
            if not sel.any():
                continue
            ax.scatter((pts["gflops"][sel] / pts["gbps"][sel]).to_numpy(float),
                       pts["gflops"][sel].to_numpy(float), s=22, color=_colour(wi),
                       marker=markers[di % len(markers)], edgecolors="white", linewidths=0.5,
                       label=_short(wl, 30) + (f" · {_short(dev, 20)}" if len(devices) > 1 else ""),
                       zorder=3)
    ax.set_xlim(xmin, xmax)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved GFLOP/s")
    title = "Roofline: measured peaks per device, one point per case"
    _titles(ax, title, "", 6.2)
    _plain_log(ax.xaxis)
    _plain_log(ax.yaxis)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    return _svg(fig, cid, title)


# ---------------------------------------------------------------------------------------------
# samples of one case
# ---------------------------------------------------------------------------------------------


@_styled
def sample_histogram(samples: Sequence[float], base_samples: Sequence[float] = (), title: str = "",
                     chart_id: str | None = None, subtitle: str = "") -> str:
    """Histogram of one case's raw samples, the baseline's overlaid when given; medians marked."""
    cid = _chart_id(chart_id)
    new = np.asarray([s for s in samples if s is not None], float)
    base = np.asarray([s for s in base_samples if s is not None], float)
    both = np.concatenate([new, base]) if base.size else new
    scale, unit = time_unit(both)
    fig, ax = _figure(3.8, 2.0, bottom=0.5, top=0.6 if subtitle else 0.4)
    if both.size:
        lo, hi = np.percentile(both, [0.5, 99.5])  # a few extreme outliers must not squash the rest
        if hi <= lo:
            lo, hi = lo * 0.999, hi * 1.001 + 1e-12
        bins = np.linspace(lo / scale, hi / scale, 31)
        if base.size:
            ax.hist(np.clip(base, lo, hi) / scale, bins=bins, color=BASE_COLOUR, alpha=0.55,
                    label=f"baseline (n={base.size})")
            ax.axvline(np.median(base) / scale, color="#555", linestyle="--", linewidth=1)
        ax.hist(np.clip(new, lo, hi) / scale, bins=bins, color=NEW_COLOUR, alpha=0.6,
                label=f"this run (n={new.size})")
        if new.size:
            ax.axvline(np.median(new) / scale, color=NEW_COLOUR, linewidth=1.2)
    ax.set_xlabel(f"time per launch ({unit}); lines: medians")
    ax.set_ylabel("samples")
    _titles(ax, title, subtitle, 3.8)
    ax.legend(loc="upper right")
    return _svg(fig, cid, title)


@_styled
def clock_trace(samples: Sequence[float], clocks: Sequence[float | None] = (),
                base_samples: Sequence[float] = (), base_clocks: Sequence[float | None] = (),
                title: str = "", chart_id: str | None = None, subtitle: str = "") -> str:
    """Samples in the order they were taken and, where NVML recorded it, the SM clock of each.

    A slowdown that follows the clock (thermal or power capping) shows up as both curves moving
    together; the baseline's trace is drawn in grey when given.
    """
    cid = _chart_id(chart_id)
    new = np.asarray(list(samples), float)
    base = np.asarray(list(base_samples), float)
    nc = np.asarray([np.nan if c is None else c for c in clocks], float)
    bc = np.asarray([np.nan if c is None else c for c in base_clocks], float)
    have_clocks = bool(np.isfinite(nc).any() or np.isfinite(bc).any())
    scale, unit = time_unit(np.concatenate([new, base]))
    fig, axes = _figure(3.8, 1.3 if have_clocks else 2.0, nrows=2 if have_clocks else 1, sharex=True,
                        bottom=0.5, top=0.6 if subtitle else 0.4)
    ax = axes[0] if have_clocks else axes
    if base.size:
        ax.plot(np.arange(base.size), base / scale, color=BASE_COLOUR, linewidth=0.8, label="baseline")
    ax.plot(np.arange(new.size), new / scale, color=NEW_COLOUR, linewidth=0.9, label="this run")
    ax.set_ylabel(f"time ({unit})")
    _titles(ax, title, subtitle, 3.8)
    ax.legend(loc="upper right")
    if have_clocks:
        cax = axes[1]
        if np.isfinite(bc).any():
            cax.plot(np.arange(bc.size), bc, color=BASE_COLOUR, linewidth=0.8)
        if np.isfinite(nc).any():
            cax.plot(np.arange(nc.size), nc, color=STEP_COLOUR, linewidth=0.9)
        cax.set_ylabel("SM clock (MHz)")
        cax.set_xlabel("sample index")
    else:
        ax.set_xlabel("sample index (no SM clock recorded)")
    return _svg(fig, cid, title)


__all__ = ["clock_trace", "device_peaks", "roofline_chart", "sample_histogram", "trend_chart",
           "variant_bars"]
