"""What runs on a worker: build each case, check it against its float64 reference, then time it.

``run_cases`` yields one :class:`Result` per case, in order, as soon as it is known, so the
dispatcher can store it at once and notice a case that hangs.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterator, Optional, Sequence


import kernels as tvm
from harness import measure
from harness.config import apply_runtime_defaults
from harness.env import fingerprint, fingerprint_id
from harness.model import Case, MeasureConfig, Peaks, Phases, Result, Timeline
from harness.stats.peaks import bandwidth_peak, flops_peak_key, needs_flops_peak
from kernels.errors import TVMError
from kernels.runtime import build_module
from kernels.workloads import INPUTS_VERSION
from kernels.workloads import get as get_workload

from .ahead import HOST_TIMED, BuildAhead
from .build import Artifact, CaseBuildError, counted_compile, is_callable, load_module_counted
from .callables import run_call
from .check import check_outputs
from .inputs import case_data, device_array
from .peers import run_peer
from .portable import PortableSpecError, thaw


def worker_label() -> str:
    """Where a result was measured: the Ray node id when inside Ray, else host:pid."""
    ray = sys.modules.get("ray")  # a process that never imported Ray is not inside Ray (importing it
    if ray is None:               # takes seconds: the local executor's child would pay them per start)
        return f"{socket.gethostname()}:{os.getpid()}"
    try:
        if ray.is_initialized():
            ctx = ray.get_runtime_context()
            return f"{ctx.get_node_id()[:12]}:{os.getpid()}"
    except Exception:
        pass
    return f"{socket.gethostname()}:{os.getpid()}"


def _device(target: str):
    return {"c": tvm.cpu(0), "opencl": tvm.opencl(0), "cuda": tvm.cuda(0)}[target]


def timer_for(target: str, device):
    """The timer ``kbench run`` times a case of ``target`` with on ``device`` (its settings, cold or
    hot mode and the flush, come from the MeasureConfig the loop is given): CUDA events with the L2
    flush for cuda, the OpenCL queue for opencl, the host clock for c. ``kbench tune`` times its
    candidates with the same timer (harness.tune.runner)."""
    if target == "cuda":
        return measure.CudaTimer(device.index)
    if target == "opencl":
        return measure.OpenCLTimer()
    return measure.CpuTimer()


_FP: Dict[str, dict] = {}


def _fingerprint(target: str) -> dict:
    """This worker's environment fingerprint (computed once per process and device kind)."""
    kind = "cuda" if target == "cuda" else "cpu"
    if kind not in _FP:
        _FP[kind] = fingerprint(kind)
    return _FP[kind]


def _device_name(target: str) -> str:
    fp = _fingerprint(target)
    return str(fp.get("gpu_name") or fp.get("cpu_model") or target)


def _env(target: str) -> tuple[str, dict]:
    """(environment id, fingerprint) of this worker's device for ``target``."""
    fp = _fingerprint(target)
    return fingerprint_id(fp), fp


def _phases(**seconds: float) -> Phases:
    """A result's :class:`~harness.model.Phases`: where a case's wall time went (inputs, reference,
    build, check, warm-up, measuring), seconds each to the microsecond; printed by the CLI and stored
    with the result."""
    return Phases(**{k: round(float(v), 6) for k, v in seconds.items()})


def _measure_phases(timing) -> dict:
    tel = dict(timing.telemetry) if timing is not None else {}
    warm = float(tel.get("warmup_s", 0.0) or 0.0)
    return {"warmup": warm, "measure": max(0.0, float(tel.get("wall_s", 0.0) or 0.0) - warm)}


def _ok(case: Case, timing, flops: float, nbytes: float, target: str,
        traffic: Optional[tuple] = None, **fields) -> Result:
    """The ``ok`` Result of a timed case, with its derived rates, its variant's kind and its
    ``peaks``. ``traffic``: the workload's (read, written) bytes, which pick the bandwidth peak; the
    Peaks say which bandwidth peak ``pct_peak_bw`` is of ("read" or "copy") and its GB/s, and which
    matmul peak ``pct_peak_flops`` is of (None where the case is memory-bound and its share of the
    FLOP peak is not worked out, see harness.stats.peaks.needs_flops_peak)."""
    want_flops = needs_flops_peak(flops, nbytes)
    # the arithmetic whose matmul peak the case is a share of (float32 on the TF32 tensor cores: tf32)
    dtype = get_workload(case.workload).peak_dtype.get(case.dtype, case.dtype)
    peaks = measure.device_peaks(target, _env(target)[0], flops=want_flops)
    if not want_flops:
        peaks = {k: v for k, v in peaks.items() if not k.startswith("matmul_")}
    d = measure.derived(timing, flops, nbytes, peaks, dtype=dtype, traffic=traffic)
    kind, bw = bandwidth_peak(peaks, *(traffic or (None, None)))
    flops_key = flops_peak_key(dtype)
    # a case faster than its peak by more than measure.BEATEN_BY has the peak measured again (once a
    # process): a peak measured low (a busy GPU) would print every percentage too high
    beaten = [(f"{kind}_gbps", d.get("pct_peak_bw"))]
    if want_flops and flops_key:
        beaten.append((flops_key, d.get("pct_peak_flops")))
    for key, pct in beaten:
        if pct is not None and pct > 100.0 * (1.0 + measure.BEATEN_BY):
            fresh = measure.recheck_peak(target, _env(target)[0], key, peaks.get(key) * pct / 100.0)
            if fresh is not peaks:
                if not want_flops:
                    fresh = {k: v for k, v in fresh.items() if not k.startswith("matmul_")}
                peaks = fresh
                d = measure.derived(timing, flops, nbytes, peaks, dtype=dtype, traffic=traffic)
                kind, bw = bandwidth_peak(peaks, *(traffic or (None, None)))
    note = Peaks(bandwidth=kind if bw else None, bandwidth_gbps=bw if bw else None,
                 flops=flops_key if peaks.get(flops_key) else None)
    return Result(case, "ok", timing=timing, gbps=d.get("gbps"), gflops=d.get("gflops"),
                  pct_peak_bw=d.get("pct_peak_bw"), pct_peak_flops=d.get("pct_peak_flops"),
                  device=_device_name(target), variant_kind=_variant_kind(case),
                  peaks=None if note == Peaks() else note, **fields)


def _variant_kind(case: Case) -> str:
    """What ``Result.variant_kind`` says of a case: ``"cuda_source"`` or ``"callable:<library>"``
    for those variants (kernels.workloads.cuda_source, device_callable; the report names them), ``""``
    for a kbench schedule or a peer."""
    if case.peer:
        return ""
    try:
        v = get_workload(case.workload).variant(case.variant)
    except KeyError:
        return ""
    kind = getattr(v, "kind", "schedule")
    if kind == "callable":
        return f"callable:{v.library}"
    return "" if kind == "schedule" else kind


def _with_sides(config: MeasureConfig, per_side: Dict[str, Result]) -> Result:
    """The Result of a case timed as the sides of ``config.interleave``: one Result per side, each
    labelled with its side, in ``sides`` of the first side's (harness.model.Result; harness.run
    stores each in its side's run). Without sides: the one Result."""
    if not config.interleave:
        return per_side[""]
    ordered = tuple(replace(per_side[name], side=name) for name in config.side_names)
    return replace(ordered[0], sides=ordered)


def _run_peer(case: Case, config: MeasureConfig, worker: str) -> Result:
    """A peer case: the library function named ``case.peer`` (harness.execute.peers)."""
    t_case = time.time()

    def run(w, data):
        return run_peer(case.peer, data.args, data.reference, case.rtol, case.atol, config,
                        params=case.param_dict, dtype=case.dtype, outputs=w.outputs,
                        limit_s=measure_limit_s(case, time.time() - t_case))

    return _run_on_library(case, config, worker, run)


def _run_callable(case: Case, config: MeasureConfig, worker: str) -> Result:
    """A callable variant's case (kernels.workloads.device_callable): the user's function on device
    arrays, checked and timed by harness.execute.callables."""
    t_case = time.time()

    def run(w, data):
        call, _ = w.build(case.variant, case.param_dict, case.dtype, case.knob_dict)
        return run_call(call.arrays, call.launcher, data.args, w.outputs, data.reference, case.rtol,
                        case.atol, config, what=f"callable variant {case.workload}/{case.variant}",
                        limit_s=measure_limit_s(case, time.time() - t_case))

    return _run_on_library(case, config, worker, run)


def _run_on_library(case: Case, config: MeasureConfig, worker: str, run) -> Result:
    """Check and time a case that a Python library launches (a peer, a callable variant):
    ``run(workload, case data) -> (ok, message, timing)`` as harness.execute.callables.run_call."""
    try:
        w = get_workload(case.workload)
        params = case.param_dict
        data = case_data(w, case, config.seed)
        t_peer = time.perf_counter()
        ok, msg, timing = run(w, data)
        peer_s = time.perf_counter() - t_peer
        env_id, fp = _env(case.target)
        if ok is None:
            return Result(case, "build_error", message=msg, worker=worker, env_id=env_id, environment=fp)
        if not ok:
            return Result(case, "wrong", message=msg, worker=worker, env_id=env_id, environment=fp)
        sides = timing if config.interleave else [("", timing)]
        flops, nbytes = w.flops(params), w.bytes(params, case.dtype)
        traffic = w.traffic(params, case.dtype)

        def phases(t):
            m = _measure_phases(t)
            # the library's own preparation and check (copies to the GPU, one call, the comparison)
            return _phases(inputs=data.inputs_s, reference=data.reference_s,
                           check=max(0.0, peer_s - m["warmup"] - m["measure"]), **m)

        return _with_sides(config, {side: _ok(case, t, flops, nbytes, "cuda", traffic=traffic, env_id=env_id,
                                              worker=worker, environment=fp,
                                              phases=phases(t), inputs_version=INPUTS_VERSION)
                                    for side, t in sides})
    except Exception as exc:
        return Result(case, "crashed", message=f"{type(exc).__name__}: {exc}", worker=worker)


@dataclass(frozen=True)
class _Built:
    """One side's build: the module (None: it failed, ``message`` says why), its build seconds, nvcc
    calls, the seconds the worker waited for it (a build ahead still running) and when it ran."""

    module: Any
    build_s: float = 0.0
    calls: int = 0
    wait_s: float = 0.0
    started: float = 0.0
    finished: float = 0.0
    message: str = ""


def _build(case: Case, artifact: Optional[Artifact], side_spec: Optional[dict],
           ahead: Optional[BuildAhead] = None) -> _Built:
    """This checkout's build of ``case`` (using ``artifact``'s cubin when given, else its build
    ahead when ``ahead`` has one), or ``side_spec``, another source tree's frozen build
    (harness.execute.portable), compiled by this checkout's runtime (CUDA: for the architecture this
    checkout's side is built for: the artifact's, else this GPU's). Raises CaseBuildError."""
    wait_s = 0.0
    if artifact is None and side_spec is None and ahead is not None:
        artifact, wait_s = ahead.take(case)
    started = time.time()
    t0 = time.perf_counter()
    if side_spec is None:
        module, calls = load_module_counted(case, artifact)
    else:
        try:
            spec = thaw(side_spec)
            if spec.target == "cuda":  # compiled for what this checkout's side runs as, on this GPU
                spec = replace(spec, arch=artifact.arch if artifact is not None else "")
            module, calls = counted_compile(lambda: build_module(spec)) if spec.target == "cuda" \
                else (build_module(spec), 0)
        except PortableSpecError as exc:
            raise CaseBuildError(f"the other source tree's build: {exc}") from None
        except TVMError as exc:
            raise CaseBuildError(f"the other source tree's build: {type(exc).__name__}: {exc}") from None
    build_s = time.perf_counter() - t0
    finished = time.time()
    if artifact is not None and side_spec is None:  # built ahead (a CPU worker, a build thread): it counts
        calls += int(artifact.nvcc_called)
        build_s += artifact.build_s
        if artifact.started:  # when it was built (loading it here takes milliseconds)
            started, finished = artifact.started, artifact.finished
    return _Built(module, build_s, calls, wait_s, started, finished)


#: the share of a case's remaining time (its timeout less what building and checking took) that
#: measuring may use when ``min_samples`` asks for more than ``max_time_s`` gives: the rest is
#: margin for the end of the last sample, the telemetry and the answer to reach the driver
MEASURE_LIMIT_SHARE = 0.8


def measure_limit_s(case: Case, spent_s: float) -> float:
    """How long measuring ``case`` may take when ``min_samples`` outlasts ``max_time_s``
    (harness.measure.stopping.should_stop): :data:`MEASURE_LIMIT_SHARE` of what its ``timeout_s``
    leaves after ``spent_s`` seconds of building and checking."""
    return max(0.0, MEASURE_LIMIT_SHARE * (case.timeout_s - spent_s))


def run_case(case: Case, config: MeasureConfig, artifact: Optional[Artifact] = None,
             side_specs: Optional[Dict[str, dict]] = None, ahead: Optional[BuildAhead] = None) -> Result:
    """Build, check and time one case. Failures become outcomes, never exceptions.

    With ``config.interleave`` the case is timed as several sides in one loop
    (harness.measure.loop.measure_sides) and every side gets its own Result (see :func:`_with_sides`).
    A side named in ``side_specs`` runs another source tree's build of the case (``kbench ab``,
    harness.execute.portable); the others run this checkout's. Each distinct build is checked against
    the reference on its own; a side that fails to build or is wrong is recorded so and not timed, and
    the remaining sides are timed together.

    ``ahead``: the builds ahead of the batch (:mod:`harness.execute.ahead`): this checkout's build of
    the case comes from there. A result carries its ``phases`` (where its wall time went; ``build``
    is the build's own time, ``build_wait`` the part of it the case waited for, the rest ran while
    earlier cases were checked and timed) and ``timeline`` (wall-clock times of the build's start and
    end and of the case's start and end).
    """
    worker = worker_label()
    if case.peer:
        return _run_peer(case, config, worker)
    if is_callable(case):
        return _run_callable(case, config, worker)
    t_case = time.time()
    early = None
    if ahead is not None and case.key in ahead:
        # the shape's inputs and reference while its build ahead may still run (a failure here is the
        # case's to report below)
        try:
            early = case_data(get_workload(case.workload), case, config.seed)
        except Exception:
            early = None
    names = list(config.side_names) or [""]
    side_specs = side_specs or {}
    builds: Dict[str, _Built] = {}
    own: Optional[_Built] = None
    for name in names:
        spec = side_specs.get(name)
        if spec is None and own is not None:  # one build for several sides: its nvcc calls count once
            builds[name] = replace(own, calls=0)
            continue
        try:
            builds[name] = _build(case, artifact, spec, ahead)
        except CaseBuildError as exc:
            builds[name] = _Built(None, message=str(exc))
        if spec is None:
            own = builds[name]
    results: Dict[str, Result] = {n: Result(case, "build_error", message=b.message, worker=worker)
                                  for n, b in builds.items() if b.module is None}
    built = [n for n in names if n not in results]
    if not built:
        return _with_sides(config, results)
    build_s = {n: builds[n].build_s for n in built}
    try:
        w = get_workload(case.workload)
        params = case.param_dict
        data = early if early is not None else case_data(w, case, config.seed)
        host = data.args
        dev = _device(case.target)
        t_check = time.perf_counter()
        nd = [device_array(w, case, i, a, dev) for i, a in enumerate(host)]
        env_id, fp = _env(case.target)
        for n in results:  # sides that did not build: on the same device as the others (verdicts pair them)
            results[n] = replace(results[n], device=_device_name(case.target), env_id=env_id, environment=fp)
        checked: Dict[int, tuple] = {}  # id(module) -> (ok, message)
        for n in built:
            module = builds[n].module
            if id(module) not in checked:
                for i in w.outputs if checked else ():  # poisoned again for each further build
                    nd[i] = device_array(w, case, i, host[i], dev)
                module(*nd)
                dev.sync()
                got = [nd[i].numpy() for i in w.outputs]
                checked[id(module)] = check_outputs(got, data.reference, case.rtol, case.atol)
            ok, msg = checked[id(module)]
            if not ok:
                results[n] = Result(case, "wrong", message=msg, worker=worker, build_s=build_s[n],
                                    nvcc_calls=builds[n].calls, environment=fp,
                                    device=_device_name(case.target), env_id=env_id,
                                    inputs_version=INPUTS_VERSION)
        check_s = time.perf_counter() - t_check  # device copies, one call per build, the comparison
        timed = [n for n in built if n not in results]
        if timed:
            quiet_s = ahead.quiet() if ahead is not None and case.target in HOST_TIMED else 0.0
            launches = {n: builds[n].module.launcher(*nd)[0] for n in timed}
            sides = measure.measure_sides(lambda: timer_for(case.target, dev), launches[timed[0]], config,
                                          side_launches=launches, skip=set(names) - set(timed),
                                          limit_s=measure_limit_s(case, time.time() - t_case))
            flops, nbytes = w.flops(params), w.bytes(params, case.dtype)
            traffic = w.traffic(params, case.dtype)
            t_end = time.time()
            for n, timing in sides:
                b = builds[n]
                phases = _phases(inputs=data.inputs_s, reference=data.reference_s, build=b.build_s,
                                 build_wait=b.wait_s + quiet_s, check=check_s, **_measure_phases(timing))
                timeline = Timeline(build_start=round(b.started, 6), build_end=round(b.finished, 6),
                                    start=round(t_case, 6), end=round(t_end, 6))
                results[n] = _ok(case, timing, flops, nbytes, case.target, env_id=env_id, worker=worker,
                                 build_s=build_s[n], nvcc_calls=b.calls, environment=fp, phases=phases,
                                 timeline=timeline, inputs_version=INPUTS_VERSION, traffic=traffic)
        return _with_sides(config, results)
    except Exception as exc:
        tb = traceback.format_exc(limit=3)
        crashed = Result(case, "crashed", message=f"{type(exc).__name__}: {exc}\n{tb}", worker=worker,
                         build_s=max(build_s.values()))
        return _with_sides(config, {n: results.get(n, crashed) for n in names})


def import_suite_modules(imports: Sequence[str]) -> None:
    """Import the suite's ``imports``. A module that fails, for whatever reason (itself missing, or a
    module it needs), is an ImportError named after the suite's module, so that an executor can tell
    a worker that cannot load the suite (every case would fail alike: the run fails) from a case
    that fails."""
    for mod in imports:
        try:
            importlib.import_module(mod)
        except ImportError as exc:
            if exc.name == mod:
                raise
            raise ImportError(f"cannot import {mod}: {type(exc).__name__}: {exc}", name=mod) from exc


def prepare(target: str, imports: Sequence[str] = (), peer_libraries: Sequence[str] = ()) -> None:
    """Pay a worker's one-time costs before its first case: the suite's modules, the device's
    fingerprint and bandwidth peaks (CUDA context included), the statistics' imports and the peer
    libraries (e.g. torch, seconds to import). GPU runners call it as they start, while the CPU
    workers still build; a failure here is left for the first case to report."""
    apply_runtime_defaults()
    import_suite_modules(imports)
    measure.device_peaks(target, _env(target)[0], flops=False)  # the matmul peak when a case needs it
    # what the first case would otherwise import inside its timeout: the statistics of a timing
    # (scipy.stats, seconds on a busy host) and Ray's runtime context (worker_label)
    importlib.import_module("scipy.stats")
    worker_label()
    for lib in peer_libraries:
        importlib.import_module(lib)


def _cuda_arch(cases: Sequence[Case], artifacts: Dict[str, Artifact]) -> str:
    """The architecture of this worker's GPU when some CUDA case of the batch still needs a build."""
    if not any(c.target == "cuda" and not c.peer and c.key not in artifacts for c in cases):
        return ""
    try:
        # imported when used: loading the submodule rebinds kernels.runtime.cuda (see build.load_module)
        from kernels.runtime.cuda import default_arch

        if tvm.cuda(0).exist:
            return default_arch()
    except Exception:  # no GPU here: the case itself reports it
        pass
    return ""


def run_cases(cases: Sequence[Case], config: MeasureConfig, imports: Sequence[str] = (),
              artifacts: Optional[Dict[str, Artifact]] = None,
              side_specs: Optional[Dict[str, Dict[str, dict]]] = None,
              build_ahead: bool = True, ahead: Optional[BuildAhead] = None) -> Iterator[Result]:
    """Run cases in order, yielding each result as soon as it is known. ``artifacts``: prebuilt
    cubins by case key; ``side_specs``: per case key, the sides built by another source tree
    (see :func:`run_case`). With ``build_ahead`` the cases without an artifact are built in
    background threads from the start (:class:`harness.execute.ahead.BuildAhead`, see
    :func:`builds_ahead`), so that no case waits for its compiler while an earlier one could be
    timed; ``ahead``: builds already started by the caller for these cases and more (the local
    executor starts one for the whole run), left running when this returns."""
    apply_runtime_defaults()
    import_suite_modules(imports)
    artifacts = artifacts or {}
    side_specs = side_specs or {}
    own = None
    if ahead is None and build_ahead and len(cases) > 1:
        ahead = own = builds_ahead(cases, config, artifacts, side_specs)
    try:
        for case in cases:
            yield run_case(case, config, artifacts.get(case.key), side_specs.get(case.key), ahead=ahead)
    finally:
        if own is not None:
            own.close()


def builds_ahead(cases: Sequence[Case], config: MeasureConfig,
                 artifacts: Optional[Dict[str, Artifact]] = None,
                 side_specs: Optional[Dict[str, Dict[str, dict]]] = None) -> BuildAhead:
    """Start building ``cases`` in background threads (CUDA cases for this worker's GPU), except those
    with an artifact (built by a CPU worker) and those whose every side is another source tree's
    build (``kbench ab``). The caller closes it."""
    artifacts = artifacts or {}
    not_ours = [k for k, sides in (side_specs or {}).items()
                if config.side_names and set(config.side_names) <= set(sides)]
    return BuildAhead(cases, _cuda_arch(cases, artifacts), skip=[*artifacts, *not_ours])
