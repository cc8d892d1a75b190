"""The run in pytest-benchmark's JSON format, so tools built for it (``pytest-benchmark compare``,
its CSV and histogram output, dashboards that read ``--benchmark-json`` files) can read kbench runs.

Layout (as pytest-benchmark writes it): ``machine_info``, ``commit_info``, ``benchmarks``,
``datetime``, ``version``. One benchmark per timed case (failed cases have no samples and are left
out, as pytest-benchmark leaves out benchmarks that errored):

- ``group``: workload, shape, dtype, target and device, so ``compare`` tables put the schedule
  variants of one problem side by side;
- ``name`` ``workload/variant[knobs]``; ``fullname`` ``kbench::<case key>`` (unique in a run and
  stable across runs, which is what ``compare`` matches on);
- ``params``/``param``: the shape parameters, knobs, dtype, target and device;
- ``extra_info``: GB/s, GFLOP/s, % of peaks, the 95 % CI of the median, discarded samples,
  verdict and ratio against the baseline;
- ``stats``: computed here with numpy from the raw samples (seconds per launch), with
  pytest-benchmark's definitions: sample standard deviation, its quartile method (Wikipedia's
  method 2 for an even count, method 3 for an odd one), Tukey fences at 1.5 IQR, ops = rounds /
  total.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from reports.data import ReportData, case_rows

#: written as ``version`` when pytest-benchmark itself is not installed
FALLBACK_VERSION = "5.1.0"


def sample_stats(samples: Any) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` block (without ``data``/``iterations``) of ``samples``.

    Parameters
    ----------
    samples : sequence of float
        Raw sample times in seconds (at least one).

    Returns
    -------
    dict
        min, max, mean, stddev, rounds, median, iqr, q1, q3, iqr_outliers, stddev_outliers,
        outliers ("stddev;iqr"), ld15iqr, hd15iqr, ops, total; plain Python numbers.
    """
    x = np.asarray(samples, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        raise ValueError("sample_stats: no samples")
    s = np.sort(x)
    mean = float(np.mean(x))
    stddev = float(np.std(x, ddof=1)) if n > 1 else 0.0
    q1, q3 = _quartiles(s)
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    iqr_outliers = int(np.count_nonzero((x < low_fence) | (x > high_fence)))
    stddev_outliers = int(np.count_nonzero((x < mean - stddev) | (x > mean + stddev)))
    if n == 1:
        ld15iqr = hd15iqr = float(s[0])
    else:  # lowest / highest datum within the Tukey fences
        ld15iqr = float(s[int(np.searchsorted(s, low_fence, side="left"))])
        hd15iqr = float(s[int(np.searchsorted(s, high_fence, side="right")) - 1])
    total = float(np.sum(x))
    return {
        "min": float(s[0]),
        "max": float(s[-1]),
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": float(np.median(x)),
        "iqr": float(iqr),
        "q1": float(q1),
        "q3": float(q3),
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": ld15iqr,
        "hd15iqr": hd15iqr,
        "ops": n / total if total else 0.0,
        "total": total,
    }


def _quartiles(s: np.ndarray) -> tuple[float, float]:
    """Q1 and Q3 of sorted ``s`` as pytest-benchmark computes them.

    Even n: the medians of the lower and upper halves (method 2). Odd n = 4k + r: interpolated
    between neighbouring order statistics with weights 1/4, 3/4 (method 3).
    """
    n = s.size
    if n == 1:
        return float(s[0]), float(s[0])
    if n % 2 == 0:
        return float(np.median(s[: n // 2])), float(np.median(s[n // 2:]))
    k, r = divmod(n, 4)
    if r == 1:
        q1 = 0.25 * s[k - 1] + 0.75 * s[k]
        q3 = 0.75 * s[3 * k] + 0.25 * s[3 * k + 1]
    else:  # r == 3
        q1 = 0.75 * s[k] + 0.25 * s[k + 1]
        q3 = 0.25 * s[3 * k + 1] + 0.75 * s[3 * k + 2]
    return float(q1), float(q3)


def pybench_json(data: ReportData, include_data: bool = True) -> dict[str, Any]:
    """``data`` as a pytest-benchmark JSON document (a dict; ``json.dump`` it).

    Parameters
    ----------
    data : ReportData
    include_data : bool
        Put the raw samples in ``stats.data`` (as ``--benchmark-json`` does).
    """
    fp = _main_environment(data)
    mc = data.run.get("measure_config") or {}
    results = data.results.set_index("case_key", drop=False)
    benchmarks = []
    for r in case_rows(data):
        samples = [float(v) for v in r["samples"] if v is not None and math.isfinite(float(v))]
        if r["outcome"] != "ok" or not samples:
            continue
        tel = _json(results.loc[r["case_key"], "telemetry"]) if r["case_key"] in results.index else {}
        params: dict[str, Any] = {}
        params.update(_json(results.loc[r["case_key"], "params"]))
        params.update(_json(results.loc[r["case_key"], "knobs"]))
        params.update(dtype=r["dtype"], target=r["target"], device=r["device"])
        stats = sample_stats(samples)
        if include_data:
            stats["data"] = samples
        stats["iterations"] = 1  # each sample is one launch (kbench stores per-launch times)
        extra = {k: r[k] for k in ("gbps", "gflops", "pct_peak_bw", "pct_peak_flops", "ci_low_s",
                                   "ci_high_s", "device", "env_id", "outcome") if r[k] is not None}
        if r["pct_peak_bw"] is not None:  # which bandwidth peak: "read" or "copy" (harness.stats.peaks)
            extra["peak_bw"] = r["peak_bw"]
        discarded = results.loc[r["case_key"], "discarded"] if r["case_key"] in results.index else None
        if discarded is not None and not pd.isna(discarded):
            extra["discarded_low_clock"] = int(discarded)
        if r["verdict"]:
            extra.update(verdict=r["verdict"], ratio=r["ratio"], ratio_ci=[r["ratio_lo"], r["ratio_hi"]],
                         q_value=r["q_value"], baseline=data.baseline_label)
        benchmarks.append({
            "group": " ".join(x for x in (r["workload"], r["shape"], r["dtype"], r["target"], r["device"])
                              if x),
            "name": f"{r['workload']}/{r['variant']}[{r['knobs']}]",
            "fullname": f"kbench::{r['case_key']}",
            "params": params,
            "param": "-".join(str(v) for v in params.values()),
            "extra_info": extra,
            "options": {
                "disable_gc": False,
                "timer": tel.get("timer") or ("cuda_event" if r["target"] == "cuda" else "perf_counter"),
                "min_rounds": mc.get("min_samples"),
                "max_time": mc.get("max_time_s"),
                "min_time": mc.get("min_time_s"),
                "warmup": True,
            },
            "stats": stats,
        })
    commit = data.run.get("git_commit") or ""
    dirty = commit.endswith("-dirty")
    return _finite({
        "machine_info": _machine_info(fp, data),
        "commit_info": {
            "id": (commit[:-len("-dirty")] if dirty else commit) or "unversioned",
            "time": None,
            "author_time": None,
            "dirty": dirty,
            "project": "kbench",
            "branch": "(unknown)",
        },
        "benchmarks": benchmarks,
        "datetime": _iso(data.run.get("started_at")),
        "version": _pytest_benchmark_version(),
    })


def _finite(obj: Any) -> Any:
    """``obj`` with NaN/inf floats (and numpy scalars) made JSON-safe: None resp. Python numbers."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _main_environment(data: ReportData) -> dict[str, Any]:
    """The fingerprint most of the run's results were measured in ({} when none was stored)."""
    counts = data.results["env_id"].value_counts()
    for env_id in counts.index:
        if env_id in data.environments:
            return data.environments[env_id]
    return next(iter(data.environments.values()), {})


def _machine_info(fp: dict[str, Any], data: ReportData) -> dict[str, Any]:
    os_text = str(fp.get("os") or "")
    system, _, release = os_text.partition(" ")
    gpus = sorted({e.get("gpu_name") for e in data.environments.values() if e.get("gpu_name")})
    return {
        "node": fp.get("host") or "",
        "processor": fp.get("cpu_model") or "",
        "machine": fp.get("arch") or "",
        "python_compiler": "",
        "python_implementation": fp.get("python_implementation") or "",
        "python_implementation_version": fp.get("python_version") or "",
        "python_version": fp.get("python_version") or "",
        "python_build": [],
        "release": release,
        "system": system,
        "cpu": {
            "brand_raw": fp.get("cpu_model") or "",
            "arch": fp.get("arch") or "",
            "count": fp.get("cpu_count"),
            "physical_cores": fp.get("cpu_physical_cores"),
        },
        "gpu": {
            "name": fp.get("gpu_name"),
            "compute_capability": fp.get("gpu_compute_capability"),
            "sm_count": fp.get("gpu_sm_count"),
            "driver_version": fp.get("gpu_driver_version"),
            "cuda_version": fp.get("cuda_version"),
            "max_sm_clock_mhz": fp.get("gpu_max_sm_clock_mhz"),
        },
        "kbench": {"run_id": data.run_id, "suite": data.run.get("suite_name"), "gpus": gpus,
                   "environments": sorted(data.environments)},
    }


def _json(text: Any) -> dict[str, Any]:
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _iso(text: Any) -> str:
    try:
        return datetime.fromisoformat(str(text)).isoformat()
    except (TypeError, ValueError):
        return datetime.now(timezone.utc).isoformat()


def _pytest_benchmark_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-benchmark")
    except PackageNotFoundError:
        return FALLBACK_VERSION


__all__ = ["pybench_json", "sample_stats"]
