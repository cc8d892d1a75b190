"""Stored content for the store's tests: cases, results with raw samples, fingerprints, and a fill
of a store that exercises every column (runs of each kind, a re-measure parent, an interleave
group, results without timing, NaN clocks, named baselines)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from harness import __version__, env
from harness.model import Case, MeasureConfig, Peaks, Phases, Result, Timeline, Timing, TuningRef
from harness.store import Store

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"


@dataclass(frozen=True)
class FakeSuite:
    name: str = "tutorials"
    path: str | None = "suites/tutorials.toml"
    sha256: str | None = "ab" * 32
    regression_threshold: float | None = 0.03
    thresholds: tuple = (("row_sum", 0.05),)


def make_case(n: int = 1024, variant: str = "split", gpu_model: str = "", target: str = "cuda") -> Case:
    return Case(suite="tutorials", workload="row_sum", variant=variant, params=(("m", 512), ("n", n)),
                knobs=(("factor", 16),), dtype="float32", target=target, rtol=1e-4, atol=1e-5,
                gpu_model=gpu_model)


def fake_fp(gpu_name: str = H100, **changes) -> dict:
    fp = {f: None for f in env.FIELDS}
    fp.update(host="box", cpu_model="Test CPU", gpu_name=gpu_name, gpu_uuid=f"GPU-{gpu_name[-4:]}",
              kbench_version=__version__, device="cuda")
    fp.update(changes)
    return fp


#: what a worker notes of a timed case besides its timing (schema version 9's typed columns)
PHASES = Phases(inputs=0.25, reference=0.0125, build=0.5, build_wait=0.125, check=0.03125, warmup=0.0625,
                measure=1.5)
TIMELINE = Timeline(build_start=1.7e9, build_end=1.7e9 + 0.5, start=1.7e9 + 0.25, end=1.7e9 + 2.5)
PEAKS = Peaks(bandwidth="read", bandwidth_gbps=3000.0, flops=None)


def timed_result(case: Case, samples, *, clocks=(), fp: dict | None = None, device: str = H100,
                 **fields) -> Result:
    """An ``ok`` result of ``case`` with these raw samples (median and CI taken from them), its
    phases, timeline, inputs version and peaks as a worker notes them."""
    fields = {"phases": PHASES, "timeline": TIMELINE, "inputs_version": 2, "peaks": PEAKS, **fields}
    samples = tuple(float(x) for x in samples)
    med = float(np.median(samples))
    timing = Timing(samples=samples, discarded=1, clocks_mhz=tuple(clocks), median=med,
                    ci_low=float(np.quantile(samples, 0.25)), ci_high=float(np.quantile(samples, 0.75)),
                    mode="cold", stop_reason="converged",
                    telemetry=(("before", {"temperature_c": 41.0}), ("after", {"temperature_c": 44.5})))
    return Result(case=case, outcome="ok", message="", timing=timing, gbps=512.0 / med * 1e-9,
                  gflops=None, pct_peak_bw=0.37, pct_peak_flops=None, device=device,
                  env_id=env.fingerprint_id(fp) if fp else "", environment=fp, worker="node-1/pid-42",
                  build_s=0.5, **fields)


def fill(store: Store, seed: int = 0) -> list[int]:
    """Write the same content into ``store`` whatever its engine; return the run ids in order."""
    rng = np.random.default_rng(seed)
    fp = fake_fp()
    runs = []
    base = store.begin_run(FakeSuite(), ["kbench", "run", "x"], "local", MeasureConfig(), git_commit="aaa")
    runs.append(base)
    for i, variant in enumerate(("split", "bind", "vec")):
        samples = 1e-4 * (1 + i) * rng.lognormal(0.0, 0.01, 40)
        clocks = [1980.0] * 39 + [math.nan]  # one clock unknown: stored NULL, read back NaN
        # the third as a tuned CUDA-source variant nearer its FLOP peak, without a timeline
        noted = {} if i < 2 else dict(variant_kind="cuda_source", timeline=None,
                                      peaks=Peaks("copy", 2600.0, "matmul_fp32_gflops"),
                                      tuning=TuningRef("best", "H100", 1, 3, 2.5e-5))
        store.record_result(base, timed_result(make_case(variant=variant, gpu_model=H100), samples,
                                               clocks=clocks, fp=fp, nvcc_calls=i, **noted))
    store.record_result(base, Result(case=make_case(variant="broken", gpu_model=H100), outcome="build_error",
                                     message="nvcc: error: boom\nsecond line",
                                     tuning=TuningRef("untuned", "H100"), inputs_version=2))
    store.finish_run(base, "done")
    store.set_baseline("nightly", base, note="first")
    remeasure = store.begin_run(FakeSuite(), ["kbench"], "local", {"max_time_s": 2.0}, kind="remeasure",
                                parent_run=base)
    runs.append(remeasure)
    store.record_result(remeasure, timed_result(make_case(variant="split", gpu_model=H100),
                                                1e-4 * rng.lognormal(0.0, 0.01, 25), fp=fp))
    store.finish_run(remeasure, "done")
    head = store.begin_run(FakeSuite(name="ab"), ["kbench", "ab"], "local", MeasureConfig(), kind="ab")
    other = store.begin_run(FakeSuite(name="ab"), ["kbench", "ab"], "local", MeasureConfig(), kind="ab")
    runs += [head, other]
    for run, side in ((head, "base"), (other, "head")):
        store.record_result(run, replace(timed_result(make_case(n=4096, gpu_model=H200),
                                                      2e-4 * rng.lognormal(0.0, 0.02, 30),
                                                      fp=fake_fp(H200), device=H200),
                                         side=side, interleave_group=head))
    store.finish_run(head, "interrupted")
    calibration = store.begin_run(FakeSuite(), [], "ray", None, kind="calibration")
    runs.append(calibration)
    store.record_result(calibration, Result(case=make_case(n=64, target="c"), outcome="wrong",
                                            message="max abs err 3.2 at (1, 2)", device="cpu0"))
    return runs


def tuned_case(gpu_model: str = "H100") -> Case:
    """A case of a tuned variant (schema version 6: tuning sessions and trials)."""
    return Case(suite="tutorials", workload="matmul", variant="shared_blocked",
                params=(("k", 64), ("m", 64), ("n", 64)), knobs=(("tile_k", 4), ("vector", 1)),
                dtype="float32", target="cuda", gpu_model=gpu_model, tuned=True)


#: the tuning space of :func:`tuned_case` and the trials :func:`fill_tuning` stores:
#: (session, knobs, costs or the error message, error number)
TUNING_SPACE = (("tile_k", (4, 8)), ("vector", (1, 4)))
TUNING_TRIALS = (
    (0, {"tile_k": 4, "vector": 1}, [4e-5, 6e-5], 0),
    (0, {"tile_k": 8, "vector": 1}, ["ScheduleError: split: factor must be positive"], 1),
    (0, {"tile_k": 8, "vector": 4}, [3e-5, 3e-5], 0),
    (1, {"tile_k": 4, "vector": 4}, [2e-5, 2e-5], 0),
)


def fill_tuning(store: Store) -> list[int]:
    """Two tuning sessions of :func:`tuned_case` on the H100 with the trials of :data:`TUNING_TRIALS`
    (flop 2 * 64^3); returns the session ids."""
    case = tuned_case()
    sessions = [store.begin_tuning_session(case, device="H100", tuner=t, n_trial=3, executor="local",
                                           space=TUNING_SPACE, suite=FakeSuite(), argv=["kbench", "tune"])
                for t in ("random", "xgb")]
    counters = [0, 0]
    for s, knobs, costs, error_no in TUNING_TRIALS:
        space = dict(TUNING_SPACE)
        index = space["tile_k"].index(knobs["tile_k"]) + 2 * space["vector"].index(knobs["vector"])
        store.record_trial(sessions[s], counters[s], config_index=index, knobs=knobs, costs=costs,
                           error_no=error_no, all_cost_s=0.5, timestamp=1.7e9 + counters[s], flop=2 * 64 ** 3)
        counters[s] += 1
    for sid in sessions:
        store.finish_tuning_session(sid, "done")
    return sessions
