"""meta_schedule.tune_tir on the tuning engine, with OpenCL (PoCL) and C standing in for the GPU:
the notes' call form, a design space generated from the block, records in work_dir reused by a
later call, the tuned schedule correct against numpy float64, target tags, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kbtest import opencl_available, run

import kernels as tvm
from kernels import meta_schedule as ms
from kernels.tuning.tir_task import TIRTask
from kernels.workloads import tensorir as notes

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@needs_opencl
def test_tune_tir_matmul_on_opencl_and_reuse_its_records(tmp_path):
    n = 64
    mod = notes.matmul_module({"n": n})
    config = ms.TuneConfig(max_trials_global=10, num_trials_per_iter=5)
    sch = ms.tune_tir(mod=mod, target="opencl", config=config, work_dir=str(tmp_path), task_name="main",
                      seed=1)
    assert isinstance(sch, tvm.tir.Schedule)
    assert "blockIdx" in sch.mod.script() and "shared" in sch.mod.script()  # multi-level tiling applied
    assert len(sch.trace.insts) > 5
    records = (tmp_path / "tuning_records.json").read_text().splitlines()
    assert len(records) == 10 and all(json.loads(r)["input"][1] == "tir/main" for r in records)
    f = tvm.build(sch.mod, target="opencl")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (n, n)).astype("float32"), rng.uniform(-1, 1, (n, n)).astype("float32")
    _, _, c = run(f, "opencl", a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    # a second call with the same function and folder measures nothing new and gives the same best
    again = ms.tune_tir(mod=mod, target="opencl", config=config, work_dir=str(tmp_path), task_name="main",
                        seed=2)
    assert len((tmp_path / "tuning_records.json").read_text().splitlines()) == 10
    assert again.mod.script() == sch.mod.script()


def test_elementwise_space_on_c(tmp_path):
    n = 4096
    mod = notes.vector_add_module({"n": n})
    task = TIRTask(mod, "c")
    assert task.kind == "fuse_split" and len(task.config_space) == 5
    sch = ms.tune_tir(mod, "c", ms.TuneConfig(max_trials_global=3, num_trials_per_iter=3), str(tmp_path))
    f = tvm.build(sch.mod, target="c")
    a, b = np.arange(n, dtype="float32"), np.ones(n, "float32")
    _, _, c = run(f, "c", a, b, np.zeros(n, "float32"))
    np.testing.assert_array_equal(c, a.astype(np.float64) + 1.0)


def test_the_gpu_space_is_multi_level_tiling():
    task = TIRTask(notes.matmul_module({"n": 1024}), "cuda")
    assert task.kind == "tile2s1r"
    assert set(task.config_space.space_map) == {"tile_y", "tile_x", "tile_k", "vector", "unroll_k"}
    # every tiling divides the extents: no point of the space is refused for its shape
    for name, sp in task.config_space.space_map.items():
        if name.startswith("tile_"):
            assert all(1024 % (e.size[1] * (e.size[2] if len(e.size) > 2 else 1)) == 0 for e in sp.entities)
    assert task.flop == 2 * 1024 ** 3


def test_target_tags():
    assert "-arch=sm_80" in str(ms.target_of_tag("nvidia/nvidia-a100"))
    # the P100's sm_60 is older than CUDA 13 builds: the present GPU's architecture, or the default
    assert str(ms.target_of_tag("nvidia/tesla-p100")).startswith("cuda") and "sm_60" not in \
        str(ms.target_of_tag("nvidia/tesla-p100"))
    assert str(ms.target_of_tag("opencl")).startswith("opencl")


def test_the_cpu_space_is_multi_level_tiling(tmp_path):
    n = 64
    mod = notes.matmul_module({"n": n})
    task = TIRTask(mod, "c")
    assert task.kind == "cpu_tile2s1r"
    assert set(task.config_space.space_map) == {"tile_i", "tile_j", "tile_k", "unroll_k"}
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (n, n)).astype("float32")
    b = rng.uniform(-1, 1, (n, n)).astype("float32")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    config = {"tile_i": [-1, 2, 4], "tile_j": [-1, 2, 16], "tile_k": [-1, 8], "unroll_k": 1}
    f = tvm.build(task.instantiate(config)[0], target="c")
    src = f.get_source()
    assert "#pragma omp parallel for" in src and "float C_local[64];" in src and "#pragma GCC ivdep" in src
    _, _, c = run(f, "c", a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
    sch = ms.tune_tir(mod, "c", ms.TuneConfig(max_trials_global=3, num_trials_per_iter=3), str(tmp_path))
    _, _, c = run(tvm.build(sch.mod, target="c"), "c", a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
