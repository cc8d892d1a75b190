"""The measurement loop: warm-up, then samples until the stopping rule says stop; one case, or several
*sides* of one case interleaved sample by sample.

:func:`measure` runs one loop for every backend::

    timing = measure(CudaTimer(0), launch, MeasureConfig())

1. **Warm-up** (untimed for the result): launches until at least ``config.warmup_min`` were made
   and the last ``max(2, warmup_min)`` per-launch times are within :data:`WARMUP_TOLERANCE` (5 %)
   of each other, or until :data:`WARMUP_CAP_FRACTION` of ``config.max_time_s`` has passed.
2. **Sampling**: one sample after another until :func:`harness.measure.stopping.should_stop` says
   so. A sample whose SM clock (NVML, read right after it) is below ``config.clock_floor`` times the
   device's maximum SM clock is discarded and counted (``Timing.discarded``).

The timer (:mod:`harness.measure.timers`, :mod:`harness.measure.cuda_timer`) decides what one
sample is.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Collection, List, Mapping, Optional, Sequence, Tuple

from harness.model import MeasureConfig, Timing
from harness.stats.intervals import median_ci

from .stopping import should_stop
from .timers import Launch, Launches, Timer, as_launches

__all__ = ["WARMUP_CAP_FRACTION", "WARMUP_TOLERANCE", "measure", "measure_interleaved", "measure_sides",
           "module_launcher"]

#: warm-up ends when the last launches are within this fraction of each other
WARMUP_TOLERANCE = 0.05
#: warm-up ends at the latest after this fraction of ``max_time_s`` (MeasureConfig has no field)
WARMUP_CAP_FRACTION = 0.2


def module_launcher(module: Any, args: Sequence[Any]) -> Launch:
    """A launch of a built ``kernels`` module with fixed arguments, checked once.

    ``Module.__call__`` checks every argument on every call (tens of microseconds of Python);
    ``Module.launcher`` does that once and returns the bare launch, which is what should sit
    between the timing events. Falls back to calling the module when it has no such method.
    """
    public = getattr(module, "launcher", None)  # Module.launcher(*args) -> (launch, device)
    if public is not None:
        launch, _device = public(*args)
        return launch
    prepare = getattr(module, "_prepare", None)
    if prepare is None:
        return lambda: module(*args)
    launch, _device = prepare(list(args))
    return launch


def _warm_up(timer: Timer, config: MeasureConfig, t0: float) -> Tuple[int, float]:
    """Launch until stable (see the module docstring); return (launches, last per-launch time)."""
    cap = WARMUP_CAP_FRACTION * config.max_time_s
    window = max(2, config.warmup_min)
    first, _ = timer.sample()  # module loading, lazy compilation, first touch
    timer.calibrate(first)  # hot mode: the batch is fixed from here on
    launches = 1
    times: List[float] = []
    while time.perf_counter() - t0 < cap:
        t, _ = timer.sample()
        launches += 1
        times.append(t)
        if launches >= config.warmup_min and len(times) >= window:
            last = times[-window:]
            if max(last) <= (1.0 + WARMUP_TOLERANCE) * min(last):
                break
    # the per-launch time at the end of warm-up: the median of the last window (calibration's
    # injected work is a fraction of it)
    return launches, (statistics.median(times[-window:]) if times else first)


def measure(timer: Timer, launch: Launches, config: Optional[MeasureConfig] = None, *,
            limit_s: Optional[float] = None) -> Timing:
    """Warm up, then sample until :func:`should_stop`; return the :class:`Timing`.

    Parameters
    ----------
    timer : Timer
        :class:`CpuTimer`, :class:`OpenCLTimer` or :class:`CudaTimer` (a fresh or reused one).
    launch : callable or sequence of callables
        What one launch is. A sequence is rotated over, one entry per launch (hot mode: copies
        of the case over different buffers, see :func:`hot_rotation_count`).
    config : MeasureConfig, optional
        The defaults when not given.
    limit_s : float, optional
        The case's time limit for measuring (warm-up included): up to it ``config.min_samples`` wins
        over ``config.max_time_s`` (:func:`harness.measure.stopping.should_stop`).

    Returns
    -------
    Timing
        Kept samples (seconds per launch), discarded count, per-sample SM clocks (when NVML
        reads them), median and 95 % CI, mode, stop reason and telemetry pairs (sorted by key)
        with the timer's settings, before/after GPU state, warm-up launches, wall and measured
        time. When every sample was discarded the median and CI are NaN.
    """
    return measure_interleaved([timer], launch, [MeasureConfig() if config is None else config],
                               limit_s=limit_s)[0]


class _SideState:
    """The sampling state of one side of :func:`measure_interleaved`."""

    def __init__(self, timer: Timer, config: MeasureConfig) -> None:
        self.timer, self.config = timer, config
        self.samples: List[float] = []
        self.clocks: List[float] = []
        self.discarded = 0
        self.measured = 0.0  # timed seconds of the kept samples
        self.next_check = 1
        self.reason = ""  # set once the stopping rule said stop
        self.floor: Optional[float] = None
        self.warm_launches, self.warm_s, self.telemetry = 0, 0.0, {}

    def take(self) -> None:
        t, clock = self.timer.sample()
        if self.floor is not None and clock is not None and clock < self.floor:
            self.discarded += 1
            return
        self.samples.append(t)
        self.clocks.append(math.nan if clock is None else clock)
        self.measured += t * self.timer.batch

    def check(self, wall_s: float, limit_s: Optional[float] = None) -> None:
        """Apply the stopping rule at geometrically spaced counts (the CI sorts every sample)."""
        n, cfg = len(self.samples), self.config
        if self.reason or not (n >= self.next_check or wall_s >= cfg.max_time_s or n >= cfg.max_samples):
            return
        stop, reason = should_stop(self.samples, self.measured, cfg, wall_s=wall_s, limit_s=limit_s)
        if stop:
            self.reason = reason
        self.next_check = n + max(1, n // 64)

    def timing(self, wall_s: float, sides: int) -> Timing:
        samples, clocks = self.samples, self.clocks
        if samples:
            med, lo, hi = median_ci(samples)
        else:
            med = lo = hi = math.nan
        if all(math.isnan(c) for c in clocks):
            clocks = []
        telemetry = dict(self.telemetry)
        telemetry.update({
            "warmup_launches": self.warm_launches,
            "warmup_s": self.warm_s,
            "wall_s": wall_s,
            "measured_s": self.measured,
            "batch": self.timer.batch,
            "kind": self.timer.kind,
            "clock_floor_mhz": self.floor,
        })
        if sides > 1:
            telemetry["interleaved_sides"] = sides
        if self.config.slowdown:
            telemetry.update({"slowdown": self.config.slowdown, "injected_s": self.timer.extra_s})
        return Timing(samples=tuple(samples), discarded=self.discarded, clocks_mhz=tuple(clocks), median=med,
                      ci_low=lo, ci_high=hi, mode=self.timer.mode, stop_reason=self.reason,
                      telemetry=tuple(sorted(telemetry.items())))


def measure_interleaved(timers: Sequence[Timer], launch: Launches,
                        configs: Sequence[MeasureConfig], *,
                        side_launches: Optional[Sequence[Launches]] = None,
                        limit_s: Optional[float] = None) -> List[Timing]:
    """Time one case as several *sides*, interleaved sample by sample; one :class:`Timing` each.

    Side ``i`` is ``timers[i]`` with ``configs[i]`` (their stopping rules should agree; they may
    differ in ``slowdown``), launching ``launch``, or ``side_launches[i]`` when given (``kbench
    ab``: the same case built from two source trees, on the same arguments). Each side is warmed up
    in turn (its injected work, if any, is sized
    from its own warm-up), then the sides take one sample each per round, the order rotating
    every round (ABC, BCA, CAB, ...), until every side's stopping rule has said stop; every side
    keeps sampling until then, so all end with the same number of samples taken. A side's wall
    time, for its cap, is its share of the loop's wall time (the loop's / number of sides), and its
    share of ``limit_s`` (the case's time limit, up to which ``min_samples`` wins over the cap) is
    ``limit_s`` / number of sides.

    Why: on a machine whose speed drifts (shared hosts, clocks, thermals) two runs made one after
    the other differ by more than their samples' spread says, and a verdict between them sees a
    change that is not there; interleaving gives each side the same mixture of the machine's
    states, so the sides' samples are exchangeable when nothing changed (the verdicts use that:
    harness.stats.verdicts). One side (``measure``) is the plain loop.
    """
    if len(timers) != len(configs) or not timers:
        raise ValueError("measure_interleaved needs one config per timer, and at least one timer")
    if side_launches is not None and len(side_launches) != len(timers):
        raise ValueError("measure_interleaved needs one entry of side_launches per timer")
    per_side = [as_launches(f) for f in side_launches] if side_launches is not None else None
    launches = per_side[0] if per_side else as_launches(launch)
    sides = [_SideState(t, c) for t, c in zip(timers, configs)]
    k = len(sides)
    t0 = time.perf_counter()
    begun: List[_SideState] = []
    try:
        for i, side in enumerate(sides):
            t_side = time.perf_counter()
            side.timer.begin(per_side[i] if per_side else launches, side.config)
            begun.append(side)
            side.warm_launches, per_launch = _warm_up(side.timer, side.config, t_side)
            if side.config.slowdown:
                side.timer.inject(side.config.slowdown * per_launch)
            side.warm_s = time.perf_counter() - t_side
            side.floor = side.timer.clock_floor_mhz(side.config)
        t_loop = time.perf_counter()
        round_no = 0
        while not all(side.reason for side in sides):
            for j in range(k):
                sides[(round_no + j) % k].take()
            round_no += 1
            share = (time.perf_counter() - t_loop) / k
            for side in sides:
                side.check(side.warm_s + share, None if limit_s is None else limit_s / k)
    finally:
        for side in begun:
            side.telemetry = side.timer.end()
    wall = time.perf_counter() - t0
    return [side.timing(wall if k == 1 else side.warm_s + (wall - sum(s.warm_s for s in sides)) / k, k)
            for side in sides]


def measure_sides(make_timer: Callable[[], Timer], launch: Launches, config: MeasureConfig,
                  side_launches: Optional[Mapping[str, Launches]] = None,
                  skip: Collection[str] = (), limit_s: Optional[float] = None) -> List[Tuple[str, Timing]]:
    """``[(side, Timing)]`` for ``config.interleave`` (see :func:`measure_interleaved`; each side
    gets a fresh timer from ``make_timer``, ``config`` with its own ``slowdown`` and
    ``side_launches[side]`` when given, else ``launch``; the sides in ``skip`` are left out), or
    ``[("", measure(make_timer(), launch, config))]`` when there are no sides; ``limit_s`` as for
    :func:`measure`."""
    if not config.interleave:
        return [("", measure(make_timer(), launch, config, limit_s=limit_s))]
    chosen = [side for side in config.interleave if side.name not in skip]
    if not chosen:
        return []
    names = [side.name for side in chosen]
    configs = [replace(config, slowdown=side.slowdown, interleave=()) for side in chosen]
    launches = [(side_launches or {}).get(name, launch) for name in names]
    timings = measure_interleaved([make_timer() for _ in names], launch, configs, side_launches=launches,
                                  limit_s=limit_s)
    return list(zip(names, timings))


