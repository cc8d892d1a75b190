"""Statistics and verdicts: one new run judged against its baseline, case by case (DESIGN.md 7).

Speed verdicts need two kinds of evidence at once:

- *statistical*: the two-sided Mann-Whitney U test on the raw samples (no normality assumed; GPU
  timings are skewed and carry outliers) gives a p-value, corrected over the compared suite with
  Benjamini-Hochberg (many cases are compared at once; BH bounds the expected share of false
  discoveries among the flagged ones), and a percentile-bootstrap confidence interval of
  ``median(new) / median(base)`` that must exclude 1;
- *practical*: the ratio must lie beyond the practical threshold (default 3 %): changes smaller
  than run-to-run drift of a GPU (clocks, thermals, driver) are not worth a red build even when
  they are statistically real.

:func:`judge` holds the exact decision table. History helpers (:func:`lookback_zscore`,
:func:`detect_steps`, :func:`first_bad`) look at one case's medians over many runs.

Timings are positive seconds; a ratio > 1 is slower.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.errors import ExitCode, UsageError
from harness.model import DEFAULT_THRESHOLD, Verdict

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Spread", "Step", "benjamini_hochberg", "bootstrap_ratio_ci", "compare_frames", "detect_steps",
    "exit_code", "first_bad", "history_sd", "judge", "lookback_zscore", "mann_whitney_p",
    "parse_fail_on", "widen_ci",
]

#: default significance level for the (BH-corrected) Mann-Whitney test
DEFAULT_ALPHA = 0.05

# Bootstrap memory bound: resampled index blocks hold at most this many entries at a time
# (int16/int32 indices: 8-16 MiB), whatever n_boot and the sample count are.
_BOOT_CHUNK_ELEMENTS = 1 << 22
# Above this many samples on one side the bootstrap distribution of the median is drawn exactly
# from the order-statistic (binomial) law instead of by resampling: O(n + n_boot log n) instead of
# O(n_boot * n). See _boot_medians.
_BOOT_EXACT_ABOVE = 10_000


def _clean(samples: Iterable[float]) -> np.ndarray:
    """Samples as a float64 array without NaN/inf (a lost sample carries no timing)."""
    arr = np.asarray(list(samples) if not isinstance(samples, np.ndarray) else samples, dtype=np.float64)
    return arr[np.isfinite(arr)].ravel()


# ---------------------------------------------------------------------------------------------
# tests and intervals
# ---------------------------------------------------------------------------------------------

def mann_whitney_p(base: Sequence[float], new: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value of ``new`` against ``base`` on raw samples.

    The rank-sum test asks whether one side tends to take larger values than the other without
    assuming a distribution, which suits skewed, outlier-prone kernel timings. scipy's
    ``method="auto"`` uses the exact null distribution for small samples without ties and the
    normal approximation (tie-corrected, with continuity correction) otherwise.

    Parameters
    ----------
    base, new : sequence of float
        Raw samples (seconds); NaN/inf are dropped.

    Returns
    -------
    float
        The p-value; 1.0 (no evidence) when either side has fewer than 2 samples or every value
        on both sides is identical (the test statistic has no variance then).
    """
    from scipy.stats import mannwhitneyu

    b, n = _clean(base), _clean(new)
    if len(b) < 2 or len(n) < 2:
        return 1.0
    both = np.concatenate([b, n])
    if np.all(both == both[0]):
        return 1.0
    p = float(mannwhitneyu(n, b, alternative="two-sided", method="auto").pvalue)
    return 1.0 if math.isnan(p) else min(max(p, 0.0), 1.0)


def _boot_medians(sorted_x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the median of ``sorted_x`` (ascending, length n).

    Because ``sorted_x`` is sorted, the median of a resample ``sorted_x[idx]`` is ``sorted_x`` at the
    median order statistics of the integer indices ``idx``: we sort small integers (radix sort for
    int16) instead of floats and never materialise resampled values. Indices are drawn in blocks
    of at most ``_BOOT_CHUNK_ELEMENTS`` entries to bound memory.

    Above ``_BOOT_EXACT_ABOVE`` samples the k-th smallest resampled index J (k = ceil(n / 2), the
    lower median) is drawn exactly from its law: ``P(J <= j) = P(Binomial(n, (j + 1) / n) >= k)``
    (at least k of the n draws fall at or below position j), by inverting that CDF at uniform
    variates. For even n this is the lower of the two middle values; with that many samples
    neighbouring order statistics differ negligibly against the interval's width.
    """
    n = len(sorted_x)
    if n > _BOOT_EXACT_ABOVE:
        from scipy.stats import binom

        k = (n + 1) // 2
        cdf = binom.sf(k - 1, n, np.arange(1, n + 1) / n)
        cdf[-1] = 1.0
        j = np.searchsorted(cdf, rng.random(n_boot), side="left")
        return sorted_x[np.minimum(j, n - 1)]
    dtype = np.int16 if n <= np.iinfo(np.int16).max else np.int32
    rows = max(1, _BOOT_CHUNK_ELEMENTS // n)
    lo, hi = (n - 1) // 2, n // 2  # the two middle order statistics (equal for odd n)
    out = np.empty(n_boot)
    for start in range(0, n_boot, rows):
        m = min(rows, n_boot - start)
        idx = rng.integers(0, n, size=(m, n), dtype=dtype)
        idx.sort(axis=1, kind="stable")  # radix sort for 16-bit integers
        out[start:start + m] = 0.5 * (sorted_x[idx[:, lo]] + sorted_x[idx[:, hi]])
    return out


def bootstrap_ratio_ci(base: Sequence[float], new: Sequence[float], *, confidence: float = 0.95,
                       n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``median(new) / median(base)``.

    Each side is resampled independently with replacement (the runs are independent; samples are
    not paired), the ratio of the resampled medians is formed ``n_boot`` times and the interval is
    the central ``confidence`` share of those ratios. The median is robust to the occasional slow
    sample (preemption, clock dip) that would drag a mean.

    Parameters
    ----------
    base, new : sequence of float
        Raw samples (seconds, > 0); NaN/inf are dropped. One sample gives a degenerate interval.
    confidence : float
        Two-sided coverage, in (0, 1).
    n_boot : int
        Bootstrap replicates (>= 1). Memory stays bounded for any sample count (see
        ``_boot_medians``).
    seed : int
        Seed of ``numpy.random.default_rng``-style generators; the result is deterministic for a
        seed (the two sides draw from independent child streams of ``SeedSequence(seed)``).

    Returns
    -------
    tuple of float
        ``(low, high)``.

    Raises
    ------
    ValueError
        If a side has no finite sample, or ``confidence``/``n_boot`` are out of range.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot!r}")
    b, n = np.sort(_clean(base)), np.sort(_clean(new))
    if len(b) == 0 or len(n) == 0:
        raise ValueError("bootstrap_ratio_ci needs at least one finite sample on each side")
    seq_b, seq_n = np.random.SeedSequence(seed).spawn(2)
    mb = _boot_medians(b, n_boot, np.random.default_rng(seq_b))
    mn = _boot_medians(n, n_boot, np.random.default_rng(seq_n))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = mn / mb
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


def benjamini_hochberg(pvalues: Iterable[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order.

    With m finite p-values sorted ascending, ``q_(i) = min_{j >= i} p_(j) * m / j``, clipped to 1:
    flagging every case with ``q < alpha`` keeps the expected false-discovery share at or below
    alpha (independent or positively dependent tests). BH rather than Bonferroni because a
    suite compares many cases and we would rather flag a regression and re-measure than hide it.

    Parameters
    ----------
    pvalues : iterable of float
        p-values in [0, 1]; NaN entries are not counted in m and come back NaN.

    Returns
    -------
    numpy.ndarray
        float64 q-values, same length and order as the input.
    """
    p = np.asarray(list(pvalues), dtype=np.float64)
    q = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return q
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = p[order] * m / np.arange(1, m + 1)
    # enforce monotonicity from the largest p down (the "min over j >= i")
    q[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return q


# ---------------------------------------------------------------------------------------------
# one case
# ---------------------------------------------------------------------------------------------

def _evidence(base: np.ndarray, new: np.ndarray, n_boot: int, seed: int
              ) -> tuple[float, tuple[float, float], float]:
    """(point ratio of medians, its bootstrap 95 % CI, Mann-Whitney p) of cleaned samples."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(new) / np.median(base))
    ci = bootstrap_ratio_ci(base, new, n_boot=n_boot, seed=seed)
    return ratio, ci, mann_whitney_p(base, new)


#: z of a two-sided 95 % interval (the bootstrap CI's coverage)
_Z95 = 1.959963984540054
#: fewest earlier runs of a case whose medians give a run-to-run spread (history_sd)
MIN_HISTORY_RUNS = 3


@dataclass(frozen=True)
class Spread:
    """A run-to-run spread: ``sd`` of log medians, estimated with ``df`` degrees of freedom."""

    sd: float
    df: int


def _log_medians(medians: Iterable[float | None]) -> np.ndarray:
    """The logs of the finite, positive medians among ``medians`` (a lost or zero median says
    nothing about the spread)."""
    return np.log(np.asarray([m for m in medians if m is not None and np.isfinite(m) and m > 0],
                             dtype=np.float64))


def history_sd(medians: Sequence[float]) -> Spread | None:
    """Run-to-run spread of one case on one device: a robust SD (1.4826 x the median absolute
    deviation) of the log medians of its recent runs, with ``n - 1`` degrees of freedom; None for
    fewer than :data:`MIN_HISTORY_RUNS` finite positive medians. Robust, because one disturbed run
    (or a past step change) should not inflate the spread the next verdicts are given."""
    logs = _log_medians(medians)
    if len(logs) < MIN_HISTORY_RUNS:
        return None
    return Spread(float(1.4826 * np.median(np.abs(logs - np.median(logs)))), len(logs) - 1)


def _sides_sd(groups: Sequence[Sequence[float]]) -> Spread | None:
    """Pooled SD of log medians between the runs of each side (``groups``: per side, the medians of
    its runs), from the sides with at least two runs; None when no side has two."""
    ss, df = 0.0, 0
    for g in groups:
        x = _log_medians(g)
        if len(x) >= 2:
            ss += float(np.sum((x - x.mean()) ** 2))
            df += len(x) - 1
    return Spread(math.sqrt(ss / df), df) if df else None


def widen_ci(ratio: float, ci: tuple[float, float], run_sd: float, k_base: int, k_new: int,
             df: int | None = None) -> tuple[float, float]:
    """The ratio's CI with run-to-run spread added (a random-effects approximation).

    Separate runs of unchanged code differ by more than their samples say (clocks, thermals,
    placement, other tenants): each run's median carries a run effect of spread ``run_sd`` (on the
    log scale). The bootstrap CI sees only the samples' spread, so it is widened on each side of
    the point ratio, in log space, as independent errors add: ``h' = sqrt(h^2 + (q * s)^2)`` with
    ``s^2 = run_sd^2 (1/k_base + 1/k_new)`` for medians pooled over ``k`` runs per side. ``q`` is the
    97.5 % quantile of Student's t with ``df`` degrees of freedom when the spread was estimated from
    few runs (2.78 for 4: three runs a side), else of the normal law (1.96): an SD from a handful of
    runs is often too small, and z would then trust it.
    """
    lo, hi = ci
    if not (run_sd > 0 and ratio > 0 and lo > 0 and hi > 0 and all(map(math.isfinite, (ratio, lo, hi)))):
        return ci
    if df:
        from scipy.stats import t as student_t

        q = float(student_t.ppf(0.975, df))
    else:
        q = _Z95
    extra = (q * run_sd) ** 2 * (1.0 / max(k_base, 1) + 1.0 / max(k_new, 1))
    c = math.log(ratio)
    h_lo, h_hi = max(c - math.log(lo), 0.0), max(math.log(hi) - c, 0.0)
    return math.exp(c - math.sqrt(h_lo ** 2 + extra)), math.exp(c + math.sqrt(h_hi ** 2 + extra))


def _decide(ratio: float, ci: tuple[float, float], q: float, threshold: float, alpha: float,
            interleaved: bool = False) -> str:
    """The decision table of :func:`judge` (see there); ``q`` is the q-value, else the p-value."""
    lo, hi = 1.0 / (1.0 + threshold), 1.0 + threshold
    ci_low, ci_high = ci
    if not (math.isfinite(ratio) and math.isfinite(ci_low) and math.isfinite(ci_high)):
        return "AMBIGUOUS"
    if lo <= ci_low and ci_high <= hi:  # row 1
        return "SAME"
    evidence = q < alpha and (ci_low > 1.0 or ci_high < 1.0)
    # rows 2 and 3: the CI beyond the threshold; interleaved sides: the point ratio (2i, 3i)
    slow, fast = (ratio, ratio) if interleaved else (ci_low, ci_high)
    if evidence and slow > hi:  # row 2 / 2i
        return "SLOWER"
    if evidence and fast < lo:  # row 3 / 3i
        return "FASTER"
    if lo <= ratio <= hi:  # row 4
        return "SAME"
    return "AMBIGUOUS"  # row 5


def _check_threshold(threshold: float) -> None:
    if not (isinstance(threshold, numbers.Real) and math.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold must be a positive fraction (0.03 = 3 %), got {threshold!r}")


def judge(base: Sequence[float], new: Sequence[float], *, threshold: float = DEFAULT_THRESHOLD,
          alpha: float = DEFAULT_ALPHA, q_value: float | None = None, n_boot: int = 2000,
          seed: int = 0, interleaved: bool = False) -> dict[str, Any]:
    """The speed verdict of one case: SAME, FASTER, SLOWER or AMBIGUOUS.

    Let ``r = median(new) / median(base)``, ``[lo_ci, hi_ci]`` its 95 % bootstrap CI, ``q`` the
    given q-value (the Mann-Whitney p-value when none is given) and the practical band
    ``B = [1 / (1 + threshold), 1 + threshold]`` (symmetric in log space: 3 % slower and
    3 % faster are the same size of change). *Evidence* means ``q < alpha`` AND the CI excludes 1.
    The first matching row decides:

    ====  ========================================  ==========  ==================================
    row   condition                                 verdict     why
    ====  ========================================  ==========  ==================================
    1     CI inside B (``lo_ci >= 1/(1+t)`` and     SAME        any change is smaller than the
          ``hi_ci <= 1+t``)                                     threshold, significant or not
    2     evidence and ``lo_ci > 1+t``              SLOWER      real and, over the whole CI,
                                                                beyond the threshold
    3     evidence and ``hi_ci < 1/(1+t)``          FASTER      (mirror of row 2)
    4     ``r`` inside B                            SAME        the best estimate is negligible;
                                                                a wide CI alone is no sign of a
                                                                practical change
    5     otherwise (``r`` outside B)               AMBIGUOUS   looks like a practical change but
                                                                lacks evidence or the CI straddles
                                                                the threshold: re-measure
    ====  ========================================  ==========  ==================================

    With ``interleaved=True`` (the two sides were timed in one loop, sample by sample in rotation:
    harness.measure.measure_interleaved) rows 2 and 3 ask for evidence and the *point* ratio
    beyond the threshold (rows 2i/3i). Why the difference: samples of two runs made one after the
    other miss the drift of the machine between the runs (other tenants, clocks, thermals), so
    their test and CI are too confident and only a CI wholly past the threshold is trusted;
    interleaved sides see the same drift, their samples are exchangeable when nothing changed, the
    test's error rate holds, and the DESIGN.md 7 rule (evidence and a practical change) applies as
    written. Measured with ``kbench calibrate`` (docs/PERF.md).

    Why this width of the AMBIGUOUS zone: requiring the whole CI beyond the threshold for
    SLOWER/FASTER keeps false alarms far under 1 % in A/A comparisons; calling every CI that merely
    reaches past the band AMBIGUOUS (instead of row 4) would make most noisy-but-unchanged cases
    AMBIGUOUS (measured: ~90 % of A/A pairs at 10 samples with 3 % noise), so only a point ratio
    beyond the threshold without firm support is inconclusive. Non-finite ratios or intervals
    (a zero median) are AMBIGUOUS. Measured on seeded lognormal A/A pairs (300 per cell, 10..200
    samples x 0.5..3 % noise): no SLOWER/FASTER in 6000; AMBIGUOUS 6 % at 10 samples with 3 %
    noise, 1.3 % at 20/3 %, 0.7 % at 10/2 %, none elsewhere. A 5 % slowdown with 1 % noise is
    SLOWER in every trial from 20 samples on (92 % at 10, the rest AMBIGUOUS).

    Parameters
    ----------
    base, new : sequence of float
        Raw samples in seconds (NaN/inf dropped); each side needs at least one finite sample.
    threshold : float
        Practical threshold as a fraction (0.03 = 3 %).
    alpha : float
        Significance level applied to ``q_value`` (or to the p-value).
    q_value : float, optional
        The BH-adjusted p-value of this case when it is judged as part of a suite.
    n_boot, seed
        Bootstrap replicates and seed (see :func:`bootstrap_ratio_ci`).
    interleaved : bool
        The sides were timed interleaved (rows 2i/3i apply).

    Returns
    -------
    dict
        ``verdict``, ``ratio``, ``ratio_ci`` (tuple), ``p_value`` (Mann-Whitney, uncorrected) and
        ``q_value`` (the value the decision used).
    """
    _check_threshold(threshold)
    b, n = _clean(base), _clean(new)
    if len(b) == 0 or len(n) == 0:
        raise ValueError("judge needs at least one finite sample on each side")
    ratio, ci, p = _evidence(b, n, n_boot, seed)
    q = p if q_value is None else float(q_value)
    return {"verdict": _decide(ratio, ci, q, threshold, alpha, interleaved), "ratio": ratio, "ratio_ci": ci,
            "p_value": p, "q_value": q}


# ---------------------------------------------------------------------------------------------
# a suite: data frames in, verdicts out
# ---------------------------------------------------------------------------------------------

def _value(row: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """``row[name]`` with None for missing columns and NaN/NA cells."""
    v = row.get(name, default)
    if v is None:
        return default
    try:
        import pandas as pd

        if not isinstance(v, (list, tuple, np.ndarray)) and pd.isna(v):
            return default
    except (TypeError, ValueError):
        pass
    return v


def _row_samples(row: Mapping[str, Any]) -> list[float]:
    """A result's raw samples; its stored median as a single sample when none were kept."""
    samples = _value(row, "samples")
    if samples is not None and len(samples) > 0:
        return [float(s) for s in samples if s is not None and math.isfinite(float(s))]
    median = _value(row, "median_s")
    return [float(median)] if median is not None and math.isfinite(float(median)) else []


def _ordered_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, oldest first (by run_id, then result_id, when the columns exist)."""
    if frame is None or len(frame) == 0:
        return []
    keys = [c for c in ("run_id", "result_id") if c in frame.columns]
    if keys:
        frame = frame.sort_values(keys, kind="stable")
    return frame.to_dict("records")


def _interleave_group(row: Mapping[str, Any]) -> Any:
    """The ``interleave_group`` of a row's telemetry (sides timed together share it), or None."""
    tel = _value(row, "telemetry")
    if isinstance(tel, str):
        import json

        try:
            tel = json.loads(tel)
        except ValueError:
            return None
    return tel.get("interleave_group") if isinstance(tel, Mapping) else None


def _interleaved(new_rows: Sequence[Mapping[str, Any]], base_rows: Sequence[Mapping[str, Any]]) -> bool:
    """True when every new and baseline row was timed interleaved and both sides cover the same
    interleave groups (each new row's samples have partners taken in the same loop)."""
    groups = [_interleave_group(r) for r in (*new_rows, *base_rows)]
    if not new_rows or not base_rows or any(g is None for g in groups):
        return False
    return {_interleave_group(r) for r in new_rows} == {_interleave_group(r) for r in base_rows}


def _run_medians(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """The median of each run among ``rows`` (its samples pooled when a run has several rows)."""
    by_run: dict[Any, list[float]] = {}
    for r in rows:
        by_run.setdefault(_value(r, "run_id", id(r)), []).extend(_row_samples(r))
    return [float(np.median(v)) for v in by_run.values() if v]


def _ids(rows: Sequence[Mapping[str, Any]], column: str) -> tuple[int, ...]:
    return tuple(int(v) for v in (_value(r, column) for r in rows) if v is not None)


def compare_frames(new: pd.DataFrame, base: pd.DataFrame, *, threshold: float = DEFAULT_THRESHOLD,
                   thresholds: Mapping[str, float] | None = None, alpha: float = DEFAULT_ALPHA,
                   n_boot: int = 2000, seed: int = 0,
                   match_on: Sequence[str] = ("case_key", "device"),
                   run_sd: Mapping[str, Spread] | None = None) -> list[Verdict]:
    """Judge every case of a new run against its baseline rows.

    Parameters
    ----------
    new, base : pandas.DataFrame
        Frames shaped like ``Store.results_frame(..., with_samples=True)``: at least the
        ``match_on`` columns and ``outcome``; ``samples`` (list of seconds; without it, or when
        empty, the row's ``median_s`` counts as one sample), ``result_id``, ``run_id``,
        ``workload``, ``variant``, ``target``, ``device``, ``env_id``, ``message`` are used when
        present. ``base`` may hold several rows per key (recent runs): the samples of its ``ok``
        rows are pooled. ``new`` may too (interleaved rounds): when all of a key's rows are ``ok``
        their samples are pooled, else the most recent row that is not ``ok`` makes it WRONG;
        ``new_result_id`` is the most recent row's id.
    threshold : float
        Default practical threshold (0.03 = 3 %).
    thresholds : mapping of str to float, optional
        Per-case_key thresholds overriding ``threshold``.
    alpha : float
        Significance level for the BH q-values.
    n_boot, seed
        Bootstrap replicates and seed (the same seed for every case: verdicts do not depend on
        the order of the frames).
    match_on : sequence of str
        Columns that pair a new row with its baseline rows (same case on the same device).
    run_sd : mapping of str to Spread, optional
        Per case_key, the run-to-run spread of the case's medians on this device from its history
        (:func:`history_sd`; harness.judge supplies it).

    Returns
    -------
    list of Verdict
        One per key of ``new`` or ``base``, ordered by case_key (then the other ``match_on``
        values):

        - new outcome not ``ok``: WRONG (``base_outcome``: the most recent baseline outcome, or
          None; ``Verdict.regression`` tells a correctness regression from an old failure);
        - new ``ok``, no baseline rows: NEW; baseline rows but none ``ok``: NEW with message
          "baseline was <outcome>" (a fix, not a regression);
        - both ``ok``: :func:`judge` on the pooled samples, the p-values of all judged cases
          corrected together with :func:`benjamini_hochberg` and the verdicts decided on the
          q-values (``interleaved`` when every row of both sides carries an ``interleave_group``
          in its telemetry and both sides cover the same groups); a side without any sample is
          AMBIGUOUS and left out of the correction. For sides that are separate runs (not
          interleaved) the CI is widened by the run-to-run spread (:func:`widen_ci`): the larger
          of ``run_sd[case_key]`` and the spread between the runs pooled on either side;
        - a baseline key absent from ``new``: MISSING.

        ``base_result_ids``/``base_run_ids`` list the baseline rows whose samples were pooled for
        judged (and MISSING) cases, all baseline rows of the key otherwise.
    """
    _check_threshold(threshold)
    thresholds = dict(thresholds or {})
    for key, t in thresholds.items():
        try:
            _check_threshold(t)
        except ValueError as err:
            raise ValueError(f"thresholds[{key!r}]: {err}") from None
    match_on = tuple(match_on)

    def key_of(row: Mapping[str, Any]) -> tuple:
        return tuple("" if _value(row, c) is None else _value(row, c) for c in match_on)

    new_by: dict[tuple, dict[str, Any]] = {}
    new_all: dict[tuple, list[dict[str, Any]]] = {}
    for row in _ordered_records(new):
        new_all.setdefault(key_of(row), []).append(row)
    for key, rows in new_all.items():
        # several new rows (interleaved A/B rounds): judged on their pooled samples when all are
        # ok; a round that is not ok makes the case WRONG (the most recent such round reports)
        bad = [r for r in rows if _value(r, "outcome") != "ok"]
        new_by[key] = bad[-1] if bad else rows[-1]
    base_by: dict[tuple, list[dict[str, Any]]] = {}
    for row in _ordered_records(base):
        base_by.setdefault(key_of(row), []).append(row)

    verdicts: dict[tuple, Verdict] = {}
    pending: list[tuple[tuple, dict[str, Any]]] = []  # judged cases awaiting the BH step
    for key, row in new_by.items():
        case_key = str(_value(row, "case_key", ""))
        t = float(thresholds.get(case_key, threshold))
        rows = base_by.get(key, [])
        ok_rows = [r for r in rows if _value(r, "outcome") == "ok"]
        base_outcome = _value(rows[-1], "outcome") if rows else None
        new_outcome = _value(row, "outcome")
        new_samples = ([x for r in new_all[key] for x in _row_samples(r)] if new_outcome == "ok" else [])
        common: dict[str, Any] = {
            "case_key": case_key, "workload": str(_value(row, "workload", "")),
            "variant": str(_value(row, "variant", "")), "target": str(_value(row, "target", "")),
            "device": str(_value(row, "device", "")), "env_id": str(_value(row, "env_id", "")),
            "new_outcome": new_outcome, "base_outcome": base_outcome, "threshold": t,
            "new_result_id": None if _value(row, "result_id") is None else int(row["result_id"])}
        if new_outcome != "ok":
            if base_outcome is None:
                why = "no baseline"
            elif base_outcome == "ok":
                why = "correctness regression: baseline was ok"
            else:
                why = f"already failing: baseline was {base_outcome}"
            detail = _value(row, "message", "")
            message = f"{new_outcome}; {why}" + (f"; {detail}" if detail else "")
            verdicts[key] = Verdict(verdict="WRONG", message=message, base_result_ids=_ids(rows, "result_id"),
                                    base_run_ids=_ids(rows, "run_id"), **common)
            continue
        new_med = float(np.median(new_samples)) if new_samples else None
        if not ok_rows:
            message = "no baseline" if not rows else f"baseline was {base_outcome}"
            verdicts[key] = Verdict(verdict="NEW", message=message, new_median_s=new_med,
                                    n_new=len(new_samples), base_result_ids=_ids(rows, "result_id"),
                                    base_run_ids=_ids(rows, "run_id"), **common)
            continue
        pooled = [s for r in ok_rows for s in _row_samples(r)]
        common.update(new_median_s=new_med, n_new=len(new_samples), n_base=len(pooled),
                      base_median_s=float(np.median(pooled)) if pooled else None,
                      base_result_ids=_ids(ok_rows, "result_id"),
                      base_run_ids=tuple(dict.fromkeys(_ids(ok_rows, "run_id"))))
        if not new_samples or not pooled:
            side = "new run" if not new_samples else "baseline"
            verdicts[key] = Verdict(verdict="AMBIGUOUS", message=f"no timing samples in the {side}",
                                    **common)
            continue
        ratio, ci, p = _evidence(np.asarray(pooled), np.asarray(new_samples), n_boot, seed)
        interleaved = _interleaved(new_all[key], ok_rows)
        if not interleaved:
            new_runs, base_runs = _run_medians(new_all[key]), _run_medians(ok_rows)
            spreads = [x for x in ((run_sd or {}).get(case_key), _sides_sd([new_runs, base_runs]))
                       if x is not None]
            if spreads:
                spread = max(spreads, key=lambda x: x.sd)  # the larger estimate, with its df
                common["run_sd"] = spread.sd
                ci = widen_ci(ratio, ci, spread.sd, len(base_runs), len(new_runs), spread.df)
        common.update(ratio=ratio, ratio_ci=ci, p_value=p, interleaved=interleaved)
        pending.append((key, common))

    # Benjamini-Hochberg over every judged case of the suite, then the per-case decision on q.
    qs = benjamini_hochberg([c["p_value"] for _, c in pending])
    for (key, fields), q in zip(pending, qs):
        q = float(q)
        verdict = _decide(fields["ratio"], fields["ratio_ci"], q, fields["threshold"], alpha,
                          fields["interleaved"])
        verdicts[key] = Verdict(verdict=verdict, q_value=q, **fields)

    for key, rows in base_by.items():
        if key in new_by:
            continue
        last = rows[-1]
        ok_rows = [r for r in rows if _value(r, "outcome") == "ok"]
        used = ok_rows or rows
        pooled = [s for r in ok_rows for s in _row_samples(r)]
        case_key = str(_value(last, "case_key", ""))
        verdicts[key] = Verdict(
            case_key=case_key, verdict="MISSING", workload=str(_value(last, "workload", "")),
            variant=str(_value(last, "variant", "")), target=str(_value(last, "target", "")),
            device=str(_value(last, "device", "")), env_id=str(_value(last, "env_id", "")),
            base_outcome=_value(last, "outcome"), n_base=len(pooled),
            base_median_s=float(np.median(pooled)) if pooled else None,
            threshold=float(thresholds.get(case_key, threshold)),
            base_result_ids=_ids(used, "result_id"),
            base_run_ids=tuple(dict.fromkeys(_ids(used, "run_id"))),
            message="in the baseline, not in the new run")

    def order(item: tuple[tuple, Verdict]) -> tuple:
        key, v = item
        return (v.case_key, tuple(str(k) for k in key))

    return [v for _, v in sorted(verdicts.items(), key=order)]


def exit_code(verdicts: Iterable[Verdict]) -> ExitCode:
    """The process exit code for a set of verdicts (DESIGN.md 7).

    2 if any case is WRONG (correctness first; an already-failing case counts too), else 1 if
    any is SLOWER, else 3 if any is AMBIGUOUS (inconclusive), else 0. Whether 3 fails a gate is
    the caller's choice (``parse_fail_on(...)["fail_ambiguous"]``).
    """
    seen = {v.verdict for v in verdicts}
    if "WRONG" in seen:
        return ExitCode.WRONG
    if "SLOWER" in seen:
        return ExitCode.SLOWER
    if "AMBIGUOUS" in seen:
        return ExitCode.INCONCLUSIVE
    return ExitCode.OK


_FAIL_ON_FORMS = "'median:N%' (e.g. 'median:3%'), 'ambiguous', 'wrong'; comma-separated"
_MEDIAN_RULE = re.compile(r"median\s*:\s*(?P<num>[0-9]*\.?[0-9]+)\s*%")


def parse_fail_on(text: str) -> dict[str, Any]:
    """Parse a gate spec such as ``"median:3%"`` or ``"median:3%,ambiguous"``.

    Rules (comma-separated, case-insensitive, spaces ignored):

    - ``median:N%``: practical threshold N % for SLOWER/FASTER verdicts (N > 0);
    - ``ambiguous``: AMBIGUOUS verdicts (exit code 3) fail the gate;
    - ``wrong``: WRONG verdicts fail (always on; accepted for explicitness).

    Returns
    -------
    dict
        ``{"fail_ambiguous": bool, "fail_wrong": True}`` plus ``"threshold": float`` only when a
        ``median:N%`` rule is given (absent: keep the suite's thresholds, per case included).

    Raises
    ------
    harness.errors.UsageError
        On an empty spec, an unknown or malformed rule (the message names it and lists the
        accepted forms), a non-positive threshold or a repeated median rule.
    """
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"empty --fail-on spec; accepted rules: {_FAIL_ON_FORMS}")
    spec: dict[str, Any] = {"fail_ambiguous": False, "fail_wrong": True}
    for raw in text.split(","):
        rule = raw.strip().lower()
        if rule == "ambiguous":
            spec["fail_ambiguous"] = True
            continue
        if rule == "wrong":
            continue
        m = _MEDIAN_RULE.fullmatch(rule)
        if m is None:
            what = "empty rule" if not rule else f"bad rule {raw.strip()!r}"
            raise UsageError(f"--fail-on {text!r}: {what}; accepted rules: {_FAIL_ON_FORMS}")
        value = float(m["num"]) / 100.0
        if value <= 0:
            raise UsageError(f"--fail-on {text!r}: rule {raw.strip()!r} needs a threshold above 0 %;"
                             f" accepted rules: {_FAIL_ON_FORMS}")
        if "threshold" in spec:
            raise UsageError(f"--fail-on {text!r}: rule {raw.strip()!r} repeats the median threshold;"
                             f" accepted rules: {_FAIL_ON_FORMS}")
        spec["threshold"] = value
    return spec


# ---------------------------------------------------------------------------------------------
# history view
# ---------------------------------------------------------------------------------------------

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
    h = _clean(history)[-window:]
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
    """
    d = np.diff(x)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    if sigma == 0.0:  # quantised or constant series: fall back to the mean absolute difference
        sigma = float(np.mean(np.abs(d))) / math.sqrt(2.0)
    if sigma == 0.0:  # constant: any positive price stops needless splits
        sigma = 1e-9 * max(float(np.median(np.abs(x))), 1e-300)
    return 3.0 * sigma * math.log(len(x))


def detect_steps(values: Sequence[float], *, min_size: int = 3, penalty: float | None = None,
                 rel_threshold: float = 0.03) -> list[Step]:
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
              rel_threshold: float = 0.03) -> dict[str, Any] | None:
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
