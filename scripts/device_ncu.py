"""Where the harness's cold median and Nsight Compute's gpu__time_duration part, on one GPU.

The row-sum cubin of tests/gpu/test_measure_gpu.py (rfactor + cross-thread, 16384 x 4096 float32,
256 MiB of input) timed several ways in one process on one GPU, then under ncu in child processes:

  harness read flush (default)   CudaTimer(): events around one launch, 2 x L2 read before it
  harness memset flush           CudaTimer(flush="memset")
  harness read flush 4 x L2      CudaTimer(flush_bytes=4 * L2)
  harness no spin                CudaTimer(spin=False)
  harness events, no flush       CudaTimer(flush_bytes=16): the input stays partly in L2
  triton do_bench                median, its own 256 MiB zeroing between launches
  ncu cache all / clock none     what tests/gpu/test_measure_gpu.py compares with
  ncu cache none / clock none
  ncu cache all / clock base     ncu's default clock control (base clocks locked)

Run on the GPU machine after `source .whl/setup.sh`:  python3 scripts/device_ncu.py
Prints one line per way (median, ratio to the default harness figure, SM clock) and writes
$OUT/ncu.json when OUT is set.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kernels as tvm  # noqa: E402
from harness.measure import CudaTimer, l2_cache_bytes, measure, module_launcher  # noqa: E402
from harness.model import MeasureConfig  # noqa: E402
from kernels.workloads import get  # noqa: E402

PARAMS = {"n": 16384, "m": int(os.environ.get("NCU_M", "4096"))}
CHILD = f"""
import numpy as np, kernels as tvm
from kernels.workloads import get
w = get("row_sum")
s, args = w.build("rfactor_crossthread", {PARAMS!r}, "float32")
f = tvm.build(s, args, "cuda")
arrays = [tvm.nd.array(x, tvm.cuda(0)) for x in w.make_args({PARAMS!r}, "float32", np.random.default_rng(0))]
launch, _ = f.launcher(*arrays)
for _ in range(40):
    launch()
tvm.cuda(0).sync()
"""


def ncu_median(cache: str, clock: str) -> float | None:
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([ncu, "--clock-control", clock, "--cache-control", cache, "--metrics",
                           "gpu__time_duration.sum", "--csv", sys.executable, "-c", CHILD],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    if proc.returncode != 0:
        print(f"ncu {cache}/{clock} failed: {proc.stderr[-500:]}")
        return None
    rows = [r for r in csv.reader(io.StringIO(proc.stdout)) if len(r) > 10]
    head = rows[0]
    vi, ui = head.index("Metric Value"), head.index("Metric Unit")
    scale = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3}
    values = [float(r[vi].replace(",", "")) * scale[r[ui]] for r in rows[1:]]
    return statistics.median(values[5:])


def main() -> int:
    w = get("row_sum")
    s, args = w.build("rfactor_crossthread", PARAMS, "float32")
    f = tvm.build(s, args, "cuda")
    host = w.make_args(PARAMS, "float32", np.random.default_rng(0))
    dev = tvm.cuda(0)
    arrays = [tvm.nd.array(x, dev) for x in host]
    launch = module_launcher(f, arrays)
    cfg = MeasureConfig(max_time_s=4.0, min_time_s=1.0)
    l2 = l2_cache_bytes(0)
    rows: list[tuple[str, float | None, float | None]] = []
    timers = [
        ("harness read flush (default)", CudaTimer(0)),
        ("harness memset flush", CudaTimer(0, flush="memset")),
        ("harness read flush 4 x L2", CudaTimer(0, flush_bytes=4 * l2)),
        ("harness no spin", CudaTimer(0, spin=False)),
        ("harness events, no flush", CudaTimer(0, flush_bytes=16)),
    ]
    for name, timer in timers[:1] if "NCU_M" in os.environ else timers:
        t = measure(timer, launch, cfg)
        clock = statistics.median(t.clocks_mhz) if t.clocks_mhz else None
        rows.append((name, t.median, clock))
    try:
        from triton.testing import do_bench

        rows.append(("triton do_bench (median)",
                     do_bench(launch, warmup=100, rep=2000, return_mode="median") * 1e-3,
                     None))
    except ImportError:
        rows.append(("triton do_bench (median)", None, None))
    short = "NCU_M" in os.environ  # a second size: the default harness figure and one ncu setting
    ways = (("all", "none"),) if short else (("all", "none"), ("none", "none"), ("all", "base"))
    for cache, clock in ways:
        rows.append((f"ncu cache {cache} / clock {clock}", ncu_median(cache, clock), None))
    # what a pair of events adds around a kernel that does nothing (queued behind a busy GPU, as in
    # a sample): the launch gap CudaTimer.inject measures
    probe = CudaTimer(0)
    probe.begin([launch], cfg)
    probe.inject(1e-7)
    rows.append(("events around an empty kernel", probe._static.get("injected_gap_s"), None))
    probe.end()
    ref = rows[0][1]
    print(f"device {dev.device_name if hasattr(dev, 'device_name') else ''} L2 {l2 / 2**20:.0f} MiB, "
          f"row_sum rfactor_crossthread {PARAMS}")
    for name, med, clock in rows:
        if med is None:
            print(f"  {name:32s} (not available)")
            continue
        ck = f"  SM clock {clock:.0f} MHz" if clock else ""
        print(f"  {name:32s} {med * 1e6:8.2f} us   ratio to harness default {med / ref:.4f}{ck}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "ncu.json").write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
