"""Intervals and spreads of timings: the CI of one median (the stopping rule's), the bootstrap CI of a
ratio of medians (the verdicts'), and the run-to-run spread that separate runs add to it.

Timings are positive seconds; NaN/inf samples carry no timing and are dropped (:func:`finite`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MIN_HISTORY_RUNS", "Spread", "bootstrap_ratio_ci", "finite", "history_sd", "median_ci",
           "sides_sd", "widen_ci"]

# Bootstrap memory bound: resampled index blocks hold at most this many entries at a time
# (int16/int32 indices: 8-16 MiB), whatever n_boot and the sample count are.
_BOOT_CHUNK_ELEMENTS = 1 << 22
# Above this many samples on one side the bootstrap distribution of the median is drawn exactly
# from the order-statistic (binomial) law instead of by resampling: O(n + n_boot log n) instead of
# O(n_boot * n). See _boot_medians.
_BOOT_EXACT_ABOVE = 10_000


def finite(samples: Iterable[float]) -> np.ndarray:
    """Samples as a float64 array without NaN/inf (a lost sample carries no timing)."""
    arr = np.asarray(list(samples) if not isinstance(samples, np.ndarray) else samples, dtype=np.float64)
    return arr[np.isfinite(arr)].ravel()


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """The sample median and a distribution-free confidence interval for the true median.

    Method (order statistics): let ``x(1) <= ... <= x(n)`` be the sorted samples and ``m`` the
    population median. Each sample falls below ``m`` with probability 1/2, independently, so the
    number ``B`` of samples below ``m`` is Binomial(n, 1/2). The ``l``-th smallest sample lies
    above ``m`` exactly when fewer than ``l`` samples are below it: ``P(x(l) > m) = P(B <= l-1)``;
    by symmetry ``P(x(n+1-l) < m)`` is the same. Taking ``l`` as the largest rank with
    ``P(B <= l-1) < alpha/2`` (``alpha = 1 - confidence``), i.e. ``l = binom.ppf(alpha/2, n, 1/2)``
    (the smallest ``k`` with ``P(B <= k) >= alpha/2``), the interval ``[x(l), x(n+1-l)]`` covers
    ``m`` with probability ``1 - 2 P(B <= l-1) >= confidence`` whatever the distribution
    (continuous). Example: n = 10, alpha/2 = 0.025: P(B <= 1) = 11/1024 = 0.0107 < 0.025 <=
    P(B <= 2) = 56/1024 = 0.0547, so l = 2 and the interval is (x(2), x(9)), coverage 97.9 %.

    For n < 6 no pair of order statistics reaches 95 % (even (x(1), x(n)) covers only
    1 - 2^(1-n)); the interval is then (x(1), x(n)), the widest there is, and is narrower than
    nominal. The stopping rule (:mod:`harness.measure.stopping`) never uses it below
    ``min_samples`` (10 by default).

    Parameters
    ----------
    samples : sequence of float
        At least one sample.
    confidence : float
        The coverage wanted, in (0, 1).

    Returns
    -------
    (median, lo, hi) : tuple of float
    """
    x = np.sort(np.asarray(samples, dtype=np.float64).ravel())
    n = x.size
    if n == 0:
        raise ValueError("median_ci needs at least one sample")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    med = float(np.median(x))
    if n == 1:
        return med, float(x[0]), float(x[0])
    from scipy.stats import binom

    alpha = 1.0 - confidence
    lo_rank = int(binom.ppf(alpha / 2.0, n, 0.5))  # 1-based rank l
    lo_rank = min(max(lo_rank, 1), (n + 1) // 2)
    hi_rank = n + 1 - lo_rank
    return med, float(x[lo_rank - 1]), float(x[hi_rank - 1])


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
    b, n = np.sort(finite(base)), np.sort(finite(new))
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


def sides_sd(groups: Sequence[Sequence[float]]) -> Spread | None:
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


