"""The site's charts (:mod:`reports.site`): a case's trend on one GPU generation, drawn with matplotlib
as inline SVG under the same conventions as :mod:`reports.plots` (text stays text, ids prefixed by
the chart's id, no active content)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.ticker import LogLocator, MaxNLocator

from reports.data import time_unit
from reports.plots import (
    NEW_COLOUR,
    PALETTE,
    STEP_COLOUR,
    _chart_id,
    _figure,
    _legend_room,
    _plain_log,
    _short,
    _styled,
    _svg,
    _titles,
)

__all__ = ["BASELINE_COLOUR", "CI_ROOM", "LOG_SPAN", "case_trend", "relative_speed"]

#: the points of runs a named baseline points to
BASELINE_COLOUR = "#009E73"
#: a CI reaching further than this factor beyond the highest (lowest) median is cut at the edge
CI_ROOM = 1.3
#: medians spanning more than this ratio are drawn on a log axis
LOG_SPAN = 4.0


@_styled
def case_trend(points: Sequence[dict[str, Any]], steps: Sequence[Any] = (), title: str = "",
               subtitle: str = "", chart_id: str | None = None) -> str:
    """Median (with its 95 % CI band) of one case on one GPU generation over its runs.

    Parameters
    ----------
    points : sequence of dict
        In run order: ``run_id``, ``date``, ``commit``, ``median_s``, ``ci_low_s``, ``ci_high_s``
        and ``baselines`` (names of the baselines pointing to that run).
    steps : sequence of harness.stats.Step
        Steps found in the medians: each ``index`` (a position in ``points``) is marked by a
        dashed line labelled with the ratio of the levels.
    title, subtitle : str
        The case, and a smaller line under it (shape, dtype, target, generation).
    chart_id : str, optional
        Prefix of the SVG's ids (unique on its page).

    Returns
    -------
    str
        One ``<svg>`` element.
    """
    cid = _chart_id(chart_id)
    n = len(points)
    scale, unit = time_unit([p["median_s"] for p in points])
    x = np.arange(n)
    med = np.array([p["median_s"] for p in points], dtype=float) / scale
    lo = np.array([p["ci_low_s"] for p in points], dtype=float) / scale
    hi = np.array([p["ci_high_s"] for p in points], dtype=float) / scale
    legend = ["95 % CI", "median", "detected step", "baseline run"]
    fig, ax = _figure(6.2, 2.2, right=_legend_room(legend), bottom=0.95, top=0.6 if subtitle else 0.4)
    if n:
        ax.fill_between(x, lo, hi, color=NEW_COLOUR, alpha=0.18, linewidth=0, label="95 % CI",
                        step=None)
        ax.errorbar(x, med, yerr=[med - lo, hi - med], color=NEW_COLOUR, marker="o", markersize=3.5,
                    linewidth=1.4, elinewidth=0.8, capsize=2, label="median")
    marked = False
    for i, p in enumerate(points):
        if p.get("baselines"):
            ax.plot([i], [med[i]], marker="D", markersize=8, markerfacecolor="none",
                    markeredgecolor=BASELINE_COLOUR, markeredgewidth=1.6, linestyle="none",
                    label=None if marked else "baseline run")
            ax.annotate(", ".join(p["baselines"])[:24], (i, med[i]), xytext=(0, 9),
                        textcoords="offset points",
                        ha="center", fontsize=7, color=BASELINE_COLOUR)
            marked = True
    for k, st in enumerate(steps):
        idx = int(getattr(st, "index", 0))
        if not 0 < idx < n:
            continue
        ax.axvline(idx - 0.5, color=STEP_COLOUR, linestyle="--", linewidth=1.0,
                   label="detected step" if k == 0 else None)
        ratio = getattr(st, "ratio", None)
        if ratio is not None and math.isfinite(float(ratio)):
            ax.annotate(f"×{float(ratio):.3g}", (idx - 0.5, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -10), textcoords="offset points", color=STEP_COLOUR, fontsize=8)
    labels = [f"{p['run_id']}\n{p['date'][:10]}\n{p['commit'][:7]}" for p in points]
    every = max(1, math.ceil(n / 12))
    ax.set_xticks(x[::every])
    ax.set_xticklabels(labels[::every], fontsize=7)
    ax.set_xlim(-0.5, max(n - 0.5, 0.5))
    ax.set_xlabel("run / date / commit")
    ax.set_ylabel(f"median time ({unit})")
    _y_range(ax, med, lo, hi)
    _titles(ax, title, subtitle, 6.2)
    if n:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, cid, f"{title} {subtitle}".strip())


def _y_range(ax: Any, med: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
    """Limits that keep every median in view whatever the CIs do (one noisy run's wide interval is
    cut at the edge rather than flattening the line); a log axis where the medians span more than
    :data:`LOG_SPAN` (a large step keeps both levels readable)."""
    ok = med[np.isfinite(med) & (med > 0)]
    if not len(ok):
        ax.yaxis.set_major_locator(MaxNLocator(5))
        return
    top, bottom = float(ok.max()), float(ok.min())
    hi_f, lo_f = hi[np.isfinite(hi)], lo[np.isfinite(lo) & (lo > 0)]
    if len(hi_f):
        top = max(top, min(float(hi_f.max()), top * CI_ROOM))
    if len(lo_f):
        bottom = min(bottom, max(float(lo_f.min()), bottom / CI_ROOM))
    if top / bottom > LOG_SPAN:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        _plain_log(ax.yaxis)
        ax.set_ylim(bottom / 1.15, top * 1.15)
        return
    pad = 0.08 * (top - bottom) or 0.05 * top
    ax.set_ylim(max(0.0, bottom - pad), top + pad)
    ax.yaxis.set_major_locator(MaxNLocator(5))


@_styled
def relative_speed(rows: Sequence[dict[str, Any]], generations: Sequence[str], title: str = "",
                   subtitle: str = "", chart_id: str | None = None) -> str | None:
    """Each variant's speed relative to the fastest schedule variant on each GPU generation.

    Parameters
    ----------
    rows : sequence of dict
        The rows of a matrix group (:func:`reports.site._matrix`): ``label``, ``peer`` and ``cells``
        (generation -> ``{"ok", "median_s", "best"}``).
    generations : sequence of str
        The matrix's columns, one bar colour each.
    title, subtitle : str
        The workload, and the shape and dtype.
    chart_id : str, optional
        Prefix of the SVG's ids.

    Returns
    -------
    str or None
        One ``<svg>`` element: horizontal bars, ``best median / median`` (1 = the best variant on
        that GPU; a library peer may pass 1), or None when no generation has a timed variant.
    """
    cid = _chart_id(chart_id)
    best = {}
    for gen in generations:
        for row in rows:
            cell = row["cells"].get(gen)
            if cell and cell.get("best"):
                best[gen] = cell["median_s"]
    if not best:
        return None
    n, ng = len(rows), max(1, len(generations))
    height = max(1.2, 0.22 * n * ng + 0.2 * n)
    labels = [_short(r["label"], 40) for r in rows]
    fig, ax = _figure(4.6, height, left=0.3 + 0.075 * max(len(x) for x in labels),
                      top=0.6 if subtitle else 0.4,
                      bottom=0.6, right=_legend_room(list(generations), title="GPU"))
    bar = 0.8 / ng
    for gi, gen in enumerate(generations):
        ys, xs = [], []
        for ri, row in enumerate(rows):
            cell = row["cells"].get(gen)
            if cell and cell.get("ok") and gen in best and cell["median_s"]:
                ys.append(ri - 0.4 + bar * (gi + 0.5))
                xs.append(best[gen] / cell["median_s"])
        ax.barh(ys, xs, height=bar * 0.9, color=PALETTE[gi % len(PALETTE)], label=gen)
    ax.axvline(1.0, color="#333", linewidth=0.8, linestyle=":")
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speed relative to the best variant on that GPU (1 = best)")
    ax.grid(axis="y", visible=False)
    _titles(ax, title, subtitle, 4.6)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="GPU", title_fontsize=8)
    return _svg(fig, cid, f"{title} {subtitle}".strip())
