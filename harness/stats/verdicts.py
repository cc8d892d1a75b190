"""The verdict of one case (the decision table), the exit code of a set of verdicts, and the
``--fail-on`` gate (docs/ARCHITECTURE.md, "Verdicts").

Speed verdicts need two kinds of evidence at once:

- *statistical*: the two-sided Mann-Whitney U test on the raw samples (no normality assumed; GPU
  timings are skewed and carry outliers) gives a p-value, corrected over the compared suite with
  Benjamini-Hochberg (many cases are compared at once; BH bounds the expected share of false
  discoveries among the flagged ones), and a percentile-bootstrap confidence interval of
  ``median(new) / median(base)`` that must exclude 1 (:mod:`harness.stats.significance`,
  :mod:`harness.stats.intervals`);
- *practical*: the ratio must lie beyond the practical threshold (default 3 %): changes smaller
  than run-to-run drift of a GPU (clocks, thermals, driver) are not worth a red build even when
  they are statistically real.

:func:`judge` holds the exact decision table. Timings are positive seconds; a ratio > 1 is slower.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.errors import ExitCode, UsageError, compose_exit_code
from harness.model import DEFAULT_THRESHOLD, Verdict

from .intervals import bootstrap_ratio_ci, finite
from .significance import DEFAULT_ALPHA, mann_whitney_p

__all__ = ["FailOn", "decide", "evidence", "exit_code", "judge", "parse_fail_on"]


def evidence(base: np.ndarray, new: np.ndarray, n_boot: int, seed: int
              ) -> tuple[float, tuple[float, float], float]:
    """(point ratio of medians, its bootstrap 95 % CI, Mann-Whitney p) of cleaned samples."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(new) / np.median(base))
    ci = bootstrap_ratio_ci(base, new, n_boot=n_boot, seed=seed)
    return ratio, ci, mann_whitney_p(base, new)



def decide(ratio: float, ci: tuple[float, float], q: float, threshold: float, alpha: float,
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


def check_threshold(threshold: float) -> None:
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
    harness.measure.loop.measure_interleaved) rows 2 and 3 ask for evidence and the *point* ratio
    beyond the threshold (rows 2i/3i). Why the difference: samples of two runs made one after the
    other miss the drift of the machine between the runs (other tenants, clocks, thermals), so
    their test and CI are too confident and only a CI wholly past the threshold is trusted;
    interleaved sides see the same drift, their samples are exchangeable when nothing changed, the
    test's error rate holds, and the rule of docs/ARCHITECTURE.md, "Verdicts" (evidence and a
    practical change) applies as written. Measured with ``kbench calibrate`` (docs/PERF.md).

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
    check_threshold(threshold)
    b, n = finite(base), finite(new)
    if len(b) == 0 or len(n) == 0:
        raise ValueError("judge needs at least one finite sample on each side")
    ratio, ci, p = evidence(b, n, n_boot, seed)
    q = p if q_value is None else float(q_value)
    return {"verdict": decide(ratio, ci, q, threshold, alpha, interleaved), "ratio": ratio, "ratio_ci": ci,
            "p_value": p, "q_value": q}



def exit_code(verdicts: Iterable[Verdict]) -> ExitCode:
    """The process exit code for a set of verdicts without a gate (harness.errors.compose_exit_code).

    2 if any case is WRONG (correctness first; an already-failing case counts too), else 1 if
    any is SLOWER, else 3 if any is AMBIGUOUS (inconclusive), else 0.
    """
    return compose_exit_code(verdicts=verdicts)


_FAIL_ON_FORMS = "'median:N%' (e.g. 'median:3%'), 'ambiguous', 'wrong'; comma-separated"
_MEDIAN_RULE = re.compile(r"median\s*:\s*(?P<num>[0-9]*\.?[0-9]+)\s*%")


@dataclass(frozen=True)
class FailOn:
    """A ``--fail-on`` gate, parsed once (:meth:`parse`) where the command line is read.

    Attributes
    ----------
    spec : str
        The gate as given (for reports).
    threshold : float or None
        The practical threshold of a ``median:N%`` rule (0.03 = 3 %); None keeps the suite's
        thresholds, per case included.
    fail_ambiguous : bool
        ``ambiguous``: inconclusive verdicts fail the gate (exit 3); otherwise the gate passes them.
    fail_wrong : bool
        ``wrong``: always on (a correctness failure always fails); accepted for explicitness.

    A gate never passes an incomplete run (harness.errors.compose_exit_code).
    """

    spec: str
    threshold: float | None = None
    fail_ambiguous: bool = False
    fail_wrong: bool = True

    @classmethod
    def parse(cls, text: str) -> FailOn:
        """Parse a gate spec such as ``"median:3%"`` or ``"median:3%,ambiguous"``.

        Rules (comma-separated, case-insensitive, spaces ignored): ``median:N%`` (practical threshold
        N % for SLOWER/FASTER verdicts, N > 0), ``ambiguous`` (AMBIGUOUS verdicts fail the gate),
        ``wrong`` (always on).

        Raises
        ------
        harness.errors.UsageError
            On an empty spec, an unknown or malformed rule (the message names it and lists the
            accepted forms), a non-positive threshold or a repeated median rule.
        """
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"empty --fail-on spec; accepted rules: {_FAIL_ON_FORMS}")
        threshold: float | None = None
        fail_ambiguous = False
        for raw in text.split(","):
            rule = raw.strip().lower()
            if rule == "ambiguous":
                fail_ambiguous = True
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
            if threshold is not None:
                raise UsageError(f"--fail-on {text!r}: rule {raw.strip()!r} repeats the median threshold;"
                                 f" accepted rules: {_FAIL_ON_FORMS}")
            threshold = value
        return cls(text.strip(), threshold, fail_ambiguous)

    @classmethod
    def of(cls, gate: FailOn | str | None) -> FailOn | None:
        """``gate`` as a :class:`FailOn` (a string is parsed; None stays None)."""
        if gate is None or isinstance(gate, FailOn):
            return gate
        return cls.parse(gate)

    def __str__(self) -> str:
        return self.spec


def parse_fail_on(text: str) -> FailOn:
    """:meth:`FailOn.parse` (the gate of ``--fail-on``)."""
    return FailOn.parse(text)
