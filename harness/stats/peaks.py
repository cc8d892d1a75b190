"""Which measured peak a result is a percentage of (harness.measure.peaks measures them; the CLI and
the reports label them): pure arithmetic on a kernel's counts, no device.

* Bandwidth: a kernel that writes at most :data:`READ_MOSTLY_SHARE` of its bytes (a row sum writes
  one value per row it reads) is a percentage of the device's *read* peak; every other kernel, and
  one whose split of reads and writes is unknown, of its *copy* peak (as much read as written).
  A copy is slower than a read of the same bytes, so a row sum measured against the copy peak showed
  more than 100 %.
* FLOP/s: the matmul peak of the kernel's dtype (:func:`flops_peak_key`), worked out only for kernels
  of at least :data:`MIN_FLOP_INTENSITY` operations per byte (:func:`needs_flops_peak`).
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional, Tuple

__all__ = ["MIN_FLOP_INTENSITY", "PEAK_LABELS", "READ_MOSTLY_SHARE", "bandwidth_peak", "flops_peak_key",
           "needs_flops_peak", "pct_peak_text", "peak_bw_kind", "peak_share_text"]

#: a kernel writing at most this share of its bytes is compared with the read peak, else the copy peak
READ_MOSTLY_SHARE = 0.05

#: operations per byte from which a case's percentage of the FLOP peak is worked out (GPUs' ridge
#: points lie between about 5 and 60 flop/byte: below 1 a kernel cannot reach a fifth of the peak)
MIN_FLOP_INTENSITY = 1.0

#: the labels of the bandwidth peaks, as reports print them
PEAK_LABELS = {"read": "of read peak", "copy": "of copy peak"}


def bandwidth_peak(peaks: Optional[Dict[str, Any]], read_bytes: Optional[float] = None,
                   write_bytes: Optional[float] = None) -> Tuple[str, Optional[float]]:
    """The bandwidth peak matching a kernel's traffic: ``("read", read_gbps)`` when the kernel writes
    at most :data:`READ_MOSTLY_SHARE` of its bytes and the read peak was measured, else
    ``("copy", copy_gbps)`` (also when the split of the traffic is unknown: ``write_bytes`` None).
    The peak is None when not measured.

    >>> bandwidth_peak({"copy_gbps": 2600.0, "read_gbps": 3200.0}, 1024.0, 1.0)
    ('read', 3200.0)
    >>> bandwidth_peak({"copy_gbps": 2600.0, "read_gbps": 3200.0}, 1024.0, 1024.0)
    ('copy', 2600.0)
    """
    peaks = peaks or {}
    if write_bytes is not None and read_bytes is not None and peaks.get("read_gbps"):
        total = float(read_bytes) + float(write_bytes)
        if total > 0 and float(write_bytes) <= READ_MOSTLY_SHARE * total:
            return "read", float(peaks["read_gbps"])
    copy = peaks.get("copy_gbps")
    return "copy", (float(copy) if copy else None)


def needs_flops_peak(flops: Optional[float], nbytes: Optional[float]) -> bool:
    """Whether a case's percentage of the FLOP peak is worked out: it counts operations and does at
    least :data:`MIN_FLOP_INTENSITY` of them per byte (or moves no bytes)."""
    if not flops:
        return False
    return not nbytes or float(flops) / float(nbytes) >= MIN_FLOP_INTENSITY


def flops_peak_key(dtype: Optional[str]) -> Optional[str]:
    """The matmul peak a kernel of ``dtype`` is compared with: float16/bfloat16 -> fp16, float64 ->
    fp64, integer types (int8, int4, int1) -> None (the harness measures no integer matmul peak, and
    a float one would mislead), else fp32."""
    if dtype in ("float16", "bfloat16"):
        return "matmul_fp16_gflops"
    if dtype == "float64":
        return "matmul_fp64_gflops"
    if dtype is not None and dtype.startswith(("int", "uint")):
        return None
    return "matmul_fp32_gflops"


def peak_bw_kind(extra: Any) -> Optional[str]:
    """Which bandwidth peak a stored result's ``pct_peak_bw`` is of: "read" or "copy" from its
    ``extra`` (a dict, the pairs of Result.extra, or the JSON text the store keeps); "copy" for a
    result stored before the read peak existed (every percentage was of the copy peak then); None
    when there is nothing to read."""
    if extra is None or (isinstance(extra, float) and math.isnan(extra)):
        return None
    if isinstance(extra, (bytes, str)):
        try:
            extra = json.loads(extra) if extra else {}
        except ValueError:
            return None
    if isinstance(extra, (tuple, list)):
        try:
            extra = dict(extra)
        except (TypeError, ValueError):
            return None
    if not isinstance(extra, dict):
        return None
    note = extra.get("peaks")
    kind = note.get("bandwidth") if isinstance(note, dict) else None
    return kind if kind in PEAK_LABELS else "copy"


def peak_share_text(pct_bw: Optional[float], pct_flops: Optional[float], extra: Any) -> str:
    """A result's share of its nearest peak, for a table: ``"61.2 % of FLOP peak"`` where the kernel
    is nearer its FLOP peak than its bandwidth peak, else :func:`pct_peak_text`; "" with neither."""
    def known(x: Optional[float]) -> bool:
        return x is not None and not (isinstance(x, float) and math.isnan(x))

    if known(pct_flops) and (not known(pct_bw) or float(pct_flops) > float(pct_bw)):
        return f"{float(pct_flops):.3g} % of FLOP peak"
    return pct_peak_text(pct_bw, extra)


def pct_peak_text(pct: Optional[float], extra: Any) -> str:
    """``"93.1 % of read peak"`` (or copy peak) for a stored result's ``pct_peak_bw``; "" without it."""
    if pct is None or (isinstance(pct, float) and math.isnan(pct)):
        return ""
    return f"{float(pct):.3g} % {PEAK_LABELS[peak_bw_kind(extra) or 'copy']}"


