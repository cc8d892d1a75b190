"""The compiler core on its own: build the reduction tutorial's schedules on every target this machine
has, check each against numpy (float64), time the correct ones with ``time_evaluator``, and write the
generated sources to kbench-out/compiler_core/.

Run with ``.venv/bin/python examples/compiler_core.py``. (The harness does all of this, with a real
methodology and a result store, through ``kbench run``.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import kernels as tvm
from kernels.workloads import get as workload

OUT = Path("kbench-out") / "compiler_core"


def row_sum(variant):
    return workload("row_sum").build(variant, {}, "float32")


def conv2d_3x3(bind):
    return workload("conv2d_3x3").build("tiled" if bind else "default", {}, "float32")


def conv2d_ref(a, f):
    return workload("conv2d_3x3").reference([a, f])[0]


def targets():
    out = ["c"]
    if tvm.opencl(0).exist:
        out.append("opencl")
    if tvm.cuda(0).exist:
        out.append("cuda")
    return out


def cases(target):
    gpu = target != "c"
    variants = ["bind", "rfactor_crossthread"] if gpu else ["default", "split"]
    for v in variants:
        yield f"row_sum/{v}", lambda v=v: row_sum(v), "row_sum"
    yield "conv2d_3x3" + ("/tiled+bound" if gpu else "/default"), lambda: conv2d_3x3(bind=gpu), "conv"


def main() -> int:
    console = Console()
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n = 1024
    a = rng.uniform(size=(n, n)).astype("float32")
    filt = rng.uniform(size=(3, 3)).astype("float32")
    ref_sum = a.astype(np.float64).sum(axis=1)
    ref_conv = conv2d_ref(a, filt)
    table = Table(title=f"reduction tutorial kernels, n = m = {n}, float32")
    for col in ("target", "kernel", "correct", "median (ms)", "GB/s"):
        table.add_column(col, justify="right" if col in ("median (ms)", "GB/s") else "left")
    failures = 0
    for target in targets():
        dev = {"c": tvm.cpu(0), "opencl": tvm.opencl(0), "cuda": tvm.cuda(0)}[target]
        for name, make, kind in cases(target):
            s, args = make()
            f = tvm.build(s, args, target)
            (OUT / f"{name.replace('/', '_')}.{target}.txt").write_text(
                f.imported_modules[0].get_source() if f.imported_modules else f.get_source())
            if kind == "row_sum":
                inputs = [tvm.nd.array(a, dev), tvm.nd.array(np.full(n, np.nan, "float32"), dev)]
                ref, nbytes = ref_sum, a.nbytes + n * 4
            else:
                inputs = [tvm.nd.array(a, dev), tvm.nd.array(filt, dev),
                          tvm.nd.array(np.full((n - 2, n - 2), np.nan, "float32"), dev)]
                ref, nbytes = ref_conv, a.nbytes + ref_conv.size * 4
            f(*inputs)
            ok = np.allclose(inputs[-1].numpy(), ref, rtol=1e-4, atol=1e-4)
            if not ok:
                failures += 1
                table.add_row(target, name, "[red]WRONG[/red]", "-", "-")
                continue
            t = f.time_evaluator(f.entry_name, dev, number=5, repeat=5)(*inputs)
            ms = float(np.median(t.results)) * 1e3
            table.add_row(target, name, "[green]yes[/green]", f"{ms:.3f}", f"{nbytes / ms / 1e6:.1f}")
    console.print(table)
    console.print(f"generated sources: {OUT.resolve()}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
