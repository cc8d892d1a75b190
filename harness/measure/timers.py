"""What one sample is, per backend: the :class:`Timer` protocol the loop drives, and the host and
OpenCL timers (the CUDA timer is :mod:`harness.measure.cuda_timer`).

* ``"cold"`` mode (the default, nvbench's): one launch per sample; before it, outside the timed
  region, the cache is flushed so the launch finds no useful data cached: on CPUs and OpenCL
  devices a buffer the size of the last-level cache is overwritten with a byte that changes every
  sample (CUDA: see :class:`~harness.measure.cuda_timer.CudaTimer`). On a host CPU (the C target,
  and OpenCL CPU devices such as PoCL) that size is capped at :data:`HOST_FLUSH_CAP_BYTES`: server
  parts report the whole socket's last-level cache (480 MiB on some), which one timing thread
  cannot fill and whose flush would cost tens of milliseconds a sample; the size used is in each
  timing's telemetry (``flush_bytes``).
* ``"hot"`` mode: ``batch`` launches back to back per sample (about :data:`HOT_BATCH_S` of work),
  rotating over the launch callables given (build them over input copies whose total exceeds the
  cache: :func:`harness.measure.cuda_timer.hot_rotation_count`); the sample is the bracketed time /
  ``batch``. Timings carry ``mode="hot"`` and must never be compared with cold ones.

Timers: :class:`CpuTimer` (``time.perf_counter`` around the call; C target), :class:`OpenCLTimer`
(profiling markers when the queue has profiling on, else the host clock around a drained queue).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from harness.model import MeasureConfig
from kernels.runtime.device import opencl_handle

__all__ = ["DEFAULT_CACHE_BYTES", "HOST_FLUSH_CAP_BYTES", "HOT_BATCH_MAX", "HOT_BATCH_S", "MODES", "CpuTimer",
           "Launch", "Launches", "OpenCLTimer", "Timer", "as_launches", "host_flush_bytes"]

Launch = Callable[[], Any]
Launches = Union[Launch, Sequence[Launch]]

#: the values of ``Timing.mode``
MODES = ("cold", "hot")
#: a hot-mode sample brackets about this much work
HOT_BATCH_S = 1e-3
#: the most launches in one hot-mode sample
HOT_BATCH_MAX = 1024
#: flush size when the last-level cache size cannot be read
DEFAULT_CACHE_BYTES = 32 << 20
#: the most a host CPU's cold-mode flush writes (unless ``flush_bytes`` asks for more): a whole
#: large private L2 and a last-level cache share well above what a few cores' data occupies
HOST_FLUSH_CAP_BYTES = 64 << 20


def as_launches(launch: Launches) -> List[Launch]:
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


def host_flush_bytes(cache_bytes: int) -> int:
    """The cold-mode flush size for a host CPU whose last-level cache is ``cache_bytes`` (0: unknown)."""
    return min(int(cache_bytes) or DEFAULT_CACHE_BYTES, HOST_FLUSH_CAP_BYTES)


_host_flush: Dict[str, np.ndarray] = {}


def _host_flush_buffer(size: int) -> np.ndarray:
    """A host buffer of ``size`` bytes with its pages faulted in, shared by the process's CPU timers
    (faulting in tens of MiB costs more than a case's whole measurement of a small kernel; what it
    holds never matters, so timers on several threads may overwrite it together)."""
    buf = _host_flush.get("buffer")
    if buf is None or buf.nbytes < size:
        buf = np.empty(max(size, 1), dtype=np.uint8)
        buf.fill(1)
        _host_flush["buffer"] = buf
    return buf[:max(size, 1)]


class CpuTimer(Timer):
    """Host timing with ``time.perf_counter`` around one call (``"cold"``) or a batch (``"hot"``).

    In cold mode a host buffer the size of the last-level cache (sysfs, at most
    :data:`HOST_FLUSH_CAP_BYTES`; ``flush_bytes`` to override) is overwritten before each sample,
    outside the timed region. That evicts the data from the caches of the timing thread's core and
    from the last-level cache (up to the cap); other cores' private caches (OpenMP kernels) keep what
    they hold, so CPU "cold" is best effort.
    """

    kind = "cpu"

    def __init__(self, mode: Optional[str] = None, flush_bytes: Optional[int] = None) -> None:
        super().__init__(mode)
        self.flush_bytes = flush_bytes
        self._buffer: Optional[np.ndarray] = None

    def _setup(self, config: MeasureConfig) -> None:
        if self.mode == "cold":
            size = int(self.flush_bytes or host_flush_bytes(_llc_bytes()))
            self._buffer = _host_flush_buffer(size)  # pages faulted in already, not during a flush

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

    In cold mode a device buffer of ``CL_DEVICE_GLOBAL_MEM_CACHE_SIZE`` bytes (at most
    :data:`HOST_FLUSH_CAP_BYTES` on a CPU device; ``flush_bytes`` to override) is filled with a
    changing byte before each sample, and the queue drained, outside the timed region.

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
            self.queue = opencl_handle(self.device_index).queue
        props = self.queue.properties
        self.profiling = bool(props & cl.command_queue_properties.PROFILING_ENABLE)
        if self.mode == "cold":
            size = self.flush_bytes
            if not size:
                device = self.queue.device
                try:
                    size = int(device.global_mem_cache_size)
                except Exception:
                    size = 0
                size = size or DEFAULT_CACHE_BYTES
                if device.type & cl.device_type.CPU:
                    size = host_flush_bytes(size)
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


