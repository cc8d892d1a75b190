"""Device experiment: the auto-tensor-core tutorial's tuning with the Ray builder and runner
(kernels.tuning.ray_measure) against the in-process pair, on the machine's GPUs.

Starts the embedded local Ray (or joins ``--address``), runs XGBTuner for ``--trials`` trials on the
float16 ``--n``-cubed space once with ``RayBuilder`` + ``RayRunner`` (nvcc on CPU build tasks, one
runner actor per GPU of the model) and once with ``LocalBuilder`` + ``LocalRunner``, and reports for
each: trials per minute, failed trials by error number, best TFLOP/s and configuration. Then it kills
the runner actor in the middle of a batch and checks that the search goes on (the trial that was
running recorded as RUNTIME_DEVICE, the others measured). Writes ``tune_ray.json`` to ``--out``.

    python3 scripts/device_tune_ray.py [--n 2048] [--trials 48] [--address ADDR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtime import tutorial_namespace  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--address", default=None)
    ap.add_argument("--gpu-model", default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    opt = ap.parse_args()
    ns = tutorial_namespace()
    autotvm = ns["autotvm"]
    n = opt.n
    ns.update(N=n, L=n, M=n)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, "float16", "NN"),
                               target="cuda")
    out = Path(opt.out)
    report: dict = {"n": n, "space": len(task.config_space), "trials": opt.trials}

    builder = autotvm.RayBuilder(timeout=120, address=opt.address)
    runner = autotvm.RayRunner(number=5, repeat=3, timeout=30, gpu_model=opt.gpu_model,
                               check_correctness=True)
    report["cluster"] = builder.cluster.summary()
    report["runner_workers"] = runner.workers()
    print("cluster:", json.dumps(report["cluster"]), "\nrunners:", report["runner_workers"], flush=True)

    def tune(name, option, trials):
        log = out / f"tune_ray_{name}.log"
        log.unlink(missing_ok=True)
        tuner = autotvm.tuner.XGBTuner(task, plan_size=max(8, builder.n_parallel), seed=0)
        t0 = time.time()
        tuner.tune(n_trial=trials, measure_option=option, callbacks=[autotvm.callback.log_to_file(str(log))])
        wall = time.time() - t0
        recs = list(autotvm.record.load_from_file(log))
        errors = Counter(int(r.error_no) for _, r in recs if r.error_no != 0)
        row = {"trials": len(recs), "failed_by_error_no": dict(errors), "wall_s": wall,
               "trials_per_min": 60 * len(recs) / wall, "best_tflops": tuner.best_flops / 1e12,
               "best_config": str(tuner.best_config)}
        print(f"{name}: {row['trials']} trials in {wall:.0f} s = {row['trials_per_min']:.1f}/min; errors "
              f"{dict(errors)}; best {row['best_tflops']:.2f} TFLOP/s {tuner.best_config}", flush=True)
        report[name] = row
        return recs

    tune("ray", autotvm.measure_option(builder=builder, runner=runner), opt.trials)
    tune("local", autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=os.cpu_count(), timeout=120),
                                         runner=autotvm.LocalRunner(number=5, repeat=3, timeout=30,
                                                                    check_correctness=True)), opt.trials)

    # a runner actor killed (SIGKILL) in the middle of a batch: the search goes on
    pid = runner.workers()[0]["pid"]

    def kill_later():
        time.sleep(3.0)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    threading.Thread(target=kill_later, daemon=True).start()
    recs = tune("ray_killed", autotvm.measure_option(builder=builder, runner=runner), 16)
    report["ray_killed"]["runner_pids_after"] = [w["pid"] for w in runner.workers()]
    report["ray_killed"]["killed_pid"] = pid
    ok = len(recs) == 16
    print("killed-actor run:", "ok" if ok else "FAILED", f"(pid {pid} killed; runners now "
          f"{report['ray_killed']['runner_pids_after']})", flush=True)
    runner.close()
    (out / "tune_ray.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
