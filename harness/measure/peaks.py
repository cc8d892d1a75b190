"""Derived rates of a timing (GB/s, GFLOP/s, percent of peak) and the device peaks they refer to,
measured by the harness on the device itself (copy bandwidth, read bandwidth, dense matmul) and kept
per device.

Which bandwidth peak a kernel is a percentage of depends on its traffic (:func:`bandwidth_peak`): a
kernel that only reads (writes at most :data:`READ_MOSTLY_SHARE` of its bytes, e.g. a row sum) is
compared with the *read* peak, every other one with the *copy* peak (as much read as written). A
row sum is not bounded by the copy peak (a copy's writes are slower than reads), so against it a good
row sum showed more than 100 %.

The bandwidth peaks take a fraction of a second to measure; the matmul peak needs torch (seconds
to import and start) and is measured only when a case asks for it: cases of at least
:data:`MIN_FLOP_INTENSITY` operations per byte (below that a kernel is memory-bound on every GPU and
its percentage of the FLOP peak says nothing). :func:`device_peaks` keeps what was measured in a small
file per device fingerprint under the build cache folder.

A peak is the best the device did: each one is the *fastest* of its timed repetitions, after a
warm-up of at least :data:`WARMUP_S` seconds (the clocks ramp up, the library picks its kernels), so
a repetition slowed by anything else only costs accuracy, never inflates a percentage. A peak measured
while other processes had the GPU open (NVML's compute processes) can be low: it is used by this
process only and not written to the file (``shared_with`` says how many others there were). A file
written by an older way of measuring (``peaks_version``) is measured again; and a case faster than
its peak by more than :data:`BEATEN_BY` has the peak measured again, once a process
(:func:`recheck_peak`): a low peak in the file (a busy GPU, a throttled clock) would otherwise
print every percentage too high, some above 100 %.

Size: the read-peak kernel's PTX (about 60 lines) and the host's C read loop are the measurements
themselves, and the rules of when a peak is trusted, kept, or measured again belong with them."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np

from harness.model import Timing
from harness.stats.peaks import (
    MIN_FLOP_INTENSITY,
    PEAK_LABELS,
    READ_MOSTLY_SHARE,
    bandwidth_peak,
    flops_peak_key,
    needs_flops_peak,
)
from kernels.runtime.device import cuda_context, cuda_driver
from kernels.runtime.config import get_config

from .nvml import nvml_handle as _nvml_handle
from .nvml import pynvml as _nvml

__all__ = ["BEATEN_BY", "MIN_FLOP_INTENSITY", "PEAKS_VERSION", "PEAK_LABELS", "READ_MOSTLY_SHARE", "WARMUP_S",
           "bandwidth_peak", "derived", "device_peaks", "flops_peak_key", "measure_peaks_cpu",
           "measure_peaks_cuda", "needs_flops_peak", "recheck_peak", "torch_tf32"]

#: how peaks are measured (fastest repetition after a timed warm-up); a file of another version is
#: measured again (version 1, before 2026-11-28: the median of a few repetitions after two warm-ups,
#: and written even when other processes shared the GPU: H200 fp32 read 36 TFLOP/s instead of 51)
PEAKS_VERSION = 2

#: seconds of untimed repetitions before a peak is timed (at least two repetitions)
WARMUP_S = 0.2

#: a case faster than its peak by more than this share has the peak measured again (recheck_peak)
BEATEN_BY = 0.05


def derived(
    timing: Timing,
    flops: Optional[float],
    nbytes: Optional[float],
    peaks: Optional[Dict[str, Any]],
    dtype: Optional[str] = None,
    traffic: Optional[Tuple[float, Optional[float]]] = None,
) -> Dict[str, Any]:
    """Rates from the median time, and percentages of the device's measured peaks.

    Parameters
    ----------
    timing : Timing
    flops : float or None
        Operations of one launch (the workload's count).
    nbytes : float or None
        Bytes moved by one launch (the workload's count).
    peaks : dict or None
        From :func:`measure_peaks_cuda` / :func:`measure_peaks_cpu`: ``copy_gbps``, ``read_gbps`` and
        ``matmul_fp32_gflops`` / ``matmul_fp16_gflops`` (``fp64`` if present).
    dtype : str, optional
        Picks the matmul peak of its class: float16/bfloat16 -> fp16, float64 -> fp64, int8/uint8 ->
        int8 (``matmul_int8_gops``), other integer types -> none, else fp32. A kernel of at least
        :data:`MIN_FLOP_INTENSITY` operations per byte whose class peak is unknown gets no
        percentage at all (``pct_peak_bw`` None too).
    traffic : (float, float or None), optional
        ``(read bytes, written bytes)`` of one launch (kernels.workloads.Workload.traffic): picks the
        bandwidth peak (:func:`bandwidth_peak`); without it, the copy peak.

    Returns
    -------
    dict
        ``gbps`` (1e9 bytes/s), ``gflops`` (1e9 ops/s), ``pct_peak_bw`` and ``pct_peak_flops``
        (percent, 0-100+); None where a count, a peak or a positive median is missing; ``peak_bw``
        ("read" or "copy": which bandwidth peak ``pct_peak_bw`` is of).
    """
    out: Dict[str, Any] = {"gbps": None, "gflops": None, "pct_peak_bw": None, "pct_peak_flops": None}
    read, written = traffic if traffic is not None else (None, None)
    kind, bw = bandwidth_peak(peaks, read, written)
    out["peak_bw"] = kind
    med = timing.median
    if not (isinstance(med, (int, float)) and med > 0 and math.isfinite(med)):
        return out
    if nbytes:
        out["gbps"] = float(nbytes) / med / 1e9
    if flops:
        out["gflops"] = float(flops) / med / 1e9
    peaks = peaks or {}
    key = flops_peak_key(dtype)
    fp = peaks.get(key) if key is not None else None
    # a compute-bound kernel is a share of its dtype class's matmul peak or of nothing: its share of a
    # bandwidth peak would read as a (poor) grade it does not deserve (harness.stats.peaks)
    compute_bound = needs_flops_peak(flops, nbytes)
    if out["gbps"] is not None and bw and (fp or not compute_bound):
        out["pct_peak_bw"] = 100.0 * out["gbps"] / bw
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
    dev = cuda_driver().Device(device_index)
    return f"{dev.pci_bus_id()}/{dev.name()}"


# kbench_read_peak(src, nvec, sink): every thread of the grid reads 4 16-byte vectors an iteration,
# `total threads` vectors apart (coalesced, 4 loads in flight per thread, nvec a multiple of 4 x the
# threads), folds them with xor and stores the result only if it equals a value it never has (the
# buffer is zeros): a read-only kernel whose loads stay alive. Timed over a buffer many times the L2,
# it gives the read bandwidth a kernel like a row sum can reach.
_READ_PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry kbench_read_peak(.param .u64 src, .param .u64 nvec, .param .u64 sink)
{
    .reg .pred %p<3>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<16>;
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
    shl.b64 %rd9, %rd6, 4;
    shl.b64 %rd10, %rd6, 2;
    mov.u32 %r5, 0;
$L_loop:
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra $L_done;
    shl.b64 %rd7, %rd4, 4;
    add.u64 %rd8, %rd1, %rd7;
    add.u64 %rd11, %rd8, %rd9;
    add.u64 %rd12, %rd11, %rd9;
    add.u64 %rd13, %rd12, %rd9;
    ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];
    ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%rd11];
    ld.global.v4.u32 {%r14, %r15, %r16, %r17}, [%rd12];
    ld.global.v4.u32 {%r18, %r19, %r20, %r21}, [%rd13];
    xor.b32 %r6, %r6, %r7;
    xor.b32 %r8, %r8, %r9;
    xor.b32 %r10, %r10, %r11;
    xor.b32 %r12, %r12, %r13;
    xor.b32 %r14, %r14, %r15;
    xor.b32 %r16, %r16, %r17;
    xor.b32 %r18, %r18, %r19;
    xor.b32 %r20, %r20, %r21;
    xor.b32 %r6, %r6, %r8;
    xor.b32 %r10, %r10, %r12;
    xor.b32 %r14, %r14, %r16;
    xor.b32 %r18, %r18, %r20;
    xor.b32 %r6, %r6, %r10;
    xor.b32 %r14, %r14, %r18;
    xor.b32 %r5, %r5, %r6;
    xor.b32 %r5, %r5, %r14;
    add.u64 %rd4, %rd4, %rd10;
    bra $L_loop;
$L_done:
    setp.ne.u32 %p2, %r5, 0x9E3779B9;
    @%p2 bra $L_end;
    st.global.u32 [%rd3], %r5;
$L_end:
    ret;
}
\0"""

#: threads a block of the read-peak kernel, and blocks per SM (a full H100 SM: 2048 threads)
_READ_THREADS = 256
_READ_BLOCKS_PER_SM = 8


def _fastest(run_timed, count: int, warmup_s: float = WARMUP_S) -> float:
    """The fewest seconds of ``count`` calls of ``run_timed()`` (each returns the seconds of one
    repetition), after untimed ones (the same calls) for at least ``warmup_s`` and at least two."""
    t0, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - t0 < warmup_s:
        run_timed()
        n += 1
    return min(run_timed() for _ in range(count))


def _event_fastest(drv, enqueue, count: int = 10) -> float:
    """The fewest seconds of ``enqueue()`` between two CUDA events, ``count`` times after a warm-up
    (:func:`_fastest`)."""
    start, end = drv.Event(), drv.Event()

    def once() -> float:
        start.record()
        enqueue()
        end.record()
        end.synchronize()
        return start.time_till(end) * 1e-3

    return _fastest(once, count)


def _others_on(device_index: int) -> int:
    """How many other processes have the GPU open for compute (NVML's compute processes, less this
    one: call it while this process holds a context with memory on the device); 0 when NVML cannot
    say."""
    handle = _nvml_handle(device_index)
    nv = _nvml()
    if handle is None or nv is None:
        return 0
    try:
        return max(0, len(nv.nvmlDeviceGetComputeRunningProcesses(handle)) - 1)
    except Exception:
        return 0


def _cuda_bandwidth_peaks(device_index: int) -> Dict[str, Any]:
    """Copy and read bandwidth of ``cuda(device_index)`` (see :func:`measure_peaks_cuda`)."""
    drv = cuda_driver()
    dev = drv.Device(device_index)
    sms = int(dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT))
    with cuda_context(device_index):
        free, _total = drv.mem_get_info()
        nbytes = min(1 << 30, (free // 4) & ~((1 << 20) - 1))
        a = drv.mem_alloc(nbytes)
        b = drv.mem_alloc(nbytes)
        others = _others_on(device_index)
        try:
            drv.memset_d8(a, 0, nbytes)
            copy_s = _event_fastest(drv, lambda: drv.memcpy_dtod_async(b, a, nbytes))
            read_gbps = read_bytes = None
            module = fn = None
            try:
                module = drv.module_from_buffer(_READ_PTX)
                fn = module.get_function("kbench_read_peak")
                fn.prepare("PQP")
                grid = (_READ_BLOCKS_PER_SM * sms, 1, 1)
                step = 4 * grid[0] * _READ_THREADS  # vectors of one iteration of the whole grid
                nvec = (nbytes // 16) // step * step
                read_s = _event_fastest(drv, lambda f=fn: f.prepared_call(grid, (_READ_THREADS, 1, 1), a,
                                                                         np.uint64(nvec), b))
                read_bytes = 16 * nvec
                read_gbps = read_bytes / read_s / 1e9
            except drv.Error:  # a driver refusing the PTX: no read peak (the copy peak serves)
                pass
            del fn, module  # unloaded here, in the context it was loaded into
        finally:
            a.free()
            b.free()
    return {
        "device": str(dev.name()),
        "copy_gbps": 2.0 * nbytes / copy_s / 1e9,
        "copy_bytes": 2 * nbytes,
        "read_gbps": read_gbps,
        "read_bytes": read_bytes,
        "l2_bytes": int(dev.get_attribute(drv.device_attribute.L2_CACHE_SIZE)),
        "shared_with": max(others, _others_on(device_index)),
    }


def measure_peaks_cuda(device_index: int = 0, refresh: bool = False, matmul: bool = True) -> Dict[str, Any]:
    """Measure the device's bandwidth and dense-matmul peaks (cached per device UUID).

    * ``copy_gbps``: device-to-device ``cuMemcpyDtoD`` of a large buffer (1 GiB, or a quarter of
      the free memory when less), bytes read + written over the fastest of 10 timed copies (CUDA
      events, after :data:`WARMUP_S` of untimed ones).
    * ``read_gbps``: the harness's read-only kernel (``kbench_read_peak``, PTX: coalesced 16-byte
      loads folded with xor, 8 blocks of 256 threads per SM) over the same buffer, bytes read over
      the fastest of 10 timed launches after a warm-up; None where the driver refuses the PTX.
    * ``matmul_fp32_gflops`` / ``matmul_fp16_gflops`` (only with ``matmul``): ``torch.matmul`` on
      8192 x 8192 matrices (2 n^3 operations), fastest of 5 after a warm-up, with torch's events;
      None without torch. fp32 runs with torch's default TF32 setting, recorded as
      ``matmul_fp32_tf32``; ``matmul_tf32_gflops`` is float32 with TF32 allowed (the peak of
      float32 kernels on the TF32 tensor cores).
    * ``matmul_int8_gops`` (only with ``matmul``): ``torch._int_mm`` (int8 x int8 -> int32 on the
      tensor cores) on 8192 x 8192 matrices, timed alike; None where torch lacks it or the GPU
      refuses it. int4 and int1 tensor cores have no peak of their own (torch has no such matmul).
    * ``shared_with``: how many other processes had the GPU open for compute (NVML) before or after
      a measurement, when any did (its peaks may be low: :func:`device_peaks` keeps them out of the
      file); absent when none did or NVML cannot say.

    Returns
    -------
    dict
        ``device``, ``uuid``, ``peaks_version``, ``copy_gbps``, ``copy_bytes``, ``read_gbps``,
        ``read_bytes``, ``l2_bytes``; with ``matmul`` also ``matmul_fp32_gflops``,
        ``matmul_fp16_gflops``, ``matmul_int8_gops``, ``matmul_tf32_gflops``, ``matmul_fp32_tf32``,
        ``matmul_source``.
    """
    key = _cuda_device_key(device_index)
    with _peaks_lock:
        known = {} if refresh else dict(_PEAKS.get(key, {}))
    if "copy_gbps" not in known:
        known.update(_cuda_bandwidth_peaks(device_index), uuid=key, peaks_version=PEAKS_VERSION)
    if matmul and _lacks_matmul_peaks(known):
        shared = known.get("shared_with")
        known.update({"matmul_fp32_gflops": None, "matmul_fp16_gflops": None, "matmul_fp32_tf32": None,
                      _INT8_KEY: None, _TF32_KEY: None, "matmul_source": None})
        known.update(_torch_matmul_peaks(device_index))
        known["shared_with"] = max(int(shared or 0), int(known.get("shared_with") or 0))
    if not known.get("shared_with"):
        known.pop("shared_with", None)
    with _peaks_lock:
        _PEAKS[key] = dict(known)
    return known


#: the int8 tensor-core peak's key (operations per second / 1e9; harness.stats.peaks.flops_peak_key)
_INT8_KEY = "matmul_int8_gops"
#: the TF32 tensor-core peak's key (float32 torch.matmul with TF32 allowed, whatever torch's default)
_TF32_KEY = "matmul_tf32_gflops"


def _lacks_matmul_peaks(peaks: Dict[str, Any]) -> bool:
    """Whether ``peaks`` miss a matmul peak (measured by a version of kbench that had fewer of them,
    or not measured yet): then all of them are measured."""
    return any(k not in peaks for k in (_MATMUL_KEY, _INT8_KEY, _TF32_KEY))


@contextlib.contextmanager
def torch_tf32(torch: Any, allowed: Optional[bool]) -> Iterator[None]:
    """``torch.matmul`` of float32 on the TF32 tensor cores (``allowed``) or not, for the ``with``
    block, restoring torch's setting after it; None leaves the setting as it is."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = prev if allowed is None else allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def _torch_fastest_s(torch: Any, fn: Any, reps: int = 5) -> float:
    """The fewest seconds of ``fn()`` between two torch CUDA events, ``reps`` times after a warm-up
    (:func:`_fastest`)."""
    def once() -> float:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e-3

    return _fastest(once, reps)


def _torch_int8_peak(torch: Any, n: int) -> Optional[float]:
    """int8 x int8 -> int32 matmul operations per second / 1e9 with ``torch._int_mm``; None without it."""
    int_mm = getattr(torch, "_int_mm", None)
    if int_mm is None:
        return None
    try:
        a = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        seconds = _torch_fastest_s(torch, lambda: int_mm(a, b))
        a = b = None  # the operands are freed before the next measurement
    except RuntimeError:  # an architecture or build of torch without int8 matmul
        return None
    return 2.0 * n ** 3 / seconds / 1e9


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
    others = 0
    with torch.cuda.device(device_index):
        for dtype, name, tf32 in ((torch.float32, "matmul_fp32_gflops", None),
                                  (torch.float16, "matmul_fp16_gflops", None), (torch.float32, _TF32_KEY, True)):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            others = max(others, _others_on(device_index))
            with torch_tf32(torch, tf32):
                out[name] = flop / _torch_fastest_s(torch, lambda: torch.matmul(a, b, out=c)) / 1e9
            a = b = c = None  # freed before the next dtype's operands
        out[_INT8_KEY] = _torch_int8_peak(torch, n)
        others = max(others, _others_on(device_index))
        torch.cuda.empty_cache()
    out["shared_with"] = others
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


# kbench_read_peak(p, n): n 64-bit words folded with xor into four accumulators (the compiler
# vectorises it): a read-only loop at the host's read bandwidth, compiled like a C-target kernel.
_READ_C = """#include <stddef.h>
#include <stdint.h>
uint64_t kbench_read_peak(const uint64_t* p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) { a0 ^= p[i]; a1 ^= p[i + 1]; a2 ^= p[i + 2]; a3 ^= p[i + 3]; }
    for (; i < n; ++i) a0 ^= p[i];
    return a0 ^ a1 ^ a2 ^ a3;
}
"""


def _cpu_read_function():
    """A function reading every word of a uint64 array once: :data:`_READ_C` through the C
    compiler (cached like C-target builds), else numpy's xor reduction (a little slower)."""
    try:
        import ctypes

        # the C backend when the host's peaks are measured (GPU workers never load it)
        from kernels.runtime.c import compile_c

        fn = ctypes.CDLL(str(compile_c(_READ_C))).kbench_read_peak
        fn.restype = ctypes.c_uint64
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        return lambda words: fn(words.ctypes.data, words.size)
    except Exception:  # no C compiler: numpy
        return np.bitwise_xor.reduce


def measure_peaks_cpu(nbytes: int = 256 << 20, refresh: bool = False) -> Dict[str, Any]:
    """Host copy bandwidth (``np.copyto`` of ``nbytes``, read + write bytes), host read bandwidth
    (a C loop reading the same ``nbytes`` as 64-bit words, ``kbench_read_peak``) and numpy matmul
    GFLOP/s (1024 x 1024, float32 and float64); each the fastest of 5 after a warm-up
    (:data:`WARMUP_S`).
    One thread each, like the numpy calls; cached in-process.

    Returns
    -------
    dict
        ``device``, ``copy_gbps``, ``copy_bytes``, ``read_gbps``, ``read_bytes``,
        ``matmul_fp32_gflops``, ``matmul_fp64_gflops``, ``matmul_source``.
    """
    key = f"cpu:{nbytes}"
    with _peaks_lock:
        if not refresh and key in _PEAKS:
            return dict(_PEAKS[key])
    def seconds(fn: Any) -> Any:
        def once() -> float:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        return once

    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros(nbytes, dtype=np.uint8)
    copy_s = _fastest(seconds(lambda: np.copyto(dst, src)), 5)
    dst = None
    read = _cpu_read_function()
    words = src.view(np.uint64)
    read_s = _fastest(seconds(lambda: read(words)), 5)
    src = words = None
    result: Dict[str, Any] = {
        "device": _cpu_name(),
        "peaks_version": PEAKS_VERSION,
        "copy_gbps": 2.0 * nbytes / copy_s / 1e9,
        "copy_bytes": 2 * nbytes,
        "read_gbps": nbytes / read_s / 1e9,
        "read_bytes": nbytes,
        "matmul_source": f"numpy {np.__version__}",
        "threads": os.cpu_count(),
    }
    n = 1024
    rng = np.random.default_rng(0)
    for dtype, name in ((np.float32, "matmul_fp32_gflops"), (np.float64, "matmul_fp64_gflops")):
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        c = np.empty((n, n), dtype)
        result[name] = 2.0 * n ** 3 / _fastest(seconds(lambda: np.matmul(a, b, out=c)), 5) / 1e9
    with _peaks_lock:
        _PEAKS[key] = dict(result)
    return result



_DEVICE_PEAKS: Dict[str, Dict[str, Any]] = {}

#: what a peaks file holds: the bandwidth peaks, and (once a case needed them) the matmul peaks
_MATMUL_KEY = "matmul_source"


def _peaks_path(env_id: str) -> Path:
    return get_config().cache_dir / "peaks" / f"{env_id}.json"


def _save_peaks(path: Path, peaks: Dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(peaks, default=str))
        os.replace(tmp, path)
    except OSError:
        pass


def _keep(path: Path, peaks: Dict[str, Any]) -> None:
    """Write ``peaks`` to the device's file unless they were measured on a shared GPU."""
    if not peaks.get("shared_with"):
        _save_peaks(path, peaks)


def device_peaks(target: str, env_id: str, flops: bool = True) -> Dict[str, Any]:
    """The measured peaks of this process's device for ``target`` ("cuda": :func:`measure_peaks_cuda`
    of device 0, else :func:`measure_peaks_cpu`); ``{}`` when they cannot be measured.

    The bandwidth peaks are measured on the first call; the matmul peaks only when ``flops`` asks
    for them (for CUDA they need torch: seconds). What was measured is kept in a file per
    environment fingerprint ``env_id`` (GPU UUID, driver version, max clocks ...: harness.env) under
    the build cache folder, and every later process on the same device reuses it; a file of another
    :data:`PEAKS_VERSION` is measured again, and peaks measured while other processes shared the GPU
    are not written (this process uses them).

    Returns
    -------
    dict
        The peaks; the matmul keys are absent until a call with ``flops`` measured them (and None
        there when they could not be measured: no torch).
    """
    peaks = _DEVICE_PEAKS.get(target)
    path = _peaks_path(env_id)
    if peaks is None:
        try:
            peaks = json.loads(path.read_text())
        except (OSError, ValueError):
            peaks = None
        if peaks is not None and (not isinstance(peaks, dict) or peaks.get("peaks_version") != PEAKS_VERSION
                                  or "read_gbps" not in peaks):
            peaks = None  # measured another way (or unreadable): measured again
    if peaks is None:
        try:
            peaks = measure_peaks_cuda(0, matmul=flops) if target == "cuda" else measure_peaks_cpu()
        except Exception:
            peaks = {}
        if peaks:
            _keep(path, peaks)
    elif flops and _lacks_matmul_peaks(peaks) and target == "cuda":
        try:
            peaks = {**peaks, **measure_peaks_cuda(0, matmul=True)}
        except Exception:
            peaks = {**peaks, _MATMUL_KEY: None}
        _keep(path, peaks)
    _DEVICE_PEAKS[target] = peaks
    return peaks


_RECHECKED: Dict[Tuple[str, str], bool] = {}


def recheck_peak(target: str, env_id: str, key: str, rate: Optional[float]) -> Dict[str, Any]:
    """The device's peaks after a case measured ``rate`` (GB/s or GFLOP/s) against the peak ``key``
    (``read_gbps``, ``matmul_fp32_gflops``, ...): where the rate beats the peak by more than
    :data:`BEATEN_BY`, the peaks are measured again (once a process and key) and the fresh ones
    replace those known (and the file's, unless the GPU was shared). A rate that still beats the
    fresh peak is a kernel faster than the library the peak comes from, and its percentage says so.

    Returns
    -------
    dict
        The peaks to work the case's percentages out with (those of :func:`device_peaks` when
        nothing was measured again).
    """
    peaks = _DEVICE_PEAKS.get(target) or device_peaks(target, env_id, flops=key.startswith("matmul_"))
    peak = peaks.get(key)
    if not (rate and peak) or rate <= (1.0 + BEATEN_BY) * float(peak) or _RECHECKED.get((target, key)):
        return peaks
    _RECHECKED[(target, key)] = True
    try:
        if target == "cuda":
            fresh = measure_peaks_cuda(0, refresh=True, matmul=_MATMUL_KEY in peaks)
        else:
            fresh = measure_peaks_cpu(refresh=True)
    except Exception:
        return peaks
    peaks = {**{k: v for k, v in peaks.items() if k != "shared_with"}, **fresh}
    _DEVICE_PEAKS[target] = peaks
    _keep(_peaks_path(env_id), peaks)
    return peaks
