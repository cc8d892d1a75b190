"""Bad input to the tuning engine's Ray builder and runner, and to the module bytes they pass around,
gives an error naming what is wrong: options (before any cluster is touched), Ray missing, bytes
that are not a module. (A GPU model the cluster lacks, or several models and none chosen, need a
cluster: tests/cpu/test_tuning_ray.py.)"""

from __future__ import annotations

import sys

import pytest

import kernels as tvm
from kernels import autotvm, te
from kernels.runtime.serialize import ModuleFormatError, module_from_bytes, module_to_bytes
from kernels.tuning import ray_measure
from kernels.tuning.ray_measure import RayMeasureError


@pytest.mark.parametrize("kwargs, match", [
    ({"timeout": 0}, r"RayBuilder: timeout must be > 0, got 0"),
    ({"timeout": "soon"}, r"RayBuilder: timeout must be a number, got 'soon'"),
    ({"n_parallel": 0}, r"RayBuilder: n_parallel must be >= 1, got 0"),
    ({"runtime_env": "PYTHONPATH=."}, r"RayBuilder: runtime_env must be a dict, got str"),
])
def test_ray_builder_options(kwargs, match):
    with pytest.raises(RayMeasureError, match=match):
        autotvm.RayBuilder(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"number": 0}, r"RayRunner: number must be >= 1, got 0"),
    ({"repeat": -2}, r"RayRunner: repeat must be >= 1, got -2"),
    ({"timeout": -1}, r"RayRunner: timeout must be > 0, got -1"),
    ({"min_repeat_ms": -5}, r"RayRunner: min_repeat_ms must be >= 0, got -5"),
    ({"cooldown_interval": "a while"}, r"RayRunner: cooldown_interval must be a number, got 'a while'"),
    ({"max_restarts": -1}, r"RayRunner: max_restarts must be >= 0, got -1"),
    ({"runtime_env": ["x"]}, r"RayRunner: runtime_env must be a dict, got list"),
    ({"measure_fn": "check_and_time"}, r"RayRunner: measure_fn must be callable, got str"),
    ({"pool": object()}, r"RayRunner: a pool needs the name of its factory of this runner's worker \(worker=\)"),
])
def test_ray_runner_options(kwargs, match):
    with pytest.raises(RayMeasureError, match=match):
        autotvm.RayRunner(**kwargs)


def test_ray_missing_is_named(monkeypatch):
    monkeypatch.setattr(ray_measure, "_CLUSTER", None)
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" fails as where it is not installed
    with pytest.raises(RayMeasureError, match=r"RayBuilder needs Ray: pip install 'kbench\[ray\]'"):
        autotvm.RayBuilder()
    with pytest.raises(RayMeasureError, match=r"RayRunner needs Ray"):
        autotvm.RayRunner(gpu_model="H100")


def test_bytes_that_are_not_a_module():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    data = module_to_bytes(tvm.build(te.create_schedule(B.op), [A, B], "c"))
    with pytest.raises(ModuleFormatError, match="the module bytes is not a module archive"):
        module_from_bytes(data[: len(data) // 3])
    with pytest.raises(ModuleFormatError, match="module_from_bytes: expected bytes, got str"):
        module_from_bytes("lib.so")
    with pytest.raises(ModuleFormatError, match="holds no meta.json"):
        import io
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("lib.so")
            info.size = 3
            tar.addfile(info, io.BytesIO(b"abc"))
        module_from_bytes(buf.getvalue())
