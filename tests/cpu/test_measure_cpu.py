"""harness.measure timing real kernels built by kernels: the C target with CpuTimer and the OpenCL
target (PoCL in CI) with OpenCLTimer; correctness is checked before anything is timed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import kernels as tvm
import kernels.runtime.device
from harness.execute.check import check_outputs, poisoned_unwritten
from harness.measure import (
    STOP_REASONS,
    CpuTimer,
    OpenCLTimer,
    derived,
    measure,
    measure_interleaved,
    measure_peaks_cpu,
    measure_sides,
    module_launcher,
)
from harness.measure.timers import DEFAULT_CACHE_BYTES, HOST_FLUSH_CAP_BYTES, _llc_bytes, host_flush_bytes
from harness.model import MeasureConfig
from kernels.workloads import get

needs_opencl = pytest.mark.opencl  # skipped without an OpenCL device (tests/conftest.py)

PARAMS = {"n": 256, "m": 256}
CFG = MeasureConfig(max_time_s=0.5, min_time_s=0.01, min_samples=10)


def _case(variant: str, target: str):
    w = get("row_sum")
    s, args = w.build(variant, PARAMS, "float32")
    f = tvm.build(s, args, target)
    host = w.make_args(PARAMS, "float32", np.random.default_rng(0))
    return w, f, host


def _assert_timing(t, kind):
    assert t.stop_reason in STOP_REASONS
    if t.stop_reason != "cap":
        assert len(t.samples) >= CFG.min_samples
    assert t.samples and all(s > 0 for s in t.samples)
    assert min(t.samples) <= t.ci_low <= t.median <= t.ci_high <= max(t.samples)
    assert dict(t.telemetry)["kind"] == kind


def test_c_kernel_with_cpu_timer():
    w, f, host = _case("default", "c")
    assert poisoned_unwritten(host[1]) == PARAMS["n"]
    launch = module_launcher(f, host)
    launch()
    ok, msg = check_outputs([host[i] for i in w.outputs], w.reference(host), 1e-5, 1e-5)
    assert ok, msg
    t = measure(CpuTimer(), launch, CFG)
    _assert_timing(t, "cpu")
    assert t.mode == "cold"
    # hot mode: many calls per sample, and a warm cache: not slower than cold by much
    hot = measure(CpuTimer(mode="hot"), launch, CFG)
    assert hot.mode == "hot" and dict(hot.telemetry)["batch"] >= 1
    assert hot.median <= 1.5 * t.median
    d = derived(t, w.flops(PARAMS), w.bytes(PARAMS, "float32"), measure_peaks_cpu(nbytes=32 << 20))
    assert d["gbps"] > 0 and d["gflops"] > 0 and d["pct_peak_bw"] > 0 and d["pct_peak_flops"] > 0


def test_cpu_timer_wrong_output_is_caught_before_timing():
    w, f, host = _case("default", "c")
    host[0][3, 7] = np.nan  # a planted bad input row: the kernel's output differs from a clean ref
    ref = w.reference(w.make_args(PARAMS, "float32", np.random.default_rng(0)))
    f(*host)
    ok, msg = check_outputs([host[1]], ref, 1e-5, 1e-5)
    assert not ok and "worst at index (3,): got nan" in msg


@needs_opencl
def test_opencl_kernel_with_opencl_timer():
    w, f, host = _case("bind", "opencl")
    dev = tvm.opencl(0)
    arrays = [tvm.nd.array(x, dev) for x in host]
    launch = module_launcher(f, arrays)
    launch()
    got = arrays[1].numpy()
    assert poisoned_unwritten(got) == 0
    ok, msg = check_outputs([got], w.reference(host), 1e-5, 1e-5)
    assert ok, msg
    timer = OpenCLTimer(0)
    t = measure(timer, launch, CFG)
    _assert_timing(t, "opencl")
    tel = dict(t.telemetry)
    assert tel["timer"] == "perf_counter+finish"  # the runtime's queue has profiling off
    import pyopencl as cl

    device = kernels.runtime.device.opencl_handle(0).device
    expected = device.global_mem_cache_size or DEFAULT_CACHE_BYTES
    if device.type & cl.device_type.CPU:  # PoCL: a host CPU's flush is capped
        expected = min(expected, HOST_FLUSH_CAP_BYTES)
    assert tel["flush_bytes"] == expected > 0


def test_host_flush_size_is_the_last_level_cache_up_to_the_cap():
    """The flush covers a small last-level cache whole; a socket-sized one (480 MiB reported on some
    server parts) only up to the cap; an unreadable size gives the default."""
    assert host_flush_bytes(8 << 20) == 8 << 20
    assert host_flush_bytes(480 << 20) == HOST_FLUSH_CAP_BYTES == 64 << 20
    assert host_flush_bytes(0) == DEFAULT_CACHE_BYTES
    _, f, host = _case("default", "c")
    cfg = MeasureConfig(max_time_s=0.3, min_time_s=0.01, min_samples=12)
    t = measure(CpuTimer(), module_launcher(f, host), cfg)
    flushed = dict(t.telemetry)["flush_bytes"]
    assert flushed == host_flush_bytes(_llc_bytes()) <= HOST_FLUSH_CAP_BYTES
    # the per-sample flush leaves room for the minimum samples within a short cap
    assert len(t.samples) >= 12 and t.stop_reason in ("converged", "cap")
    # an explicit size is used as given, above the cap too
    big = measure(CpuTimer(flush_bytes=HOST_FLUSH_CAP_BYTES + (1 << 20)), module_launcher(f, host), cfg)
    assert dict(big.telemetry)["flush_bytes"] == HOST_FLUSH_CAP_BYTES + (1 << 20)


@needs_opencl
def test_opencl_timer_uses_profiling_markers_on_a_profiling_queue():
    import pyopencl as cl

    handle = kernels.runtime.device.opencl_handle(0)
    queue = cl.CommandQueue(handle.context, handle.device,
                            properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(handle.context, """
        __kernel void scale(__global float *x, const float s) {
            size_t i = get_global_id(0); x[i] = x[i] * s; }""").build()
    kernel = cl.Kernel(prg, "scale")
    n = 1 << 16
    buf = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4 * n)
    cl.enqueue_fill_buffer(queue, buf, np.float32(1.0), 0, 4 * n)
    kernel.set_args(buf, np.float32(1.0))

    def launch():
        cl.enqueue_nd_range_kernel(queue, kernel, (n,), None)

    for mode in ("cold", "hot"):
        t = measure(OpenCLTimer(0, mode=mode, queue=queue, flush_bytes=1 << 20), launch, CFG)
        _assert_timing(t, "opencl")
        assert t.mode == mode
        assert dict(t.telemetry)["timer"] == "opencl-profiling"


# -- calibration: injected slowdown -------------------------------------------------------------


def _check_injection(timer_factory, launch, slowdown):
    """Injected work sits inside every timed sample: each kept sample is at least the injected
    time, which is ``slowdown`` times the warm-up's per-launch estimate (recorded in telemetry).
    (The ratio of medians is measured by kbench calibrate, not asserted here: CI must not gate on
    a timing.)"""
    cfg = MeasureConfig(max_time_s=0.3, min_time_s=0.05, min_samples=20, slowdown=slowdown)
    t = measure(timer_factory(), launch, cfg)
    tel = dict(t.telemetry)
    assert tel["slowdown"] == slowdown and tel["injected_s"] > 0
    assert min(t.samples) >= tel["injected_s"]
    plain = measure(timer_factory(), launch, MeasureConfig(max_time_s=0.3, min_time_s=0.05, min_samples=20))
    assert "injected_s" not in dict(plain.telemetry)


def test_cpu_timer_injected_work_is_inside_every_sample():
    _, f, host = _case("default", "c")
    _check_injection(CpuTimer, module_launcher(f, host), 0.5)


@needs_opencl
def test_opencl_timer_injected_work_is_inside_every_sample():
    _, f, host = _case("bind", "opencl")
    arrays = [tvm.nd.array(x, tvm.opencl(0)) for x in host]
    _check_injection(OpenCLTimer, module_launcher(f, arrays), 0.5)


def test_inject_rejects_negative():
    with pytest.raises(ValueError, match=">= 0"):
        CpuTimer().inject(-1.0)


# -- interleaved sides --------------------------------------------------------------------------


class _LoggingCpuTimer(CpuTimer):
    """A real CpuTimer that also writes its name into a shared log at every timed sample."""

    def __init__(self, name, log):
        super().__init__()
        self.name, self.log = name, log

    def _sample(self):
        self.log.append(self.name)
        return super()._sample()


def test_interleaved_sides_rotate_sample_by_sample_and_end_together():
    _, f, host = _case("default", "c")
    launch = module_launcher(f, host)
    log = []
    timers = [_LoggingCpuTimer(n, log) for n in "ABC"]
    cfg = MeasureConfig(max_time_s=0.3, min_time_s=0.01, min_samples=12)
    timings = measure_interleaved(timers, launch, [cfg, cfg, cfg])
    # warm-up of A, then B, then C; then rounds in rotated order ABC, BCA, CAB, ABC, ...
    n = len(timings[0].samples)
    assert n >= 12 and all(len(t.samples) == n for t in timings)
    rounds = log[len(log) - 3 * n:]
    expected = [s for r in range(n) for s in ("ABC"[r % 3:] + "ABC"[:r % 3])]
    assert rounds == expected
    for t in timings:
        tel = dict(t.telemetry)
        assert tel["interleaved_sides"] == 3 and t.stop_reason in STOP_REASONS
        assert t.ci_low <= t.median <= t.ci_high


def test_interleaved_injection_only_in_its_side():
    """measure_sides gives every side its own timer and slowdown: only C carries injected work,
    inside each of its samples (sized from C's own warm-up)."""
    _, f, host = _case("default", "c")
    cfg = MeasureConfig(max_time_s=0.3, min_time_s=0.02, min_samples=20,
                        interleave=(("A", 0.0), ("B", 0.0), ("C", 1.0)))
    sides = measure_sides(CpuTimer, module_launcher(f, host), cfg)
    assert [name for name, _ in sides] == ["A", "B", "C"]
    tel = {name: dict(t.telemetry) for name, t in sides}
    assert "injected_s" not in tel["A"] and "injected_s" not in tel["B"]
    assert tel["C"]["slowdown"] == 1.0 and tel["C"]["injected_s"] > 0
    assert min(sides[2][1].samples) >= tel["C"]["injected_s"]
    # a 100 % slowdown shows whatever the machine's noise (the 5 % figures are kbench calibrate's)
    assert sides[2][1].median > 1.3 * sides[1][1].median


def test_measure_sides_without_interleave_is_one_plain_measure():
    _, f, host = _case("default", "c")
    sides = measure_sides(CpuTimer, module_launcher(f, host), CFG)
    assert len(sides) == 1 and sides[0][0] == ""
    assert "interleaved_sides" not in dict(sides[0][1].telemetry)


def test_measure_interleaved_needs_one_config_per_timer():
    with pytest.raises(ValueError, match="one config per timer"):
        measure_interleaved([CpuTimer(), CpuTimer()], lambda: None, [CFG])


def test_cpu_read_peak_beside_the_copy_peak():
    peaks = measure_peaks_cpu(nbytes=32 << 20, refresh=True)
    assert peaks["read_gbps"] > 0 and peaks["read_bytes"] == 32 << 20
    assert peaks["copy_gbps"] > 0 and peaks["copy_bytes"] == 64 << 20
    w, f, host = _case("default", "c")
    t = measure(CpuTimer(), module_launcher(f, host), CFG)
    d = derived(t, w.flops(PARAMS), w.bytes(PARAMS, "float32"), peaks, traffic=w.traffic(PARAMS, "float32"))
    # a row sum writes one value per 256 it reads: measured against the read peak
    assert d["peak_bw"] == "read"
    assert d["pct_peak_bw"] == pytest.approx(100.0 * d["gbps"] / peaks["read_gbps"])


def test_a_case_gets_its_min_samples_past_max_time_within_its_timeout():
    # suites/smoke.toml asks min_samples = 5 with max_time_s = 0.1; a cap far below one sample's time
    # must still give 5 samples (the case's timeout bounds it), where it used to give one
    from harness.execute.worker import measure_limit_s, run_case
    from harness.suite import load_suite

    suite = load_suite("suites/smoke.toml")
    assert suite.measure.min_samples == 5
    config = replace(suite.measure, max_time_s=1e-6, min_time_s=0.0)
    case = suite.cases[0]
    result = run_case(case, config)
    assert result.outcome == "ok", result.message
    assert len(result.timing.samples) >= 5 and result.timing.stop_reason == "cap"
    assert measure_limit_s(case, 10.0) == pytest.approx(0.8 * (case.timeout_s - 10.0))
    assert measure_limit_s(case, case.timeout_s + 5) == 0.0
