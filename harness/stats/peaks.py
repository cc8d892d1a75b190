"""Which measured peak a result is a percentage of (harness.measure.peaks measures them; the CLI and
the reports label them): pure arithmetic on a kernel's counts, no device.

* Bandwidth: a kernel that writes at most :data:`READ_MOSTLY_SHARE` of its bytes (a row sum writes
  one value per row it reads) is a percentage of the device's *read* peak; every other kernel, and
  one whose split of reads and writes is unknown, of its *copy* peak (as much read as written).
  A copy is slower than a read of the same bytes, so a row sum measured against the copy peak showed
  more than 100 %.
* FLOP/s: the matmul peak of the kernel's dtype class (:func:`flops_peak_key`: fp16, fp32, fp64, or
  int8 tensor cores, measured with ``torch._int_mm``; TF32 tensor cores for float32 kernels that use
  them, a workload's ``peak_dtype``), worked out only for kernels of at least
  :data:`MIN_FLOP_INTENSITY` operations per byte (:func:`needs_flops_peak`). Such a compute-bound
  kernel is a percentage of its class's peak or of nothing: where that peak is unknown (int4 and
  int1 tensor cores, a GPU without torch) it gets no bandwidth percentage either, since a matmul's
  share of the copy peak says nothing about how good it is.

Rates are printed for people by :func:`rate_text`: ``362534.72`` GFLOP/s reads ``362.5 TFLOP/s``,
``2450.3`` GB/s ``2.5 TB/s``; integer kernels count operations (``OP/s``).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

__all__ = ["FLOP_PEAK_LABELS", "MIN_FLOP_INTENSITY", "PEAK_LABELS", "READ_MOSTLY_SHARE", "bandwidth_peak",
           "flops_peak_key", "needs_flops_peak", "ops_unit", "pct_peak_text", "peak_bw_kind",
           "peak_flops_kind", "peak_share_text", "rate_text"]

#: a kernel writing at most this share of its bytes is compared with the read peak, else the copy peak
READ_MOSTLY_SHARE = 0.05

#: operations per byte from which a case's percentage of the FLOP peak is worked out (GPUs' ridge
#: points lie between about 5 and 60 flop/byte: below 1 a kernel cannot reach a fifth of the peak)
MIN_FLOP_INTENSITY = 1.0

#: the labels of the bandwidth peaks, as reports print them
PEAK_LABELS = {"read": "of read peak", "copy": "of copy peak"}

#: the labels of the matmul peaks (the keys of the measured peaks), as tables print them
FLOP_PEAK_LABELS = {"matmul_int8_gops": "of int8 matmul peak", "matmul_tf32_gflops": "of TF32 matmul peak"}


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
    """The matmul peak a kernel of ``dtype`` is compared with, by dtype class: float16/bfloat16 ->
    fp16, float64 -> fp64, int8/uint8 -> the int8 tensor-core peak (``matmul_int8_gops``), ``"tf32"``
    (float32 on the TF32 tensor cores: a workload's ``peak_dtype``) -> ``matmul_tf32_gflops``, other
    integer types (int4, int1, int32, ...) -> None (no integer peak of theirs is measured, and a
    float one would mislead), else fp32."""
    if dtype in ("float16", "bfloat16"):
        return "matmul_fp16_gflops"
    if dtype == "float64":
        return "matmul_fp64_gflops"
    if dtype in ("int8", "uint8"):
        return "matmul_int8_gops"
    if dtype == "tf32":
        return "matmul_tf32_gflops"
    if dtype is not None and dtype.startswith(("int", "uint")):
        return None
    return "matmul_fp32_gflops"


def ops_unit(dtype: Optional[str]) -> str:
    """``"OP/s"`` for integer kernels (they count operations, not floating-point ones), else
    ``"FLOP/s"``."""
    return "OP/s" if dtype is not None and str(dtype).startswith(("int", "uint")) else "FLOP/s"


# SI prefixes of a rate given in giga-units (GB/s, GFLOP/s), largest first
_PREFIXES = ((1e6, "P"), (1e3, "T"), (1.0, "G"), (1e-3, "M"), (1e-6, "k"))


def rate_text(giga: Optional[float], unit: str = "B/s") -> str:
    """A rate given in giga-units (``gbps``, ``gflops``) for people: scaled to the prefix that puts it
    in [1, 1000), one decimal; "" when unknown.

    >>> rate_text(362534.72, "FLOP/s")
    '362.5 TFLOP/s'
    >>> rate_text(2450.3), rate_text(45.25), rate_text(0.5)
    ('2.5 TB/s', '45.2 GB/s', '500.0 MB/s')
    """
    if giga is None or not isinstance(giga, (int, float)) or not math.isfinite(giga):
        return ""
    value = float(giga)
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value * 1e9:.1f} {unit}"


def peak_bw_kind(kind: Any) -> str:
    """Which bandwidth peak a stored result's ``pct_peak_bw`` is of, from its ``peak_bw_kind`` column
    (``Result.peaks.bandwidth``): "read" or "copy"; "copy" where it says nothing (NULL, or NaN in a
    frame: a result stored before the read peak existed, when every percentage was of the copy peak).

    >>> peak_bw_kind("read"), peak_bw_kind(None)
    ('read', 'copy')
    """
    return kind if isinstance(kind, str) and kind in PEAK_LABELS else "copy"


def peak_flops_kind(kind: Any) -> Optional[str]:
    """Which matmul peak a stored result's ``pct_peak_flops`` is of (``matmul_fp32_gflops``,
    ``matmul_int8_gops``, ...), from its ``peak_flops_kind`` column (``Result.peaks.flops``); None
    when it does not say (NULL, or NaN in a frame)."""
    return kind if isinstance(kind, str) and kind else None


def _known(x: Optional[float]) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def peak_share_text(pct_bw: Optional[float], pct_flops: Optional[float], bw_kind: Any = None,
                    flops_kind: Any = None) -> str:
    """A result's share of its nearest peak, for a table: ``"61.2 % of FLOP peak"`` (``"of int8 matmul
    peak"`` for an int8 kernel, ``flops_kind`` ``matmul_int8_gops``) where the kernel is nearer its
    FLOP peak than its bandwidth peak, else :func:`pct_peak_text` of ``bw_kind``; "" with neither.
    ``bw_kind`` and ``flops_kind`` are the result's ``peak_bw_kind`` and ``peak_flops_kind``."""
    if _known(pct_flops) and (not _known(pct_bw) or float(pct_flops) > float(pct_bw)):
        label = FLOP_PEAK_LABELS.get(peak_flops_kind(flops_kind) or "", "of FLOP peak")
        return f"{float(pct_flops):.3g} % {label}"
    return pct_peak_text(pct_bw, bw_kind)


def pct_peak_text(pct: Optional[float], bw_kind: Any = None) -> str:
    """``"93.1 % of read peak"`` (or copy peak: :func:`peak_bw_kind` of ``bw_kind``, the result's
    ``peak_bw_kind``) for a stored result's ``pct_peak_bw``; "" without it."""
    if not _known(pct):
        return ""
    return f"{float(pct):.3g} % {PEAK_LABELS[peak_bw_kind(bw_kind)]}"
