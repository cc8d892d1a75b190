"""The statistics of the harness: intervals, significance tests, the verdict table and its gate, the
verdicts of a suite from result frames, and step detection over a case's history.

Modules: :mod:`~harness.stats.intervals` (CI of a median, bootstrap CI of a ratio of medians,
run-to-run spread), :mod:`~harness.stats.significance` (Mann-Whitney U, Benjamini-Hochberg),
:mod:`~harness.stats.verdicts` (the decision table of one case, exit codes, ``--fail-on``),
:mod:`~harness.stats.frames` (a suite's verdicts from stored results), :mod:`~harness.stats.steps`
(lookback z-score, step detection, first bad run). Pure functions of numbers and frames: nothing here
reads the store or times anything.
"""

from harness.stats.frames import compare_frames
from harness.stats.intervals import (
    MIN_HISTORY_RUNS,
    Spread,
    bootstrap_ratio_ci,
    history_sd,
    median_ci,
    widen_ci,
)
from harness.stats.significance import DEFAULT_ALPHA, benjamini_hochberg, mann_whitney_p
from harness.stats.steps import Step, detect_steps, first_bad, lookback_zscore
from harness.stats.verdicts import FailOn, exit_code, judge, parse_fail_on

__all__ = [
    "DEFAULT_ALPHA", "MIN_HISTORY_RUNS", "FailOn", "Spread", "Step", "benjamini_hochberg",
    "bootstrap_ratio_ci",
    "compare_frames", "detect_steps", "exit_code", "first_bad", "history_sd", "judge", "lookback_zscore",
    "mann_whitney_p", "median_ci", "parse_fail_on", "widen_ci",
]
