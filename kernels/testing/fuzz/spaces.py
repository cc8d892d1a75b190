"""The fuzzer's spaces: the sizes, knobs and workload variants it draws samples from, the autotvm
template with ``define_split`` tilings of the ``sgemm`` space, and the streams of samples (drawn, or
every configuration of the tensor-core tutorial's template). A sample is a plain dict (see
:mod:`kernels.testing.fuzz`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

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
    "flat_fetch": (0, 1), "align_all": (0, 1), "raster": (0, 0, 0, 1, 2, 8), "widen": (0, 1),
    "mma": (0, 1)}
#: knobs a warp-tile sample of another dtype keeps at their default (``widen`` takes int4 only: drawn
#: for int4, half of the samples; a refusal for the other dtypes would test nothing new)
WARP_TILE_ONLY = {"widen": ("int4",)}

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
    if vname == "warp_tile":
        knobs.update({k: d for k, d in w.variants[vname].knobs
                      if k in WARP_TILE_ONLY and dtype not in WARP_TILE_ONLY[k]})
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
