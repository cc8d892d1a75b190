"""Device experiment: the cost model's features on the auto-tensor-core tutorial's 288-configuration
float16 space. The grid's measurements (a log of scripts/device_tune.py, or measured here on the
GPU when none is given) are replayed to XGBTuner with each feature type (knob values, itervar,
curve) and to RandomTuner, several seeds each: after how many trials each is within 5 % of the
grid's best, and how close it is after a quarter of the space (72 trials). Replaying the same
measurements isolates the search from the device's noise. Also: loop-feature extraction time per
candidate, in one process and with the worker pool.

    python3 scripts/device_tune.py --out $OUT          # the grid (and its log) first, or
    python3 scripts/device_tunefeat.py [--grid-log $OUT/tune_grid.log] [--n 2048] [--trials 72]
                                       [--seeds 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtime import tutorial_namespace  # noqa: E402


class ReplayRunner:
    """Each candidate's result as the grid measured it."""

    def __init__(self, results):
        self.results = results

    def run(self, inputs, builds):
        return [self.results[inp.config.index] for inp in inputs]


class NoBuild:
    def build(self, inputs):
        return [None] * len(inputs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid-log", default=None)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=72)
    ap.add_argument("--plan-size", type=int, default=24)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    opt = ap.parse_args()
    ns = tutorial_namespace()
    autotvm = ns["autotvm"]
    from kernels.tuning import features as F

    n = opt.n
    ns.update(N=n, L=n, M=n)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, "float16", "NN"),
                               target="cuda")
    size = len(task.config_space)
    out = Path(opt.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"n": n, "space": size, "trials": opt.trials, "plan_size": opt.plan_size}

    # feature extraction: one process, then the pool over the whole space
    one = F.FeatureExtractor(task, "itervar", n_workers=1)
    t0 = time.perf_counter()
    one.get_many(range(0, size, max(1, size // 16)))
    report["extract_ms_one_process"] = 1e3 * (time.perf_counter() - t0) / one.extracted
    pool = F.FeatureExtractor(task, "itervar")
    t0 = time.perf_counter()
    pool.get_many(range(size))
    report["extract_ms_pool_wall"] = 1e3 * (time.perf_counter() - t0) / size
    report["pool_workers"] = pool.n_workers
    report["extract_failures"] = len(pool.failures)
    print(f"features: {report['extract_ms_one_process']:.1f} ms a candidate in one process, "
          f"{report['extract_ms_pool_wall']:.1f} ms wall with {pool.n_workers} workers; "
          f"{len(pool.failures)} of {size} refused", flush=True)

    # the grid's measurements
    if opt.grid_log:
        records = list(autotvm.record.load_from_file(opt.grid_log))
    else:
        log = out / "tunefeat_grid.log"
        log.unlink(missing_ok=True)
        option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=os.cpu_count(), timeout=120),
                                        runner=autotvm.LocalRunner(number=5, repeat=3, timeout=30))
        autotvm.tuner.GridSearchTuner(task).tune(size, option,
                                                 callbacks=[autotvm.callback.log_to_file(str(log))])
        records = list(autotvm.record.load_from_file(log))
    results = {inp.config.index: res for inp, res in records if tuple(inp.task.workload) == task.workload}
    if len(results) != size:
        raise SystemExit(f"the grid log has {len(results)} of the {size} configurations")
    best_cost = min(r.mean for r in results.values())
    report["grid_best_tflops"] = task.flop / best_cost / 1e12
    print(f"grid: best {report['grid_best_tflops']:.2f} TFLOP/s over {size} configurations", flush=True)

    option = autotvm.measure_option(NoBuild(), ReplayRunner(results))
    target = 0.95 * task.flop / best_cost
    for name in ("knob", "itervar", "curve", "random"):
        rows = []
        for seed in range(opt.seeds):
            if name == "random":
                tuner = autotvm.tuner.RandomTuner(task, seed=seed)
            else:
                tuner = autotvm.tuner.XGBTuner(task, plan_size=opt.plan_size, feature_type=name, seed=seed)
                if tuner.extractor is not None and name == "itervar":
                    tuner.extractor.cache.update(pool.cache)  # extracted above: the same vectors
            t0 = time.perf_counter()
            tuner.tune(n_trial=opt.trials, measure_option=option)
            reached = next((i + 1 for i, f in enumerate(tuner.flops_history) if f >= target), None)
            rows.append({"seed": seed, "within_5pct_at": reached,
                         "best_of_grid": tuner.best_flops * best_cost / task.flop,
                         "search_s": time.perf_counter() - t0})
        ratios = [r["best_of_grid"] for r in rows]
        hits = [r["within_5pct_at"] for r in rows if r["within_5pct_at"] is not None]
        report[name] = {"runs": rows, "median_best_of_grid": statistics.median(ratios),
                        "reached_5pct": f"{len(hits)}/{len(rows)}",
                        "median_trials_to_5pct": statistics.median(hits) if hits else None}
        print(f"{name:8s}: best {statistics.median(ratios):.3f} of the grid's (median of {len(rows)} seeds); "
              f"within 5 % in {len(hits)}/{len(rows)} runs, median after "
              f"{report[name]['median_trials_to_5pct']} trials", flush=True)
    (out / "tunefeat.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
