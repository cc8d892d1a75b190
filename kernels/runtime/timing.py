"""Timing a built module: :meth:`Timing.time_evaluator` (TVM's ``mod.time_evaluator``) and the
:class:`BenchmarkResult` it gives.

GPU time is measured with CUDA events (CUDA) or the host clock around a drained queue (OpenCL), CPU
time with ``time.perf_counter``: each backend times ``count`` back-to-back launches in its
:meth:`Timing._time_launches`.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Tuple

from kernels.errors import ArgumentError
from kernels.runtime.device import Device
from kernels.runtime.launch import Launch

__all__ = ["BenchmarkResult", "Timing"]


@dataclass(frozen=True)
class BenchmarkResult:
    """Timings from :meth:`Module.time_evaluator`, in seconds.

    Attributes
    ----------
    results : tuple of float
        The mean time of one call in each repeat.
    number : int
        Calls timed per repeat (after any ``min_repeat_ms`` growth).
    """

    results: Tuple[float, ...]
    number: int = 1

    @property
    def mean(self) -> float:
        """float: mean of :attr:`results`."""
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        """float: median of :attr:`results`."""
        return statistics.median(self.results)

    @property
    def std(self) -> float:
        """float: population standard deviation of :attr:`results` (0 for one repeat)."""
        return statistics.pstdev(self.results)

    @property
    def min(self) -> float:
        """float: the fastest repeat."""
        return min(self.results)

    @property
    def max(self) -> float:
        """float: the slowest repeat."""
        return max(self.results)

    def __repr__(self) -> str:
        ms = [r * 1e3 for r in self.results]
        return (
            f"BenchmarkResult(mean={self.mean * 1e3:.6f} ms, median={self.median * 1e3:.6f} ms, "
            f"std={self.std * 1e3:.6f} ms, repeats={len(ms)}, number={self.number})"
        )


class Timing:
    """The timing of :class:`~kernels.runtime.module.Module` (its launches come from
    :class:`~kernels.runtime.launch.Launching`, its checks from
    :class:`~kernels.runtime.arguments.ArgumentChecks`)."""

    type_key: str
    device_type: str

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        cooldown_interval_ms: float = 0,
    ) -> Callable[..., BenchmarkResult]:
        """Return a function that times calls of ``func_name`` on ``dev``.

        The returned function checks its arguments once, runs one untimed warm-up call, then
        ``repeat`` times runs ``number`` calls back to back and records their mean. With
        ``min_repeat_ms``, ``number`` grows until one repeat lasts at least that long. GPU time
        is measured with CUDA events (CUDA) or the host clock around a drained queue (OpenCL);
        CPU time with ``time.perf_counter``.

        Parameters
        ----------
        func_name : str
            The function to time (``mod.entry_name``).
        dev : Device
            The device the arguments live on.
        number : int
            Calls per repeat.
        repeat : int
            Repeats; each gives one entry of ``results``.
        min_repeat_ms : float
            Least duration of one repeat in milliseconds (0: no minimum).
        cooldown_interval_ms : float
            Pause between repeats in milliseconds.

        Returns
        -------
        callable
            ``f(*args) -> BenchmarkResult`` with ``.mean``, ``.results``, ``.median``, ``.std``.
        """
        self._check_name(func_name)
        if number < 1 or repeat < 1:
            raise ArgumentError(f"time_evaluator: number and repeat must be >= 1, got {number}, {repeat}")
        if not isinstance(dev, Device) or dev.device_type != self.device_type:
            raise ArgumentError(
                f"time_evaluator: dev must be a {self.device_type} device for the {self.type_key} "
                f"target, got {dev!r}"
            )

        def evaluator(*args: Any) -> BenchmarkResult:
            launch, device = self._prepare(args)
            if device != dev and self.device_type != "cpu":
                raise ArgumentError(f"time_evaluator: the arguments are on {device!r}, not on {dev!r}")
            launch()  # warm-up: lazy compilation, module loading, caches
            self._synchronize(device)
            count = number
            results: List[float] = []
            for i in range(repeat):
                if i and cooldown_interval_ms > 0:
                    time.sleep(cooldown_interval_ms / 1e3)
                while True:
                    elapsed = self._time_launches(device, launch, count)
                    if min_repeat_ms <= 0 or elapsed * 1e3 >= min_repeat_ms:
                        break
                    # aim 20% past the minimum, at least doubling, so this loop ends quickly
                    per_call_ms = elapsed * 1e3 / count
                    wanted = math.ceil(1.2 * min_repeat_ms / per_call_ms) if per_call_ms > 0 else 10 * count
                    count = max(wanted, 2 * count)
                results.append(elapsed / count)
            return BenchmarkResult(tuple(results), count)

        return evaluator

    def _time_launches(self, device: Device, launch: Launch, count: int) -> float:
        """Seconds taken by ``count`` back-to-back launches (host clock)."""
        start = time.perf_counter()
        for _ in range(count):
            launch()
        self._synchronize(device)
        return time.perf_counter() - start
