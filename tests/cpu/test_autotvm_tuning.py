"""autotvm's tuning flow on the tuning engine (kernels.tuning): the tutorial's template tuned on
OpenCL (PoCL) with its own calls (measure_option, LocalRunner, XGBTuner, log_to_file,
apply_history_best), records written and read back, failing candidates recorded with their error
number while the search goes on, and the search strategies on a space whose costs are known."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kbtest import assert_int8_gemm_on_opencl, opencl_available, tensorcore_tutorial

import kernels as tvm
from kernels import autotvm, te
from kernels.tuning.measure import MeasureErrorNo, MeasureResult
from kernels.tuning.record import decode, encode, load_from_file

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@pytest.fixture(scope="module")
def tutorial():
    return tensorcore_tutorial()


@needs_opencl
def test_tutorial_tuning_flow_on_opencl(tutorial, tmp_path, capsys):
    """tune_and_evaluate's calls, with the target swapped for OpenCL and a small n_trial: every
    trial logged, the best configuration applied when the template is built again, and the
    result exact (int8 inputs, int32 sums)."""
    N = L = M = 32
    tutorial.update(N=N, L=L, M=M)
    log = tmp_path / "matmul.log"
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, "int8", "NN"),
                               target="opencl")
    option = autotvm.measure_option(builder="local",
                                    runner=autotvm.LocalRunner(number=2, repeat=2, check_correctness=True))
    tuner = autotvm.tuner.XGBTuner(task, plan_size=6, seed=3)
    tuner.tune(n_trial=12, measure_option=option,
               callbacks=[autotvm.callback.log_to_file(str(log)), autotvm.callback.progress_bar(12)])
    assert "Progress: (12/12)" in capsys.readouterr().out
    records = list(load_from_file(log))
    assert len(records) == 12
    assert len({inp.config.index for inp, _ in records}) == 12  # no configuration measured twice
    ok = [(inp, res) for inp, res in records if res.error_no == MeasureErrorNo.NO_ERROR]
    assert ok, [res for _, res in records]
    best_inp, best_res = min(ok, key=lambda p: np.mean(p[1].costs))
    assert tuner.best_config.index == best_inp.config.index

    ctx = autotvm.apply_history_best(str(log))
    best = ctx.query(task.target, task.workload)
    assert best.index == best_inp.config.index
    with autotvm.apply_history_best(str(log)):
        with tvm.target.Target("opencl"):
            s, bufs = tutorial["test_gemm"](N, L, M, "int8", "NN")
    # the template ran with the best configuration: its knobs are those of the record
    cfg = task.config_space.get(best.index)
    assert cfg.to_values() == best.to_values()
    assert_int8_gemm_on_opencl(s, bufs, N, L, M)


@autotvm.template("test/picky_scale")
def picky_scale(n):
    """An elementwise template whose 'bad' knob values fail in different places."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("split", [4, 8, 0])  # 0: split refuses the factor (instantiation error)
    cfg.define_knob("inner", ["serial", "unroll"])
    if cfg["split"].val == 0:
        s[B].split(B.op.axis[0], factor=0)
    xo, xi = s[B].split(B.op.axis[0], factor=cfg["split"].val)
    if cfg["inner"].val == "unroll":
        s[B].unroll(xi)
    return s, [A, B]


def test_failing_candidates_are_recorded_and_the_search_goes_on(tmp_path):
    task = autotvm.task.create("test/picky_scale", args=(64,), target="c")
    assert len(task.config_space) == 6
    log = tmp_path / "t.log"
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.tune(n_trial=100, measure_option=autotvm.measure_option("local", autotvm.LocalRunner(number=1)),
               callbacks=[autotvm.callback.log_to_file(str(log))])
    records = list(load_from_file(log))
    assert [inp.config.index for inp, _ in records] == list(range(6))  # grid order, every point once
    by_split = {}
    for inp, res in records:
        by_split.setdefault(inp.config.to_values()["split"], []).append(res)
    assert all(r.error_no == MeasureErrorNo.INSTANTIATION_ERROR and "factor" in str(r.costs[0])
               for r in by_split[0])
    assert all(r.error_no == MeasureErrorNo.NO_ERROR and min(r.costs) > 0
               for s in (4, 8) for r in by_split[s])
    assert tuner.best_config.to_values()["split"] in (4, 8)


def test_records_round_trip():
    task = autotvm.task.create("test/picky_scale", args=(64,), target="c")
    inp = autotvm.MeasureInput(task.target, task, task.config_space.get(3))
    res = MeasureResult((1.5e-6, 1.7e-6), 0, 0.25, 1700000000.0)
    line = encode(inp, res)
    obj = json.loads(line)
    assert obj["version"] == 0.2 and obj["input"][1:3] == ["test/picky_scale", [64]]
    assert obj["config"]["index"] == 3 and obj["result"][0] == [1.5e-6, 1.7e-6]
    inp2, res2 = decode(line)
    assert inp2.task.workload == task.workload and inp2.config.to_values() == inp.config.to_values()
    assert res2.costs == res.costs and res2.error_no == 0


@autotvm.template("test/bowl")
def bowl(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("x", list(range(16)))
    cfg.define_knob("y", list(range(16)))
    return s, [A, B]


class BowlRunner:
    """A runner with a known landscape: the cost of (x, y) is a bowl around (11, 4). It stands in
    for the device so that what is tested is the search strategy itself."""

    def run(self, inputs, builds):
        out = []
        for inp in inputs:
            v = inp.config.to_values()
            cost = 1e-3 * (1.0 + 0.05 * ((v["x"] - 11) ** 2 + (v["y"] - 4) ** 2))
            out.append(MeasureResult((cost,), 0, 0.0, 0.0))
        return out


class NoBuild:
    def build(self, inputs):
        return [None] * len(inputs)


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_xgb_tuner_finds_the_bottom_of_a_bowl_in_a_quarter_of_the_space(seed, overlap):
    """On 256 points, within 5 % of the best in at most 64 trials (what the grid needs 256 for),
    batch by batch and with the proposals one batch behind the measurements."""
    task = autotvm.task.create("test/bowl", args=(8,), target="c")
    option = autotvm.measure_option(NoBuild(), BowlRunner())
    tuner = autotvm.tuner.XGBTuner(task, plan_size=16, seed=seed, overlap=overlap)
    tuner.tune(n_trial=64, measure_option=option)
    best_cost = task.flop / tuner.best_flops
    assert best_cost <= 1.05e-3 * (1 + 1e-9), tuner.best_config  # 5 % (the ring next to the bottom)
    assert len(tuner.visited) == 64


def test_random_tuner_is_reproducible_and_never_repeats():
    task = autotvm.task.create("test/bowl", args=(8,), target="c")
    option = autotvm.measure_option(NoBuild(), BowlRunner())
    orders = []
    for _ in range(2):
        t = autotvm.tuner.RandomTuner(task, seed=7)
        seen = []
        t.tune(n_trial=40, measure_option=option,
               callbacks=[lambda tu, i, r: seen.extend(x.config.index for x in i)])
        orders.append(seen)
    assert orders[0] == orders[1] and len(set(orders[0])) == 40


def test_grid_builds_the_next_batch_while_the_current_one_runs():
    """Grid and random proposals do not depend on results: batch i + 1 is compiled while batch i is
    timed (the device does not wait for the compiler); so does the model tuner unless told not to."""
    import threading
    import time

    events = []
    lock = threading.Lock()

    class Builder(autotvm.LocalBuilder):
        def build(self, inputs):
            with lock:
                events.append(("build", time.perf_counter(), [i.config.index for i in inputs]))
            return super().build(inputs)

    class Runner(autotvm.LocalRunner):
        def run(self, inputs, built):
            t0 = time.perf_counter()
            out = super().run(inputs, built)
            time.sleep(0.2)  # a slow device: the next build must already be under way
            with lock:
                events.append(("run", t0, time.perf_counter(), [i.config.index for i in inputs]))
            return out

    task = autotvm.task.create("test/picky_scale", args=(64,), target="c")
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.tune(n_trial=6, measure_option=autotvm.measure_option(Builder(n_parallel=2), Runner(number=1)))
    builds = [e for e in events if e[0] == "build"]
    runs = [e for e in events if e[0] == "run"]
    assert [b[2] for b in builds] == [[0, 1], [2, 3], [4, 5]]
    assert [r[3] for r in runs] == [[0, 1], [2, 3], [4, 5]]
    for k in range(2):
        assert builds[k + 1][1] < runs[k][2], "batch k + 1 was not built while batch k ran"
    assert autotvm.tuner.XGBTuner(task).overlap and autotvm.tuner.RandomTuner(task).overlap
    assert not autotvm.tuner.XGBTuner(task, overlap=False).overlap
