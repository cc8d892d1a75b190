"""Tuning throughput of the model-based tuner: XGBTuner on loop features (feature_type="itervar")
with each batch proposed and built while the previous one is timed (overlap, the default) against
the same tuner batch by batch (overlap=False), same seed and trials, and RandomTuner for reference.

For each tuner: trials per minute, the device's busy fraction (the summed wall time of the runner's
calls over the tuning's wall time), the time the device waited between two batches (for the
proposal and the builds), the best throughput and configuration, and that configuration timed again
with nothing else running (timings taken while the proposal and the builds run in the background
share the host's CPU and Python's interpreter lock with the runner). One JSON line per tuner at the
end.

    # on a GPU: the auto-tensor-core tutorial's float16 template at 2048^3 (< 5 minutes on an H100)
    python3 scripts/device_tune_throughput.py [--n 2048] [--trials 64] [--plan-size 16] [--out DIR]
    # no GPU: the same comparison on a C stand-in, a tiled matrix product compiled for the CPU
    python3 scripts/device_tune_throughput.py --stand-in c [--trials 48] [--plan-size 8]
    # no GPU: the cost of loop features per candidate (lowering for cuda + analysis), median over a
    # random sample of the tutorial's 2048^3 float16 space and of tune_tir's 1024^3 float32 space
    python3 scripts/device_tune_throughput.py --features [--samples 30]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from devtime import tutorial_namespace  # noqa: E402

from kernels import autotvm, te  # noqa: E402


class TimedRunner:
    """The runner, with the wall-clock span of each of its calls (a batch timed on the device)."""

    def __init__(self, runner):
        self.runner = runner
        self.spans = []

    def run(self, inputs, builds):
        t0 = time.perf_counter()
        out = self.runner.run(inputs, builds)
        self.spans.append((t0, time.perf_counter()))
        return out

    def __getattr__(self, name):  # get_build_kwargs and the like: the wrapped runner's
        return getattr(self.runner, name)


@autotvm.template("throughput/c_matmul")
def c_matmul(n):
    """C = A @ B tiled three ways, the loop order and the innermost loop's kind as knobs (384 points)."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    cfg = autotvm.get_config()
    cfg.define_knob("tile_i", [4, 8, 16, 32])
    cfg.define_knob("tile_j", [8, 16, 32, 64])
    cfg.define_knob("tile_k", [4, 8, 16, 32])
    cfg.define_knob("order", ["kij", "ikj"])
    cfg.define_knob("inner", ["serial", "unroll", "vectorize"])
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=cfg["tile_i"].val)
    jo, ji = s[C].split(j, factor=cfg["tile_j"].val)
    ko, ki = s[C].split(k, factor=cfg["tile_k"].val)
    if cfg["order"].val == "kij":
        s[C].reorder(io, jo, ko, ki, ii, ji)
    else:
        s[C].reorder(io, jo, ko, ii, ki, ji)
    if cfg["inner"].val == "unroll":
        s[C].unroll(ji)
    elif cfg["inner"].val == "vectorize":
        s[C].vectorize(ji)
    return s, [A, B, C]


def tune_one(name, tuner, task, trials, builder, runner, out_dir, unit):
    import tempfile

    from kernels.runtime.config import reload_config

    # a build cache of its own: no tuner finds the libraries another one compiled (the C target
    # caches by content)
    os.environ["KBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"kbench-throughput-{name}-")
    reload_config()
    timed = TimedRunner(runner)
    option = autotvm.measure_option(builder=builder, runner=timed)
    log = out_dir / f"throughput_{name}.log"
    log.unlink(missing_ok=True)
    t0 = time.perf_counter()
    tuner.tune(n_trial=trials, measure_option=option, callbacks=[autotvm.callback.log_to_file(str(log))])
    wall = time.perf_counter() - t0
    records = list(autotvm.record.load_from_file(log))
    busy = sum(b - a for a, b in timed.spans)
    waits = [timed.spans[k + 1][0] - timed.spans[k][1] for k in range(len(timed.spans) - 1)]
    scale, label = (1e12, "tflops") if unit == "T" else (1e9, "gflops")
    extractor = getattr(tuner, "extractor", None)
    # the best configuration timed again with nothing else running: how much the work in the
    # background (proposals, builds) disturbed the timings taken while tuning
    again = None
    if tuner.best_config is not None:
        inp = autotvm.MeasureInput(task.target, task, tuner.best_config)
        (res,) = runner.run([inp], builder.build([inp]))
        again = task.flop / res.mean / scale if res.ok else None
    row = {"tuner": name, "overlap": bool(getattr(tuner, "overlap", True)), "trials": len(records),
           "distinct": len({inp.config.index for inp, _ in records}),
           "failed": sum(1 for _, r in records if r.error_no != 0), "wall_s": round(wall, 2),
           "trials_per_min": round(60 * len(records) / wall, 1), "busy_fraction": round(busy / wall, 3),
           "first_batch_at_s": round(timed.spans[0][0] - t0, 2) if timed.spans else None,
           "waits_between_batches_s": [round(w, 2) for w in waits],
           f"best_{label}": round(tuner.best_flops / scale, 3),
           f"best_{label}_alone": round(again, 3) if again is not None else None,
           "best_config": str(tuner.best_config),
           "features_extracted": extractor.extracted if extractor is not None else 0,
           "feature_s": round(extractor.seconds, 2) if extractor is not None else 0.0}
    print(f"{name}: {row['trials']} trials ({row['failed']} failed) in {wall:.1f} s = "
          f"{row['trials_per_min']}/min; device busy {100 * row['busy_fraction']:.0f} %, waits between "
          f"batches {row['waits_between_batches_s']} s; best {row[f'best_{label}']} {label[0].upper()}FLOP/s "
          f"({row[f'best_{label}_alone']} timed again alone) {tuner.best_config}", flush=True)
    return row


def throughput(opt) -> None:
    out = Path(opt.out)
    out.mkdir(parents=True, exist_ok=True)
    if opt.stand_in:
        target = opt.stand_in
        task = autotvm.task.create("throughput/c_matmul", args=(opt.n,), target=target)
        builder = autotvm.LocalBuilder(n_parallel=os.cpu_count(), timeout=60)
        runner = autotvm.LocalRunner(number=2, repeat=3, timeout=30)
        unit = "G"
    else:
        ns = tutorial_namespace()
        n = opt.n
        ns.update(N=n, L=n, M=n)
        task = ns["autotvm"].task.create("tutorial/auto_tensorcore/test_gemm",
                                         args=(n, n, n, "float16", "NN"), target="cuda")
        builder = autotvm.LocalBuilder(n_parallel=os.cpu_count(), timeout=120)
        runner = autotvm.LocalRunner(number=5, repeat=3, timeout=30)
        unit = "T"
    print(f"{task.name if hasattr(task, 'name') else task}: {len(task.config_space)} configurations, "
          f"{opt.trials} trials each, batches of {opt.plan_size}, {os.cpu_count()} cores", flush=True)
    if not opt.stand_in:  # the reference build and the device's first context, outside every timing
        warm = autotvm.tuner.RandomTuner(task, seed=12345)
        warm.tune(n_trial=1, measure_option=autotvm.measure_option(builder=builder, runner=runner))
    rows = []
    for name, make in (
            ("xgb_sequential", lambda: autotvm.tuner.XGBTuner(task, plan_size=opt.plan_size, seed=opt.seed,
                                                              overlap=False)),
            ("xgb_overlapped", lambda: autotvm.tuner.XGBTuner(task, plan_size=opt.plan_size, seed=opt.seed,
                                                              overlap=True)),
            ("random", lambda: autotvm.tuner.RandomTuner(task, seed=opt.seed))):
        rows.append(tune_one(name, make(), task, opt.trials, builder, runner, out, unit))
    seq, ovl = rows[0], rows[1]
    print(f"overlapped / sequential: {ovl['trials_per_min'] / seq['trials_per_min']:.2f}x trials per minute",
          flush=True)
    (out / "tune_throughput.json").write_text(json.dumps(rows, indent=1))
    for row in rows:
        print(json.dumps(row), flush=True)


def feature_cost(opt) -> None:
    """Median milliseconds per candidate of candidate_features (instantiate, lower_for_features,
    analyze) and of lower_for_features + analyze alone, each candidate extracted once: the CPU time
    of this thread (what the extraction costs, whatever else the machine runs meanwhile)."""
    from kernels.lower import is_tensor_ir
    from kernels.meta_schedule import target_of_tag
    from kernels.tuning import features as F
    from kernels.tuning.tir_task import TIRTask
    from kernels.workloads import tensorir as notes

    ns = tutorial_namespace()
    ns.update(N=2048, L=2048, M=2048)
    tasks = {
        "tensorcore_fp16_2048": ns["autotvm"].task.create("tutorial/auto_tensorcore/test_gemm",
                                                          args=(2048, 2048, 2048, "float16", "NN"),
                                                          target="cuda"),
        "tune_tir_fp32_1024": TIRTask(notes.matmul_module({"n": 1024}), target_of_tag("nvidia/tesla-p100")),
    }
    for name, task in tasks.items():
        size = len(task.config_space)
        sample = sorted(random.Random(opt.seed).sample(range(size), min(opt.samples, size)))
        whole, lowered, refused = [], [], 0
        for index in sample:
            config = task.config_space.get(index)
            t0 = time.thread_time()
            try:
                with task.target:
                    sch, args = task.instantiate(config)
            except Exception:  # a configuration the template refuses costs only its instantiation
                refused += 1
                continue
            t1 = time.thread_time()
            func, vthreads = F.lower_for_features(sch, None if is_tensor_ir(sch) else args, task.target)
            F.feature_vector(F.analyze(func, vthreads, F.DeviceLimits.of_target(task.target)))
            t2 = time.thread_time()
            whole.append(1e3 * (t2 - t0))
            lowered.append(1e3 * (t2 - t1))
        row = {"space": name, "configurations": size, "sampled": len(sample), "refused": refused,
               "clock": "thread CPU time", "median_ms": round(statistics.median(whole), 1),
               "median_lower_analyze_ms": round(statistics.median(lowered), 1),
               "p90_ms": round(statistics.quantiles(whole, n=10)[-1], 1), "max_ms": round(max(whole), 1)}
        print(json.dumps(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=None, help="matrix size (default 2048; 256 for --stand-in)")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--plan-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stand-in", choices=("c",), default=None,
                    help="tune a C stand-in on the CPU instead of the tutorial on the GPU")
    ap.add_argument("--features", action="store_true")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    opt = ap.parse_args()
    if opt.n is None:
        opt.n = 256 if opt.stand_in else 2048
    if opt.features:
        feature_cost(opt)
    else:
        throughput(opt)


if __name__ == "__main__":
    main()
