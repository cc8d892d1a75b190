"""NVML and the CUDA driver's device queries: GPU clocks and telemetry for the CUDA timer, and the GPU
facts of an environment's fingerprint (harness.env).

Both are optional: without nvidia-ml-py (module ``pynvml``), pycuda, a driver or a GPU every query
answers None, and timing goes on without clocks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["as_text", "clock_event_reason_names", "cuda_device", "guarded", "nvml_handle", "pynvml",
           "sm_clock_mhz", "telemetry"]

# NVML clock-event ("throttle") reason bits, as nvml.h defines them (stable ABI).
_CLOCK_EVENT_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def nvml_handle(index: int = 0) -> Any:
    """The NVML handle of CUDA ordinal ``index`` (mapped by PCI bus id when pycuda is present).

    Returns None when NVML is unavailable or the device cannot be found.
    """
    nvml = pynvml()
    if nvml is None:
        return None
    bus_id = _cuda_pci_bus_id(index)
    try:
        if bus_id is not None:
            return nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        return nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


def sm_clock_mhz(handle: Any) -> float | None:
    """The current SM clock of the NVML device ``handle`` in MHz, or None when unknown."""
    nvml = pynvml()
    if nvml is None or handle is None:
        return None
    return guarded(lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)))


def telemetry(handle: Any) -> dict[str, Any]:
    """A snapshot of the GPU's state, taken before and after timing a case.

    Parameters
    ----------
    handle
        An NVML device handle (:func:`nvml_handle`), or None.

    Returns
    -------
    dict
        ``temperature_c``, ``power_w``, ``sm_clock_mhz``, ``mem_clock_mhz`` and
        ``clock_event_reasons`` (a list of names such as "sw_power_cap", "hw_thermal_slowdown";
        ``[]`` when the clocks run unrestricted). Values NVML cannot give are None; with no
        handle every value is None.
    """
    snap: dict[str, Any] = {
        "temperature_c": None, "power_w": None, "sm_clock_mhz": None, "mem_clock_mhz": None,
        "clock_event_reasons": None,
    }
    nvml = pynvml()
    if nvml is None or handle is None:
        return snap
    snap["temperature_c"] = guarded(
        lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)))
    snap["power_w"] = guarded(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)  # mW -> W
    snap["sm_clock_mhz"] = guarded(lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)))
    snap["mem_clock_mhz"] = guarded(
        lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)))
    # nvidia-ml-py >= 12.535 calls them "clocks event reasons"; older ones "throttle reasons"
    getter = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
              or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    if getter is not None:
        bits = guarded(lambda: int(getter(handle)))
        if bits is not None:
            snap["clock_event_reasons"] = clock_event_reason_names(bits)
    return snap


def clock_event_reason_names(bits: int) -> list[str]:
    """The names of the NVML clock-event reason ``bits`` (unknown bits as "unknown_0x...")."""
    names = [name for bit, name in _CLOCK_EVENT_REASONS if bits & bit]
    known = 0
    for bit, _ in _CLOCK_EVENT_REASONS:
        known |= bit
    rest = bits & ~known
    if rest:
        names.append(f"unknown_{rest:#x}")
    return names


_nvml_lock = threading.Lock()
_nvml_state: dict[str, Any] = {}  # "module": the initialised pynvml module, or None if unusable


def pynvml() -> Any:
    """The pynvml module, initialised once per process; None without nvidia-ml-py or a driver."""
    with _nvml_lock:
        if "module" not in _nvml_state:
            module = None
            try:
                import pynvml as module

                module.nvmlInit()
            except Exception:
                module = None
            _nvml_state["module"] = module
        return _nvml_state["module"]


def cuda_device(index: int) -> Any:
    """The pycuda Device of CUDA ordinal ``index``, or None without pycuda or a usable driver."""
    try:
        import pycuda.driver as drv
    except Exception:
        return None
    try:
        drv.init()
        return drv.Device(index)
    except Exception:
        return None


def _cuda_pci_bus_id(index: int) -> str | None:
    dev = cuda_device(index)
    return None if dev is None else guarded(dev.pci_bus_id)


def as_text(value: Any) -> str:
    """NVML strings: bytes in old nvidia-ml-py releases, str in new ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


def guarded(fn: Callable[[], Any]) -> Any:
    """``fn()``, or None when the driver cannot answer (unsupported query, lost device...)."""
    try:
        return fn()
    except Exception:
        return None
