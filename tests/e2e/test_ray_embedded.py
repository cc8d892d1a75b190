"""The embedded Ray (RayExecutor with no address) running CPU batches: they carry no runtime
environment of their own (so Ray's started worker processes take them), and still never see a GPU:
the task body hides them before anything touches CUDA."""

from __future__ import annotations

import os

import pytest
from test_ray_dispatch import _PROBE, HERE, IMPORTS, planted, run_collect

ray = pytest.importorskip("ray")

from harness.execute.ray_executor import RayExecutor  # noqa: E402


@pytest.mark.slow
def test_cpu_batches_without_a_runtime_env_see_no_gpu(tmp_path, monkeypatch):
    if ray.is_initialized():  # another module's cluster: this test needs an embedded one
        ray.shutdown()
    (tmp_path / "probe_gpu_env_mod.py").write_text(_PROBE)
    # what the embedded Ray's processes inherit: the planted workloads, and a GPU the driver sees
    monkeypatch.setenv("PYTHONPATH", f"{HERE}{os.pathsep}{tmp_path}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    log = tmp_path / "seen.txt"
    ex = RayExecutor(None, imports=IMPORTS + ("probe_gpu_env_mod",), poll_s=0.05, init_kwargs={"num_cpus": 2})
    try:
        assert ex.embedded and ex.cluster.cpu_runtime_env() == {}
        cases = [planted("probe_gpu_env", 32 + i, knobs=(("log", str(log)),)) for i in range(4)]
        got = run_collect(ex, [cases[:2], cases[2:]])
    finally:
        ex.close()
    assert sorted((r.case.key, r.outcome) for r in got) == sorted((c.key, "ok") for c in cases), got
    seen = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert len(seen) >= 4 and all(gpus == "" for _, gpus in seen), seen  # "" in every worker process
    assert os.getpid() not in {int(pid) for pid, _ in seen}  # they ran in Ray's workers, not here
