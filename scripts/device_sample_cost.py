"""Device experiment: where the wall time of one CUDA sample goes, and how busy the GPU is while a
case is measured (the harness's CudaTimer and measurement loop, as kbench run uses them).

For a ~0.17 ms kernel (exp over 2^26 float32) and a ~0.36 ms one (row sums of 16384 x 16384):
the wall time per sample of CudaTimer.sample() as is, without NVML clock reads, without the spin
kernel; the cost of one NVML clock read and of one stopping-rule check at 500 samples; and a full
``measure()`` at min_time 0.2 s / max_time 1.5 s with its samples, wall time and GPU-busy fraction
(sum of the timed samples over the wall time). Run on the GPU machine from the repository root:

    python3 scripts/device_sample_cost.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kernels as tvm  # noqa: E402
from harness.measure import CudaTimer, measure  # noqa: E402
from harness.measure.loop import module_launcher  # noqa: E402
from harness.measure.stopping import should_stop  # noqa: E402
from harness.model import MeasureConfig  # noqa: E402
from kernels import workloads  # noqa: E402


def _launch(name, variant, params, knobs):
    w = workloads.get(name)
    s, args = w.build(variant, params, "float32", knobs)
    f = tvm.build(s, args, "cuda")
    dev = tvm.cuda(0)
    host = w.make_args(params, "float32", np.random.default_rng(0))
    nd = [tvm.nd.array(a, dev) for a in host]
    return module_launcher(f, nd)


def _per_sample(timer, launch, config, n=200):
    timer.begin([launch], config)
    for _ in range(20):
        timer.sample()
    t0 = time.perf_counter()
    gpu = 0.0
    for _ in range(n):
        t, _ = timer.sample()
        gpu += t
    wall = (time.perf_counter() - t0) / n
    timer.end()
    return wall, gpu / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    opt = ap.parse_args()
    config = MeasureConfig(min_time_s=0.2, max_time_s=1.5)
    kernels = {
        "exp 2^26": _launch("exp", "bind_vector", {"n": 1 << 26}, {"threads": 256, "vector": 4, "items": 2}),
        "row_sum 16384^2": _launch("row_sum", "rfactor_crossthread", {"n": 16384, "m": 16384},
                                   {"factor": 32}),
    }
    report = {"device": tvm.cuda(0).device_name if hasattr(tvm.cuda(0), "device_name") else "cuda:0"}
    for label, launch in kernels.items():
        row = {}
        for what, timer in (("as is", CudaTimer(0)), ("no NVML", CudaTimer(0, use_nvml=False)),
                            ("no spin", CudaTimer(0, spin=False))):
            wall, gpu = _per_sample(timer, launch, config)
            row[what] = {"wall_per_sample_ms": wall * 1e3, "kernel_ms": gpu * 1e3, "busy": gpu / wall}
        t = CudaTimer(0)
        t.begin([launch], config)
        reads = []
        for _ in range(200):
            r0 = time.perf_counter()
            t._read_clock()
            reads.append(time.perf_counter() - r0)
        t.end()
        row["nvml_clock_read_us"] = statistics.median(reads) * 1e6
        samples = [1e-4 * (1 + 0.01 * np.sin(i)) for i in range(500)]
        c0 = time.perf_counter()
        for _ in range(20):
            should_stop(samples, sum(samples), config, wall_s=0.5)
        row["stopping_check_500_us"] = (time.perf_counter() - c0) / 20 * 1e6
        w0 = time.perf_counter()
        timing = measure(CudaTimer(0), launch, config)
        wall = time.perf_counter() - w0
        tel = dict(timing.telemetry)
        row["measure"] = {"samples": len(timing.samples), "wall_s": wall, "median_ms": timing.median * 1e3,
                          "busy": sum(timing.samples) / wall, "stop": timing.stop_reason,
                          "warmup_s": tel.get("warmup_s")}
        report[label] = row
        print(label, json.dumps(row, indent=1), flush=True)
    if opt.json:
        Path(opt.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
