"""Block partitioning on one GPU: a kernel checked against numpy in float64 with the pass on and
off (and with its asynchronous copies made synchronous), to tell the pass's faults from others.
    source .whl/setup.sh && python3 scripts/device_partition_check.py
Writes each CUDA source to $OUT (or kbench-out/partition-check)."""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np

import kernels as tvm
from kernels import workloads

L = importlib.import_module("kernels.lower")
BP = importlib.import_module("kernels.lower.block_partition")
_orig_partition = BP._partition_kernel


def _variant(mode):
    """The pass as it is ("on"), or with both copies made the checked one ("slow-slow") or the
    unchecked one ("fast-fast", wrong at the edges by design: only its interior counts)."""
    import dataclasses

    from kernels.tir.stmt import IfThenElse

    def pk(launch, barriers_ok):
        out = _orig_partition(launch, barriers_ok)
        if out is None or mode == "on":
            return out

        def fix(n):
            if isinstance(n, IfThenElse) and n.else_case is not None:
                copy = n.else_case if mode == "slow-slow" else n.then_case
                return dataclasses.replace(n, then_case=copy, else_case=copy)
            return dataclasses.replace(n, body=fix(n.body)) if hasattr(n, "body") else n
        return fix(out)
    BP._partition_kernel = pk
out = os.environ.get("OUT", "kbench-out/partition-check")
os.makedirs(out, exist_ok=True)

CASES = [
    ("int8-549", "matmul_tensorcore", "warp_tile", dict(n=549, m=317, l=78, layout="NN"), "int8",
     dict(bx=4, by=32, step_k=1, v=16, ty=2, tx=2, warp_m=64, double_buffer=1, flat_fetch=0, align_all=0, raster=0)),
    ("int8-549-db0", "matmul_tensorcore", "warp_tile", dict(n=549, m=317, l=78, layout="NN"), "int8",
     dict(bx=4, by=32, step_k=1, v=16, ty=2, tx=2, warp_m=64, double_buffer=0, flat_fetch=0, align_all=0, raster=0)),
    ("f16-600", "matmul_tensorcore", "warp_tile", dict(n=600, m=600, l=256, layout="NN"), "float16",
     dict(bx=8, by=16, step_k=4, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1)),
    ("f16-600-db", "matmul_tensorcore", "warp_tile", dict(n=600, m=600, l=256, layout="NN"), "float16",
     dict(bx=16, by=16, step_k=4, v=8, ty=8, tx=16, warp_m=64, double_buffer=1, flat_fetch=1, align_all=1)),
    ("f32-300", "matmul", "shared_blocked", dict(n=300, m=200, k=104), "float32",
     dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8, reg_cache=1)),
]


def check(tag, wname, variant, params, dtype, knobs):
    w = workloads.get(wname)
    s, args = w.build(variant, params, dtype, knobs)
    f = tvm.build(s, args, "cuda")
    src = f.imported_modules[0].get_source()
    open(os.path.join(out, f"{tag}.cu"), "w").write(src)
    host = w.make_args(params, dtype, np.random.default_rng(5))
    dev = tvm.cuda(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    f(*nd)
    rtol, atol = w.tolerance_for(dtype, params)
    bad = 0
    where = None
    for idx, ref in zip(w.outputs, w.reference_of(host, params, dtype)):
        got = nd[idx].numpy()
        diff = ~np.isclose(got, ref, rtol=rtol, atol=atol)
        bad += int(diff.sum())
        if diff.any():
            where = np.argwhere(diff)[:3].tolist()
    if tag.startswith("int8-549") and where:  # wrong at interior rows (< 512) and columns (< 312)?
        got = nd[w.outputs[0]].numpy()
        ref = w.reference_of(host, params, dtype)[0]
        inner = ~np.isclose(got[:512, :312], ref[:512, :312], rtol=rtol, atol=atol)
        where = f"{where}; interior wrong {int(inner.sum())}, edge wrong {bad - int(inner.sum())}"
    return bad, where, src.count("mma_sync"), src.count("} else {")


for on in ("on", "slow-slow", "off", "fast-fast"):
    _variant(on)
    if on == "off":
        L.TARGET_PASSES.remove(L.BLOCK_PARTITION)
    elif L.BLOCK_PARTITION not in L.TARGET_PASSES:
        L.TARGET_PASSES.insert(0, L.BLOCK_PARTITION)
    for tag, *rest in (CASES if on in ("on", "off") else CASES[:1]):
        try:
            bad, where, mma, branches = check(f"{tag}-{on}", *rest)
            print(f"CHECK {tag:14s} partition {on:9s}: wrong {bad:7d} first {where} mma_sync {mma} else {branches}")
        except Exception as e:  # noqa: BLE001
            print(f"CHECK {tag:14s} partition {on:9s}: {type(e).__name__}: {str(e)[:200]}")
sys.stdout.flush()
