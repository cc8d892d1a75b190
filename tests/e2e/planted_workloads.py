"""Planted workloads for the dispatch tests: kernels that misbehave on purpose, on the C target.

Import this module in the worker (``imports=("planted_workloads",)``, with this folder on the
worker's ``PYTHONPATH``) and it registers:

* ``planted_hang`` — a real generated C kernel that does not finish: a float sum over 2**60 terms
  (two nested 2**30 reduction loops; without fast-math the compiler must keep every addition).
* ``planted_oob`` — a real generated C kernel that reads 2e9 elements (8 GB) past its input: the
  worker process dies with SIGSEGV. (A TE compute only stores inside its output, so the planted
  out-of-bounds access is a load; it kills the worker the same way a wild store would.)
* ``planted_kill_once`` — a correct kernel whose *build* SIGKILLs the worker process the first time
  it runs for a given marker file (knob ``marker``): the retry finds the marker and succeeds.
* ``planted_wrong`` — a correct-looking kernel checked against a wrong reference: outcome ``wrong``.
* ``planted_regress`` — correct, until the environment variable PLANTED_BREAK is set: then
  ``wrong`` (a correctness regression between two runs).
* ``planted_slow`` — correct, but its float64 reference takes ``PLANTED_SLOW_S`` seconds (default
  0.5; one per shape, so give each case its own ``n``): a run slow enough to be stopped mid-way.

All take ``n`` and float32; the well-behaved ones compute ``B[i] = 2 * A[i]``.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from kernels import te
from kernels.workloads import REGISTRY, Variant, Workload, register

CPU = ("c",)


def _scale(params, dtype):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return te.create_schedule(B.op), [A, B]


def _hang(params, dtype):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    k1 = te.reduce_axis((0, 1 << 30), "k1")
    k2 = te.reduce_axis((0, 1 << 30), "k2")
    B = te.compute((n,), lambda i: te.sum(A[(i + k2) % n], axis=[k1, k2]), name="B")
    return te.create_schedule(B.op), [A, B]


def _oob(params, dtype):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: A[i + 2_000_000_000] * 2.0, name="B")
    return te.create_schedule(B.op), [A, B]


def _kill_once(params, dtype, marker=""):
    if marker and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return _scale(params, dtype)


def _args(p, dtype, rng):
    return [rng.uniform(size=p["n"]).astype(dtype), np.full(p["n"], np.nan, dtype=dtype)]


def _planted(name: str, build, knobs=(), reference=None, description=""):
    if name in REGISTRY:  # imported twice under different module names: keep the first
        return
    register(Workload(
        name=name,
        params=("n",),
        dtypes=("float32",),
        variants={"default": Variant("default", build, CPU, knobs, description)},
        make_args=_args,
        reference=reference or (lambda a: [2.0 * a[0].astype(np.float64)]),
        outputs=(1,),
        flops=lambda p: float(p["n"]),
        bytes=lambda p, d: float(2 * p["n"] * 4),
        description=description,
    ))


_planted("planted_hang", _hang, description="a C kernel that never finishes")
_planted("planted_oob", _oob, description="a C kernel reading 8 GB past its input (SIGSEGV)")
_planted("planted_kill_once", _kill_once, (("marker", ""),),
         description="SIGKILLs its worker while building, once per marker file")
_planted("planted_wrong", _scale, reference=lambda a: [2.0 * a[0].astype(np.float64) + 1.0],
         description="checked against a wrong reference")
def _slow_reference(a):
    time.sleep(float(os.environ.get("PLANTED_SLOW_S", "0.5")))
    return [2.0 * a[0].astype(np.float64)]


_planted("planted_slow", _scale, reference=_slow_reference,
         description="correct; its reference sleeps PLANTED_SLOW_S seconds (a slow run to interrupt)")
_planted("planted_regress", _scale,
         reference=lambda a: [2.0 * a[0].astype(np.float64)
                              + (1.0 if os.environ.get("PLANTED_BREAK") else 0.0)],
         description="correct, unless PLANTED_BREAK is set in the worker's environment (then wrong)")
