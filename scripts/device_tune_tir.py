"""Device experiment: the GPU notes' meta_schedule call, unchanged except for the imports
(``ms.tune_tir(mod=MyModuleMatmul, target="nvidia/tesla-p100", config=ms.TuneConfig(
max_trials_global=64, num_trials_per_iter=64), work_dir=..., task_name="main")``) on the 1024^3
float32 matmul, then the tuned kernel against the notes' hand schedule blocking_with_shared(8, 8, 8,
8, 8) and torch.matmul with TF32 off, timed in one process (time_evaluator, CUDA events).

    python3 scripts/device_tune_tir.py [--trials 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kernels as tvm  # noqa: E402
from kernels import meta_schedule as ms  # noqa: E402
from kernels.workloads import tensorir as notes  # noqa: E402

N = 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--json")
    opt = ap.parse_args()
    MyModuleMatmul = notes.matmul_module({"n": N})
    work = Path(os.environ.get("OUT", ".")) / "tune_tmp"
    t0 = time.time()
    sch_tuned = ms.tune_tir(
        mod=MyModuleMatmul,
        target="nvidia/tesla-p100",
        config=ms.TuneConfig(
            max_trials_global=opt.trials,
            num_trials_per_iter=64,
        ),
        work_dir=str(work),
        task_name="main"
    )
    tune_s = time.time() - t0
    sch_tuned.mod.show()
    dev = tvm.cuda(0)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (N, N)).astype("float32")
    b = rng.uniform(-1, 1, (N, N)).astype("float32")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    args = [tvm.nd.array(a, dev), tvm.nd.array(b, dev), tvm.nd.array(np.zeros((N, N), "float32"), dev)]
    rows = {}
    hand = tvm.tir.Schedule(notes.matmul_module({"n": N}))
    notes.blocking_with_shared(hand, 8, 8, 8, 8, 8)
    for label, s in (("tune_tir (64 trials)", sch_tuned), ("blocking_with_shared(8,8,8,8,8)", hand)):
        f = tvm.build(s.mod, target="cuda")
        f(*args)
        err = float(np.max(np.abs(args[2].numpy() - ref)))
        res = f.time_evaluator(f.entry_name, dev, number=50, repeat=20)(*args)
        rows[label] = {"median_ms": res.median * 1e3, "tflops": 2 * N ** 3 / res.median / 1e12,
                       "max_err": err}
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    times = []
    for _ in range(20):
        s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s_.record()
        for _ in range(50):
            torch.matmul(ta, tb)
        e_.record()
        e_.synchronize()
        times.append(s_.elapsed_time(e_) / 50)
    torch_ms = statistics.median(times)
    rows["torch.matmul (TF32 off)"] = {"median_ms": torch_ms, "tflops": 2 * N ** 3 / torch_ms / 1e9}
    for label, r in rows.items():
        ratio = torch_ms / r["median_ms"]
        print(f"{label:34s} {r['median_ms']:8.4f} ms {r['tflops']:6.2f} TFLOP/s  x{ratio:.3f} of torch",
              flush=True)
    records = (work / "tuning_records.json").read_text().splitlines()
    failed = sum(json.loads(r)["result"][1] != 0 for r in records)
    print(f"tuning: {len(records)} trials ({failed} failed) in {tune_s:.0f} s", flush=True)
    if opt.json:
        Path(opt.json).write_text(json.dumps({"rows": rows, "tune_s": tune_s, "trials": len(records),
                                              "failed": failed}, indent=1))


if __name__ == "__main__":
    main()
