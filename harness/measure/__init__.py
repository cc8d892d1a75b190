"""Timing methodology (docs/ARCHITECTURE.md, "Measuring"): one loop for every backend, the stopping
rule, the timers, derived rates and measured peaks, GPU clocks and telemetry.

Modules, in the order a sample meets them: :mod:`~harness.measure.loop` (warm-up, sampling,
interleaved sides), :mod:`~harness.measure.stopping` (when to stop; convergence criteria named in
``MeasureConfig.stopping``), :mod:`~harness.measure.timers` (what one sample is: the ``Timer``
protocol, host and OpenCL timers), :mod:`~harness.measure.cuda_timer` (CUDA events, L2 flush, helper
PTX), :mod:`~harness.measure.nvml` (clocks and telemetry), :mod:`~harness.measure.peaks` (GB/s,
GFLOP/s and the device peaks they are a percentage of).

The names below are importable from this package (``from harness.measure import CudaTimer``); each
loads its module on first use, so that ``harness.measure.nvml`` (which the environment fingerprint
needs) does not bring the timers and the compiler runtime with it.

>>> timing = measure(CudaTimer(0), launch, MeasureConfig())          # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module of this package that defines it
_EXPORTS = {
    "FLUSHES": "cuda_timer", "CudaTimer": "cuda_timer", "hot_rotation_count": "cuda_timer",
    "l2_cache_bytes": "cuda_timer",
    "measure": "loop", "measure_interleaved": "loop", "measure_sides": "loop", "module_launcher": "loop",
    "derived": "peaks", "device_peaks": "peaks", "measure_peaks_cpu": "peaks", "measure_peaks_cuda": "peaks",
    "recheck_peak": "peaks", "BEATEN_BY": "peaks",
    "CRITERIA": "stopping", "STOP_REASONS": "stopping", "ConvergenceCriterion": "stopping",
    "register_criterion": "stopping", "should_stop": "stopping",
    "MODES": "timers", "CpuTimer": "timers", "Launch": "timers", "OpenCLTimer": "timers", "Timer": "timers",
}

__all__ = sorted([*_EXPORTS, "median_ci"])


def __getattr__(name: str) -> Any:
    """The public names of the package's modules, each loaded on first use (PEP 562)."""
    if name == "median_ci":
        module = importlib.import_module("harness.stats.intervals")
    elif name in _EXPORTS:
        module = importlib.import_module(f"harness.measure.{_EXPORTS[name]}")
    else:
        raise AttributeError(f"module 'harness.measure' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value
