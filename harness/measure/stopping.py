"""When a case has been measured enough: the stopping rule and its convergence criteria.

:func:`should_stop` is applied by the loop (:mod:`harness.measure.loop`) after samples, with ``n``
kept samples, ``t`` the measured time of the kept samples (device time for GPUs) and ``wall`` the wall
time since measuring began::

    converged    n >= min_samples and t >= min_time_s and the criterion says converged
    cap          max(wall, t) >= max_time_s and n >= min_samples,
                 or max(wall, t) >= limit_s (the case's own time limit)
    max_samples  n >= max_samples

checked in that order. ``min_samples`` wins over ``max_time_s``: a case slower than
``max_time_s / min_samples`` a sample keeps sampling past the cap until it has ``min_samples``,
for as long as its time limit allows (``limit_s``: the worker derives it from the case's
``timeout_s``, so the case ends with fewer samples rather than be killed as a timeout). Without a
limit (a direct call) the cap stops it as before.

What "converged" means is a :class:`ConvergenceCriterion`, named by ``MeasureConfig.stopping`` and
looked up in :data:`CRITERIA`; the minimums and the caps hold for every criterion, so no criterion
can make a measurement shorter than asked or longer than capped (as nvbench separates its pluggable
stopping criteria from the measurement's time limits).

Criteria (register more with :func:`register_criterion`):

``"median-ci"`` (default)
    The relative half-width of the distribution-free 95 % CI of the median
    (:func:`harness.stats.intervals.median_ci`) is at most ``MeasureConfig.max_rel_ci``, or the
    interval has no width (quantised timers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Protocol, Tuple

from harness.errors import UsageError
from harness import model
from harness.model import MeasureConfig
from harness.stats.intervals import median_ci

__all__ = ["CRITERIA", "STOP_REASONS", "ConvergenceCriterion", "MedianCI", "criterion", "register_criterion",
           "should_stop"]

#: the values of ``Timing.stop_reason``
STOP_REASONS = ("converged", "cap", "max_samples")


class ConvergenceCriterion(Protocol):
    """Whether the samples so far pin the case's time down well enough (the minimums of samples and
    measured time are checked before it is asked)."""

    def __call__(self, samples: Sequence[float], config: MeasureConfig) -> bool:
        ...


class MedianCI:
    """Converged when the 95 % CI of the median is at most ``config.max_rel_ci`` of it on either side
    (or has no width)."""

    def __call__(self, samples: Sequence[float], config: MeasureConfig) -> bool:
        med, lo, hi = median_ci(samples)
        width = hi - lo
        return width == 0 or (med > 0 and width / 2.0 / med <= config.max_rel_ci)


#: convergence criteria by the name ``MeasureConfig.stopping`` gives
CRITERIA: dict[str, ConvergenceCriterion] = {"median-ci": MedianCI()}


def register_criterion(name: str, criterion: ConvergenceCriterion) -> None:
    """Make ``criterion`` available as ``MeasureConfig(stopping=name)`` (a suite's ``[measure]
    stopping``); a module named in a suite's ``imports`` may register its own.

    Raises
    ------
    ValueError
        ``name`` is empty or already registered.
    """
    if not name or name in CRITERIA:
        raise ValueError(f"stopping criterion {name!r}: " + ("already registered" if name else "empty name"))
    CRITERIA[name] = criterion
    model.STOPPING_NAMES.add(name)  # MeasureConfig(stopping=name) is accepted from now on


def criterion(name: str) -> ConvergenceCriterion:
    """The criterion registered as ``name``.

    Raises
    ------
    harness.errors.UsageError
        No criterion has that name (the message lists those that do).
    """
    try:
        return CRITERIA[name]
    except KeyError:
        raise UsageError(f"stopping criterion {name!r} is not one of {', '.join(sorted(CRITERIA))}") from None


def should_stop(
    samples: Sequence[float], elapsed_s: float, config: MeasureConfig, wall_s: Optional[float] = None,
    limit_s: Optional[float] = None,
) -> Tuple[bool, str]:
    """Apply the stopping rule (see the module docstring).

    Parameters
    ----------
    samples : sequence of float
        The kept samples so far (seconds).
    elapsed_s : float
        Measured time of the kept samples (device time on GPUs, timed CPU time on CPUs); the
        ``min_time_s`` condition is on this.
    config : MeasureConfig
    wall_s : float, optional
        Wall time since measuring began (warm-up, flushes, discarded samples included); the cap
        applies to ``max(wall_s, elapsed_s)``, or to ``elapsed_s`` when not given.
    limit_s : float, optional
        The most time the samples may take whatever ``min_samples`` asks (from the case's timeout);
        up to it ``min_samples`` wins over ``max_time_s``. None: ``max_time_s`` caps as it is.

    Returns
    -------
    (bool, str)
        ``(True, reason)`` with reason in :data:`STOP_REASONS`, or ``(False, "")``.
    """
    n = len(samples)
    if n >= max(config.min_samples, 1) and elapsed_s >= config.min_time_s:
        if criterion(config.stopping)(samples, config):
            return True, "converged"
    clock = elapsed_s if wall_s is None else max(wall_s, elapsed_s)
    if clock >= config.max_time_s and (n >= config.min_samples or limit_s is None):
        return True, "cap"
    if limit_s is not None and clock >= max(limit_s, config.max_time_s):
        return True, "cap"
    if n >= config.max_samples:
        return True, "max_samples"
    return False, ""


