"""Significance: the rank test on the raw samples of one case and the false-discovery correction over
the cases of a suite."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from .intervals import finite

__all__ = ["DEFAULT_ALPHA", "benjamini_hochberg", "mann_whitney_p"]

#: default significance level for the (BH-corrected) Mann-Whitney test
DEFAULT_ALPHA = 0.05


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

    b, n = finite(base), finite(new)
    if len(b) < 2 or len(n) < 2:
        return 1.0
    both = np.concatenate([b, n])
    if np.all(both == both[0]):
        return 1.0
    p = float(mannwhitneyu(n, b, alternative="two-sided", method="auto").pvalue)
    return 1.0 if math.isnan(p) else min(max(p, 0.0), 1.0)



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


