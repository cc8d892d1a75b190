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
        assert runner.pool.child.replacements == 1
    assert good.ok and good.costs[0] > 0, good
    assert bad.error_no == MeasureErrorNo.RUNTIME_DEVICE and "SIGSEGV" in bad.costs[0]
    here = CheckedRunner(case, settings, isolate=False)
    (res,) = here.run(inputs[:1], built[:1])
    assert res.ok and here._pool is None


# -- the harness's clock (harness.tune.runner.measure_checked, check_and_time) ---------------------


def _row_sum_job(n: int = 512, m: int = 512, factor: int = 16):
    """A tuned c row sum, one configuration built here, as the RunJob the runner sends its child."""
    from harness.execute.inputs import case_data
    from harness.tune.task import make_task
    from kernels.tuning.measure import RunJob, arg_infos

    case = Case("clock", "row_sum", "split", (("n", n), ("m", m)), (), "float32", "c", tuned=True,
                timeout_s=30)
    task = make_task(case, [("factor", [factor]), ("rows", [32])], "")
    (built,) = LocalBuilder().build([MeasureInput(task.target, task, task.config_space.get(0))])
    assert built.ok, built.error
    # the arguments' shapes as the case's inputs have them (the template's are symbolic)
    args = arg_infos(case_data(workloads.get("row_sum"), case, 0).args)
    return case, RunJob("c", args, None, 1, 1, 0.0, 30.0, module=built.module)


def test_check_and_time_measures_with_the_harness_timer_and_loop():
    """measure_checked times a checked candidate with the timer `kbench run` picks for c (CpuTimer,
    the LLC-sized flush before every sample) in the harness loop under the config given (warm-up,
    min_samples, the cap), and check_and_time's one cost is a median of that loop: with injected
    work of once the launch's own time inside every timed sample (MeasureConfig.slowdown, which only
    the harness timers do), the cost doubles."""
    from harness.measure.timers import _llc_bytes, host_flush_bytes
    from harness.model import MeasureConfig
    from harness.tune.runner import check_and_time, measure_checked

    case, job = _row_sum_job()
    config = MeasureConfig(min_samples=7, min_time_s=0.0, max_time_s=3.0, warmup_min=4, max_rel_ci=0.5)
    timing, error_no = measure_checked(case, 0, job, config)
    assert error_no == 0, timing
    tel = dict(timing.telemetry)
    assert tel["kind"] == "cpu" and tel["timer"] == "perf_counter" and timing.mode == "cold"
    assert tel["flush_bytes"] == host_flush_bytes(_llc_bytes()) > 0  # flushed before each sample
    assert tel["warmup_launches"] >= 4 and len(timing.samples) >= 7 and timing.stop_reason
    assert timing.ci_low <= timing.median <= timing.ci_high
    plain = MeasureConfig(min_samples=15, min_time_s=0.05, max_time_s=1.0, max_rel_ci=0.05)
    slower = MeasureConfig(min_samples=15, min_time_s=0.05, max_time_s=1.0, max_rel_ci=0.05, slowdown=1.0)
    (base,), e1 = check_and_time(case, 0, job, plain)
    (doubled,), e2 = check_and_time(case, 0, job, slower)
    assert e1 == e2 == 0
    # 2x asked; the spin is sized from the warm-up's median, so a shared host's noise widens it
    assert doubled / base > 1.3, (base, doubled)  # about 2; no upper bound: a busy host slows either


def test_check_and_time_checks_before_it_times_on_either_clock():
    """A wrong candidate is WRONG_ANSWER on the harness clock and on time_evaluator alike (the float64
    check comes first); the time_evaluator clock gives its ``repeat`` costs, the harness clock one."""
    from harness.model import MeasureConfig
    from harness.tune.runner import check_and_time

    case, job = _row_sum_job(n=64, m=64)
    config = MeasureConfig(min_samples=3, min_time_s=0.0, max_time_s=0.2, max_rel_ci=0.5)
    costs, error_no = check_and_time(case, 0, job, config)
    assert error_no == 0 and len(costs) == 1 and costs[0] > 0
    from dataclasses import replace

    costs, error_no = check_and_time(case, 0, replace(job, repeat=3))
    assert error_no == 0 and len(costs) == 3 and min(costs) > 0
    wrong = replace(case, rtol=0.0, atol=0.0)  # float32 sums against float64, exactly: never equal
    for cfg in (config, None):
        costs, error_no = check_and_time(wrong, 0, job, cfg)
        assert error_no == MeasureErrorNo.WRONG_ANSWER and "output 0" in costs[0], costs


def test_runner_settings_of_the_harness_clock_are_checked_and_never_dearer_than_the_suite():
    from harness.errors import InvalidSetting
    from harness.model import MeasureConfig

    for bad in (dict(clock="wall"), dict(max_time_s=0), dict(min_samples=0), dict(max_rel_ci=1.5),
                dict(min_time_s=2.0, max_time_s=1.0)):
        with pytest.raises(InvalidSetting, match="RunnerSettings"):
            RunnerSettings(**bad)
    suite = MeasureConfig(min_samples=20, min_time_s=0.5, max_time_s=15.0, max_rel_ci=0.005, mode="cold",
                          warmup_min=5, clock_floor=0.8, stopping="median-ci")
    got = RunnerSettings(max_time_s=1.0, min_time_s=0.1, min_samples=5, max_rel_ci=0.02).measure_config(suite)
    assert (got.max_time_s, got.min_time_s, got.min_samples, got.max_rel_ci) == (1.0, 0.1, 5, 0.02)
    assert (got.warmup_min, got.clock_floor, got.stopping, got.mode) == (5, 0.8, "median-ci", "cold")
    cheap = MeasureConfig(min_samples=3, min_time_s=0.01, max_time_s=0.2, max_rel_ci=0.05)
    got = RunnerSettings().measure_config(cheap)  # a suite cheaper than the defaults stays as it is
    assert (got.max_time_s, got.min_time_s, got.min_samples, got.max_rel_ci) == (0.2, 0.01, 3, 0.05)
