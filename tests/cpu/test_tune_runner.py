"""harness.tune.runner: `kbench tune --executor local` checks and times each candidate in a warm
child process. A suite's tuned workload whose knob ``off`` makes some configurations read 4 GiB past
their input (a segfault) is tuned to the end: those trials are stored with RUNTIME_DEVICE and the
crash named, the others measured, and the best configuration computes numpy's float64 answer."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap

import numpy as np
import pytest

import kernels as tvm
from harness.cli import main
from harness.model import Case
from harness.tune.runner import CheckedRunner, RunnerSettings
from kernels import workloads
from kernels.tuning import LocalBuilder, MeasureErrorNo, MeasureInput

pytestmark = [pytest.mark.slow]

FAR = 2**30 + 7

PROBE = f'''
"""B[i] = A[i + off] * 2 over A of n + 8 elements: off up to 8 is in bounds, {FAR} is 4 GiB past A."""
import numpy as np

from kernels import te
from kernels.workloads import Variant, Workload, register


def _shifted(params, dtype, off=0, factor=4):
    n = params["n"]
    A = te.placeholder((n + 8,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: A[i + off] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=factor)
    return s, [A, B]


register(Workload(
    name="tune_probe_shift", params=("n",), dtypes=("float32",),
    variants={{"shifted": Variant("shifted", _shifted, ("c",), (("off", 0), ("factor", 4)))}},
    make_args=lambda p, d, rng: [rng.uniform(size=(p["n"] + 8,)).astype(d), np.full((p["n"],), np.nan, d)],
    reference=lambda a: [2.0 * a[0].astype(np.float64)[:-8]], outputs=(1,), flops=lambda p: float(p["n"]),
    bytes=lambda p, d: 8.0 * p["n"]))
'''


@pytest.fixture(autouse=True)
def _workloads_restored():
    before, mods = dict(workloads.REGISTRY), set(sys.modules)
    yield
    workloads.REGISTRY.clear()
    workloads.REGISTRY.update(before)
    for name in set(sys.modules) - mods:
        if name.startswith("kbench_tune_probe"):
            del sys.modules[name]


def _rows(db, sql, *args):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def test_kbench_tune_records_segfaulting_candidates_and_goes_on(tmp_path, capsys):
    (tmp_path / "kbench_tune_probe_shift.py").write_text(textwrap.dedent(PROBE))
    suite, db = tmp_path / "probe.toml", tmp_path / "k.db"
    suite.write_text('[suite]\nname = "probe"\ntargets = ["c"]\ntimeout_s = 20\n'
                     'imports = ["kbench_tune_probe_shift"]\n\n'
                     '[[workload]]\nname = "tune_probe_shift"\nparams = { n = [256] }\n'
                     'variants = [{ name = "shifted", tuned = true, '
                     f'knobs = {{ off = [0, {FAR}, 3], factor = [4, 8] }} }}]\n')
    code = main(["tune", str(suite), "--trials", "6", "--tuner", "grid", "--executor", "local",
                 "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    trials = _rows(db, "SELECT knobs, error_no, error, costs FROM tuning_trials ORDER BY id")
    assert len(trials) == 6
    for knobs, error_no, error, costs in trials:
        off = json.loads(knobs)["off"]
        if off == FAR:
            assert error_no == MeasureErrorNo.RUNTIME_DEVICE and "SIGSEGV" in error, (knobs, error)
        elif off == 3:  # reads in bounds, but not what the reference computes: checked in the child
            assert error_no == MeasureErrorNo.WRONG_ANSWER and "output 0" in error, (knobs, error)
        else:
            assert error_no == 0 and all(c > 0 for c in json.loads(costs)), (knobs, error)
    (best,) = _rows(db, "SELECT knobs FROM best_configs")
    knobs = json.loads(best[0])
    assert knobs["off"] == 0
    # the stored best, built here, computes the reference in float64
    w = workloads.get("tune_probe_shift")
    s, args = w.build("shifted", {"n": 256}, "float32", knobs)
    f = tvm.build(s, args, "c")
    a = np.random.default_rng(1).uniform(size=264).astype("float32")
    b = tvm.nd.array(np.full(256, np.nan, "float32"))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), 2.0 * a.astype(np.float64)[:256], rtol=1e-6)


def test_the_checked_runner_measures_in_its_child_and_can_run_here_for_debugging(tmp_path):
    sys.path.insert(0, str(tmp_path))
    try:
        (tmp_path / "kbench_tune_probe_shift2.py").write_text(
            textwrap.dedent(PROBE).replace("tune_probe_shift", "tune_probe_shift2"))
        __import__("kbench_tune_probe_shift2")
    finally:
        sys.path.remove(str(tmp_path))  # as a suite's import leaves it: the child must still find it
    from harness.tune.task import make_task

    case = Case("probe", "tune_probe_shift2", "shifted", (("n", 64),), (), "float32", "c", tuned=True,
                timeout_s=20)
    task = make_task(case, [("off", [0, FAR]), ("factor", [4])], "")
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(2)]
    built = LocalBuilder().build(inputs)
    settings = RunnerSettings(number=1, repeat=1)
    with CheckedRunner(case, settings, imports=("kbench_tune_probe_shift2",)) as runner:
        good, bad = runner.run(inputs, built)
        assert runner.worker.replacements == 1
    assert good.ok and good.costs[0] > 0, good
    assert bad.error_no == MeasureErrorNo.RUNTIME_DEVICE and "SIGSEGV" in bad.costs[0]
    here = CheckedRunner(case, settings, isolate=False)
    (res,) = here.run(inputs[:1], built[:1])
    assert res.ok and here._worker is None
