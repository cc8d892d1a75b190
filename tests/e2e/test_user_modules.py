"""A suite's own workload modules travel to the Ray workers: ``kbench run`` of a suite whose
``imports`` sit next to it (or in a folder its ``import_paths`` names), in a folder outside the
repository, started from yet another folder with the default (embedded Ray) executor.

The kbench subprocess gets PYTHONPATH set to this source tree only: that is how the installed kbench
is found in this checkout (the test must run this tree's code). The user modules' folders are never
on it, nor the working directory: they reach the driver through the suite and the workers through
Ray's runtime environment alone.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.execute.cluster import shipped_modules

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "user_workloads"

PACKAGE_INIT = '''"""A package of workloads named by the suite's import_paths."""
import dataclasses

from kernels import workloads

from .scale import build

workloads.register(dataclasses.replace(
    workloads.get("axpy"), name="axpy_pkg",
    variants={"halved": workloads.Variant("halved", build, ("c",), (("vector", 4),), "from a package")}))
'''

PACKAGE_SCALE = '''"""A helper module of the package: the workers import it through the shipped package."""
from kernels import te


def build(params, dtype, vector=4):
    n = params["n"]
    X = te.placeholder((n,), name="X", dtype=dtype)
    Y = te.placeholder((n,), name="Y", dtype=dtype)
    Z = te.compute((n,), lambda i: X[i] * 2.0 + Y[i], name="Z")
    s = te.create_schedule(Z.op)
    _, inner = s[Z].split(Z.op.axis[0], factor=vector)
    s[Z].vectorize(inner)
    return s, [X, Y, Z]
'''


def _user_tree(tmp_path: Path) -> Path:
    """The example module next to a suite, and a package in a sibling folder the suite names."""
    outside = tmp_path / "team"
    (outside / "suites").mkdir(parents=True)
    shutil.copy(EXAMPLE / "my_workloads.py", outside / "suites" / "my_workloads.py")
    pkg = outside / "lib" / "team_kernels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(PACKAGE_INIT)
    (pkg / "scale.py").write_text(PACKAGE_SCALE)
    suite = outside / "suites" / "team.toml"
    suite.write_text(
        '[suite]\nname = "team"\ntargets = ["c"]\nimports = ["my_workloads", "team_kernels"]\n'
        'import_paths = ["../lib"]\n'
        "[measure]\nmin_samples = 3\nmin_time_s = 0.005\nmax_time_s = 0.05\n"
        '[[workload]]\nname = "axpy"\nparams = { n = [1000] }\nvariants = ["vectorized"]\n'
        '[[workload]]\nname = "axpy_pkg"\nparams = { n = [1000] }\n')
    return suite


def test_shipped_modules_are_the_ones_found_in_the_suites_folders(tmp_path):
    suite = _user_tree(tmp_path)
    folders = [str(suite.parent), str(tmp_path / "team" / "lib")]
    got = shipped_modules(["my_workloads", "team_kernels.scale", "kernels.workloads.tensorir", "json"],
                          folders)
    # the single file, the package folder (for a submodule too); installed modules are not shipped
    assert got == [str(suite.parent / "my_workloads.py"), str(tmp_path / "team" / "lib" / "team_kernels")]
    assert shipped_modules(["my_workloads"], []) == []
    # kbench's own packages are never shipped, even from a folder that holds them
    assert shipped_modules(["kernels.workloads.tensorir", "harness"], [str(ROOT)]) == []


def _kbench_run_elsewhere(tmp_path: Path, suite: Path, *extra: str) -> Path:
    """``kbench run SUITE`` started from a folder of its own; the store it wrote."""
    elsewhere = tmp_path / "ci-job"
    elsewhere.mkdir()
    db = elsewhere / "k.db"
    # PYTHONPATH: this tree only, for kbench itself (see the module docstring)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(suite), "--db", str(db),
                           "--out", str(elsewhere / "out"), *extra],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return db


def _assert_both_cases_ok(db: Path) -> None:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT case_key, outcome FROM results ORDER BY case_key").fetchall()
        status = con.execute("SELECT status FROM runs").fetchall()
    assert status == [("done",)]
    assert rows == [("axpy/vectorized[vector=8]/n=1000/float32/c", "ok"),
                    ("axpy_pkg/halved[vector=4]/n=1000/float32/c", "ok")], rows


@pytest.mark.slow
def test_kbench_run_ships_user_modules_to_embedded_ray_workers_from_any_folder(tmp_path):
    pytest.importorskip("ray")
    suite = _user_tree(tmp_path)
    _assert_both_cases_ok(_kbench_run_elsewhere(tmp_path, suite))


@pytest.mark.slow
def test_kbench_run_ships_user_modules_to_a_joined_cluster(tmp_path):
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # a cluster started by this process: its workers see this process's environment, which has
    # kbench (this tree) on its path but neither user folder
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 0,
                                                            "object_store_memory": 100 * 2**20})
    try:
        suite = _user_tree(tmp_path)
        _assert_both_cases_ok(_kbench_run_elsewhere(tmp_path, suite, "--address", cluster.address))
    finally:
        cluster.shutdown()
