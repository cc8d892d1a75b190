"""Device script: the GPU notes' ``blocking_with_shared(8, 8, 8, 8, 8)`` matmul (1024^3, float32) built
from TVMScript, checked against numpy and timed, as is, with its k loop unrolled, and the notes'
``blocking(8, 8, 8, 8, 4)``; then the same schedules written with TE (workload ``matmul``, variant
``shared_blocked`` at the notes' tiles, ``unroll_k`` 0 and 1), with each TIR/TE time ratio (both
front ends share one backend: within 3 %).

Run on the GPU machine:  python3 scripts/device_tir.py [--number 50] [--repeat 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kernels as tvm  # noqa: E402
from kernels import workloads  # noqa: E402
from kernels.workloads import tensorir as notes  # noqa: E402

N = 1024


def _time(f, args, dev, number: int, repeat: int) -> dict:
    res = f.time_evaluator(f.entry_name, dev, number=number, repeat=repeat)(*args)
    med = res.median
    return {"median_ms": med * 1e3, "mean_ms": res.mean * 1e3, "min_ms": res.min * 1e3,
            "std_ms": res.std * 1e3, "gflops": 2 * N ** 3 / med / 1e9, "repeats": len(res.results),
            "number": res.number}


def _check(f, dev, a, b, ref) -> float:
    c = tvm.nd.array(np.full((N, N), np.nan, "float32"), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    out = c.numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)
    return float(np.max(np.abs(out - ref)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=50, help="launches per repeat")
    ap.add_argument("--repeat", type=int, default=30, help="repeats (the median is reported)")
    ap.add_argument("--json", default=None, help="write the results here (default: $OUT/device_tir.json)")
    ap.add_argument("--source", action="store_true", help="print the generated CUDA source")
    opts = ap.parse_args(argv)
    dev = tvm.cuda(0)
    if not dev.exist:
        print("no CUDA device", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, size=(N, N)).astype("float32")
    b = rng.uniform(-1, 1, size=(N, N)).astype("float32")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    args = [tvm.nd.array(a, dev), tvm.nd.array(b, dev), tvm.nd.array(np.zeros((N, N), "float32"), dev)]
    report = {"device": getattr(dev, "device_name", "cuda:0"), "compute_version": dev.compute_version, "n": N,
              "results": {}}

    def measure(label, f):
        err = _check(f, dev, a, b, ref)
        t = _time(f, args, dev, opts.number, opts.repeat)
        t["max_abs_err"] = err
        report["results"][label] = t
        print(f"{label:45s} {t['median_ms']:8.4f} ms  {t['gflops']:8.1f} GFLOP/s  (max |err| {err:.2e})")
    def notes_shared(sch):
        notes.blocking_with_shared(sch, 8, 8, 8, 8, 8)

    def notes_shared_unrolled(sch):  # the same, with the k loop inside a tile unrolled
        notes.blocking_with_shared(sch, 8, 8, 8, 8, 8)
        sch.unroll(sch.get_loops(sch.get_block("C_update"))[4])

    tir_variants = [("tir blocking_with_shared(8, 8, 8, 8, 8)", notes_shared),
                    ("tir blocking_with_shared + unroll(k_1)", notes_shared_unrolled),
                    ("tir blocking(8, 8, 8, 8, 4)", lambda sch: notes.blocking(sch, 8, 8, 8, 8, 4))]
    for label, schedule in tir_variants:
        sch = tvm.tir.Schedule(notes.matmul_module({"n": N}))
        schedule(sch)
        f = tvm.build(sch.mod, target="cuda")
        if opts.source:
            print(f.imported_modules[0].get_source())
        measure(label, f)
    # the same schedules written with TE (workload matmul, variant shared_blocked at the notes' tiles)
    tiles = dict(local_y=8, local_x=8, block_y=8, block_x=8, tile_k=8)
    te_variants = [("te shared_blocked(8, 8, 8, 8, 8)", dict(tiles, unroll_k=0)),
                   ("te shared_blocked + unroll(k_1)", dict(tiles, unroll_k=1))]
    w = workloads.get("matmul")
    for label, knobs in te_variants:
        s, targs = w.build("shared_blocked", {"n": N, "m": N, "k": N}, "float32", knobs)
        measure(label, tvm.build(s, targs, target="cuda"))
    res = report["results"]
    report["tir_over_te"] = {}
    for tir_label, te_label in zip([v[0] for v in tir_variants[:2]], [v[0] for v in te_variants]):
        ratio = res[tir_label]["median_ms"] / res[te_label]["median_ms"]
        report["tir_over_te"][tir_label] = ratio
        print(f"{tir_label} / {te_label}: time ratio {ratio:.4f} "
              f"({'within' if abs(ratio - 1) <= 0.03 else 'NOT within'} 3 %)")
    out = opts.json or (os.path.join(os.environ["OUT"], "device_tir.json") if os.environ.get("OUT") else None)
    if out:
        Path(out).write_text(json.dumps(report, indent=2))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
