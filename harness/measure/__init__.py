"""Timing methodology (docs/ARCHITECTURE.md, "Measuring"): one loop for every backend, the stopping
rule, the timers, derived rates and measured peaks, GPU clocks and telemetry.

Modules, in the order a sample meets them: :mod:`~harness.measure.loop` (warm-up, sampling,
interleaved sides), :mod:`~harness.measure.stopping` (when to stop; convergence criteria named in
``MeasureConfig.stopping``), :mod:`~harness.measure.timers` (what one sample is: the ``Timer``
protocol, host and OpenCL timers), :mod:`~harness.measure.cuda_timer` (CUDA events, L2 flush, helper
PTX), :mod:`~harness.measure.nvml` (clocks and telemetry), :mod:`~harness.measure.peaks` (GB/s,
GFLOP/s and the device peaks they are a percentage of).

>>> timing = measure(CudaTimer(0), launch, MeasureConfig())          # doctest: +SKIP
"""

from harness.measure.cuda_timer import FLUSHES, CudaTimer, hot_rotation_count, l2_cache_bytes
from harness.measure.loop import measure, measure_interleaved, measure_sides, module_launcher
from harness.measure.peaks import derived, device_peaks, measure_peaks_cpu, measure_peaks_cuda
from harness.measure.stopping import (
    CRITERIA,
    STOP_REASONS,
    ConvergenceCriterion,
    register_criterion,
    should_stop,
)
from harness.measure.timers import MODES, CpuTimer, Launch, OpenCLTimer, Timer
from harness.stats.intervals import median_ci

__all__ = [
    "CRITERIA", "FLUSHES", "MODES", "STOP_REASONS", "ConvergenceCriterion", "CpuTimer", "CudaTimer", "Launch",
    "OpenCLTimer", "Timer", "derived", "device_peaks", "hot_rotation_count", "l2_cache_bytes", "measure",
    "measure_interleaved", "measure_peaks_cpu", "measure_peaks_cuda", "measure_sides", "median_ci",
    "module_launcher", "register_criterion", "should_stop",
]
