"""A differential schedule fuzzer: every space the project can draw a schedule from, at random shapes,
built and run in isolation and compared with numpy in float64.

Spaces (``--space NAME``; all by default):

==================  ===============================================================================
``tc_tutorial``     the auto-tensor-core tutorial's autotvm template (``workloads/matmul_tensorcore``,
                    288 configurations: bx, by, step_k, v) with the ``"tensor_core"`` pragma;
                    float16 and int8 in every layout, int4 and int1 in layout TN
``tc_plain``        the same template without the pragma (the plain register-tiled code)
``tc_warp_tile``    ``matmul_tensorcore/warp_tile``'s knobs (thread tile, warp width, multi-buffering,
                    flat fetch, padding, rasterisation)
``sgemm``           ``matmul``'s variants and their knobs (naive, local_blocked, shared_blocked; the
                    default loop nest on C) and an autotvm template with ``define_split`` tilings
``reduction``       ``row_sum`` and ``product_reduce`` variants (split, rfactor, cross-thread)
``elementwise``     ``vector_add``, ``exp``, ``log``, ``window_sum`` and ``conv2d_3x3`` variants
``tune_tir``        meta_schedule's generated design spaces (:class:`kernels.tuning.tir_task.TIRTask`)
                    of the notes' TensorIR matmul, vector add and window sum
``tir_variants``    the notes' TensorIR workloads' schedule variants and their knobs
==================  ===============================================================================

Shapes are drawn tiny (1, 2, 3), prime, ragged or powers of two. Each sample runs in a child process
(``multiprocessing``'s "spawn" context) that is kept warm and replaced after a crash, a hang (the
sample's ``timeout``) or a CUDA error, so one faulting kernel costs one sample, never the run.

Every buffer is allocated with red zones: as many bytes again as the buffer (at least 4 KiB) before
and after it, filled with NaN (integers: a large sentinel). A red zone that changes is an
out-of-bounds write (``oob_write``); NaN read from an input's red zone makes an out-of-bounds read a
wrong value (``wrong``). Before code generation the lowered IR's accesses are also checked against
their buffers, shared and local allocations included, under the guards around them
(``oob_index``): on a CPU device an out-of-bounds shared-memory read lands in other memory without a
fault, on a GPU it faults.

Outcomes: ``ok``; ``refused`` (a clear error from the schedule, the lowering or the workload: a
``TVMError``); ``built`` (``--build-only``); ``device_bug`` (an OpenCL sample that is wrong or writes
out of bounds as the device compiles it, and correct with its optimizer off, ``-cl-opt-disable``: the
device's compiler miscompiles correct code); and the failures ``wrong``, ``oob_write``, ``oob_index``,
``build_error`` (the native compiler rejected generated code), ``crashed`` (another exception, or the
child died) and ``timeout``. The exit status is 1 when any failure but a timeout was seen.

Usage::

    python -m kernels.testing.fuzz --target opencl --budget 120 --seed 1
    python -m kernels.testing.fuzz --target cuda --count 2000 --jobs 16 --json out.json
    python -m kernels.testing.fuzz --target cuda --sweep tc_tutorial --shape n=32,l=512,m=512 \\
        --dtype float16 --layout NN
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import wait as _wait_conns
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["FAILURES", "OUTCOMES", "SPACES", "FuzzReport", "check_accesses", "draw_samples", "execute",
           "main", "run_fuzz", "sweep_samples"]

#: every outcome a sample can have
OUTCOMES = ("ok", "built", "refused", "wrong", "oob_write", "oob_index", "build_error", "crashed",
            "timeout", "device_bug")
#: the outcomes that make the run fail (a timeout is reported but may be the machine's load)
FAILURES = ("wrong", "oob_write", "oob_index", "build_error", "crashed")
TARGETS = ("c", "opencl", "cuda")

# -- the spaces ----------------------------------------------------------------------------------------

_PRIMES = (5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 53, 61, 67, 97, 127, 131, 257, 509, 1021)


def draw_size(rng: np.random.Generator, hi: int, multiple: int = 1) -> int:
    """A size in [1, hi] (a multiple of ``multiple``): tiny, prime, ragged or a power of two."""
    hi = max(hi, multiple)
    kind = rng.random()
    if kind < 0.2:
        n = int(rng.integers(1, 4))
    elif kind < 0.45:
        ps = [p for p in _PRIMES if p <= hi // multiple] or [1]
        n = int(rng.choice(ps))
    elif kind < 0.8:
        n = int(rng.integers(1, hi // multiple + 1))
    else:
        n = 1 << int(rng.integers(0, int(math.log2(max(hi // multiple, 1))) + 1))
    return n * multiple


#: candidate values of the registered variants' knobs, by knob name (a knob missing here is drawn
#: around its default)
KNOB_VALUES: Dict[str, Tuple[Any, ...]] = {
    "threads": (1, 3, 32, 64, 128, 256), "vector": (1, 2, 4, 8), "items": (1, 2, 3, 4),
    "factor": (1, 2, 3, 4, 16, 32, 64), "rows": (1, 2, 4, 8, 32), "tile": (1, 2, 4, 8, 16),
    "local_y": (1, 2, 4, 8), "local_x": (1, 2, 4, 8), "block_y": (1, 2, 4, 8, 16),
    "block_x": (1, 2, 4, 8, 16), "tile_k": (1, 2, 3, 4, 8, 16), "double_buffer": (0, 1, 3),
    "vthread": (1, 2), "reg_cache": (0, 1), "unroll_k": (1, 2, 4),
}
#: the tensor-core variants' knobs
TC_KNOBS: Dict[str, Tuple[Any, ...]] = {
    "bx": (2, 4, 8), "by": (8, 16, 32, 64), "step_k": (1, 2, 4, 8, 16, 32), "v": (4, 8, 16, 32)}
WARP_TILE_KNOBS: Dict[str, Tuple[Any, ...]] = {
    "bx": (1, 2, 4, 8, 16), "by": (4, 8, 16, 32), "step_k": (1, 2, 4, 8), "v": (1, 2, 4, 8, 16),
    "ty": (1, 2, 4, 8), "tx": (1, 2, 4, 8, 16), "warp_m": (8, 16, 32, 64), "double_buffer": (0, 1, 3),
    "flat_fetch": (0, 1), "align_all": (0, 1), "raster": (0, 0, 0, 1, 2, 8)}

#: space -> [(workload, [variants])]; "*" = every variant for the target
_VARIANT_SPACES = {
    "sgemm": [("matmul", ["*"])],
    "reduction": [("row_sum", ["*"]), ("product_reduce", ["*"])],
    "elementwise": [("vector_add", ["*"]), ("exp", ["*"]), ("log", ["*"]), ("window_sum", ["*"]),
                    ("conv2d_3x3", ["*"])],
    "tc_warp_tile": [("matmul_tensorcore", ["warp_tile"])],
    "tir_variants": [("matmul_tir", ["*"]), ("vector_add_tir", ["*"]), ("window_sum_tir", ["*"])],
}
SPACES = ("tc_tutorial", "tc_plain", "tc_warp_tile", "sgemm", "reduction", "elementwise", "tune_tir",
          "tir_variants")

#: largest size drawn per workload parameter on a CPU device (c, opencl); CUDA draws up to 8x larger
_SIZE_CAP = {"matmul": 72, "matmul_tensorcore": 96, "row_sum": 160, "product_reduce": 64,
             "vector_add": 4096, "exp": 2048, "log": 2048, "window_sum": 2048, "conv2d_3x3": 48,
             "matmul_tir": 48, "vector_add_tir": 4096, "window_sum_tir": 2048}


_NOTES: Dict[str, Any] = {}


def _get(name: str):
    """The workload ``name``; the notes' TensorIR workloads without registering them (the registry
    lists what suites may name: the fuzzer leaves it as it found it)."""
    from kernels import workloads
    from kernels.workloads.tensorir import NOTES_WORKLOADS, register_notes_workloads

    if name not in NOTES_WORKLOADS or name in workloads.REGISTRY:
        return workloads.get(name)
    if not _NOTES:
        before = dict(workloads.REGISTRY)
        try:
            register_notes_workloads()
            _NOTES.update({n: workloads.REGISTRY[n] for n in NOTES_WORKLOADS})
        finally:
            workloads.REGISTRY.clear()
            workloads.REGISTRY.update(before)
    return _NOTES[name]


def _dtypes_for(w, target: str, caps: Dict[str, bool]) -> List[str]:
    out = []
    for d in w.dtypes:
        if d == "float16" and not caps.get("fp16", True):
            continue
        if d == "float64" and not caps.get("fp64", True):
            continue
        out.append(d)
    return out


def _params(rng, w, dtype: str, target: str) -> Dict[str, Any]:
    cap = _SIZE_CAP.get(w.name, 64) * (8 if target == "cuda" else 1)
    p: Dict[str, Any] = {}
    for name in w.params:
        if name in w.choices:
            choices = list(w.choices[name])
            if w.name == "matmul_tensorcore" and dtype in ("int4", "int1"):
                choices = ["TN"]
            p[name] = str(rng.choice(choices))
        else:
            packed = (w.name, name) == ("matmul_tensorcore", "l")
            mult = {"int4": 8, "int1": 32}.get(dtype, 1) if packed else 1
            p[name] = draw_size(rng, cap * (4 if mult > 1 else 1), mult)
    return p


def _knob(rng, name: str, default: Any, table: Dict[str, Tuple[Any, ...]]) -> Any:
    vals = table.get(name)
    if vals is None:
        if isinstance(default, bool) or not isinstance(default, int):
            return default
        vals = tuple(sorted({1, 2, 3, max(default, 1), 2 * max(default, 1)}))
    return vals[int(rng.integers(len(vals)))]


def _draw(space: str, rng: np.random.Generator, target: str, caps: Dict[str, bool]) -> Optional[dict]:
    """One sample of ``space`` for ``target`` (None when the space has nothing for the target)."""
    base = {"space": space, "target": target, "seed": int(rng.integers(1 << 31))}
    if space in ("tc_tutorial", "tc_plain"):
        if target == "c":
            return None
        w = _get("matmul_tensorcore")
        dtypes = _dtypes_for(w, target, caps)
        dtype = str(rng.choice(dtypes))
        knobs = {k: v[int(rng.integers(len(v)))] for k, v in TC_KNOBS.items()}
        return dict(base, kind="variant", workload=w.name, variant="tutorial" if space == "tc_tutorial"
                    else "plain", dtype=dtype, params=_params(rng, w, dtype, target), knobs=knobs)
    if space == "tune_tir":
        name = str(rng.choice(["matmul_tir", "vector_add_tir", "window_sum_tir"]))
        w = _get(name)
        dtype = str(rng.choice(_dtypes_for(w, target, caps)))
        return dict(base, kind="tir_task", workload=name, variant="", dtype=dtype,
                    params=_params(rng, w, dtype, target), index=int(rng.integers(1 << 30)))
    if space == "sgemm" and rng.random() < 0.3:
        w = _get("matmul")
        return dict(base, kind="autotvm", template=_SPLIT_TEMPLATE, workload="matmul", variant="",
                    dtype="float32", params=_params(rng, w, "float32", target),
                    index=int(rng.integers(1 << 30)))
    pairs = []
    for wname, variants in _VARIANT_SPACES[space]:
        w = _get(wname)
        names = list(w.variants) if variants == ["*"] else variants
        pairs.extend((w, v) for v in names if target in w.variants[v].targets)
    if not pairs:
        return None
    w, vname = pairs[int(rng.integers(len(pairs)))]
    dtypes = _dtypes_for(w, target, caps)
    if not dtypes:
        return None
    dtype = str(rng.choice(dtypes))
    table = WARP_TILE_KNOBS if vname == "warp_tile" else KNOB_VALUES
    knobs = {k: _knob(rng, k, d, table) for k, d in w.variants[vname].knobs}
    params = _params(rng, w, dtype, target)
    group = knobs.get("raster", 0) * knobs.get("by", 1) * knobs.get("ty", 1)
    if group and group <= _SIZE_CAP[w.name] * (8 if target == "cuda" else 1) and rng.random() < 0.7:
        # rasterisation takes whole groups of block rows: mostly draw C's rows so
        params["n"] = group * int(rng.integers(1, 3))
    return dict(base, kind="variant", workload=w.name, variant=vname, dtype=dtype, params=params, knobs=knobs)


def draw_samples(target: str, seed: int, spaces: Sequence[str] = SPACES,
                 caps: Optional[Dict[str, bool]] = None) -> Iterator[dict]:
    """An endless stream of samples for ``target``, the spaces taken in turn (seeded)."""
    rng = np.random.default_rng(seed)
    caps = caps or {}
    usable = [s for s in spaces if _draw(s, np.random.default_rng(0), target, caps) is not None]
    if not usable:
        raise ValueError(f"no space of {', '.join(spaces)} has schedules for target {target}")
    for k in itertools.count():
        sample = _draw(usable[k % len(usable)], rng, target, caps)
        if sample is not None:
            sample["id"] = k
            yield sample


def sweep_samples(space: str, target: str, params: Dict[str, Any], dtype: str) -> List[dict]:
    """Every configuration of an autotvm-template space at one shape (``tc_tutorial``/``tc_plain``:
    the tutorial's 288)."""
    if space not in ("tc_tutorial", "tc_plain"):
        raise ValueError(f"--sweep takes tc_tutorial or tc_plain, got {space!r}")
    out = []
    for k, combo in enumerate(itertools.product(*TC_KNOBS.values())):
        out.append({"space": space, "target": target, "seed": k, "id": k, "kind": "variant",
                    "workload": "matmul_tensorcore", "variant": "tutorial" if space == "tc_tutorial"
                    else "plain", "dtype": dtype, "params": dict(params),
                    "knobs": dict(zip(TC_KNOBS, combo))})
    return out


# -- an autotvm template with define_split tilings (the sgemm space's second half) ---------------------

_SPLIT_TEMPLATE = "fuzz/matmul_split"


def _split_template(n: int, m: int, k: int, target: str):
    """``matmul``'s product tiled by ``define_split``: on a GPU each spatial axis in blocks x threads
    x a per-thread tile; on C an outer loop, a vectorized or unrolled inner tile and k split."""
    from kernels import autotvm, te

    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    cfg = autotvm.get_config()
    i, j = s[C].op.axis
    if target == "c":
        cfg.define_split("tile_i", i, num_outputs=2)
        cfg.define_split("tile_j", j, num_outputs=2)
        cfg.define_split("tile_r", r, num_outputs=2)
        cfg.define_knob("inner", ["serial", "unroll", "vectorize"])
        cfg.define_knob("par", [0, 1])
        io, ii = cfg["tile_i"].apply(s, C, i)
        jo, ji = cfg["tile_j"].apply(s, C, j)
        ro, ri = cfg["tile_r"].apply(s, C, r)
        s[C].reorder(io, jo, ro, ii, ri, ji)
        if cfg["inner"].val == "unroll":
            s[C].unroll(ji)
        elif cfg["inner"].val == "vectorize":
            s[C].vectorize(ji)
        if cfg["par"].val:
            s[C].parallel(io)
        return s, [A, B, C]
    cfg.define_split("tile_i", i, num_outputs=3)
    cfg.define_split("tile_j", j, num_outputs=3)
    cfg.define_split("tile_r", r, num_outputs=2)
    CL = s.cache_write(C, "local")
    bi, ti, ii = cfg["tile_i"].apply(s, C, i)
    bj, tj, ji = cfg["tile_j"].apply(s, C, j)
    s[C].reorder(bi, bj, ti, tj, ii, ji)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(ti, te.thread_axis("threadIdx.y"))
    s[C].bind(tj, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], tj)
    ro, ri = cfg["tile_r"].apply(s, CL, s[CL].op.reduce_axis[0])
    ci, cj = s[CL].op.axis
    s[CL].reorder(ro, ri, ci, cj)
    return s, [A, B, C]


def _template_task(sample: dict):
    from kernels import autotvm
    from kernels.tuning.task import TEMPLATES

    if _SPLIT_TEMPLATE not in TEMPLATES:
        autotvm.template(_SPLIT_TEMPLATE)(_split_template)
    p = sample["params"]
    tgt = "c" if sample["target"] == "c" else "cuda"
    return autotvm.task.create(_SPLIT_TEMPLATE, args=(p["n"], p["m"], p["k"], tgt), target=tgt)


# -- building a sample (in the child) -------------------------------------------------------------------


class _Refused(Exception):
    pass


def _callable(path: str):
    import importlib

    mod, _, name = path.partition(":")
    return getattr(importlib.import_module(mod), name)


def _schedule(sample: dict, note: dict):
    """``(inputs, args, knobs, workload)`` of a sample: a TE schedule and its tensors (or a TensorIR
    module and None), the knobs applied, and the workload giving its data and reference.

    Kinds: ``variant`` (a registered workload's variant and knobs), ``autotvm`` (a configuration of
    the space of :data:`_SPLIT_TEMPLATE`, by index), ``tir_task`` (a configuration of a tune_tir design
    space, by index) and ``callable`` (``builder`` names a ``module:function`` taking the params and
    dtype and returning ``(inputs, args, workload)``: planted kernels in the fuzzer's own tests).
    The knobs go into ``note["knobs"]`` before the schedule is made (a refusal names them too).
    """
    kind = sample["kind"]
    if kind == "callable":
        inputs, args, w = _callable(sample["builder"])(sample["params"], sample["dtype"])
        return inputs, args, {}, w
    w = _get(sample["workload"])
    if kind == "variant":
        s, args = w.build(sample["variant"], sample["params"], sample["dtype"], sample["knobs"])
        return s, args, sample["knobs"], w
    if kind == "autotvm":
        task = _template_task(sample)
        cfg = task.config_space.get(sample["index"] % len(task.config_space))
        note["knobs"] = cfg.to_values()
        s, args = task.instantiate(cfg)
        return s, args, cfg.to_values(), w
    if kind == "tir_task":
        from kernels.tuning.tir_task import TIRTask

        module = _tir_module(sample["workload"], sample["params"], sample["dtype"])
        task = TIRTask(module, "cuda" if sample["target"] == "cuda" else sample["target"])
        cfg = task.config_space.get(sample["index"] % len(task.config_space))
        note["knobs"] = cfg.to_values()
        return task.instantiate(cfg)[0], None, cfg.to_values(), w
    raise ValueError(f"unknown sample kind {kind!r}")


def _tir_module(name: str, params: Dict[str, Any], dtype: str):
    from kernels.workloads import tensorir

    factory = {"matmul_tir": tensorir.matmul_module, "vector_add_tir": tensorir.vector_add_module,
               "window_sum_tir": tensorir.window_sum_module}[name]
    return factory(params, dtype)


def _lower(inputs, args, target: str):
    """The final lowered function (what code generation prints) and its FuncSpec."""
    from kernels.build_module import _check_no_threads
    from kernels.codegen import generate
    from kernels.lower import is_tensor_ir, lower, lower_for_target, run_passes
    from kernels.runtime.cuda import default_arch

    if is_tensor_ir(inputs):
        from kernels.lower.from_blocks import tir_function

        func = run_passes(tir_function(inputs, target, "fuzz_kernel"))
    else:
        if target == "c":
            _check_no_threads(inputs)
        func = lower(inputs, args, name="fuzz_kernel")["fuzz_kernel"]
    func = lower_for_target(func, target)
    arch = default_arch() if target == "cuda" else ""
    return func, generate(func, target, arch)


# -- the static check of the lowered IR's accesses ----------------------------------------------------

_SUBBYTE = ("int4", "uint4", "int1")
_POINTS = 1 << 17


class _Unknown(Exception):
    pass


def _scalar(dtype: str) -> str:
    return dtype.split("x")[0] if "x" in dtype and not dtype.startswith("x") else dtype


def _ev(e, env: Dict[Any, np.ndarray]):
    from kernels.tir import expr as E

    if isinstance(e, E.IntImm):
        return np.int64(e.value) if not e.dtype == "bool" else bool(e.value)
    if isinstance(e, E.Var):
        if e not in env:
            raise _Unknown(e.name)
        return env[e]
    if isinstance(e, E.Broadcast):
        return _ev(e.value, env)
    if isinstance(e, E.Cast):
        if e.dtype.startswith(("int", "uint")) or e.dtype == "bool":
            v = _ev(e.value, env)
            return np.asarray(v).astype(bool if e.dtype == "bool" else np.int64)
        raise _Unknown("cast")
    if isinstance(e, E.Not):
        return np.logical_not(_ev(e.a, env))
    if isinstance(e, E.Select):
        return np.where(_ev(e.condition, env), _ev(e.true_value, env), _ev(e.false_value, env))
    if isinstance(e, E.Call):
        name = getattr(e.op, "name", str(e.op))
        if name.endswith("likely") and len(e.args) == 1:
            return _ev(e.args[0], env)
        raise _Unknown(name)
    if isinstance(e, E.BinaryOp):
        a, b = _ev(e.a, env), _ev(e.b, env)
        ops = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum, E.Max: np.maximum,
               E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater, E.GE: np.greater_equal,
               E.EQ: np.equal, E.NE: np.not_equal, E.And: np.logical_and, E.Or: np.logical_or}
        for cls, fn in ops.items():
            if isinstance(e, cls):
                return fn(a, b)
        if isinstance(e, (E.FloorDiv, E.FloorMod, E.Div, E.Mod)):
            b = np.asarray(b)
            if np.any(b == 0):
                raise _Unknown("division by zero")
            if isinstance(e, E.FloorDiv):
                return np.floor_divide(a, b)
            if isinstance(e, E.FloorMod):
                return np.mod(a, b)
            q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
            return q if isinstance(e, E.Div) else a - q * b
    raise _Unknown(type(e).__name__)


def _loads(e, out: list) -> None:
    """The buffer loads ``e`` evaluates unconditionally (not those under a select or if_then_else,
    which C evaluates only on their side of the condition)."""
    from kernels.tir import expr as E

    if isinstance(e, E.BufferLoad):
        out.append(e)
        for i in e.indices:
            _loads(i, out)
        return
    if isinstance(e, E.Select):
        _loads(e.condition, out)
        return
    if isinstance(e, E.Call):
        if getattr(e.op, "name", "").endswith("if_then_else"):
            _loads(e.args[0], out)
            return
        for a in e.args:
            if isinstance(a, E.PrimExpr):
                _loads(a, out)
        return
    for f in ("a", "b", "value", "condition", "base"):
        x = getattr(e, f, None)
        if isinstance(x, E.PrimExpr):
            _loads(x, out)


def check_accesses(func, points: int = _POINTS, seed: int = 0) -> Optional[str]:
    """The first buffer access of the lowered ``func`` that can leave its buffer, or None.

    Every load and store of a buffer with a constant size (the function's arguments, shared and local
    allocations) is evaluated at the values of the loop and thread variables in its index and in the
    guards around it (every combination when there are at most ``points``, else that many random
    ones with the extreme corners), and must fall inside the buffer wherever the guards hold.
    Accesses whose index or guard depends on data or on symbolic extents are not checked.
    """
    from kernels.tir import attr
    from kernels.tir import expr as E
    from kernels.tir import stmt as S
    from kernels.tir.functor import substitute

    rng = np.random.default_rng(seed)
    sizes: Dict[int, Tuple[str, str, int]] = {}  # id(data var) -> (name, dtype, elements)
    for buf in func.buffers:
        n = 1
        for d in buf.shape:
            if not isinstance(d, E.IntImm):
                n = -1
                break
            n *= d.value
        if n >= 0:
            sizes[id(buf.data)] = (buf.name, buf.dtype, n)
    found: List[str] = []

    def check(buf, indices, ranges, conds, lets, what):
        if found or len(indices) != 1:
            return
        info = sizes.get(id(buf.data))
        if info is None or info[1] in _SUBBYTE or _scalar(buf.dtype) != _scalar(info[1]):
            return
        name, _, n = info
        idx = indices[0]
        if isinstance(idx, E.Ramp):
            if not isinstance(idx.stride, E.IntImm):
                return
            ends = [idx.base, E.Add(idx.base, E.IntImm("int32", idx.stride.value * (idx.lanes - 1)))]
        else:
            ends = [idx]
        exprs = [substitute(x, lets) if lets else x for x in ends]
        cs = [substitute(c, lets) if lets else c for c in conds]
        from kernels.tir.functor import vars_of

        free: Dict[int, Any] = {}
        for x in exprs + cs:
            for v in vars_of(x):
                free[id(v)] = v
        vs = sorted(free.values(), key=lambda v: v.name)
        if any(id(v) not in ranges for v in vs):
            return
        spans = [ranges[id(v)] for v in vs]
        total = 1
        for lo, hi in spans:
            total *= hi - lo + 1
        env: Dict[Any, np.ndarray] = {}
        if total <= points:
            for k, (v, (lo, hi)) in enumerate(zip(vs, spans)):
                shape = [1] * len(vs)
                shape[k] = hi - lo + 1
                env[v] = np.arange(lo, hi + 1, dtype=np.int64).reshape(shape)
        else:
            for k, (v, (lo, hi)) in enumerate(zip(vs, spans)):
                col = rng.integers(lo, hi + 1, size=points, dtype=np.int64)
                col[0], col[1] = lo, hi
                env[v] = col
        try:
            mask = np.ones((), dtype=bool)
            for c in cs:
                mask = np.logical_and(mask, _ev(c, env))
            for x in exprs:
                val = np.asarray(_ev(x, env))
                bad = np.logical_and(mask, np.logical_or(val < 0, val >= n))
                if np.any(bad):
                    pos = np.unravel_index(int(np.argmax(np.broadcast_to(bad, np.broadcast(bad, val).shape))),
                                           np.broadcast(bad, val).shape)
                    full = np.broadcast_to(val, np.broadcast(bad, val).shape)
                    at = ", ".join(f"{v.name}={int(np.broadcast_to(env[v], full.shape)[pos])}" for v in vs)
                    found.append(f"{what} of {name}[{int(full[pos])}] is outside its {n} elements "
                                 f"(at {at or 'every point'})")
                    return
        except _Unknown:
            return

    def visit_expr(e, ranges, conds, lets):
        lds: list = []
        _loads(e, lds)
        for ld in lds:
            check(ld.buffer, ld.indices, ranges, conds, lets, "a load")

    def const_of(e, lets):
        from kernels.tir.simplify import simplify

        x = simplify(substitute(e, lets) if lets else e)
        return x.value if isinstance(x, E.IntImm) else None

    def visit(s, ranges, conds, lets):
        if found or s is None:
            return
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                visit(x, ranges, conds, lets)
        elif isinstance(s, S.For):
            lo, ext = const_of(s.min, lets), const_of(s.extent, lets)
            r = dict(ranges)
            if lo is not None and ext is not None and ext > 0:
                r[id(s.loop_var)] = (lo, lo + ext - 1)
            else:
                r.pop(id(s.loop_var), None)
            visit(s.body, r, conds, lets)
        elif isinstance(s, S.AttrStmt):
            r = ranges
            if s.attr_key == attr.THREAD_EXTENT and isinstance(s.node, S.ThreadIndex):
                ext = const_of(s.value, lets)
                r = dict(ranges)
                if ext is not None and ext > 0:
                    r[id(s.node.var)] = (0, ext - 1)
            elif isinstance(s.value, E.PrimExpr):
                visit_expr(s.value, ranges, conds, lets)
            visit(s.body, r, conds, lets)
        elif isinstance(s, S.IfThenElse):
            visit_expr(s.condition, ranges, conds, lets)
            visit(s.then_case, ranges, conds + [s.condition], lets)
            if s.else_case is not None:
                visit(s.else_case, ranges, conds + [E.Not(s.condition)], lets)
        elif isinstance(s, S.LetStmt):
            visit_expr(s.value, ranges, conds, lets)
            nl = dict(lets)
            nl[s.var] = substitute(s.value, lets) if lets else s.value
            visit(s.body, ranges, conds, nl)
        elif isinstance(s, S.Allocate):
            n = const_of(s.extent, lets)
            if n is not None:
                sizes[id(s.buffer.data)] = (s.buffer.name, s.buffer.dtype, n)
            visit(s.body, ranges, conds, lets)
        elif isinstance(s, S.BufferStore):
            visit_expr(s.value, ranges, conds, lets)
            for i in s.indices:
                visit_expr(i, ranges, conds, lets)
            check(s.buffer, s.indices, ranges, conds, lets, "a store")
        elif isinstance(s, S.Evaluate):
            visit_expr(s.value, ranges, conds, lets)
        else:
            body = getattr(s, "body", None)
            if isinstance(body, S.Stmt):
                visit(body, ranges, conds, lets)

    visit(func.body, {}, [], {})
    return found[0] if found else None


# -- running a sample with red zones ------------------------------------------------------------------


def _sentinel(dtype: np.dtype):
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return True
    info = np.iinfo(dtype)
    return info.max // 3 + 7


class _Zoned:
    """One argument in device memory between two red zones."""

    def __init__(self, target: str, array: np.ndarray, logical: Tuple[int, ...], dtype: str):
        from kernels.runtime.ndarray import NDArray

        import kernels as tvm

        self.target = target
        flat = np.ascontiguousarray(array).reshape(-1)
        item = flat.dtype.itemsize
        self.pad = max(4096, -(-flat.nbytes // 256) * 256) // item  # elements, a multiple of 256 bytes
        self.n = flat.size
        full = np.empty(self.pad * 2 + self.n, dtype=flat.dtype)
        full[:] = _sentinel(flat.dtype)
        full[self.pad:self.pad + self.n] = flat
        self.before = full.copy()
        self.shape = array.shape
        if target == "c":
            self.store = full
            handle = full[self.pad:self.pad + self.n].reshape(array.shape)
            dev = tvm.cpu(0)
        elif target == "opencl":
            import pyopencl as cl

            from kernels.runtime.device import opencl_handle

            h = opencl_handle(0)
            self.queue = h.queue
            self.store = cl.Buffer(h.context, cl.mem_flags.READ_WRITE, full.nbytes)
            cl.enqueue_copy(h.queue, self.store, full).wait()
            handle = self.store.get_sub_region(self.pad * item, max(self.n, 1) * item)
            dev = tvm.opencl(0)
        else:
            from kernels.runtime.device import cuda_context, cuda_driver

            drv = cuda_driver()
            with cuda_context(0):
                self.store = drv.mem_alloc(full.nbytes)
                drv.memcpy_htod(self.store, full)
            handle = int(self.store) + self.pad * item
            dev = tvm.cuda(0)
        self.nd = NDArray(tuple(logical), dtype, dev, handle)

    def fetch(self) -> np.ndarray:
        if self.target == "c":
            return self.store
        out = np.empty_like(self.before)
        if self.target == "opencl":
            import pyopencl as cl

            cl.enqueue_copy(self.queue, out, self.store).wait()
        else:
            from kernels.runtime.device import cuda_context, cuda_driver

            with cuda_context(0):
                cuda_driver().memcpy_dtoh(out, self.store)
        return out

    def red_zone_damage(self, full: np.ndarray) -> Optional[str]:
        """Where a red zone changed (bytes compared, so NaN = NaN), or None."""
        b, a = self.before.view(np.uint8), full.view(np.uint8)
        item = full.dtype.itemsize
        lo = slice(0, self.pad * item)
        hi = slice((self.pad + self.n) * item, None)
        for side, sl in (("before", lo), ("after", hi)):
            diff = np.nonzero(b[sl] != a[sl])[0]
            if diff.size:
                off = int(diff[0]) // item
                pos = off - self.pad if side == "before" else off
                return (f"{side} the buffer, element {pos}" if side == "after" else
                        f"before the buffer, element {pos}")
        return None


def _compare(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> Optional[str]:
    got64 = got.astype(np.float64)
    ref64 = np.asarray(ref, dtype=np.float64)
    if got64.shape != ref64.shape:
        return f"shape {got64.shape}, expected {ref64.shape}"
    bad = ~np.isclose(got64, ref64, rtol=rtol, atol=atol)
    bad |= np.isnan(got64) & ~np.isnan(ref64)
    if not bad.any():
        return None
    pos = np.unravel_index(int(np.argmax(bad)), bad.shape)
    return (f"{int(bad.sum())} of {bad.size} elements differ; at {tuple(int(p) for p in pos)}: "
            f"{float(got64[pos])!r}, expected {float(ref64[pos])!r} (rtol {rtol}, atol {atol})")


def _module(spec, options: Sequence[str] = ()):
    from kernels.runtime import build_module

    return build_module(spec, list(options))


def execute(sample: dict, build_only: Union[bool, str] = False) -> dict:
    """Build and run one sample here (the child calls it); the result as a dict with ``outcome``."""
    from kernels.errors import DeviceError, TVMError

    res = {k: sample.get(k) for k in ("id", "space", "target", "kind", "workload", "variant", "dtype",
                                       "params", "knobs", "index", "seed")}
    target = sample["target"]
    t0 = time.perf_counter()

    def done(outcome: str, detail: str = "") -> dict:
        res.update(outcome=outcome, detail=detail[:2000], seconds=round(time.perf_counter() - t0, 3))
        return res

    try:
        inputs, args, knobs, workload = _schedule(sample, res)
        res["knobs"] = knobs
        func, spec = _lower(inputs, args, target)
    except TVMError as exc:
        return done("refused", f"{type(exc).__name__}: {exc}")
    except Exception:  # not a clear error: a bug in the compiler
        return done("crashed", traceback.format_exc(limit=6))
    try:
        oob = check_accesses(func, seed=int(sample.get("seed") or 0))
    except Exception:
        return done("crashed", "the access check failed: " + traceback.format_exc(limit=4))
    if oob:
        return done("oob_index", oob)
    if build_only == "lower":
        return done("built")
    try:
        if build_only:
            if target == "cuda":
                from kernels.contrib import nvcc

                nvcc.compile_cuda(spec.source, target="cubin", arch=spec.arch)
            elif target == "c":
                from kernels.runtime.c import compile_c

                compile_c(spec.source, openmp=spec.uses_openmp)
            return done("built")
        mod = _module(spec, sample.get("options") or ())
    except Exception as exc:
        return done("build_error", f"{type(exc).__name__}: {exc}")
    try:
        res = _run(sample, workload, mod, done)
        if target == "opencl" and res["outcome"] in ("wrong", "oob_write"):
            _triage_opencl(sample, workload, spec, res)
        return res
    except DeviceError as exc:
        if "exceeds CUDA's limits" in str(exc):  # checked before the launch: a clear refusal
            return done("refused", f"{type(exc).__name__}: {exc}")
        return done("crashed", f"{type(exc).__name__}: {exc}") | {"fatal": target == "cuda"}
    except TVMError as exc:
        return done("crashed", f"{type(exc).__name__}: {exc}") | {"fatal": target == "cuda"}
    except Exception:
        return done("crashed", traceback.format_exc(limit=6)) | {"fatal": target == "cuda"}


def _triage_opencl(sample: dict, w, spec, res: dict) -> None:
    """A wrong or out-of-bounds OpenCL sample run again with the device compiler's optimizer off
    (``-cl-opt-disable``): when that run is correct, the generated code is (the lowered IR passed the
    access check too) and the device's compiler miscompiles it: ``device_bug``, reported apart."""
    from kernels.runtime import build_module

    first = dict(res)
    try:
        again = _run(sample, w, build_module(spec, ["-cl-opt-disable"]), lambda o, d="": {"outcome": o,
                                                                                        "detail": d})
    except Exception:  # the unoptimised build or run failed: keep the first verdict
        return
    if again["outcome"] == "ok":
        res.update(outcome="device_bug",
                   detail=f"correct with -cl-opt-disable; optimised: {first['outcome']}: {first['detail']}")


def _run(sample: dict, w, mod, done) -> dict:
    params, dtype, target = sample["params"], sample["dtype"], sample["target"]
    rng = np.random.default_rng(int(sample.get("seed") or 0))
    arrays = w.make_args(params, dtype, rng)
    zoned = []
    for k, a in enumerate(arrays):
        logical = w.logical_shape(k, a, dtype)
        zoned.append(_Zoned(target, a, logical or a.shape, dtype if logical else a.dtype.name))
    mod(*[z.nd for z in zoned])
    if target == "opencl":
        zoned[0].queue.finish()
    elif target == "cuda":
        from kernels.runtime.device import cuda_context

        with cuda_context(0) as ctx:
            ctx.synchronize()
    fulls = [z.fetch() for z in zoned]
    for k, (z, full) in enumerate(zip(zoned, fulls)):
        where = z.red_zone_damage(full)
        if where:
            return done("oob_write", f"argument {k} written out of bounds, {where}")
    outs = {k: full[z.pad:z.pad + z.n].reshape(z.shape) for k, (z, full) in enumerate(zip(zoned, fulls))}
    refs = w.reference_of(arrays, params, dtype)  # every argument, outputs still poisoned, as the harness
    rtol, atol = w.tolerance_for(dtype, params)
    for k, ref in zip(w.outputs, refs):
        why = _compare(outs[k], ref, rtol, atol)
        if why:
            return done("wrong", f"output {k}: {why}")
    return done("ok")


# -- isolation: warm spawn children -------------------------------------------------------------------


def _child(conn, build_only: Union[bool, str], workdir: str) -> None:
    import logging
    import warnings

    # what a device compiler leaves in the working directory (PoCL writes a CFG .dot before some of
    # its aborts) lands in the worker's own folder, removed with the worker
    os.chdir(workdir)
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    conn.send("ready")
    while True:
        try:
            sample = conn.recv()
        except EOFError:
            return
        if sample is None:
            return
        res = execute(sample, build_only)
        conn.send(res)
        if res.get("fatal"):
            return  # a CUDA error poisons the context: the parent starts a fresh child


class _Worker:
    def __init__(self, ctx, build_only: Union[bool, str]):
        self.conn, child = ctx.Pipe()
        self.workdir = tempfile.mkdtemp(prefix="kbench-fuzz-")
        self.proc = ctx.Process(target=_child, args=(child, build_only, self.workdir), daemon=True)
        self.proc.start()
        child.close()
        self.sample: Optional[dict] = None
        self.since = 0.0
        self.ready = False

    def stop(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def run_isolated(samples: Iterable[dict], jobs: int = 1, timeout: float = 120.0,
                 build_only: Union[bool, str] = False, deadline: Optional[float] = None) -> Iterator[dict]:
    """Run ``samples`` in ``jobs`` warm child processes; yield each result as it comes.

    A child that dies (a segfault, a CUDA error) is recorded as ``crashed`` for its sample, one that
    runs past ``timeout`` seconds is killed and recorded as ``timeout``; either is replaced. No new
    sample starts after ``deadline`` (a ``time.monotonic()`` value).
    """
    ctx = multiprocessing.get_context("spawn")
    it = iter(samples)
    workers = [_Worker(ctx, build_only) for _ in range(max(1, jobs))]
    exhausted = False
    start_failures = 0
    try:
        while True:
            now = time.monotonic()
            if not exhausted and (deadline is None or now < deadline):
                for wk in workers:
                    if wk.ready and wk.sample is None:
                        nxt = next(it, None)
                        if nxt is None:
                            exhausted = True
                            break
                        wk.sample, wk.since = nxt, time.monotonic()
                        wk.conn.send(nxt)
            elif not exhausted:
                exhausted = True
            busy = [wk for wk in workers if wk.sample is not None or not wk.ready]
            if exhausted and not any(wk.sample is not None for wk in workers):
                return
            ready = _wait_conns([wk.conn for wk in busy], timeout=1.0)
            for k, wk in enumerate(workers):
                if wk.conn in ready:
                    try:
                        msg = wk.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg == "ready":
                        wk.ready = True
                        continue
                    if msg is None:  # the child died
                        s = wk.sample
                        wk.proc.join(timeout=5)
                        code = wk.proc.exitcode
                        wk.stop(kill=True)
                        if s is None and not wk.ready:
                            start_failures += 1
                            if start_failures >= 3:
                                raise RuntimeError(f"the fuzzer's child process dies before it is ready "
                                                   f"(exit code {code}), {start_failures} times")
                        workers[k] = _Worker(ctx, build_only)
                        if s is not None:
                            yield _bare(s, "crashed", f"the child process died (exit code {code})")
                        elif exhausted:
                            return
                        continue
                    wk.sample = None
                    yield msg
                    if msg.get("fatal"):
                        wk.stop(kill=True)
                        workers[k] = _Worker(ctx, build_only)
                elif wk.sample is not None and time.monotonic() - wk.since > timeout:
                    s = wk.sample
                    wk.stop(kill=True)
                    workers[k] = _Worker(ctx, build_only)
                    yield _bare(s, "timeout", f"no result after {timeout:.0f} s; the child was killed")
    finally:
        for wk in workers:
            wk.stop(kill=wk.sample is not None)


def _bare(sample: dict, outcome: str, detail: str) -> dict:
    out = {k: sample.get(k) for k in ("id", "space", "target", "kind", "workload", "variant", "dtype",
                                       "params", "knobs", "index", "seed")}
    out.update(outcome=outcome, detail=detail, sample=sample)
    return out


# -- the run and its report ---------------------------------------------------------------------------


@dataclass
class FuzzReport:
    """The results of a run and their counts by space, target and outcome."""

    target: str
    seed: int
    results: List[dict] = field(default_factory=list)
    seconds: float = 0.0

    def counts(self) -> Dict[Tuple[str, str, str], int]:
        return dict(Counter((r["space"], r["target"], r["outcome"]) for r in self.results))

    @property
    def failures(self) -> List[dict]:
        return [r for r in self.results if r["outcome"] in FAILURES]

    def table(self) -> str:
        """Counts per space (rows) and outcome (columns)."""
        cols = [o for o in OUTCOMES if any(r["outcome"] == o for r in self.results)] or ["ok"]
        spaces = sorted({(r["space"], r["target"]) for r in self.results})
        c = Counter((r["space"], r["target"], r["outcome"]) for r in self.results)
        head = ["space", "target"] + cols + ["total"]
        rows = [[s, t] + [str(c[(s, t, o)]) for o in cols] + [str(sum(c[(s, t, o)] for o in OUTCOMES))]
                for s, t in spaces]
        total = ["all", self.target] + [str(sum(1 for r in self.results if r["outcome"] == o)) for o in cols]
        rows.append(total + [str(len(self.results))])
        widths = [max(len(x) for x in col) for col in zip(head, *rows)]
        fmt = "  ".join(f"{{:<{w}}}" if k < 2 else f"{{:>{w}}}" for k, w in enumerate(widths))
        return "\n".join(fmt.format(*r) for r in [head] + rows)

    def to_json(self) -> dict:
        return {"target": self.target, "seed": self.seed, "seconds": round(self.seconds, 1),
                "samples": len(self.results),
                "counts": [{"space": s, "target": t, "outcome": o, "n": n}
                           for (s, t, o), n in sorted(self.counts().items())],
                "failures": self.failures, "results": self.results}


def device_caps(target: str) -> Dict[str, bool]:
    """What the target's device computes: float16 and float64 (OpenCL extensions)."""
    if target != "opencl":
        return {"fp16": True, "fp64": True}
    from kernels.runtime.device import opencl_handle

    ext = opencl_handle(0).device.extensions
    return {"fp16": "cl_khr_fp16" in ext, "fp64": "cl_khr_fp64" in ext}


def run_fuzz(target: str, seed: int = 0, budget: Optional[float] = None, count: Optional[int] = None,
             spaces: Sequence[str] = SPACES, jobs: int = 1, timeout: float = 120.0,
             build_only: Union[bool, str] = False,
             samples: Optional[Iterable[dict]] = None, progress=None) -> FuzzReport:
    """Draw samples for ``target`` (or run the given ``samples``) until ``count`` are done or
    ``budget`` seconds have passed; each runs in a warm child process (see :func:`run_isolated`).

    Parameters
    ----------
    target : str
        ``c``, ``opencl`` or ``cuda``.
    seed : int
        Seeds the draws (the same seed draws the same samples).
    budget, count : optional
        Stop after this many seconds / samples (at least one of them, or ``samples``, is needed).
    spaces : sequence of str
        Names from :data:`SPACES`.
    jobs : int
        Child processes working at once (builds with nvcc in parallel on CUDA).
    timeout : float
        Seconds a sample may take before its child is killed (outcome ``timeout``).
    build_only : bool or "lower"
        True: lower, check the accesses and compile (nvcc / the C compiler), without running;
        ``"lower"``: lower and check the accesses only.
    samples : iterable of dict, optional
        Run these instead of drawing (e.g. :func:`sweep_samples`).
    progress : callable, optional
        Called with each result.

    Returns
    -------
    FuzzReport
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    bad = [s for s in spaces if s not in SPACES]
    if bad:
        raise ValueError(f"unknown space {bad[0]!r}; spaces: {', '.join(SPACES)}")
    if samples is None:
        if budget is None and count is None:
            raise ValueError("give a budget (seconds) or a count (samples)")
        stream: Iterable[dict] = draw_samples(target, seed, spaces,
                                              device_caps(target) if not build_only else {})
    else:
        stream = samples
    if count is not None:
        stream = itertools.islice(stream, count)
    report = FuzzReport(target, seed)
    t0 = time.monotonic()
    deadline = t0 + budget if budget is not None else None
    retry: Dict[Any, dict] = {}
    for res in run_isolated(stream, jobs=jobs, timeout=timeout, build_only=build_only, deadline=deadline):
        if target == "opencl" and res["outcome"] == "crashed" and "child process died" in res["detail"]:
            retry[res.get("id")] = res  # the device's compiler may have died: see below
            continue
        report.results.append(res)
        if progress is not None:
            progress(res)
    if retry:
        # an OpenCL sample whose child died, run again with the device compiler's optimizer off: when
        # that run is correct, the crash was the device compiler's (device_bug, as _triage_opencl)
        again = [dict(r["sample"], options=["-cl-opt-disable"]) for r in retry.values()]
        for res in run_isolated(again, jobs=jobs, timeout=timeout, build_only=build_only):
            first = retry[res.get("id")]
            if res["outcome"] == "ok":
                first = dict(first, outcome="device_bug",
                             detail=f"correct with -cl-opt-disable; optimised: crashed: {first['detail']}")
            report.results.append(first)
            if progress is not None:
                progress(first)
    for res in report.results:
        res.pop("sample", None)
    report.seconds = time.monotonic() - t0
    report.results.sort(key=lambda r: r.get("id") or 0)
    return report


def _parse_shape(text: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"--shape: expected name=value pairs, got {part!r}")
        k, v = part.split("=", 1)
        out[k.strip()] = int(v) if v.strip().isdigit() else v.strip()
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m kernels.testing.fuzz", description=__doc__.split("\n")[0])
    ap.add_argument("--target", choices=TARGETS, default="opencl")
    ap.add_argument("--budget", type=float, default=None, help="seconds to draw samples for")
    ap.add_argument("--count", type=int, default=None, help="samples to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--space", action="append", choices=SPACES, help="a space to draw from (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="child processes at once")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a sample may take")
    ap.add_argument("--build-only", action="store_true", help="lower, check and compile; do not run")
    ap.add_argument("--lower-only", action="store_true",
                    help="lower and check the accesses; neither compile nor run")
    ap.add_argument("--sweep", choices=("tc_tutorial", "tc_plain"),
                    help="every configuration of that template at --shape/--dtype instead of drawing")
    ap.add_argument("--shape", type=_parse_shape, default="n=32,l=512,m=512,layout=NN")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--layout", default=None, help="with --sweep: the layout (else --shape's)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    samples = None
    if a.sweep:
        shape = dict(a.shape)
        if a.layout:
            shape["layout"] = a.layout
        shape.setdefault("layout", "NN")
        samples = sweep_samples(a.sweep, a.target, shape, a.dtype)
    elif a.budget is None and a.count is None:
        ap.error("give --budget SECONDS or --count N (or --sweep)")

    def progress(r):
        if not a.quiet and r["outcome"] in FAILURES + ("timeout", "device_bug"):
            print(f"[{r['outcome']}] {r['space']} {r['workload']}/{r.get('variant') or r['kind']} "
                  f"{r['dtype']} {r['params']} {r.get('knobs') or r.get('index')}: "
                  f"{str(r.get('detail', '')).splitlines()[-1][:300] if r.get('detail') else ''}",
                  flush=True)

    try:
        rep = run_fuzz(a.target, a.seed, a.budget, a.count, a.space or SPACES, a.jobs, a.timeout,
                       "lower" if a.lower_only else a.build_only, samples, progress)
    except (ValueError, RuntimeError) as exc:  # bad arguments, or a child that cannot start
        print(f"fuzz: {exc}", file=sys.stderr)
        return 2
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rep.to_json(), fh, indent=1, default=str)
    print(rep.table())
    print(f"{len(rep.results)} samples in {rep.seconds:.0f} s on {a.target}; "
          f"{len(rep.failures)} failures")
    return 1 if rep.failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
