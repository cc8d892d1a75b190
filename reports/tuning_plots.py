"""The best-so-far curve of a tuned case: what `kbench tune`'s sessions found against trials, drawn as
the other charts of the report are (reports.plots: inline SVG, ids prefixed, text as text)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from reports.data import time_unit
from reports.plots import STEP_COLOUR, _chart_id, _colour, _figure, _legend_room, _styled, _svg, _titles

__all__ = ["best_so_far_chart", "session_label"]


def session_label(session_id: int, tuner: str, device: str) -> str:
    """A session's legend entry: ``session 3 (xgb, H100)``."""
    return f"session {int(session_id)} ({tuner}, {device})"


@_styled
def best_so_far_chart(trials: pd.DataFrame, title: str = "", subtitle: str = "",
                      chart_id: str | None = None) -> str:
    """The best GFLOP/s found so far against the trial index, one line per tuning session (each
    trial's own value as a faint point; failed trials as crosses on the x axis). Without operation
    counts (no GFLOP/s) the best time so far is drawn instead, lower being better.

    Parameters
    ----------
    trials : pandas.DataFrame
        Rows of ``harness.store.Store.trials_frame`` for one case: session_id, tuner, device, trial,
        cost_s, gflops, error_no, best_cost_s, best_gflops.
    title, subtitle : str
        The case, and a smaller line under it.
    """
    cid = _chart_id(chart_id)
    rate = trials["gflops"].notna().any()
    labels = [session_label(s, t, d) for s, t, d in
              trials[["session_id", "tuner", "device"]].drop_duplicates().itertuples(index=False)]
    fig, ax = _figure(5.4, 2.2, right=_legend_room(labels + ["failed trial"]), bottom=0.6,
                      top=0.6 if subtitle else 0.4)
    scale, unit = (1.0, "GFLOP/s") if rate else time_unit(trials["cost_s"].dropna())
    failed_drawn = False
    for i, (sid, g) in enumerate(trials.groupby("session_id", sort=True)):
        g = g.sort_values("trial")
        colour = _colour(i)
        label = session_label(sid, g["tuner"].iloc[0], g["device"].iloc[0])
        x = g["trial"].to_numpy(int)
        if rate:
            own, best = g["gflops"].to_numpy(float), g["best_gflops"].to_numpy(float)
        else:
            own, best = g["cost_s"].to_numpy(float) / scale, g["best_cost_s"].to_numpy(float) / scale
        ax.plot(x, own, linestyle="none", marker="o", markersize=2.5, color=colour, alpha=0.35)
        ax.step(x, best, where="post", color=colour, linewidth=1.6, label=label)
        bad = g["error_no"].to_numpy(int) != 0
        if bad.any():
            ax.plot(x[bad], np.zeros(int(bad.sum())), linestyle="none", marker="x", markersize=5,
                    color=STEP_COLOUR, clip_on=False, label=None if failed_drawn else "failed trial")
            failed_drawn = True
    ax.set_xlabel("trial")
    ax.set_ylabel(f"best so far ({unit})" if rate else f"best time so far ({unit})")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(8, integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(5))
    _titles(ax, title, subtitle, 5.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, cid, title or "best so far against trials")
