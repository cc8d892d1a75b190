"""kernels.tuning.measure's LocalRunner measures every candidate in a warm child process: a template
some of whose configurations read 4 GiB past their input (a segfault on the C target and in PoCL's
kernels alike) is tuned by autotvm's own calls; the session finishes, the faulting candidates are
recorded with an error number and a message, and every other candidate is measured and, built again
from its record, computes numpy's float64 answer."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels import autotvm, te
from kernels.tuning.measure import MeasureErrorNo, MeasureInput, MeasureResult
from kernels.tuning.record import load_from_file

N = 64
#: the offsets the template's knob draws: 2**30 + 7 float32 elements is 4 GiB past A
OFFSETS = [0, 1, 2**30 + 7, 3]
FAULTS = {2**30 + 7}


@autotvm.template("test/offset_read")
def offset_read(n, gpu):
    """``B[i] = A[i + off] * 2`` with A holding n + 8 elements: offsets up to 8 stay inside A."""
    cfg = autotvm.get_config()
    cfg.define_knob("off", OFFSETS)
    cfg.define_knob("split", [1, 2, 4])
    off = cfg["off"].val
    A = te.placeholder((n + 8,), name="A")
    B = te.compute((n,), lambda i: A[i + off] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=cfg["split"].val)
    if gpu:
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def _expected(a: np.ndarray, off: int) -> np.ndarray:
    return a.astype(np.float64)[off:off + N] * 2.0


def _tune(target: str, log, runner) -> tuple:
    task = autotvm.task.create("test/offset_read", args=(N, target != "c"), target=target)
    assert len(task.config_space) == 12
    tuner = autotvm.tuner.XGBTuner(task, plan_size=4, seed=1)
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(), runner=runner)
    t0 = time.monotonic()
    tuner.tune(n_trial=12, measure_option=option, callbacks=[autotvm.callback.log_to_file(str(log))])
    return task, list(load_from_file(log)), time.monotonic() - t0


def _check_session(task, records, target: str) -> None:
    assert len(records) == 12
    assert len({inp.config.index for inp, _ in records}) == 12  # the whole space, each once
    dev = tvm.device(target, 0)
    rng = np.random.default_rng(0)
    measured = 0
    for inp, res in records:
        off = inp.config["off"].val
        if off in FAULTS:
            assert res.error_no == MeasureErrorNo.RUNTIME_DEVICE, (inp.config, res)
            assert "crashed its measuring process" in res.costs[0] and "SIGSEGV" in res.costs[0], res
            continue
        assert res.error_no == MeasureErrorNo.NO_ERROR, (inp.config, res)
        assert len(res.costs) == 2 and all(c > 0 for c in res.costs)
        measured += 1
        # the configuration of the record, built again here, computes numpy's answer
        with tvm.target.Target(target):
            s, args = task.instantiate(inp.config)
        f = tvm.build(s, args, target)
        a = rng.uniform(size=N + 8).astype("float32")
        b = tvm.nd.array(np.full(N, np.nan, "float32"), dev)
        f(tvm.nd.array(a, dev), b)
        np.testing.assert_allclose(b.numpy(), _expected(a, off), rtol=1e-6)
    assert measured == 9


def test_faulting_candidates_on_c_are_recorded_and_the_session_goes_on(tmp_path):
    with autotvm.LocalRunner(number=2, repeat=2, timeout=10) as runner:
        task, records, _ = _tune("c", tmp_path / "c.log", runner)
        assert runner.pool.child.replacements == 3  # one fresh child per faulting candidate
    _check_session(task, records, "c")
    with autotvm.apply_history_best(str(tmp_path / "c.log")) as ctx:
        best = ctx.query(task.target, task.workload)
    assert best["off"].val not in FAULTS


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
def test_faulting_candidates_on_opencl_are_recorded_and_the_session_goes_on(tmp_path):
    with autotvm.LocalRunner(number=2, repeat=2, timeout=10) as runner:
        task, records, _ = _tune("opencl", tmp_path / "cl.log", runner)
    _check_session(task, records, "opencl")


def test_wrong_candidates_are_found_against_the_reference_in_the_child(tmp_path):
    """check_correctness compares with configuration 0 (off = 0), computed in the measuring process:
    offsets 1 and 3 are WRONG_ANSWER, offset 0 is measured, the faulting offset crashed."""
    with autotvm.LocalRunner(number=1, repeat=1, timeout=10, check_correctness=True) as runner:
        task, records, _ = _tune("c", tmp_path / "checked.log", runner)
    by_off: dict = {}
    for inp, res in records:
        by_off.setdefault(inp.config["off"].val, set()).add(res.error_no)
    assert by_off == {0: {MeasureErrorNo.NO_ERROR}, 1: {MeasureErrorNo.WRONG_ANSWER},
                      3: {MeasureErrorNo.WRONG_ANSWER}, 2**30 + 7: {MeasureErrorNo.RUNTIME_DEVICE}}


@autotvm.template("test/slow_scale")
def slow_scale(n):
    """A float sum over 2**40 terms for every output: never finishes."""
    cfg = autotvm.get_config()
    cfg.define_knob("inner", [1 << 20, 1])
    A = te.placeholder((n,), name="A")
    k1 = te.reduce_axis((0, cfg["inner"].val), "k1")
    k2 = te.reduce_axis((0, 1 << 20), "k2")
    B = te.compute((n,), lambda i: te.sum(A[(i + k2) % n], axis=[k1, k2]), name="B")
    return te.create_schedule(B.op), [A, B]


def test_a_hanging_candidate_is_a_run_timeout_and_the_next_one_is_measured():
    task = autotvm.task.create("test/slow_scale", args=(16,), target="c")
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(2)]
    built = autotvm.LocalBuilder().build(inputs)
    with autotvm.LocalRunner(number=1, repeat=1, timeout=1.0) as runner:
        t0 = time.monotonic()
        hung, fine = runner.run(inputs, built)
        took = time.monotonic() - t0
    assert hung.error_no == MeasureErrorNo.RUN_TIMEOUT, hung
    assert "longer than 1 s" in hung.costs[0]
    assert fine.error_no == MeasureErrorNo.NO_ERROR and fine.costs[0] > 0, fine
    assert took < 1.0 + 5.0 + 20.0  # the timeout, the load grace, a fresh child's start on a busy host


def test_the_child_stays_warm_across_candidates():
    task = autotvm.task.create("test/offset_read", args=(N, False), target="c")
    safe = [i for i in range(len(task.config_space)) if task.config_space.get(i)["off"].val not in FAULTS]
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in safe]
    built = autotvm.LocalBuilder().build(inputs)
    with autotvm.LocalRunner(number=1, repeat=1) as runner:
        runner.run(inputs[:1], built[:1])  # the child's start
        pid = runner.pool.child.pid
        t0 = time.perf_counter()
        results = runner.run(inputs[1:], built[1:])
        per = (time.perf_counter() - t0) / len(results)
        assert runner.pool.child.pid == pid and runner.pool.generation == 1
    assert all(isinstance(r, MeasureResult) and r.ok for r in results), results
    assert pid != os.getpid()
    assert per < 0.25, per  # a candidate's load and run, not a process start (~0.5 s)


def test_without_isolation_candidates_run_in_this_process():
    task = autotvm.task.create("test/offset_read", args=(N, False), target="c")
    inputs = [MeasureInput(task.target, task, task.config_space.get(0))]
    built = autotvm.LocalBuilder().build(inputs)
    runner = autotvm.LocalRunner(number=1, repeat=1, isolate=False)
    (res,) = runner.run(inputs, built)
    assert res.ok and runner._pool is None


def test_an_adaptive_runner_timeout_follows_the_fastest_candidate():
    from kernels.tuning.measure import ADAPT_FACTOR, ADAPT_FIRST, LocalRunner

    fixed = LocalRunner(timeout=2)
    fixed.note_run(100.0)
    assert fixed.timeout_now() == 2
    runner = LocalRunner(timeout=2, adaptive_timeout=True)
    assert runner.timeout_now() == 2 * ADAPT_FIRST  # nothing has run yet: room for a slow first one
    runner.note_run(30.0)
    assert runner.timeout_now() == ADAPT_FACTOR * 30.0
    runner.note_run(45.0)  # slower than the fastest: no change
    assert runner.timeout_now() == ADAPT_FACTOR * 30.0
    runner.note_run(0.01)  # never below the configured timeout
    assert runner.timeout_now() == 2
