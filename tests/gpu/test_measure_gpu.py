"""harness.measure on a real GPU: CudaTimer cold and hot on the row-sum cubin (rfactor +
cross-thread), agreement with an independent measurement (triton.testing.do_bench, else a plain
torch-event loop with torch's own L2 flush), clock-based discarding, telemetry, peaks and peers."""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernels as tvm
from harness.execute import peers
from harness.execute.check import check_outputs, poisoned_unwritten
from harness.measure import (
    CudaTimer,
    derived,
    hot_rotation_count,
    l2_cache_bytes,
    measure,
    measure_peaks_cuda,
    module_launcher,
)
from harness.model import MeasureConfig
from kernels.workloads import get, names

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

BIG = {"n": 16384, "m": 4096}  # 256 MiB of float32 input: 5x the H100's L2
CFG = MeasureConfig(max_time_s=6.0)


@pytest.fixture(scope="module")
def rowsum():
    w = get("row_sum")
    s, args = w.build("rfactor_crossthread", BIG, "float32")
    f = tvm.build(s, args, "cuda")
    host = w.make_args(BIG, "float32", np.random.default_rng(0))
    dev = tvm.cuda(0)
    arrays = [tvm.nd.array(x, dev) for x in host]
    launch = module_launcher(f, arrays)
    launch()
    got = arrays[1].numpy()
    assert poisoned_unwritten(got) == 0
    ok, msg = check_outputs([got], w.reference(host), 1e-4, 1e-4)
    assert ok, msg
    return w, f, host, arrays, launch


def _independent_median_s(launch) -> tuple:
    """The kernel's median time measured without harness.measure, with a *memset-style* flush:
    triton's do_bench (median; it zeroes a 256 MiB buffer before each launch), or torch events
    around single launches after zeroing a 256 MiB buffer."""
    torch = pytest.importorskip("torch")
    try:
        from triton.testing import do_bench

        ms = do_bench(launch, warmup=100, rep=1000, return_mode="median")
        return ms * 1e-3, "triton.testing.do_bench"
    except ImportError:
        pass
    cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    times = []
    for i in range(1100):
        cache.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        launch()
        e.record()
        e.synchronize()
        if i >= 100:
            times.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(times), "torch events"


_NCU_CHILD = """
import numpy as np, kernels as tvm
from kernels.workloads import get
w = get("row_sum")
params = {"n": 16384, "m": 4096}
s, args = w.build("rfactor_crossthread", params, "float32")
f = tvm.build(s, args, "cuda")
arrays = [tvm.nd.array(x, tvm.cuda(0)) for x in w.make_args(params, "float32", np.random.default_rng(0))]
launch, _ = f.launcher(*arrays)
for _ in range(30):
    launch()
tvm.cuda(0).sync()
"""


def _ncu_median_s() -> float:
    """Median gpu__time_duration of the big row sum under Nsight Compute (caches flushed and
    invalidated before each launch, clocks left alone), in a child process."""
    ncu = shutil.which("ncu")
    if ncu is None:
        pytest.skip("ncu not found")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [ncu, "--clock-control", "none", "--cache-control", "all", "--metrics", "gpu__time_duration.sum",
         "--csv", sys.executable, "-c", _NCU_CHILD],
        capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [r for r in csv.reader(io.StringIO(proc.stdout)) if len(r) > 10]
    head = rows[0]
    vi, ui = head.index("Metric Value"), head.index("Metric Unit")
    scale = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3}
    values = [float(r[vi].replace(",", "")) * scale[r[ui]] for r in rows[1:]]
    assert len(values) >= 30
    return statistics.median(values[5:])


def _event_gap_s(launch) -> float:
    """What a pair of CUDA events adds around an empty kernel queued behind a busy GPU (the launch
    gap CudaTimer.inject measures): the part of an event-timed sample that ncu's kernel duration
    does not contain."""
    probe = CudaTimer(0)
    probe.begin([launch], MeasureConfig())
    try:
        probe.inject(1e-7)
        return float(probe._static["injected_gap_s"])
    finally:
        probe.end()


def test_cold_read_flush_matches_ncu(rowsum):
    """Cold mode (read flush, the default) against Nsight Compute's gpu__time_duration: within 2 %
    plus the launch gap the events bracket and ncu's kernel duration does not (measured here; on an
    H100 the harness came out 1.5 % under ncu, on an H200 3 us over it at two sizes alike: a
    constant, the launch, not a fraction of the kernel; docs/PERF.md)."""
    *_, launch = rowsum
    t = measure(CudaTimer(0), launch, CFG)
    assert t.mode == "cold"
    assert t.stop_reason in ("converged", "cap", "max_samples")
    assert len(t.samples) >= CFG.min_samples
    assert t.ci_low <= t.median <= t.ci_high
    tel = dict(t.telemetry)
    assert tel["flush"] == "read" and tel["l2_bytes"] == l2_cache_bytes(0) > 0
    assert tel["measured_s"] >= CFG.min_time_s or t.stop_reason != "converged"
    ref_s = _ncu_median_s()
    ratio = t.median / ref_s
    gap = _event_gap_s(launch)
    print(f"\nrow_sum rfactor_crossthread {BIG}: harness cold median {t.median * 1e6:.2f} us "
          f"(CI {t.ci_low * 1e6:.2f}-{t.ci_high * 1e6:.2f}, n={len(t.samples)}, discarded={t.discarded}, "
          f"{t.stop_reason}), ncu gpu__time_duration {ref_s * 1e6:.2f} us, ratio {ratio:.4f}, "
          f"event gap {gap * 1e6:.2f} us")
    assert abs(t.median - ref_s) <= 0.02 * ref_s + gap


def test_cold_memset_flush_matches_do_bench(rowsum):
    """With a memset flush (dirty L2 lines, as do_bench's zeroing leaves them) the harness agrees
    with triton's do_bench (or a plain torch-event loop) within 2 %."""
    *_, launch = rowsum
    t = measure(CudaTimer(0, flush="memset"), launch, CFG)
    ref_s, how = _independent_median_s(launch)
    ratio = t.median / ref_s
    print(f"\nmemset-flush cold median {t.median * 1e6:.2f} us, {how} {ref_s * 1e6:.2f} us, "
          f"ratio {ratio:.4f}")
    assert abs(ratio - 1) <= 0.02


def test_cold_telemetry_and_clocks(rowsum):
    *_, launch = rowsum
    t = measure(CudaTimer(0), launch, MeasureConfig(max_time_s=2.0))
    tel = dict(t.telemetry)
    print("\ntelemetry:", tel)
    if not tel["nvml"]:
        pytest.skip("NVML (nvidia-ml-py) not available: no clocks or telemetry")
    assert len(t.clocks_mhz) == len(t.samples)
    assert all(c >= CFG.clock_floor * tel["max_sm_clock_mhz"] for c in t.clocks_mhz)
    for when in ("before", "after"):
        assert tel[f"{when}.temperature_c"] is not None
        assert tel[f"{when}.sm_clock_mhz"] is not None
        assert tel[f"{when}.clock_event_reasons"] is not None


def test_samples_below_the_clock_floor_are_discarded_and_counted(rowsum):
    *_, launch = rowsum
    timer = CudaTimer(0)
    # a floor above the maximum clock: every sample is discarded, the loop ends at the cap
    t = measure(timer, launch, MeasureConfig(max_time_s=0.5, clock_floor=1.5))
    if timer.max_clock_mhz is None:
        pytest.skip("NVML (nvidia-ml-py) not available: no clock to discard on")
    assert t.discarded > 0 and t.samples == ()
    assert t.stop_reason == "cap" and math.isnan(t.median)
    print(f"\n{t.discarded} samples discarded under a floor of 1.5 x max clock")


def test_hot_mode_over_rotating_buffers(rowsum):
    _, f, host, arrays, launch = rowsum
    set_bytes = sum(a.nbytes for a in arrays)
    k = hot_rotation_count(set_bytes, l2_cache_bytes(0))
    assert k * set_bytes > l2_cache_bytes(0)
    dev = tvm.cuda(0)
    copies = [arrays] + [[tvm.nd.array(x, dev) for x in host] for _ in range(k - 1)]
    launches = [module_launcher(f, c) for c in copies]
    hot = measure(CudaTimer(0, mode="hot"), launches, CFG)
    cold = measure(CudaTimer(0, mode="cold"), launch, CFG)
    assert hot.mode == "hot" and cold.mode == "cold"
    batch = dict(hot.telemetry)["batch"]
    assert batch >= k and dict(hot.telemetry)["flush_bytes"] == 0
    print(f"\nhot median {hot.median * 1e6:.2f} us (batch {batch}, {k} buffer sets), "
          f"cold {cold.median * 1e6:.2f} us")
    # 256 MiB streams from HBM either way: back to back it is no slower, and not much faster
    assert 0.8 * cold.median <= hot.median <= 1.03 * cold.median


def test_peaks_and_derived(rowsum):
    w, *_ = rowsum
    peaks = measure_peaks_cuda(0)
    print("\npeaks:", peaks)
    assert peaks["copy_gbps"] > 100 and peaks["l2_bytes"] > 0
    if peaks["matmul_source"] is not None:
        assert peaks["matmul_fp16_gflops"] > peaks["matmul_fp32_gflops"] > 0
        # torch._int_mm on the int8 tensor cores (None where this torch or GPU lacks it)
        assert peaks["matmul_int8_gops"] is None or peaks["matmul_int8_gops"] > 0
        # float32 with TF32 allowed runs on the tensor cores: faster than the FFMA peak
        assert peaks["matmul_tf32_gflops"] > 1.5 * peaks["matmul_fp32_gflops"] or peaks["matmul_fp32_tf32"]
    assert "matmul_int8_gops" in peaks and "matmul_tf32_gflops" in peaks
    assert measure_peaks_cuda(0) == peaks  # cached per device UUID
    *_, launch = rowsum
    t = measure(CudaTimer(0), launch, MeasureConfig(max_time_s=2.0))
    d = derived(t, w.flops(BIG), w.bytes(BIG, "float32"), peaks, "float32")
    print("derived:", d)
    assert 0 < d["pct_peak_bw"] < 150


def _peer_cases():
    small = {"row_sum": {"n": 512, "m": 300}, "product_reduce": {"n": 512, "m": 300},
             "conv2d_3x3": {"n": 130}, "exp": {"n": 10000}, "log": {"n": 10000}}
    for name in names():
        w = get(name)
        for p in w.peers:
            if name in small:
                yield pytest.param(name, p, small[name], id=f"{name}-{p}")


@pytest.mark.parametrize("workload,peer,params", list(_peer_cases()))
def test_peer_correct_and_timed(workload, peer, params):
    if not peers.available(peer):
        pytest.skip(f"{peer} not available")
    w = get(workload)
    host = w.make_args(params, "float32", np.random.default_rng(1))
    ref = w.reference(host)
    tol = w.tolerance_for("float32", params)
    rtol, atol = tol
    ok, msg, timing = peers.run_peer(peer, host, ref, max(rtol, 1e-5), max(atol, 1e-5),
                                     MeasureConfig(max_time_s=0.5, min_time_s=0.01))
    assert ok, msg
    assert timing.mode == "cold" and timing.median > 0 and timing.samples


def test_peer_vs_kernel_on_the_big_row_sum(rowsum):
    if not peers.available("torch.sum(dim=1)"):
        pytest.skip("torch not available")
    w, _, host, _, launch = rowsum
    ok, msg, pt = peers.run_peer("torch.sum(dim=1)", host, w.reference(host), 1e-4, 1e-4, CFG)
    assert ok, msg
    ours = measure(CudaTimer(0), launch, CFG)
    print(f"\ntorch.sum {pt.median * 1e6:.2f} us, ours {ours.median * 1e6:.2f} us, "
          f"ours/torch speed {pt.median / ours.median:.3f}")


def test_small_kernel_spin_hides_host_overhead():
    """A ~10 us kernel: with the spin kernel in front, host launch overhead stays outside the
    events; without it the median can only be larger. Compared with the independent figure."""
    w = get("exp")
    params = {"n": 1 << 21}
    s, args = w.build("bind", params, "float32")
    f = tvm.build(s, args, "cuda")
    host = w.make_args(params, "float32", np.random.default_rng(0))
    dev = tvm.cuda(0)
    launch = module_launcher(f, [tvm.nd.array(x, dev) for x in host])
    cfg = MeasureConfig(max_time_s=3.0)
    spin = measure(CudaTimer(0), launch, cfg)
    nospin = measure(CudaTimer(0, spin=False), launch, cfg)
    ref_s, how = _independent_median_s(launch)
    print(f"\nexp n=2^21: spin {spin.median * 1e6:.2f} us, no spin {nospin.median * 1e6:.2f} us, "
          f"{how} {ref_s * 1e6:.2f} us")
    assert spin.median <= nospin.median * 1.02
    assert abs(spin.median / ref_s - 1) <= 0.10


def test_flush_kinds_and_ncu_style_agreement(rowsum):
    """The read flush (default) against the memset flush: the memset leaves dirty L2 lines whose
    write-back lands inside the sample, so it can only be slower."""
    *_, launch = rowsum
    read = measure(CudaTimer(0), launch, CFG)
    memset = measure(CudaTimer(0, flush="memset"), launch, CFG)
    assert dict(read.telemetry)["flush"] == "read" and dict(memset.telemetry)["flush"] == "memset"
    assert dict(read.telemetry)["flush_bytes"] == 2 * l2_cache_bytes(0)
    print(f"\nread flush {read.median * 1e6:.2f} us, memset flush {memset.median * 1e6:.2f} us")
    assert read.median <= memset.median * 1.005


@pytest.mark.parametrize("slowdown", [0.05, 0.20])
def test_injected_slowdown_on_cuda_is_the_asked_fraction(rowsum, slowdown):
    """Calibration's injected work (a timer-spin kernel inside the events, its own launch gap
    subtracted): the ratio of medians, alternating plain and slowed measurements, is 1 + slowdown
    within 1.5 percentage points or a tenth of the asked slowdown, whichever is larger (on an H200 a
    20 % injection came out at 18.4 %: the spin kernel's own share of the sample varies with the
    clock it runs at)."""
    *_, launch = rowsum
    cfg = MeasureConfig(max_time_s=1.0, min_time_s=0.2)
    plain, slowed = [], []
    for _ in range(3):
        plain.append(measure(CudaTimer(0), launch, cfg).median)
        t = measure(CudaTimer(0), launch, MeasureConfig(max_time_s=1.0, min_time_s=0.2, slowdown=slowdown))
        assert dict(t.telemetry)["injected_s"] == pytest.approx(slowdown * statistics.median(plain), rel=0.1)
        slowed.append(t.median)
    ratio = statistics.median(slowed) / statistics.median(plain)
    assert abs(ratio - (1 + slowdown)) < max(0.015, 0.1 * slowdown), ratio


def test_read_peak_and_a_row_sum_share_of_it(rowsum):
    w, *_, launch = rowsum
    peaks = measure_peaks_cuda(0, matmul=False)
    print("\nbandwidth peaks:", {k: peaks[k] for k in ("copy_gbps", "read_gbps", "read_bytes", "l2_bytes")})
    # measured over a buffer many times the L2, positive, and a read is not slower than a copy
    assert peaks["read_gbps"] > 100 and peaks["read_bytes"] > 4 * peaks["l2_bytes"]
    assert peaks["read_gbps"] >= 0.9 * peaks["copy_gbps"]
    t = measure(CudaTimer(0), launch, MeasureConfig(max_time_s=2.0))
    d = derived(t, w.flops(BIG), w.bytes(BIG, "float32"), peaks, "float32", traffic=w.traffic(BIG, "float32"))
    print("row sum:", d)
    assert d["peak_bw"] == "read" and 0 < d["pct_peak_bw"] < 110


def test_a_row_sum_case_reports_its_share_of_the_read_peak(tmp_path, monkeypatch):
    from harness.execute.worker import _env, run_cases
    from harness.measure import peaks as peaks_mod
    from harness.model import Case
    from kernels.runtime.config import reload_config

    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path))  # peaks measured afresh, kept in this folder
    monkeypatch.setattr(peaks_mod, "_DEVICE_PEAKS", {})
    reload_config()
    try:
        cases = [Case(suite="t", workload="row_sum", variant=v, params=(("m", 16384), ("n", 16384)),
                      knobs=(), dtype="float32", target="cuda") for v in ("bind", "rfactor_crossthread")]
        results = list(run_cases(cases, MeasureConfig(min_time_s=0.2, max_time_s=1.5)))
        measured = peaks_mod.device_peaks("cuda", _env("cuda")[0], flops=False)  # this process's, as measured
    finally:
        monkeypatch.undo()
        reload_config()
    for r in results:
        assert r.outcome == "ok", r.message
        note = r.peaks
        print(f"\n{r.case.key}: {r.gbps:.0f} GB/s, {r.pct_peak_bw:.1f} % of {note.bandwidth} peak "
              f"({note.bandwidth_gbps:.0f} GB/s); phases {dict(r.phases.items())}")
        assert note.bandwidth == "read" and 0 < r.pct_peak_bw < 110
        assert r.pct_peak_flops is None  # memory-bound: the matmul peak was not needed
    # kept in the cache folder for later processes, unless other processes (e.g. the other workers of a
    # parallel test run) had the GPU open while they were measured
    assert bool(list((tmp_path / "peaks").glob("*.json"))) == (not measured.get("shared_with")), measured
    # the second case was compiled (nvcc, empty cache) while the first was checked and timed
    second = results[1]
    assert second.nvcc_calls == 1 and second.phases.build_wait < second.phases.build
    assert second.timeline.build_start < results[0].timeline.end
