"""Timing methodology (DESIGN.md 6): timers per backend, one warm-up/sampling loop, the adaptive
stopping rule on the confidence interval of the median, derived rates and measured peaks.

Overview
--------
:func:`measure` runs one loop for every backend::

    timing = measure(CudaTimer(0), launch, MeasureConfig())

1. **Warm-up** (untimed for the result): launches until at least ``config.warmup_min`` were made
   and the last ``max(2, warmup_min)`` per-launch times are within :data:`WARMUP_TOLERANCE` (5 %)
   of each other, or until :data:`WARMUP_CAP_FRACTION` of ``config.max_time_s`` has passed.
2. **Sampling**: one sample after another until :func:`should_stop` says so. A sample whose SM
   clock (NVML, read right after it) is below ``config.clock_floor`` times the device's maximum
   SM clock is discarded and counted (``Timing.discarded``).

The timer decides what one sample is:

* ``"cold"`` mode (the default, nvbench's): one launch per sample; before it, outside the timed
  region, the cache is flushed so the launch finds no useful data cached: on CPUs and OpenCL
  devices a buffer the size of the last-level cache is overwritten with a byte that changes every
  sample; on CUDA GPUs a kernel reads a buffer of twice the L2 (attribute ``L2_CACHE_SIZE``),
  which leaves clean lines (``CudaTimer(flush="memset")`` overwrites an L2-sized buffer
  instead; see ``_HELPERS_PTX`` for why reading is the default).
* ``"hot"`` mode: ``batch`` launches back to back per sample (about :data:`HOT_BATCH_S` of work),
  rotating over the launch callables given (build them over input copies whose total exceeds the
  cache: :func:`hot_rotation_count`); the sample is the bracketed time / ``batch``. Timings carry
  ``mode="hot"`` and must never be compared with cold ones.

Timers: :class:`CpuTimer` (``time.perf_counter`` around the call; C target),
:class:`OpenCLTimer` (profiling markers when the queue has profiling on, else the host clock around
a drained queue), :class:`CudaTimer` (CUDA events on the null stream of the device's primary
context, NVML clocks and telemetry).

Stopping rule (:func:`should_stop`), with ``n`` kept samples, ``t`` the measured time of the kept
samples (device time for GPUs) and ``wall`` the wall time since :func:`measure` began::

    converged    n >= min_samples and t >= min_time_s and half-width(95 % CI of median)/median <= max_rel_ci
    cap          max(wall, t) >= max_time_s
    max_samples  n >= max_samples

checked in that order.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from harness.model import MeasureConfig, Timing
from harness.stats.intervals import median_ci

__all__ = [
    "Launch",
    "STOP_REASONS",
    "MODES",
    "median_ci",
    "should_stop",
    "measure",
    "measure_interleaved",
    "measure_sides",
    "Timer",
    "CpuTimer",
    "OpenCLTimer",
    "CudaTimer",
    "module_launcher",
    "hot_rotation_count",
    "l2_cache_bytes",
    "derived",
    "measure_peaks_cuda",
    "measure_peaks_cpu",
]

Launch = Callable[[], Any]
Launches = Union[Launch, Sequence[Launch]]

#: the values of ``Timing.stop_reason``
STOP_REASONS = ("converged", "cap", "max_samples")
#: the values of ``Timing.mode``
MODES = ("cold", "hot")
#: warm-up ends when the last launches are within this fraction of each other
WARMUP_TOLERANCE = 0.05
#: warm-up ends at the latest after this fraction of ``max_time_s`` (MeasureConfig has no field)
WARMUP_CAP_FRACTION = 0.2
#: a hot-mode sample brackets about this much work
HOT_BATCH_S = 1e-3
#: the most launches in one hot-mode sample
HOT_BATCH_MAX = 1024
#: flush size when the last-level cache size cannot be read
DEFAULT_CACHE_BYTES = 32 << 20


# ---------------------------------------------------------------------------------------------
# statistics


def should_stop(
    samples: Sequence[float], elapsed_s: float, config: MeasureConfig, wall_s: Optional[float] = None
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

    Returns
    -------
    (bool, str)
        ``(True, reason)`` with reason in :data:`STOP_REASONS`, or ``(False, "")``.
    """
    n = len(samples)
    if n >= max(config.min_samples, 1) and elapsed_s >= config.min_time_s:
        med, lo, hi = median_ci(samples)
        width = hi - lo
        if width == 0 or (med > 0 and width / 2.0 / med <= config.max_rel_ci):
            return True, "converged"
    clock = elapsed_s if wall_s is None else max(wall_s, elapsed_s)
    if clock >= config.max_time_s:
        return True, "cap"
    if n >= config.max_samples:
        return True, "max_samples"
    return False, ""


# ---------------------------------------------------------------------------------------------
# timers


def _as_launches(launch: Launches) -> List[Launch]:
    if callable(launch):
        return [launch]
    launches = list(launch)
    if not launches or not all(callable(f) for f in launches):
        raise TypeError("launch must be a callable or a non-empty sequence of callables")
    return launches


class Timer:
    """What one sample is, for one backend. Subclasses implement :meth:`_setup`, :meth:`_sample`
    and :meth:`_teardown`; :func:`measure` drives them.

    Parameters
    ----------
    mode : str, optional
        ``"cold"`` or ``"hot"``; by default the ``mode`` of the :class:`MeasureConfig`.
    """

    kind = "abstract"

    def __init__(self, mode: Optional[str] = None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._mode_arg = mode
        self.mode = mode or "cold"
        self.batch = 1
        self._launches: List[Launch] = []
        self._next = 0
        self._count = 0
        self.extra_s = 0.0  # injected dependent work per launch (calibration), see inject()

    # -- driven by measure() --------------------------------------------------------------------

    def begin(self, launches: Sequence[Launch], config: MeasureConfig) -> None:
        """Allocate what sampling needs and read the telemetry before."""
        self.mode = self._mode_arg or config.mode
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        self._launches = list(launches)
        self.batch = len(self._launches) if self.mode == "hot" else 1
        self._next = 0
        self._count = 0
        self._setup(config)

    def calibrate(self, per_launch_s: float) -> None:
        """Hot mode: choose ``batch`` so that one sample brackets about :data:`HOT_BATCH_S`."""
        if self.mode != "hot":
            return
        want = math.ceil(HOT_BATCH_S / max(per_launch_s, 1e-9))
        self.batch = max(len(self._launches), min(HOT_BATCH_MAX, want))

    def sample(self) -> Tuple[float, Optional[float]]:
        """One sample: (seconds per launch, SM clock in MHz right after it or None)."""
        self._count += 1
        return self._sample()

    def end(self) -> Dict[str, Any]:
        """Free what :meth:`begin` allocated; return the telemetry (before/after, settings)."""
        return self._teardown()

    def inject(self, seconds: float) -> None:
        """Calibration (``MeasureConfig.slowdown``): from now on every launch in a timed sample is
        followed, inside the timed region, by ``seconds`` of work that depends on nothing but
        delays the end of the sample: a busy wait on the host clock (CPU and host-timed OpenCL)
        or a one-thread kernel spinning on the GPU's nanosecond timer (CUDA, same stream)."""
        if seconds < 0:
            raise ValueError(f"injected work must be >= 0 seconds, got {seconds}")
        self.extra_s = float(seconds)

    def _spin_host(self) -> None:
        """Busy-wait ``extra_s * batch`` seconds on the host clock (see :meth:`inject`)."""
        if self.extra_s > 0:
            until = time.perf_counter() + self.extra_s * self.batch
            while time.perf_counter() < until:
                pass

    def clock_floor_mhz(self, config: MeasureConfig) -> Optional[float]:
        """Samples with an SM clock below this are discarded (None: no clock known)."""
        return None

    # -- helpers for subclasses -----------------------------------------------------------------

    def _pick(self) -> Launch:
        f = self._launches[self._next % len(self._launches)]
        self._next += 1
        return f

    def _run_batch(self) -> None:
        for _ in range(self.batch):
            self._pick()()

    def _setup(self, config: MeasureConfig) -> None:
        raise NotImplementedError

    def _sample(self) -> Tuple[float, Optional[float]]:
        raise NotImplementedError

    def _teardown(self) -> Dict[str, Any]:
        return {}


def _llc_bytes() -> int:
    """Size of the host's last-level cache (sysfs), or :data:`DEFAULT_CACHE_BYTES`."""
    best = 0
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in base.glob("index*"):
            text = (index / "size").read_text().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            value = int(text.rstrip("KMG")) * mult
            best = max(best, value)
    except (OSError, ValueError):
        best = 0
    return best or DEFAULT_CACHE_BYTES


class CpuTimer(Timer):
    """Host timing with ``time.perf_counter`` around one call (``"cold"``) or a batch (``"hot"``).

    In cold mode a host buffer the size of the last-level cache (sysfs; ``flush_bytes`` to
    override) is overwritten before each sample, outside the timed region. That evicts the data
    from the caches of the timing thread's core and from the last-level cache; other cores'
    private caches (OpenMP kernels) keep what they hold, so CPU "cold" is best effort.
    """

    kind = "cpu"

    def __init__(self, mode: Optional[str] = None, flush_bytes: Optional[int] = None) -> None:
        super().__init__(mode)
        self.flush_bytes = flush_bytes
        self._buffer: Optional[np.ndarray] = None

    def _setup(self, config: MeasureConfig) -> None:
        if self.mode == "cold":
            size = int(self.flush_bytes or _llc_bytes())
            self._buffer = np.empty(max(size, 1), dtype=np.uint8)
            self._buffer.fill(1)  # fault the pages in now, not during the first flush

    def _sample(self) -> Tuple[float, Optional[float]]:
        if self.mode == "cold":
            assert self._buffer is not None
            self._buffer.fill(self._count & 0xFF)
            f = self._pick()
            t0 = time.perf_counter()
            f()
            self._spin_host()
            return time.perf_counter() - t0, None
        t0 = time.perf_counter()
        self._run_batch()
        self._spin_host()
        return (time.perf_counter() - t0) / self.batch, None

    def _teardown(self) -> Dict[str, Any]:
        size = 0 if self._buffer is None else self._buffer.nbytes
        self._buffer = None
        return {"timer": "perf_counter", "flush_bytes": size}


class OpenCLTimer(Timer):
    """OpenCL timing on ``opencl(device_index)``'s queue (the one kernels.runtime launches on).

    When the queue was made with profiling enabled, a sample is the time between the end of a
    marker enqueued before the launch(es) and the end of one enqueued after (device timestamps);
    otherwise (the runtime's queue has profiling off) the queue is drained, then the host clock
    runs from before the launch(es) to after ``queue.finish()``.

    In cold mode a device buffer of ``CL_DEVICE_GLOBAL_MEM_CACHE_SIZE`` bytes (``flush_bytes`` to
    override) is filled with a changing byte before each sample, and the queue drained, outside
    the timed region.

    Parameters
    ----------
    device_index : int
    mode : str, optional
    queue : pyopencl.CommandQueue, optional
        The queue the launches go to; by default ``kernels.runtime``'s queue of the device.
    flush_bytes : int, optional
    """

    kind = "opencl"

    def __init__(
        self,
        device_index: int = 0,
        mode: Optional[str] = None,
        queue: Any = None,
        flush_bytes: Optional[int] = None,
    ) -> None:
        super().__init__(mode)
        self.device_index = device_index
        self.flush_bytes = flush_bytes
        self._queue_arg = queue
        self.queue: Any = None
        self.profiling = False
        self._buffer: Any = None
        self._flush_size = 0

    def _setup(self, config: MeasureConfig) -> None:
        import pyopencl as cl

        if self._queue_arg is not None:
            self.queue = self._queue_arg
        else:
            from kernels.runtime.device import opencl_handle

            self.queue = opencl_handle(self.device_index).queue
        props = self.queue.properties
        self.profiling = bool(props & cl.command_queue_properties.PROFILING_ENABLE)
        if self.mode == "cold":
            size = self.flush_bytes
            if not size:
                try:
                    size = int(self.queue.device.global_mem_cache_size)
                except Exception:
                    size = 0
                size = size or DEFAULT_CACHE_BYTES
            self._flush_size = int(size)
            self._buffer = cl.Buffer(self.queue.context, cl.mem_flags.READ_WRITE, self._flush_size)
        self.queue.finish()

    def _sample(self) -> Tuple[float, Optional[float]]:
        import pyopencl as cl

        q = self.queue
        if self.mode == "cold":
            cl.enqueue_fill_buffer(q, self._buffer, np.uint8(self._count & 0xFF), 0, self._flush_size)
        if self.profiling and self.extra_s > 0:
            raise ValueError("slowdown injection needs a host-timed OpenCL queue (profiling off, as the"
                             " kernels runtime's queue is); this queue has profiling on")
        if self.profiling:
            m0 = cl.enqueue_marker(q)
            self._run_batch()
            m1 = cl.enqueue_marker(q)
            m1.wait()
            seconds = (m1.profile.end - m0.profile.end) * 1e-9
            if seconds > 0:
                return seconds / self.batch, None
            # a platform giving no usable marker timestamps: time this sample on the host
        q.finish()
        t0 = time.perf_counter()
        self._run_batch()
        q.finish()
        self._spin_host()
        return (time.perf_counter() - t0) / self.batch, None

    def _teardown(self) -> Dict[str, Any]:
        if self._buffer is not None:
            self._buffer.release()
            self._buffer = None
        return {
            "timer": "opencl-profiling" if self.profiling else "perf_counter+finish",
            "flush_bytes": self._flush_size if self.mode == "cold" else 0,
        }


# -- NVML (optional) ---------------------------------------------------------------------------

# NVML (device handle matched by PCI bus id, telemetry snapshots): shared with harness.env
from .env import _nvml
from .env import nvml_handle as _nvml_handle
from .env import telemetry as _gpu_snapshot

# Helper kernels in PTX, JIT-compiled by the driver when a CudaTimer starts (no nvcc at run time).
#
# kbench_spin(ns): one thread spinning on the global nanosecond timer for `ns` ns. Enqueued first
# in each sample it keeps the GPU busy while the host enqueues the flush, the events and the
# launch, so host-side launch overhead never shows up between the two events (nvbench's blocking
# kernel does the same job).
#
# kbench_flush(src, nvec, sink): a grid-stride read of `nvec` 16-byte vectors, folding them with
# xor and storing the result only if it equals a value it never has (the buffer is zeros), which
# keeps the loads alive. Reading a buffer twice the L2 replaces every L2 line with a *clean* one:
# dirty lines left by earlier work are written back here, outside the timed region. A memset
# flush instead leaves the L2 full of dirty lines, whose write-back then lands inside the next
# sample: on an H100 that made a 256 MiB row sum 9 % slower than ncu's gpu__time_duration (which
# flushes and invalidates), while the read flush agrees with ncu within the ~1 us an event pair adds.
_HELPERS_PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry kbench_spin(.param .u64 ns)
{
    .reg .pred %p;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
$L_spin:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra $L_spin;
    ret;
}
.visible .entry kbench_flush(.param .u64 src, .param .u64 nvec, .param .u64 sink)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [nvec];
    ld.param.u64 %rd3, [sink];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
    mov.u32 %r5, 0;
$L_loop:
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra $L_done;
    shl.b64 %rd7, %rd4, 4;
    add.u64 %rd8, %rd1, %rd7;
    ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];
    xor.b32 %r5, %r5, %r6;
    xor.b32 %r5, %r5, %r7;
    xor.b32 %r5, %r5, %r8;
    xor.b32 %r5, %r5, %r9;
    add.u64 %rd4, %rd4, %rd6;
    bra $L_loop;
$L_done:
    setp.ne.u32 %p2, %r5, 0x9E3779B9;
    @%p2 bra $L_end;
    st.global.u32 [%rd3], %r5;
$L_end:
    ret;
}
\0"""

#: CudaTimer's cold-mode flushes: "read" (default, see kbench_flush) or "memset"
FLUSHES = ("read", "memset")

#: bounds of the spin before each CUDA sample (seconds)
SPIN_MIN_S = 20e-6
SPIN_MAX_S = 50e-3


def l2_cache_bytes(device_index: int = 0) -> int:
    """The L2 size of ``cuda(device_index)`` in bytes (device attribute ``L2_CACHE_SIZE``)."""
    from kernels.runtime.device import cuda_driver

    drv = cuda_driver()
    return int(drv.Device(device_index).get_attribute(drv.device_attribute.L2_CACHE_SIZE))


def hot_rotation_count(set_bytes: int, cache_bytes: int, factor: float = 2.0) -> int:
    """How many copies of a case's buffers (``set_bytes`` each) hot mode should rotate over so
    that together they exceed ``factor`` times the cache (at least 2 copies)."""
    if set_bytes <= 0:
        return 2
    return max(2, math.ceil(factor * cache_bytes / set_bytes))


class CudaTimer(Timer):
    """CUDA timing: CUDA events on the null stream of ``cuda(device_index)``'s primary context.

    The launches must run on that stream in that context: ``kernels.runtime`` modules do (they
    launch with ``prepared_call`` on the null stream inside :func:`kernels.runtime.device.cuda_context`),
    and so do PyTorch and CuPy on their default streams, which are the null stream of the same
    primary context.

    One sample, inside the pushed primary context::

        spin kernel (keeps the GPU busy while the host enqueues)      [untimed]
        cold: flush -- read 2 x L2 bytes (or memset L2 bytes)           [untimed]
        start.record(); launch (cold) or `batch` launches (hot); end.record()
        end.synchronize(); seconds = start.time_till(end) / 1e3 / batch
        SM clock read through NVML                                     [untimed]

    Parameters
    ----------
    device_index : int
    mode : str, optional
        ``"cold"`` or ``"hot"`` (default: the config's).
    flush_bytes : int, optional
        Size of the flush buffer (default: twice the L2 size for "read", the L2 size for
        "memset").
    use_nvml : bool
        Read clocks and telemetry through NVML (nvidia-ml-py) when it is installed.
    spin : bool
        Enqueue the spin kernel before each sample (see ``_HELPERS_PTX``).
    flush : str
        ``"read"`` (default): a kernel reads the flush buffer, leaving clean L2 lines;
        ``"memset"``: ``cuMemsetD8Async`` with a byte that changes every sample (nvbench's way;
        leaves dirty lines whose write-back falls into the sample). Falls back to "memset" when
        the driver refuses the helper PTX (recorded as ``helpers_error`` in the telemetry).
    """

    kind = "cuda"

    def __init__(
        self,
        device_index: int = 0,
        mode: Optional[str] = None,
        flush_bytes: Optional[int] = None,
        use_nvml: bool = True,
        spin: bool = True,
        flush: str = "read",
    ) -> None:
        super().__init__(mode)
        if flush not in FLUSHES:
            raise ValueError(f"flush must be one of {FLUSHES}, got {flush!r}")
        self.device_index = device_index
        self.flush_bytes = flush_bytes
        self.use_nvml = use_nvml
        self.spin = spin
        self.flush = flush
        self.l2_bytes = 0
        self.max_clock_mhz: Optional[float] = None
        self._ctx: Any = None
        self._drv: Any = None
        self._events: Tuple[Any, Any] = (None, None)
        self._buffer: Any = None
        self._flush_size = 0
        self._sink: Any = None
        self._helpers: Any = None
        self._spin_fn: Any = None
        self._flush_fn: Any = None
        self._flush_grid = (1, 1, 1)
        self._enqueue_s = 1e-4
        self._extra_ns = 0
        self._nvml_handle: Any = None
        self._before: Dict[str, Any] = {}
        self._static: Dict[str, Any] = {}

    def _setup(self, config: MeasureConfig) -> None:
        from kernels.runtime.device import cuda_context, cuda_driver

        self._drv = drv = cuda_driver()
        self._ctx = cuda_context(self.device_index)
        dev = drv.Device(self.device_index)
        self.l2_bytes = int(dev.get_attribute(drv.device_attribute.L2_CACHE_SIZE))
        with self._ctx:
            self._events = (drv.Event(), drv.Event())
            if self.spin or config.slowdown or (self.mode == "cold" and self.flush == "read"):
                try:
                    self._helpers = drv.module_from_buffer(_HELPERS_PTX)
                    self._spin_fn = self._helpers.get_function("kbench_spin")
                    self._spin_fn.prepare("Q")
                    self._flush_fn = self._helpers.get_function("kbench_flush")
                    self._flush_fn.prepare("PQP")
                except Exception as exc:  # a driver refusing the PTX: no spin, memset flush
                    self._helpers = self._spin_fn = self._flush_fn = None
                    self._static["helpers_error"] = str(exc)[:200]
                    self.flush = "memset"
                if not self.spin:
                    self._spin_fn = None
            if self.mode == "cold":
                default = 2 * self.l2_bytes if self.flush == "read" else self.l2_bytes
                size = int(self.flush_bytes or default or DEFAULT_CACHE_BYTES)
                self._flush_size = max(16, size - size % 16)
                self._buffer = drv.mem_alloc(self._flush_size)
                drv.memset_d8(self._buffer, 0, self._flush_size)
                self._sink = drv.mem_alloc(16)
                sms = int(dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT))
                self._flush_grid = (4 * sms, 1, 1)
            drv.Context.synchronize()
        self._static.update({
            "timer": "cuda-events",
            "device": str(dev.name()),
            "pci_bus_id": str(dev.pci_bus_id()),
            "l2_bytes": self.l2_bytes,
            "flush_bytes": self._flush_size if self.mode == "cold" else 0,
            "flush": self.flush if self.mode == "cold" else "none",
            "spin": self._spin_fn is not None,
        })
        if self.use_nvml:
            self._nvml_handle = _nvml_handle(self.device_index)
        nv = _nvml() if self._nvml_handle is not None else None
        if nv is not None:
            try:
                self.max_clock_mhz = float(nv.nvmlDeviceGetMaxClockInfo(self._nvml_handle, nv.NVML_CLOCK_SM))
            except Exception:
                self.max_clock_mhz = None
        self._static["max_sm_clock_mhz"] = self.max_clock_mhz
        self._static["nvml"] = nv is not None
        self._before = _gpu_snapshot(self._nvml_handle)

    def inject(self, seconds: float) -> None:
        """See :meth:`Timer.inject`. The spin kernel's own launch gap (measured here: events around
        a zero-length spin) is subtracted, so the sample grows by ``seconds`` per launch, not more."""
        super().inject(seconds)
        self._extra_ns = 0
        if seconds <= 0:
            return
        if self._helpers is None:
            raise ValueError("slowdown injection on CUDA needs the helper PTX, which this driver refused: "
                             + str(self._static.get("helpers_error", "")))
        if self._spin_fn is None:
            self._spin_fn = self._helpers.get_function("kbench_spin")
            self._spin_fn.prepare("Q")
        start, end = self._events
        gaps = []
        with self._ctx:
            for _ in range(9):
                # as in a sample: the GPU is kept busy while the host enqueues, so the gap is what a
                # queued zero-length spin adds between the events, not an idle GPU's launch latency
                self._spin_fn.prepared_call((1, 1, 1), (1, 1, 1), np.uint64(int(SPIN_MIN_S * 1e9)))
                start.record()
                self._spin_fn.prepared_call((1, 1, 1), (1, 1, 1), np.uint64(0))
                end.record()
                end.synchronize()
                gaps.append(start.time_till(end) * 1e-3)
        gap = statistics.median(gaps)
        if seconds * self.batch < gap:
            # the injected kernel cannot add less than its own gap: the slowdown comes out larger
            # than asked (Timing telemetry: injected_gap_s; kbench calibrate reports the observed one)
            self._static["injected_floor"] = True
        self._extra_ns = max(1, int((seconds * self.batch - gap) * 1e9))
        self._static["injected_gap_s"] = gap
        self._tune_injection(seconds)

    def _tune_injection(self, seconds: float, rounds: int = 3, pairs: int = 15) -> None:
        """Close the loop on the injected work: time ``pairs`` samples without and with it
        (alternating), and correct the spin by what the difference of their medians misses of
        ``seconds``; up to ``rounds`` times, until within 5 % of it. What a launch and its spin
        overlap or queue behind each other is then measured, not assumed. The last estimate is in
        the telemetry (``injected_measured_s``)."""
        target_ns = seconds * self.batch * 1e9
        achieved = math.nan
        for _ in range(rounds):
            plain, slowed = [], []
            spin_ns = self._extra_ns
            for _ in range(pairs):
                self._extra_ns = 0
                plain.append(self._sample()[0])
                self._extra_ns = spin_ns
                slowed.append(self._sample()[0])
            achieved = (statistics.median(slowed) - statistics.median(plain)) * self.batch * 1e9
            if abs(achieved - target_ns) <= 0.05 * target_ns:
                break
            self._extra_ns = max(1, int(spin_ns + target_ns - achieved))
            if self._extra_ns == 1 and achieved > target_ns:
                self._static["injected_floor"] = True
                break
        self._static["injected_measured_s"] = achieved * 1e-9 / self.batch

    def clock_floor_mhz(self, config: MeasureConfig) -> Optional[float]:
        if self.max_clock_mhz is None or self.max_clock_mhz <= 0:
            return None
        return config.clock_floor * self.max_clock_mhz

    def _read_clock(self) -> Optional[float]:
        if self._nvml_handle is None:
            return None
        nv = _nvml()
        try:
            return float(nv.nvmlDeviceGetClockInfo(self._nvml_handle, nv.NVML_CLOCK_SM))
        except Exception:
            return None

    def _sample(self) -> Tuple[float, Optional[float]]:
        drv = self._drv
        start, end = self._events
        with self._ctx:
            if self._spin_fn is not None:
                spin_s = min(max(2.0 * self._enqueue_s, SPIN_MIN_S), SPIN_MAX_S)
                self._spin_fn.prepared_call((1, 1, 1), (1, 1, 1), np.uint64(int(spin_s * 1e9)))
            h0 = time.perf_counter()
            if self.mode == "cold":
                if self.flush == "read":
                    self._flush_fn.prepared_call(self._flush_grid, (256, 1, 1), self._buffer,
                                                 np.uint64(self._flush_size // 16), self._sink)
                else:
                    drv.memset_d8_async(self._buffer, self._count & 0xFF, self._flush_size)
            start.record()
            self._run_batch()
            if self._extra_ns:
                self._spin_fn.prepared_call((1, 1, 1), (1, 1, 1), np.uint64(self._extra_ns))
            end.record()
            self._enqueue_s = time.perf_counter() - h0
            end.synchronize()
            seconds = start.time_till(end) * 1e-3
        return seconds / self.batch, self._read_clock()

    def _teardown(self) -> Dict[str, Any]:
        after = _gpu_snapshot(self._nvml_handle)
        if self._ctx is not None:
            with self._ctx:
                try:
                    self._drv.Context.synchronize()
                finally:
                    for mem in (self._buffer, self._sink):
                        if mem is not None:
                            mem.free()
                    self._buffer = self._sink = None
                    self._events = (None, None)
                    self._spin_fn = self._flush_fn = self._helpers = None
        out = dict(self._static)
        out.update({f"before.{k}": v for k, v in self._before.items()})
        out.update({f"after.{k}": v for k, v in after.items()})
        return out


# ---------------------------------------------------------------------------------------------
# the loop


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


def measure(timer: Timer, launch: Launches, config: Optional[MeasureConfig] = None) -> Timing:
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

    Returns
    -------
    Timing
        Kept samples (seconds per launch), discarded count, per-sample SM clocks (when NVML
        reads them), median and 95 % CI, mode, stop reason and telemetry pairs (sorted by key)
        with the timer's settings, before/after GPU state, warm-up launches, wall and measured
        time. When every sample was discarded the median and CI are NaN.
    """
    return measure_interleaved([timer], launch, [MeasureConfig() if config is None else config])[0]


class _Side:
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

    def check(self, wall_s: float) -> None:
        """Apply the stopping rule at geometrically spaced counts (the CI sorts every sample)."""
        n, cfg = len(self.samples), self.config
        if self.reason or not (n >= self.next_check or wall_s >= cfg.max_time_s or n >= cfg.max_samples):
            return
        stop, reason = should_stop(self.samples, self.measured, cfg, wall_s=wall_s)
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
                        side_launches: Optional[Sequence[Launches]] = None) -> List[Timing]:
    """Time one case as several *sides*, interleaved sample by sample; one :class:`Timing` each.

    Side ``i`` is ``timers[i]`` with ``configs[i]`` (their stopping rules should agree; they may
    differ in ``slowdown``), launching ``launch``, or ``side_launches[i]`` when given (``kbench
    ab``: the same case built from two source trees, on the same arguments). Each side is warmed up
    in turn (its injected work, if any, is sized
    from its own warm-up), then the sides take one sample each per round, the order rotating
    every round (ABC, BCA, CAB, ...), until every side's stopping rule has said stop; every side
    keeps sampling until then, so all end with the same number of samples taken. A side's wall
    time, for its cap, is its share of the loop's wall time (the loop's / number of sides).

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
    per_side = [_as_launches(f) for f in side_launches] if side_launches is not None else None
    launches = per_side[0] if per_side else _as_launches(launch)
    sides = [_Side(t, c) for t, c in zip(timers, configs)]
    k = len(sides)
    t0 = time.perf_counter()
    begun: List[_Side] = []
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
                side.check(side.warm_s + share)
    finally:
        for side in begun:
            side.telemetry = side.timer.end()
    wall = time.perf_counter() - t0
    return [side.timing(wall if k == 1 else side.warm_s + (wall - sum(s.warm_s for s in sides)) / k, k)
            for side in sides]


def measure_sides(make_timer: Callable[[], Timer], launch: Launches, config: MeasureConfig,
                  side_launches: Optional[Mapping[str, Launches]] = None,
                  skip: Collection[str] = ()) -> List[Tuple[str, Timing]]:
    """``[(side, Timing)]`` for ``config.interleave`` (see :func:`measure_interleaved`; each side
    gets a fresh timer from ``make_timer``, ``config`` with its own ``slowdown`` and
    ``side_launches[side]`` when given, else ``launch``; the sides in ``skip`` are left out), or
    ``[("", measure(make_timer(), launch, config))]`` when there are no sides."""
    if not config.interleave:
        return [("", measure(make_timer(), launch, config))]
    from dataclasses import replace

    chosen = [(str(name), float(slow)) for name, slow in config.interleave if name not in skip]
    if not chosen:
        return []
    names = [name for name, _ in chosen]
    configs = [replace(config, slowdown=slow, interleave=()) for _, slow in chosen]
    launches = [(side_launches or {}).get(name, launch) for name in names]
    timings = measure_interleaved([make_timer() for _ in names], launch, configs, side_launches=launches)
    return list(zip(names, timings))


# ---------------------------------------------------------------------------------------------
# derived rates and peaks


def _flops_peak_key(dtype: Optional[str]) -> str:
    if dtype in ("float16", "bfloat16"):
        return "matmul_fp16_gflops"
    if dtype == "float64":
        return "matmul_fp64_gflops"
    return "matmul_fp32_gflops"


def derived(
    timing: Timing,
    flops: Optional[float],
    nbytes: Optional[float],
    peaks: Optional[Dict[str, Any]],
    dtype: Optional[str] = None,
) -> Dict[str, Optional[float]]:
    """Rates from the median time, and percentages of the device's measured peaks.

    Parameters
    ----------
    timing : Timing
    flops : float or None
        Operations of one launch (the workload's count).
    nbytes : float or None
        Bytes moved by one launch (the workload's count).
    peaks : dict or None
        From :func:`measure_peaks_cuda` / :func:`measure_peaks_cpu`: ``copy_gbps`` and
        ``matmul_fp32_gflops`` / ``matmul_fp16_gflops`` (``fp64`` if present).
    dtype : str, optional
        Picks the matmul peak: float16/bfloat16 -> fp16, float64 -> fp64, else fp32.

    Returns
    -------
    dict
        ``gbps`` (1e9 bytes/s), ``gflops`` (1e9 ops/s), ``pct_peak_bw`` and ``pct_peak_flops``
        (percent, 0-100+); None where a count, a peak or a positive median is missing.
    """
    out: Dict[str, Optional[float]] = {"gbps": None, "gflops": None, "pct_peak_bw": None,
                                       "pct_peak_flops": None}
    med = timing.median
    if not (isinstance(med, (int, float)) and med > 0 and math.isfinite(med)):
        return out
    if nbytes:
        out["gbps"] = float(nbytes) / med / 1e9
    if flops:
        out["gflops"] = float(flops) / med / 1e9
    peaks = peaks or {}
    bw = peaks.get("copy_gbps")
    if out["gbps"] is not None and bw:
        out["pct_peak_bw"] = 100.0 * out["gbps"] / bw
    fp = peaks.get(_flops_peak_key(dtype))
    if out["gflops"] is not None and fp:
        out["pct_peak_flops"] = 100.0 * out["gflops"] / fp
    return out


_peaks_lock = threading.Lock()
_PEAKS: Dict[str, Dict[str, Any]] = {}


def _cuda_device_key(device_index: int) -> str:
    """The device's UUID (NVML), else its PCI bus id and name."""
    handle = _nvml_handle(device_index)
    nv = _nvml()
    if handle is not None and nv is not None:
        try:
            uuid = nv.nvmlDeviceGetUUID(handle)
            return uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        except Exception:
            pass
    from kernels.runtime.device import cuda_driver

    dev = cuda_driver().Device(device_index)
    return f"{dev.pci_bus_id()}/{dev.name()}"


def measure_peaks_cuda(device_index: int = 0, refresh: bool = False) -> Dict[str, Any]:
    """Measure the device's copy bandwidth and dense-matmul peaks (cached per device UUID).

    * ``copy_gbps``: device-to-device ``cuMemcpyDtoD`` of a large buffer (1 GiB, or a quarter of
      the free memory when less), bytes read + written over the median of 10 timed copies (CUDA
      events, after 2 untimed ones).
    * ``matmul_fp32_gflops`` / ``matmul_fp16_gflops``: ``torch.matmul`` on 8192 x 8192 matrices
      (2 n^3 operations), median of 5 after 2 warm-ups, with torch's events; None without torch.
      fp32 runs with torch's default TF32 setting, recorded as ``matmul_fp32_tf32``.

    Returns
    -------
    dict
        ``device``, ``uuid``, ``copy_gbps``, ``copy_bytes``, ``l2_bytes``, ``matmul_fp32_gflops``,
        ``matmul_fp16_gflops``, ``matmul_fp32_tf32``, ``matmul_source``.
    """
    from kernels.runtime.device import cuda_context, cuda_driver

    key = _cuda_device_key(device_index)
    with _peaks_lock:
        if not refresh and key in _PEAKS:
            return dict(_PEAKS[key])
    drv = cuda_driver()
    dev = drv.Device(device_index)
    with cuda_context(device_index):
        free, _total = drv.mem_get_info()
        nbytes = min(1 << 30, (free // 4) & ~((1 << 20) - 1))
        a = drv.mem_alloc(nbytes)
        b = drv.mem_alloc(nbytes)
        try:
            drv.memset_d8(a, 1, nbytes)
            start, end = drv.Event(), drv.Event()
            times = []
            for i in range(12):
                start.record()
                drv.memcpy_dtod_async(b, a, nbytes)
                end.record()
                end.synchronize()
                if i >= 2:
                    times.append(start.time_till(end) * 1e-3)
            del start, end
        finally:
            a.free()
            b.free()
    copy_gbps = 2.0 * nbytes / statistics.median(times) / 1e9
    result: Dict[str, Any] = {
        "device": str(dev.name()),
        "uuid": key,
        "copy_gbps": copy_gbps,
        "copy_bytes": 2 * nbytes,
        "l2_bytes": int(dev.get_attribute(drv.device_attribute.L2_CACHE_SIZE)),
        "matmul_fp32_gflops": None,
        "matmul_fp16_gflops": None,
        "matmul_fp32_tf32": None,
        "matmul_source": None,
    }
    result.update(_torch_matmul_peaks(device_index))
    with _peaks_lock:
        _PEAKS[key] = dict(result)
    return result


def _torch_matmul_peaks(device_index: int, n: int = 8192) -> Dict[str, Any]:
    try:
        import torch
    except Exception:
        return {}
    if not torch.cuda.is_available():
        return {}
    out: Dict[str, Any] = {
        "matmul_source": f"torch {torch.__version__}",
        "matmul_fp32_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
    }
    flop = 2.0 * n ** 3
    with torch.cuda.device(device_index):
        for dtype, name in ((torch.float32, "matmul_fp32_gflops"), (torch.float16, "matmul_fp16_gflops")):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            for _ in range(2):
                torch.matmul(a, b, out=c)
            times = []
            for _ in range(5):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                torch.matmul(a, b, out=c)
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e) * 1e-3)
            out[name] = flop / statistics.median(times) / 1e9
            del a, b, c
        torch.cuda.empty_cache()
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def measure_peaks_cpu(nbytes: int = 256 << 20, refresh: bool = False) -> Dict[str, Any]:
    """Host copy bandwidth (``np.copyto`` of ``nbytes``, read + write bytes, median of 5 after one
    untimed copy) and numpy matmul GFLOP/s (1024 x 1024, float32 and float64; median of 5).
    Cached in-process.

    Returns
    -------
    dict
        ``device``, ``copy_gbps``, ``copy_bytes``, ``matmul_fp32_gflops``, ``matmul_fp64_gflops``,
        ``matmul_source``.
    """
    key = f"cpu:{nbytes}"
    with _peaks_lock:
        if not refresh and key in _PEAKS:
            return dict(_PEAKS[key])
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros(nbytes, dtype=np.uint8)
    np.copyto(dst, src)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    del src, dst
    result: Dict[str, Any] = {
        "device": _cpu_name(),
        "copy_gbps": 2.0 * nbytes / statistics.median(times) / 1e9,
        "copy_bytes": 2 * nbytes,
        "matmul_source": f"numpy {np.__version__}",
        "threads": os.cpu_count(),
    }
    n = 1024
    rng = np.random.default_rng(0)
    for dtype, name in ((np.float32, "matmul_fp32_gflops"), (np.float64, "matmul_fp64_gflops")):
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        c = np.empty((n, n), dtype)
        np.matmul(a, b, out=c)
        mm = []
        for _ in range(5):
            t0 = time.perf_counter()
            np.matmul(a, b, out=c)
            mm.append(time.perf_counter() - t0)
        result[name] = 2.0 * n ** 3 / statistics.median(mm) / 1e9
    with _peaks_lock:
        _PEAKS[key] = dict(result)
    return result
