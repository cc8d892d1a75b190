"""History of one case: a lookback z-score of its latest median and step detection over its medians,
which names the first run (and commit) of a slowdown."""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.model import DEFAULT_THRESHOLD

from .intervals import finite

__all__ = ["MIN_STEP", "Step", "detect_steps", "first_bad", "lookback_zscore"]

#: the smallest relative change of level kept as a step: a change the verdicts would call SAME
#: (within the practical threshold) is no step worth naming a commit for
MIN_STEP = DEFAULT_THRESHOLD


def lookback_zscore(history: Sequence[float], value: float, *, window: int = 20,
                    min_points: int = 5) -> float | None:
    """Conbench-style lookback z-score of ``value`` against recent history.

    ``z = (value - mean) / std`` over the last ``window`` finite points of ``history`` (sample
    standard deviation, ddof=1). Positive z means slower than usual. A z-score answers "is this
    run unusual for this case" without raw samples; its scale comes from run-to-run variation,
    which includes drift the per-run bootstrap cannot see.

    Returns
    -------
    float or None
        None when fewer than ``min_points`` finite points are available. When the window has no
        spread (std == 0): 0.0 if ``value`` equals the mean, else None (the score is undefined;
        use the verdicts or :func:`detect_steps` instead).
    """
    if window < 1 or min_points < 2:
        raise ValueError("window must be >= 1 and min_points >= 2")
    h = finite(history)[-window:]
    if len(h) < min_points or len(h) < 2 or not math.isfinite(value):
        return None
    mean = float(np.mean(h))
    std = float(np.std(h, ddof=1))
    if std == 0.0:
        return 0.0 if value == mean else None
    return (float(value) - mean) / std


@dataclass(frozen=True)
class Step:
    """A change of level in a series: ``index`` is the first point of the new level."""

    index: int
    before: float  # median of the segment before
    after: float  # median of the segment from ``index`` on
    ratio: float  # after / before (> 1: slower for timings)


def _l1_costs_from(x: Sequence[float], s: int) -> np.ndarray:
    """``out[k]`` = sum of |x_i - median| over the segment ``x[s : s + k + 1]``, for every k.

    The segment grows one point at a time in a sorted list; with ``low`` = sum of the smallest
    floor(len/2) values, ``cost = total - 2 * low - (middle value when len is odd)`` (upper half
    minus lower half: the L1 deviation is the same from any point between the middle values).
    """
    srt: list[float] = []
    total = low = 0.0
    out = np.empty(len(x) - s)
    for k in range(len(x) - s):  # k = length before inserting
        v = x[s + k]
        h = k // 2
        p = bisect_left(srt, v)
        if k % 2 == 0:  # lower half keeps h values: v enters it, its largest leaves
            if p < h:
                low += v - srt[h - 1]
        else:  # lower half grows to h + 1 values: v, or the old middle value
            low += v if p <= h else srt[h]
        srt.insert(p, v)
        total += v
        out[k] = total - 2.0 * low - (srt[(k + 1) // 2] if k % 2 == 0 else 0.0)
    return out


def _default_penalty(x: np.ndarray) -> float:
    """Cost of one more segment when none is given: 3 * sigma * ln(n).

    sigma is a robust noise scale: 1.4826 * MAD of successive differences / sqrt(2) (differences
    of iid noise have sqrt(2) times its spread; a level change disturbs just one difference, so
    steps do not inflate the estimate). With an L1 cost the segment cost is a Laplace negative
    log-likelihood times its scale, so sigma * ln(n) is a BIC-like price per extra segment; the
    factor 3 was tuned on seeded synthetic series (Gaussian and t(3) noise, n = 20..200): no false
    change points in flat noise, ~96 % exact recovery of a 3-sigma step at n = 40.

    Timings are noisy in proportion to their level, so for a positive series the differences are
    those of the logarithms (relative changes), and sigma is that relative scale times the series'
    median: after a large slowdown the slower level's larger absolute noise would otherwise make
    most differences large, and the price of the step's segment more than the step is worth (a
    10x slowdown over three runs each side went unnamed). For a series near 1 both are the same.
    """
    positive = bool((x > 0).all())
    d = np.diff(np.log(x) if positive else x)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    if sigma == 0.0:  # quantised or constant series: fall back to the mean absolute difference
        sigma = float(np.mean(np.abs(d))) / math.sqrt(2.0)
    if positive:
        sigma *= float(np.median(x))
    if sigma == 0.0:  # constant: any positive price stops needless splits
        sigma = 1e-9 * max(float(np.median(np.abs(x))), 1e-300)
    return 3.0 * sigma * math.log(len(x))


def detect_steps(values: Sequence[float], *, min_size: int = 3, penalty: float | None = None,
                 rel_threshold: float = MIN_STEP) -> list[Step]:
    """asv-style step detection on a series of medians (one point per run, oldest first).

    Fits a piecewise-constant model by optimal partitioning: dynamic programming over all
    segmentations into segments of at least ``min_size`` points, minimising the sum of absolute
    deviations from each segment's median (L1: one outlier run cannot create a level) plus
    ``penalty`` per segment. Then steps whose relative change ``|after / before - 1|`` is below
    ``rel_threshold`` are dropped by merging their two segments (smallest change first,
    recomputing medians after each merge). O(n^2) time, O(n) memory; fine up to a few thousand
    points.

    Parameters
    ----------
    values : sequence of float
        The series; NaN/inf points (failed runs) are skipped, indices refer to ``values``.
    min_size : int
        Shortest segment, in points (>= 1).
    penalty : float, optional
        Price of one extra segment, in the units of ``values``; default from the noise (see
        ``_default_penalty``).
    rel_threshold : float
        Smallest relative change kept as a step.

    Returns
    -------
    list of Step
        Oldest first.
    """
    if min_size < 1:
        raise ValueError(f"min_size must be >= 1, got {min_size!r}")
    arr = np.asarray(values, dtype=np.float64).ravel()
    where = np.flatnonzero(np.isfinite(arr))
    x = arr[where]
    n = len(x)
    if n < 2 * min_size:
        return []
    beta = _default_penalty(x) if penalty is None else float(penalty)
    xs = x.tolist()
    best = np.full(n + 1, np.inf)  # best[t]: least cost of x[:t]
    best[0] = 0.0
    prev = np.zeros(n + 1, dtype=np.int64)  # start of the last segment of that optimum
    for s in range(n - min_size + 1):
        if not math.isfinite(best[s]):
            continue
        cand = best[s] + _l1_costs_from(xs, s)[min_size - 1:] + beta  # ends t = s + min_size .. n
        better = cand < best[s + min_size:]
        ends = np.flatnonzero(better) + s + min_size
        best[ends] = cand[better]
        prev[ends] = s
    bounds = [n]
    while bounds[-1] > 0:
        bounds.append(int(prev[bounds[-1]]))
    starts = bounds[::-1][:-1]  # segment starts, 0 first
    segments = [[a, b] for a, b in zip(starts, starts[1:] + [n])]

    def change(i: int) -> float:  # relative change at the boundary between segments i and i + 1
        before = float(np.median(x[segments[i][0]:segments[i][1]]))
        after = float(np.median(x[segments[i + 1][0]:segments[i + 1][1]]))
        return abs(after / before - 1.0) if before != 0 else math.inf

    while len(segments) > 1:
        changes = [change(i) for i in range(len(segments) - 1)]
        i = int(np.argmin(changes))
        if changes[i] >= rel_threshold:
            break
        segments[i:i + 2] = [[segments[i][0], segments[i + 1][1]]]

    steps = []
    for left, right in itertools.pairwise(segments):
        before = float(np.median(x[left[0]:left[1]]))
        after = float(np.median(x[right[0]:right[1]]))
        ratio = after / before if before != 0 else math.inf
        steps.append(Step(index=int(where[right[0]]), before=before, after=after, ratio=ratio))
    return steps


def first_bad(values: Sequence[float], run_ids: Sequence[Any], commits: Sequence[Any], *,
              min_size: int = 3, penalty: float | None = None,
              rel_threshold: float = MIN_STEP) -> dict[str, Any] | None:
    """The first run of the most recent slowdown of one case.

    Runs :func:`detect_steps` on the case's medians (oldest first) and takes the last step with
    ``ratio > 1``: the run at its index is the first one measured at the slower level, and its
    commit is the first bad commit among the measured ones.

    Parameters
    ----------
    values, run_ids, commits : sequences of equal length
        Medians, run ids and git commits, one per run, oldest first.
    min_size, penalty, rel_threshold
        Passed to :func:`detect_steps`.

    Returns
    -------
    dict or None
        ``{"run_id", "commit", "index", "ratio", "before", "after"}``, or None when no step up was
        found.
    """
    if not len(values) == len(run_ids) == len(commits):
        raise ValueError(f"values, run_ids and commits differ in length: {len(values)}, "
                         f"{len(run_ids)}, {len(commits)}")
    ups = [s for s in detect_steps(values, min_size=min_size, penalty=penalty,
                                   rel_threshold=rel_threshold) if s.ratio > 1.0]
    if not ups:
        return None
    step = ups[-1]
    return {"run_id": run_ids[step.index], "commit": commits[step.index], "index": step.index,
            "ratio": step.ratio, "before": step.before, "after": step.after}

