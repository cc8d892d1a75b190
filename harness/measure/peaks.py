"""Derived rates of a timing (GB/s, GFLOP/s, percent of peak) and the device peaks they refer to,
measured by the harness on the device itself (copy bandwidth, dense matmul) and kept per device."""

from __future__ import annotations

import json
import math
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from harness.model import Timing
from kernels.runtime.device import cuda_context, cuda_driver
from kernels.runtime.config import get_config

from .nvml import nvml_handle as _nvml_handle
from .nvml import pynvml as _nvml

__all__ = ["derived", "device_peaks", "measure_peaks_cpu", "measure_peaks_cuda"]

def _flops_peak_key(dtype: Optional[str]) -> Optional[str]:
    """The measured matmul peak a case's FLOP/s is a percentage of; None for integer element types
    (int8, int4, int1: the harness measures no integer matmul peak, and a float one would mislead)."""
    if dtype in ("float16", "bfloat16"):
        return "matmul_fp16_gflops"
    if dtype == "float64":
        return "matmul_fp64_gflops"
    if dtype is not None and dtype.startswith(("int", "uint")):
        return None
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
        Picks the matmul peak: float16/bfloat16 -> fp16, float64 -> fp64, integer types -> none
        (``pct_peak_flops`` stays None), else fp32.

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
    key = _flops_peak_key(dtype)
    fp = peaks.get(key) if key is not None else None
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



_DEVICE_PEAKS: Dict[str, Dict[str, Any]] = {}


def device_peaks(target: str, env_id: str) -> Dict[str, Any]:
    """The measured peaks of this process's device for ``target`` ("cuda": :func:`measure_peaks_cuda`
    of device 0, else :func:`measure_peaks_cpu`); ``{}`` when they cannot be measured.

    They take seconds to measure, so they are kept on disk per environment fingerprint ``env_id``
    (GPU UUID, driver, clocks ...: harness.env) under the compiler's cache folder, and every later
    process on the same device reuses them; a process asks once per target.
    """
    if target in _DEVICE_PEAKS:
        return _DEVICE_PEAKS[target]
    path = get_config().cache_dir / "peaks" / f"{env_id}.json"
    try:
        _DEVICE_PEAKS[target] = json.loads(path.read_text())
        return _DEVICE_PEAKS[target]
    except (OSError, ValueError):
        pass
    try:
        peaks = measure_peaks_cuda(0) if target == "cuda" else measure_peaks_cpu()
    except Exception:
        peaks = {}
    _DEVICE_PEAKS[target] = peaks
    if peaks:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(peaks, default=str))
            os.replace(tmp, path)
        except OSError:
            pass
    return peaks
