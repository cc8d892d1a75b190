"""Device experiment: the auto-tensor-core tutorial's tuning on the tuning engine (kernels.tuning,
through autotvm's API): the whole 288-configuration float16 space measured once by the grid, then
XGBTuner and RandomTuner with a quarter of the trials; how close each gets to the grid's best and
after how many trials, and the engine's throughput (trials per minute on one GPU, builds in
parallel threads).

    python3 scripts/device_tune.py [--n 2048] [--trials 72] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtime import tutorial_namespace  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=72)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    opt = ap.parse_args()
    ns = tutorial_namespace()
    autotvm = ns["autotvm"]
    n = opt.n
    ns.update(N=n, L=n, M=n)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, "float16", "NN"),
                               target="cuda")
    print(task.config_space, flush=True)
    out = Path(opt.out)
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=os.cpu_count(), timeout=120),
                                    runner=autotvm.LocalRunner(number=5, repeat=3, timeout=30))
    report = {"n": n, "space": len(task.config_space)}

    def run(name, tuner, trials):
        log = out / f"tune_{name}.log"
        log.unlink(missing_ok=True)
        t0 = time.time()
        tuner.tune(n_trial=trials, measure_option=option, callbacks=[autotvm.callback.log_to_file(str(log))])
        wall = time.time() - t0
        recs = list(autotvm.record.load_from_file(log))
        ok = [r for _, r in recs if r.error_no == 0]
        row = {"trials": len(recs), "ok": len(ok), "failed": len(recs) - len(ok), "wall_s": wall,
               "trials_per_min": 60 * len(recs) / wall, "best_tflops": tuner.best_flops / 1e12,
               "best_config": str(tuner.best_config), "history": [f / 1e12 for f in tuner.flops_history]}
        print(f"{name}: {row['trials']} trials ({row['failed']} failed) in {wall:.0f} s = "
              f"{row['trials_per_min']:.0f}/min; best {row['best_tflops']:.2f} TFLOP/s {tuner.best_config}",
              flush=True)
        report[name] = row
        return row

    grid = run("grid", autotvm.tuner.GridSearchTuner(task), len(task.config_space))
    for name, tuner in (("xgb", autotvm.tuner.XGBTuner(task, plan_size=24, seed=0)),
                        ("random", autotvm.tuner.RandomTuner(task, seed=0))):
        row = run(name, tuner, opt.trials)
        target = 0.95 * grid["best_tflops"]
        reached = next((i + 1 for i, f in enumerate(row["history"]) if f >= target), None)
        row["within_5pct_at_trial"] = reached
        print(f"  {name}: best {row['best_tflops'] / grid['best_tflops']:.3f} of the grid's best; within 5 % "
              f"after {reached} trials", flush=True)
    (out / "tune.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
