"""harness.env: the fingerprint on this (GPU-less) machine, its id, and the NVML paths with a fake."""

from __future__ import annotations

import json
import platform
import types

import pytest

from harness import __version__, env
from harness.measure import nvml

GPU_FIELDS = ("gpu_name", "gpu_uuid", "gpu_sm_count", "gpu_compute_capability", "gpu_memory_total_bytes",
              "gpu_driver_version", "cuda_version", "gpu_max_sm_clock_mhz")


@pytest.fixture
def no_gpu(monkeypatch):
    """Behave as a machine without NVML and pycuda, whatever this one has."""
    monkeypatch.setattr(nvml, "pynvml", lambda: None)
    monkeypatch.setattr(nvml, "cuda_device", lambda index: None)


def test_cpu_fingerprint_has_host_fields_and_no_gpu_fields(no_gpu):
    fp = env.fingerprint()
    assert list(fp) == list(env.FIELDS)
    assert fp["host"] and fp["cpu_model"] and fp["cpu_count"] >= 1
    assert fp["os"].startswith(platform.system())
    assert fp["python_version"] == platform.python_version()
    assert fp["kbench_version"] == __version__ and fp["device"] == "cpu"
    for field in GPU_FIELDS:
        assert fp[field] is None, field
    json.dumps(fp)  # storable as is


def test_cuda_fingerprint_without_nvml_has_none_gpu_fields(no_gpu):
    fp = env.fingerprint("cuda", 0)
    assert fp["device"] == "cuda" and fp["gpu_index"] == 0
    assert all(fp[f] is None for f in GPU_FIELDS)
    assert nvml.telemetry(None) == {"temperature_c": None, "power_w": None, "sm_clock_mhz": None,
                                   "mem_clock_mhz": None, "clock_event_reasons": None}
    assert nvml.nvml_handle(0) is None and nvml.sm_clock_mhz(None) is None


def test_fingerprint_id_is_stable_and_follows_stable_fields(no_gpu):
    a, b = env.fingerprint(), env.fingerprint()
    assert env.fingerprint_id(a) == env.fingerprint_id(b)
    fid = env.fingerprint_id(a)
    assert len(fid) == 32 and int(fid, 16) >= 0
    for field in env.STABLE_FIELDS:
        changed = dict(a, **{field: "something else"})
        assert env.fingerprint_id(changed) != fid, field
    for field in env.INFO_FIELDS:
        assert env.fingerprint_id(dict(a, **{field: "something else"})) == fid, field
    # key order and missing informative fields do not matter
    stable_only = {k: a[k] for k in reversed(env.STABLE_FIELDS)}
    assert env.fingerprint_id(stable_only) == fid


def test_cpu_model_parsing():
    x86 = "processor\t: 0\nmodel name\t: Fancy CPU 9000\ncore id\t: 0\nphysical id\t: 0\n\n" \
          "processor\t: 1\nmodel name\t: Fancy CPU 9000\ncore id\t: 0\nphysical id\t: 0\n"
    assert env._cpu_model(x86) == "Fancy CPU 9000"
    assert env._physical_cores(x86) == 1
    arm = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
    assert env._cpu_model(arm) == "ARM implementer 0x41 part 0xd4f"


def test_clock_event_reason_names():
    assert nvml.clock_event_reason_names(0) == []
    names = nvml.clock_event_reason_names(0x1 | 0x4 | 0x40)
    assert names == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    assert nvml.clock_event_reason_names(0x10000) == ["unknown_0x10000"]


class FakeNVML(types.SimpleNamespace):
    """Just enough of pynvml for one H100."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("handle", i)

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return ("handle", bus)

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"  # old releases return bytes

    def nvmlDeviceGetUUID(self, h):
        return "GPU-1234"

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (9, 0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(total=85_520_809_984)

    def nvmlDeviceGetAttributes(self, h):
        return types.SimpleNamespace(multiprocessorCount=132)

    def nvmlSystemGetDriverVersion(self):
        return "560.35.03"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12060

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        return 1980

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1755 if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId="00000000:19:00.0")

    def nvmlSystemGetNVMLVersion(self):
        return "12.560.35.03"

    def nvmlDeviceGetTemperature(self, h, which):
        return 45

    def nvmlDeviceGetPowerUsage(self, h):
        raise RuntimeError("not supported")  # NVML errors on unsupported queries

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4 | 0x20


def test_gpu_fingerprint_and_telemetry_through_nvml(monkeypatch):
    fake = FakeNVML()
    monkeypatch.setattr(nvml, "pynvml", lambda: fake)
    monkeypatch.setattr(nvml, "cuda_device", lambda index: None)
    fp = env.fingerprint("cuda", 1)
    assert fp["gpu_name"] == "NVIDIA H100 80GB HBM3" and fp["gpu_uuid"] == "GPU-1234"
    assert fp["gpu_compute_capability"] == "9.0" and fp["gpu_sm_count"] == 132
    assert fp["gpu_memory_total_bytes"] == 85_520_809_984 and fp["gpu_driver_version"] == "560.35.03"
    assert fp["cuda_version"] == "12.6" and fp["gpu_max_sm_clock_mhz"] == 1980.0
    assert fp["gpu_power_limit_w"] == 700.0 and fp["gpu_pci_bus_id"] == "00000000:19:00.0"
    assert fp["gpu_index"] == 1
    cpu_id = env.fingerprint_id(env.fingerprint("cpu"))
    assert env.fingerprint_id(fp) != cpu_id

    handle = nvml.nvml_handle(1)
    assert handle == ("handle", 1)
    assert nvml.sm_clock_mhz(handle) == 1755.0
    snap = nvml.telemetry(handle)
    assert snap == {"temperature_c": 45.0, "power_w": None, "sm_clock_mhz": 1755.0, "mem_clock_mhz": 2619.0,
                    "clock_event_reasons": ["sw_power_cap", "sw_thermal_slowdown"]}
