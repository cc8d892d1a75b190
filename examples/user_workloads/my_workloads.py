"""A workload of one's own, registered with kbench's public workload API only (docs/WORKLOADS.md).

``axpy``: ``Z[i] = alpha * X[i] + Y[i]`` with ``alpha = 2``, in float32 or float64, with two schedule
variants: ``default`` (one loop, C) and ``vectorized`` (the loop split by the knob ``vector`` and the
inner part vectorized, C), plus ``bind`` for the GPU targets (``threads`` threads a block).

The suite next to this file (``my_suite.toml``) lists it under ``[suite] imports``; ``kbench run``
finds this module beside the suite and ships it to every Ray worker, from any folder.
"""

from __future__ import annotations

import numpy as np

from kernels import te
from kernels.workloads import Variant, Workload, poison, register, storage_bytes, uniform

ALPHA = 2.0


def _compute(params, dtype):
    n = params["n"]
    X = te.placeholder((n,), name="X", dtype=dtype)
    Y = te.placeholder((n,), name="Y", dtype=dtype)
    Z = te.compute((n,), lambda i: X[i] * ALPHA + Y[i], name="Z")
    return X, Y, Z


def default(params, dtype):
    """One loop over the elements."""
    X, Y, Z = _compute(params, dtype)
    return te.create_schedule(Z.op), [X, Y, Z]


def vectorized(params, dtype, vector=8):
    """The loop split by ``vector``; the inner loop becomes vector operations."""
    X, Y, Z = _compute(params, dtype)
    s = te.create_schedule(Z.op)
    _, inner = s[Z].split(Z.op.axis[0], factor=vector)
    s[Z].vectorize(inner)
    return s, [X, Y, Z]


def bind(params, dtype, threads=128):
    """One element a thread, ``threads`` threads a block."""
    X, Y, Z = _compute(params, dtype)
    s = te.create_schedule(Z.op)
    bx, tx = s[Z].split(Z.op.axis[0], factor=threads)
    s[Z].bind(bx, te.thread_axis("blockIdx.x"))
    s[Z].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [X, Y, Z]


def make_args(params, dtype, rng):
    """Every argument of the kernel, in the order of the schedules' argument lists: the inputs drawn
    from ``rng``, the output poisoned (NaN) so that an element the kernel never writes is caught."""
    n = params["n"]
    return [uniform(rng, n, dtype, -1.0, 1.0), uniform(rng, n, dtype, -1.0, 1.0), poison((n,), dtype)]


def reference(args):
    """The outputs (here: Z, argument 2) in float64, from the inputs."""
    x, y = (a.astype(np.float64) for a in args[:2])
    return [ALPHA * x + y]


register(Workload(
    name="axpy",
    params=("n",),
    dtypes=("float32", "float64"),
    variants={
        "default": Variant("default", default, ("c",), (), "one loop"),
        "vectorized": Variant("vectorized", vectorized, ("c",), (("vector", 8),),
                              "split by `vector`, inner loop vectorized"),
        "bind": Variant("bind", bind, ("opencl", "cuda"), (("threads", 128),),
                        "one element a thread, `threads` a block"),
    },
    make_args=make_args,
    reference=reference,
    outputs=(2,),
    flops=lambda p: 2.0 * p["n"],  # one multiply and one add an element
    bytes=lambda p, d: 3 * storage_bytes(d, p["n"]),  # X and Y read, Z written
    write_bytes=lambda p, d: storage_bytes(d, p["n"]),
    description="Z = 2 X + Y",
    tolerance={"float32": (1e-6, 1e-6)},  # two roundings of values below 3: tighter than the default
))
