"""One sample of the fuzzer, built and run in this process (a child of the run calls
:func:`execute`): its schedule from the space it names, lowered and checked for out-of-bounds
accesses, compiled, and run on the device with every buffer between red zones and compared with the
workload's float64 reference. The outcomes it can have are :data:`OUTCOMES`.
"""

from __future__ import annotations

import time
import traceback
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .accesses import check_accesses
from .spaces import _get, _template_task

#: every outcome a sample can have
OUTCOMES = ("ok", "built", "refused", "wrong", "oob_write", "oob_index", "build_error", "crashed",
            "timeout", "device_bug")
#: the outcomes that make the run fail (a timeout is reported but may be the machine's load)
FAILURES = ("wrong", "oob_write", "oob_index", "build_error", "crashed")
TARGETS = ("c", "opencl", "cuda")


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
    from kernels.errors import DeviceError, DeviceLimitError, TVMError

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
    except DeviceLimitError as exc:
        # over a limit of the device, checked before the launch (or local memory the device cannot
        # reserve): a clear refusal
        return done("refused", f"{type(exc).__name__}: {exc}")
    except DeviceError as exc:
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
