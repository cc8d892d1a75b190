"""XGBTuner on loop and memory features (feature_type="itervar") tuning a real matrix product on the
C target, against the grid measured in the same test; the evolutionary search of tune_tir on a
landscape whose costs are known, and on OpenCL with the model on real candidates' features."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import autotvm, te
from kernels.tuning.measure import LocalRunner, MeasureResult

N = 128


@autotvm.template("test/feature_tuning_matmul")
def loop_order_matmul(n):
    """C = A @ B with the loop order, the width of the j tile and what the innermost loop does
    as knobs: 'ikj' keeps B's and C's innermost accesses contiguous, 'ijk' walks B's column (stride n)
    and cannot vectorize its innermost (reduction) loop."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    cfg = autotvm.get_config()
    cfg.define_knob("order", ["ijk", "ikj"])
    cfg.define_knob("tile_j", [8, 32, 128])
    cfg.define_knob("inner", ["serial", "unroll", "vectorize"])
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=cfg["tile_j"].val)
    if cfg["order"].val == "ijk":
        s[C].reorder(i, jo, ji, k)
    else:
        s[C].reorder(i, jo, k, ji)
    last = s[C].leaf_iter_vars[-1]
    if cfg["inner"].val == "unroll":
        s[C].unroll(last)
    elif cfg["inner"].val == "vectorize":
        s[C].vectorize(last)
    return s, [A, B, C]


class MinRunner(LocalRunner):
    """The local runner, each candidate's cost the fastest of its repeats (this machine runs other
    work at the same time: the minimum is what the kernel can do)."""

    def run(self, inputs, builds):
        out = []
        for res in super().run(inputs, builds):
            if res.ok:
                res = MeasureResult((min(res.costs),), res.error_no, res.all_cost, res.timestamp)
            out.append(res)
        return out


@pytest.mark.slow
def test_xgb_on_itervar_features_finds_the_grids_best_in_fewer_trials():
    task = autotvm.task.create("test/feature_tuning_matmul", args=(N,), target="c")
    size = len(task.config_space)
    assert size == 18
    runner = MinRunner(number=2, repeat=5)
    option = autotvm.measure_option(autotvm.LocalBuilder(n_parallel=2), runner)

    grid = autotvm.tuner.GridSearchTuner(task)
    grid.tune(n_trial=size, measure_option=option)
    assert len(grid.visited) == size

    trials = 12  # 8 at random, then 4 proposed by the model on the 8 results (batch by batch)
    xgb = autotvm.tuner.XGBTuner(task, plan_size=4, seed=0, n_workers=1, overlap=False)
    assert xgb.feature_type == "itervar"
    xgb.tune(n_trial=trials, measure_option=option)
    assert len(xgb.visited) == trials < size
    assert xgb.model is not None and xgb.extractor.extracted >= trials
    assert not xgb.extractor.failures.keys() - {i for i in range(size)
                                                if task.config_space.get(i).to_values()["order"] == "ijk"}

    # both picks measured again, alternately, on the same footing (the fastest of three rounds)
    picks = {"grid": grid.best_config, "xgb": xgb.best_config}
    best = {k: np.inf for k in picks}
    build = autotvm.LocalBuilder(n_parallel=1)
    for _ in range(3):
        for name, cfg in picks.items():
            inp = autotvm.MeasureInput(task.target, task, cfg)
            (res,) = runner.run([inp], build.build([inp]))
            assert res.ok, res
            best[name] = min(best[name], res.costs[0])
    assert best["xgb"] <= 1.3 * best["grid"], (picks, best)


class ValleyRunner:
    """Costs known in advance: a valley in the tile sizes of the TensorIR matmul space, lowest at
    threads 16 x 16, tiles 4 x 4 (it stands in for the device so that the search itself is tested)."""

    def run(self, inputs, builds):
        out = []
        for inp in inputs:
            v = inp.config.to_values()
            d = sum((np.log2(v[k][p]) - np.log2(w)) ** 2 for k, p, w in
                    (("tile_y", 1, 16), ("tile_x", 1, 16), ("tile_y", 2, 4), ("tile_x", 2, 4), ("tile_k", 1, 8)))
            cost = 1e-3 * (1.0 + 0.2 * d + 0.02 * v["vector"] + 0.01 * v["unroll_k"])
            out.append(MeasureResult((cost,), 0, 0.0, 0.0))
        return out


class NoBuild:
    def build(self, inputs):
        return [None] * len(inputs)


def test_evolutionary_search_finds_the_valley_floor():
    """tune_tir's search on its own design space (9600 candidates for 1024^3), 96 trials (1 % of the
    space) with the model on the knob values, over 20 seeds: it beats random sampling of the same
    budget (median best cost), and in a quarter of the seeds or more it reaches the floor within 5 %."""
    from kernels.tuning.tir_task import TIRTask
    from kernels.tuning.tuner import EvolutionaryTuner, RandomTuner
    from kernels.workloads import tensorir as notes

    task = TIRTask(notes.matmul_module({"n": 1024}), "cuda")
    assert len(task.config_space) == 9600
    floor = 1.02e-3
    found = {}
    for name, make in (("evolutionary", lambda seed: EvolutionaryTuner(task, plan_size=32, feature_type="knob",
                                                                       seed=seed)),
                       ("random", lambda seed: RandomTuner(task, seed=seed))):
        found[name] = []
        for seed in range(20):
            tuner = make(seed)
            tuner.tune(n_trial=96, measure_option=autotvm.measure_option(NoBuild(), ValleyRunner()))
            assert len(tuner.visited) == 96
            found[name].append(task.flop / tuner.best_flops / floor)
    evo, rnd = np.median(found["evolutionary"]), np.median(found["random"])
    assert evo <= 0.92 * rnd, found
    assert sum(r <= 1.05 for r in found["evolutionary"]) >= 5, found


@pytest.mark.slow
@pytest.mark.opencl
def test_tune_tir_searches_with_the_model_on_opencl(tmp_path, caplog):
    """tune_tir's evolutionary search on loop features of real candidates: the third batch is
    proposed (while the second is measured) by the model fitted on the first; the tuned schedule is
    correct."""
    import logging

    import kernels as tvm
    from kbtest import opencl_available, run
    from kernels import meta_schedule as ms
    from kernels.workloads import tensorir as notes

    if not opencl_available():
        pytest.skip("no OpenCL device")
    n = 64
    config = ms.TuneConfig(max_trials_global=24, num_trials_per_iter=8)
    with caplog.at_level(logging.DEBUG, logger="autotvm"):
        sch = ms.tune_tir(notes.matmul_module({"n": n}), "opencl", config, str(tmp_path), seed=0)
    assert any("evolutionary search:" in r.getMessage() for r in caplog.records)
    assert len((tmp_path / "tuning_records.json").read_text().splitlines()) == 24
    f = tvm.build(sch.mod, target="opencl")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (n, n)).astype("float32"), rng.uniform(-1, 1, (n, n)).astype("float32")
    _, _, c = run(f, "opencl", a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
