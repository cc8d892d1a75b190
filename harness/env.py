"""Device, host and software fingerprint of the machine that measured a result, and the commit of the
code under test.

A fingerprint is a flat ``dict`` (JSON-friendly: str, int, float or None values). Its *stable*
subset (:data:`STABLE_FIELDS`) names the hardware and software a timing depends on; its sha256
(:func:`fingerprint_id`) is the environment id under which the store files results, so a baseline
is only ever looked up on "the same machine". The other fields (:data:`INFO_FIELDS`) are kept for
people reading reports and may change without changing the id (e.g. the CUDA ordinal, which Ray's
``CUDA_VISIBLE_DEVICES`` remaps per worker).

GPU facts come from NVML (package ``nvidia-ml-py``, module ``pynvml``) and, when it is installed,
pycuda, through :mod:`harness.measure.nvml`; both are optional: without them, or without a GPU, every
GPU field is None. This module reads no environment variables (only :mod:`harness.config` does).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from harness import __version__
from harness.measure import nvml as _nv

#: bump when the meaning of a field changes (part of the stable subset, so ids change with it)
FINGERPRINT_VERSION = 1

#: the fields whose values identify an environment; their sha256 is the environment id
STABLE_FIELDS = (
    "fingerprint_version",
    # GPU (None for CPU devices or without NVML/pycuda)
    "gpu_name",
    "gpu_uuid",
    "gpu_sm_count",
    "gpu_compute_capability",  # "9.0"
    "gpu_memory_total_bytes",
    "gpu_driver_version",  # "560.35.03"
    "cuda_version",  # the CUDA version the driver supports, "12.6"
    "gpu_max_sm_clock_mhz",
    # host and software
    "host",
    "cpu_model",
    "cpu_count",  # logical CPUs of the machine (os.cpu_count)
    "os",  # "Linux 6.8.0-45-generic"
    "python_version",
    "kbench_version",
)

#: informative fields, not part of the id
INFO_FIELDS = (
    "device",  # the device kind asked for: "cpu", "cuda", ...
    "gpu_index",  # the CUDA ordinal as the measuring process saw it
    "gpu_pci_bus_id",
    "gpu_l2_cache_bytes",
    "gpu_power_limit_w",
    "cpu_physical_cores",
    "host_memory_bytes",
    "arch",
    "python_implementation",
    "nvml_version",
)

#: every field of a fingerprint, in a fixed order (the store turns them into ``env_*`` columns)
FIELDS = STABLE_FIELDS + INFO_FIELDS

_GPU_DEVICES = ("cuda", "gpu")



# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------


def fingerprint(device: str = "cpu", index: int = 0) -> dict[str, Any]:
    """The fingerprint of this host and, for ``device`` "cuda"/"gpu", of CUDA device ``index``.

    Parameters
    ----------
    device : str
        The device kind the results were measured on: "cpu" (also "c", "opencl": host fields only)
        or "cuda"/"gpu" (GPU fields filled through NVML and pycuda where available).
    index : int
        The CUDA ordinal as the calling process sees it (after ``CUDA_VISIBLE_DEVICES``). With
        pycuda it is mapped to the NVML device through its PCI bus id; without pycuda the NVML
        index is used as is.

    Returns
    -------
    dict
        Every key of :data:`FIELDS`; fields that could not be found are None.
    """
    fp: dict[str, Any] = {name: None for name in FIELDS}
    fp.update(_host_info())
    fp["device"] = device
    if device.lower() in _GPU_DEVICES:
        fp["gpu_index"] = index
        fp.update(_gpu_info(index))
    return fp


def fingerprint_id(fp: dict[str, Any]) -> str:
    """The environment id: sha256 (first 32 hex digits) of the stable subset of ``fp``.

    Missing stable fields count as None; fields outside :data:`STABLE_FIELDS` do not count.
    """
    stable = {name: fp.get(name) for name in STABLE_FIELDS}
    text = json.dumps(stable, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


#: the folder holding kbench's own packages (harness/, kernels/): its checkout when run from one
KBENCH_ROOT = Path(__file__).resolve().parents[1]


def git_commit(path: str | os.PathLike[str] | None = None) -> str | None:
    """``git rev-parse HEAD`` of the checkout at ``path``, plus "-dirty" when tracked files changed.
    ``path`` None: kbench's own checkout (:data:`KBENCH_ROOT`), never the current directory's.

    Returns None outside a git work tree or without git.
    """
    if path is None:
        path = KBENCH_ROOT
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(path), *args], check=False, capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    head = git("rev-parse", "--verify", "HEAD")
    if not head:
        return None
    # untracked files (a kbench.db, reports) do not make the code under test dirty
    status = git("status", "--porcelain", "--untracked-files=no")
    return f"{head}-dirty" if status else head


def kbench_commit() -> str | None:
    """The commit of kbench itself (its checkout's HEAD, "-dirty" when changed); None when kbench is
    not run from a git checkout (an installed package)."""
    return git_commit(KBENCH_ROOT)


def suite_commit(suite_path: str | os.PathLike[str] | None) -> str | None:
    """The commit of the repository holding the suite file ``suite_path`` (a suite kept with its own
    workloads in another repository names that one); None without a path or outside a repository."""
    if not suite_path:
        return None
    folder = Path(suite_path).resolve().parent
    return git_commit(folder) if folder.is_dir() else None


# ---------------------------------------------------------------------------------------------
# host
# ---------------------------------------------------------------------------------------------


def _host_info() -> dict[str, Any]:
    cpuinfo = _read_text("/proc/cpuinfo")
    return {
        "fingerprint_version": FINGERPRINT_VERSION,
        "host": socket.gethostname() or platform.node() or None,
        "cpu_model": _cpu_model(cpuinfo),
        "cpu_count": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}".strip() or None,
        "python_version": platform.python_version(),
        "kbench_version": __version__,
        "cpu_physical_cores": _physical_cores(cpuinfo),
        "host_memory_bytes": _host_memory_bytes(),
        "arch": platform.machine() or None,
        "python_implementation": platform.python_implementation(),
    }


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _cpuinfo_fields(cpuinfo: str) -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per processor block."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def _cpu_model(cpuinfo: str) -> str | None:
    blocks = _cpuinfo_fields(cpuinfo)
    for block in blocks:
        for key in ("model name", "Model Name", "cpu model", "Hardware", "Processor"):
            if block.get(key):
                return block[key]
    if blocks and "CPU implementer" in blocks[0]:  # aarch64 kernels name no model
        b = blocks[0]
        return f"ARM implementer {b.get('CPU implementer')} part {b.get('CPU part')}"
    return platform.processor() or platform.machine() or None


def _physical_cores(cpuinfo: str) -> int | None:
    cores = {(b.get("physical id"), b.get("core id")) for b in _cpuinfo_fields(cpuinfo)
             if "core id" in b}
    return len(cores) or None


def _host_memory_bytes(field: str = "MemTotal") -> int | None:
    for line in _read_text("/proc/meminfo").splitlines():
        if line.startswith(f"{field}:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024  # reported in kB
    return None


def available_host_memory() -> int | None:
    """Bytes of memory the host can give a new process now (``MemAvailable`` of /proc/meminfo, which
    counts reclaimable caches); None where the kernel does not say."""
    return _host_memory_bytes("MemAvailable")


def local_gpu_memory() -> dict[int, int]:
    """Total memory in bytes of each GPU this host has, by index (NVML); ``{}`` without NVML or GPUs."""
    nvml = _nv.pynvml()
    if nvml is None:
        return {}
    out: dict[int, int] = {}
    count = _nv.guarded(nvml.nvmlDeviceGetCount) or 0
    for index in range(int(count)):
        handle = _nv.nvml_handle(index)
        total = _nv.guarded(lambda h=handle: int(nvml.nvmlDeviceGetMemoryInfo(h).total)) if handle else None
        if total:
            out[index] = total
    return out


# ---------------------------------------------------------------------------------------------
# GPU: NVML and pycuda, both optional
# ---------------------------------------------------------------------------------------------

def _gpu_info(index: int) -> dict[str, Any]:
    info: dict[str, Any] = {}
    dev = _nv.cuda_device(index)
    if dev is not None:
        import pycuda.driver as drv

        attr = drv.device_attribute
        info["gpu_name"] = _nv.guarded(dev.name)
        info["gpu_pci_bus_id"] = _nv.guarded(dev.pci_bus_id)
        cc = _nv.guarded(dev.compute_capability)
        info["gpu_compute_capability"] = None if cc is None else f"{cc[0]}.{cc[1]}"
        info["gpu_memory_total_bytes"] = _nv.guarded(lambda: int(dev.total_memory()))
        info["gpu_sm_count"] = _nv.guarded(lambda: int(dev.get_attribute(attr.MULTIPROCESSOR_COUNT)))
        info["gpu_l2_cache_bytes"] = _nv.guarded(lambda: int(dev.get_attribute(attr.L2_CACHE_SIZE)))
        # the device's max clock in kHz; NVML's figure (below) is preferred when present
        info["gpu_max_sm_clock_mhz"] = _nv.guarded(lambda: dev.get_attribute(attr.CLOCK_RATE) / 1000.0)
        version = _nv.guarded(drv.get_driver_version)  # e.g. 12040
        if version is not None:
            info["cuda_version"] = f"{version // 1000}.{(version % 1000) // 10}"

    nvml = _nv.pynvml()
    handle = _nv.nvml_handle(index) if nvml is not None else None
    if handle is not None:
        name = _nv.guarded(lambda: _nv.as_text(nvml.nvmlDeviceGetName(handle)))
        info["gpu_name"] = name or info.get("gpu_name")
        info["gpu_uuid"] = _nv.guarded(lambda: _nv.as_text(nvml.nvmlDeviceGetUUID(handle)))
        cc = _nv.guarded(lambda: nvml.nvmlDeviceGetCudaComputeCapability(handle))
        if cc is not None:
            info["gpu_compute_capability"] = f"{cc[0]}.{cc[1]}"
        total = _nv.guarded(lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).total))
        if total is not None:
            info["gpu_memory_total_bytes"] = total
        if info.get("gpu_sm_count") is None:
            info["gpu_sm_count"] = _nv.guarded(
                lambda: int(nvml.nvmlDeviceGetAttributes(handle).multiprocessorCount))
        info["gpu_driver_version"] = _nv.guarded(lambda: _nv.as_text(nvml.nvmlSystemGetDriverVersion()))
        version = _nv.guarded(nvml.nvmlSystemGetCudaDriverVersion)
        if version is not None:
            info["cuda_version"] = f"{version // 1000}.{(version % 1000) // 10}"
        clock = _nv.guarded(lambda: float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)))
        if clock is not None:
            info["gpu_max_sm_clock_mhz"] = clock
        info["gpu_power_limit_w"] = _nv.guarded(
            lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0)
        if info.get("gpu_pci_bus_id") is None:
            info["gpu_pci_bus_id"] = _nv.guarded(lambda: _nv.as_text(nvml.nvmlDeviceGetPciInfo(handle).busId))
        info["nvml_version"] = _nv.guarded(lambda: _nv.as_text(nvml.nvmlSystemGetNVMLVersion()))
    return info
__all__ = ["FIELDS", "FINGERPRINT_VERSION", "INFO_FIELDS", "KBENCH_ROOT", "STABLE_FIELDS",
           "available_host_memory", "fingerprint", "fingerprint_id", "git_commit", "kbench_commit",
           "local_gpu_memory", "suite_commit"]
