"""The measured peaks a result's percentages are of: a peak measured low (another process on the GPU,
an older way of measuring) must not print percentages above 100 %.

Real measurements on this machine's CPU (numpy matmul, the C read loop); the only thing planted is a
peaks file holding a low peak, as a busy GPU once wrote one (H200 fp32: 36 TFLOP/s for 51)."""

from __future__ import annotations

import json

import pytest

from harness.execute.worker import run_cases
from harness.measure import peaks as peaks_mod
from harness.model import Case, MeasureConfig
from kernels.runtime.config import reload_config


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty build cache folder (the peaks file lives there) and no peaks known in this process."""
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path))
    reload_config()
    monkeypatch.setattr(peaks_mod, "_DEVICE_PEAKS", {})
    monkeypatch.setattr(peaks_mod, "_PEAKS", {})
    monkeypatch.setattr(peaks_mod, "_RECHECKED", {})
    yield tmp_path
    monkeypatch.undo()
    reload_config()


def _file(tmp_path):
    files = list((tmp_path / "peaks").glob("*.json"))
    assert len(files) == 1, files
    return files[0]


def test_a_peak_is_the_fastest_repetition_after_a_warm_up():
    calls = []

    def once():
        calls.append(1)
        return [5.0, 4.0, 3.0, 2.5, 2.0, 2.2, 2.9, 3.1][len(calls) - 1]

    # two untimed calls at least (5.0, 4.0); then the fastest of the next four (3.0, 2.5, 2.0, 2.2)
    assert peaks_mod._fastest(once, 4, warmup_s=0.0) == 2.0
    assert len(calls) == 6


def test_a_file_of_an_older_way_of_measuring_is_measured_again(fresh_cache):
    env = "env-old"
    path = fresh_cache / "peaks" / f"{env}.json"
    path.parent.mkdir(parents=True)
    # version 1: no peaks_version, the median of a few repetitions
    path.write_text(json.dumps({"copy_gbps": 1.0, "read_gbps": 1.0, "matmul_fp32_gflops": 0.001,
                                "matmul_source": "numpy"}))
    got = peaks_mod.device_peaks("c", env)
    assert got["peaks_version"] == peaks_mod.PEAKS_VERSION
    assert got["matmul_fp32_gflops"] > 0.5  # numpy on any CPU: far above the planted 1 MFLOP/s
    assert json.loads(path.read_text())["matmul_fp32_gflops"] == got["matmul_fp32_gflops"]


def test_a_beaten_peak_is_measured_again_once_a_process(fresh_cache):
    env = "env-low"
    real = peaks_mod.device_peaks("c", env)
    path = fresh_cache / "peaks" / f"{env}.json"
    planted = {**real, "matmul_fp32_gflops": real["matmul_fp32_gflops"] / 1000.0}
    path.write_text(json.dumps(planted))
    peaks_mod._DEVICE_PEAKS.clear()
    assert peaks_mod.device_peaks("c", env)["matmul_fp32_gflops"] == planted["matmul_fp32_gflops"]

    # a rate within BEATEN_BY of the peak leaves it be
    rate = planted["matmul_fp32_gflops"] * (1 + peaks_mod.BEATEN_BY / 2)
    assert peaks_mod.recheck_peak("c", env, "matmul_fp32_gflops", rate)["matmul_fp32_gflops"] == \
        planted["matmul_fp32_gflops"]
    # ten times the planted peak: measured again, kept in the process and in the file
    fresh = peaks_mod.recheck_peak("c", env, "matmul_fp32_gflops", 10 * planted["matmul_fp32_gflops"])
    assert fresh["matmul_fp32_gflops"] > 100 * planted["matmul_fp32_gflops"]
    assert json.loads(path.read_text())["matmul_fp32_gflops"] == fresh["matmul_fp32_gflops"]
    assert peaks_mod.device_peaks("c", env)["matmul_fp32_gflops"] == fresh["matmul_fp32_gflops"]
    # once a process: a second beaten rate measures nothing more
    again = peaks_mod.recheck_peak("c", env, "matmul_fp32_gflops", 1e9)
    assert again is peaks_mod._DEVICE_PEAKS["c"]


def test_peaks_measured_on_a_shared_gpu_stay_out_of_the_file(fresh_cache, monkeypatch):
    env = "env-shared"
    monkeypatch.setattr(peaks_mod, "measure_peaks_cpu",
                        lambda nbytes=0, refresh=False: {"copy_gbps": 1.0, "read_gbps": 1.0,
                                                         "peaks_version": peaks_mod.PEAKS_VERSION,
                                                         "shared_with": 3})
    assert peaks_mod.device_peaks("c", env)["shared_with"] == 3
    assert not (fresh_cache / "peaks").exists()


def test_a_run_with_a_low_peak_in_the_file_stores_a_true_percentage(fresh_cache):
    case = Case(suite="t", workload="matmul", variant="default", params=(("n", 256), ("m", 256), ("k", 256)),
                knobs=(), dtype="float32", target="c")
    config = MeasureConfig(min_time_s=0.05, max_time_s=0.3)
    first = list(run_cases([case], config))[0]
    assert first.outcome == "ok", first.message
    path = _file(fresh_cache)
    real = json.loads(path.read_text())
    assert first.pct_peak_flops == pytest.approx(100.0 * first.gflops / real["matmul_fp32_gflops"])

    # a low matmul peak in the file, as a busy device measures one; a new process reads it
    low = real["matmul_fp32_gflops"] * first.pct_peak_flops / 100.0 / 20.0  # the case: 20x "its peak"
    path.write_text(json.dumps({**real, "matmul_fp32_gflops": low}))
    peaks_mod._DEVICE_PEAKS.clear()
    peaks_mod._PEAKS.clear()
    second = list(run_cases([case], config))[0]
    assert second.outcome == "ok", second.message
    fixed = json.loads(path.read_text())["matmul_fp32_gflops"]
    assert fixed > 5 * low  # measured again, the file mended
    assert second.pct_peak_flops == pytest.approx(100.0 * second.gflops / fixed)
    assert second.pct_peak_flops < 100.0 * (1 + peaks_mod.BEATEN_BY)
