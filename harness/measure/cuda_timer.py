"""CUDA timing: :class:`CudaTimer` (CUDA events on the null stream of the device's primary context, an
L2 flush before every cold sample, NVML clocks and telemetry) and its helper kernels in PTX."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Dict, Optional, Tuple

import numpy as np

from harness.model import MeasureConfig
from kernels.runtime.device import cuda_context, cuda_driver

from .nvml import nvml_handle as _nvml_handle
from .nvml import pynvml as _nvml
from .nvml import telemetry as _gpu_snapshot
from .timers import DEFAULT_CACHE_BYTES, Timer

__all__ = ["FLUSHES", "SPIN_MAX_S", "SPIN_MIN_S", "CudaTimer", "hot_rotation_count", "l2_cache_bytes"]

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


