"""The tuning loop with builds overlapped with timed runs (kernels.tuning.tuner.Tuner.tune): a model
tuner proposes and builds batch i + 1 while batch i is measured, from the results of batches
0 .. i - 1. Checked against hand-written loops that call the tuner's own steps in the documented
order (batch by batch, and one batch behind), on landscapes whose costs are known and on real C
builds."""

from __future__ import annotations

import threading
import time

import pytest

from kernels import autotvm, te
from kernels.tuning.measure import MeasureErrorNo, MeasureInput, MeasureResult
from kernels.tuning.record import load_from_file
from kernels.tuning.tuner import EvolutionaryTuner, XGBTuner


@autotvm.template("test/overlap_bowl")
def overlap_bowl(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("x", list(range(12)))
    cfg.define_knob("y", list(range(12)))
    return s, [A, B]


def bowl_cost(values) -> float:
    """A bowl around (9, 3): what the search should find."""
    return 1e-3 * (1.0 + 0.05 * ((values["x"] - 9) ** 2 + (values["y"] - 3) ** 2))


class BowlRunner:
    """Known costs (the device's stand-in); remembers what it ran and what is running now."""

    def __init__(self, delay: float = 0.0, flat: bool = False):
        self.delay, self.flat = delay, flat
        self.ran = []
        self.running = frozenset()
        self.started = [threading.Event() for _ in range(64)]  # set when the k-th batch starts

    def run(self, inputs, builds):
        self.running = frozenset(i.config.index for i in inputs)
        self.started[len(self.ran)].set()
        if self.delay:
            time.sleep(self.delay)
        self.ran.append([i.config.index for i in inputs])
        out = [MeasureResult((1e-3 if self.flat else bowl_cost(i.config.to_values()),), 0, 0.0, 0.0)
               for i in inputs]
        self.running = frozenset()
        return out


class NoBuild:
    def build(self, inputs):
        return [None] * len(inputs)


def bowl_task():
    return autotvm.task.create("test/overlap_bowl", args=(8,), target="c")


def make_tuner(kind: str, task, overlap: bool, seed: int = 0, plan_size: int = 8):
    if kind == "xgb":
        return XGBTuner(task, plan_size=plan_size, feature_type="knob", seed=seed, overlap=overlap)
    return EvolutionaryTuner(task, plan_size=plan_size, feature_type="knob", seed=seed, overlap=overlap,
                             population=32, generations=2)


def reference_loop(tuner, runner, n_trial: int, batch: int, lagged: bool):
    """The tuner's steps in the order the loop documents, written out: batch by batch (each
    proposed after every earlier result was learnt), or one batch behind (batch i + 1 proposed
    before batch i's results are learnt). Returns the measured indices, batch by batch."""
    proposed = 0

    def propose():
        nonlocal proposed
        if proposed >= n_trial or not tuner.has_next():
            return []
        configs = tuner.next_batch(min(batch, n_trial - proposed))
        proposed += len(configs)
        return [MeasureInput(tuner.task.target, tuner.task, c) for c in configs]

    order, trial = [], 0
    current, pending = propose(), None
    while current:
        if pending is not None:
            tuner.update(*pending)
            pending = None
        ahead = propose() if lagged else None
        results = runner.run(current, None)
        for k, (inp, res) in enumerate(zip(current, results)):
            tuner._note(inp, res, trial + k)
        trial += len(results)
        order.append([i.config.index for i in current])
        if lagged:
            pending = (current, results)
            current = ahead
        else:
            tuner.update(current, results)
            current = propose()
    if pending is not None:
        tuner.update(*pending)
    return order


@pytest.mark.parametrize("kind", ["xgb", "evolutionary"])
@pytest.mark.parametrize("overlap", [False, True])
def test_tune_proposes_what_the_written_out_loop_proposes(kind, overlap):
    """Same seed, same landscape: ``tune`` measures the same configurations in the same batches as
    the loop written out above; sequentially, that is the batch-by-batch loop of autotvm."""
    task = bowl_task()
    runner = BowlRunner()
    tuner = make_tuner(kind, task, overlap)
    tuner.tune(n_trial=44, measure_option=autotvm.measure_option(NoBuild(), runner))
    ref = make_tuner(kind, task, overlap)
    expected = reference_loop(ref, BowlRunner(), 44, 8, lagged=overlap)
    assert runner.ran == expected
    assert [len(b) for b in expected] == [8, 8, 8, 8, 8, 4]
    assert tuner.best_config.index == ref.best_config.index and tuner.flops_history == ref.flops_history
    # the model is brought up to date when tune returns: it has seen every result
    assert tuner._fitted_on == 44 and tuner.model is not None


def test_the_overlapped_and_the_sequential_loop_differ_by_one_batch_of_lag():
    """Not a relabelling: from the third batch on, the overlapped search proposes from less."""
    task = bowl_task()
    runs = {}
    for overlap in (False, True):
        runner = BowlRunner()
        make_tuner("xgb", task, overlap).tune(n_trial=40, measure_option=autotvm.measure_option(NoBuild(),
                                                                                               runner))
        runs[overlap] = runner.ran
    assert runs[False][0] == runs[True][0]  # the first batch: random, from the same seed
    assert runs[False] != runs[True]


class ProbeTuner(XGBTuner):
    """XGBTuner noting, at each proposal, how many results its model was fitted on and which of the
    proposed configurations the runner is timing at that moment."""

    def __init__(self, *args, runner=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.runner = runner
        self.probes = []

    def next_batch(self, batch_size):
        if self.probes:  # batch k > 0 is proposed while batch k - 1 runs: wait until it has started
            self.runner.started[len(self.probes) - 1].wait(timeout=5)
        running = self.runner.running
        out = super().next_batch(batch_size)
        self.probes.append({"fitted_on": self._fitted_on, "running": running,
                            "again": {c.index for c in out} & running})
        return out


def test_proposals_run_while_the_previous_batch_is_timed_and_never_repeat_it():
    task = bowl_task()
    runner = BowlRunner(delay=0.3)
    tuner = ProbeTuner(task, plan_size=8, feature_type="knob", seed=1, runner=runner)
    tuner.tune(n_trial=40, measure_option=autotvm.measure_option(NoBuild(), runner))
    assert len(tuner.probes) == 5
    # batch k (k >= 1) was proposed while batch k - 1 was being timed, from batches 0 .. k - 2
    for k, probe in enumerate(tuner.probes[1:], start=1):
        assert probe["running"] == frozenset(runner.ran[k - 1]), k
        assert probe["fitted_on"] == 8 * (k - 1), k
        assert not probe["again"]
    measured = [i for b in runner.ran for i in b]
    assert len(measured) == len(set(measured)) == 40 == len(tuner.visited)


@pytest.mark.parametrize("kind", ["xgb", "evolutionary"])
def test_exactly_n_trial_distinct_configurations_are_measured_logged_and_called_back(kind, tmp_path):
    task = bowl_task()
    log = tmp_path / "bowl.log"
    seen = []
    tuner = make_tuner(kind, task, True, plan_size=16)
    tuner.tune(n_trial=50, measure_option=autotvm.measure_option(NoBuild(), BowlRunner()),
               callbacks=[autotvm.callback.log_to_file(str(log)),
                          lambda t, inputs, results: seen.extend(i.config.index for i in inputs)])
    records = list(load_from_file(log))
    assert [inp.config.index for inp, _ in records] == seen
    assert len(seen) == len(set(seen)) == 50 == len(tuner.flops_history) == len(tuner.visited)
    best_inp, best_res = min(records, key=lambda r: r[1].costs[0])
    assert tuner.best_config.index == best_inp.config.index
    assert task.flop / tuner.best_flops == pytest.approx(best_res.costs[0])


def test_early_stopping_forgets_the_batch_in_flight(tmp_path):
    """A flat landscape: nothing beats the first trial. With early_stopping=20 and batches of 8 the
    loop stops after 24 trials; the fourth batch, proposed and built meanwhile, is not measured,
    not logged, and no longer counts as visited."""
    task = bowl_task()
    log = tmp_path / "flat.log"
    runner = BowlRunner(flat=True)
    tuner = XGBTuner(task, plan_size=8, feature_type="knob", seed=0)
    tuner.tune(n_trial=100, measure_option=autotvm.measure_option(NoBuild(), runner), early_stopping=20,
               callbacks=[autotvm.callback.log_to_file(str(log))])
    measured = [i for b in runner.ran for i in b]
    assert len(measured) == 24 and len(list(load_from_file(log))) == 24
    assert tuner.visited == set(measured) and tuner.best_iter == 0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_overlapped_search_finds_the_bottom_of_the_bowl(seed):
    """144 points, 48 trials (a third): the bottom itself, one batch behind or not."""
    task = bowl_task()
    tuner = XGBTuner(task, plan_size=8, feature_type="knob", seed=seed)
    tuner.tune(n_trial=48, measure_option=autotvm.measure_option(NoBuild(), BowlRunner()))
    assert tuner.best_config.to_values() == {"x": 9, "y": 3}


@autotvm.template("test/overlap_picky")
def overlap_picky(n):
    """Elementwise; split 0 is refused by the schedule (an instantiation error), 3 does not divide
    n (a guarded tail), the others divide."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("split", [4, 0, 8, 3, 16])
    cfg.define_knob("inner", ["serial", "unroll"])
    xo, xi = s[B].split(B.op.axis[0], factor=cfg["split"].val)
    if cfg["inner"].val == "unroll":
        s[B].unroll(xi)
    return s, [A, B]


def test_real_c_builds_overlapped_failures_recorded_and_skipped(tmp_path):
    """Real builds (C compiler) and runs, loop features of the lowered code, the next batch built
    while the current one runs: the whole 10-point space measured once each, the refused
    configurations recorded with their error number and never the best, the results correct."""
    task = autotvm.task.create("test/overlap_picky", args=(96,), target="c")
    assert len(task.config_space) == 10
    log = tmp_path / "picky.log"
    builds, runs = [], []
    build_started = [threading.Event() for _ in range(8)]
    n_batches = 4  # 3 + 3 + 3 + 1

    class Builder(autotvm.LocalBuilder):
        def build(self, inputs):
            k = len(builds)
            builds.append([i.config.index for i in inputs])
            build_started[k].set()
            return super().build(inputs)

    class Runner(autotvm.LocalRunner):
        def run(self, inputs, built):
            k = len(runs)
            out = super().run(inputs, built)
            # a slow device: it is still busy with batch k when the build of batch k + 1 starts
            # (a loop that built only after the run would leave this waiting in vain)
            seen = build_started[k + 1].wait(timeout=20) if k + 1 < n_batches else True
            runs.append(([i.config.index for i in inputs], seen))
            return out

    tuner = XGBTuner(task, plan_size=3, seed=0, n_workers=1)
    assert tuner.feature_type == "itervar" and tuner.overlap
    tuner.tune(n_trial=100, measure_option=autotvm.measure_option(
        Builder(n_parallel=2), Runner(number=1, repeat=1, check_correctness=True)),
        callbacks=[autotvm.callback.log_to_file(str(log))])
    records = list(load_from_file(log))
    assert sorted(inp.config.index for inp, _ in records) == list(range(10))
    for inp, res in records:
        if inp.config.to_values()["split"] == 0:
            assert res.error_no == MeasureErrorNo.INSTANTIATION_ERROR, res
        else:
            assert res.error_no == MeasureErrorNo.NO_ERROR and min(res.costs) > 0, (inp.config, res)
    assert tuner.best_config.to_values()["split"] != 0
    assert builds == [r[0] for r in runs] and len(runs) == n_batches
    assert all(seen for _, seen in runs), "a batch was not built while the previous one ran"
