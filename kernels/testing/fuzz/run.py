"""A fuzzing run: samples drawn (or given) for one target, run in warm children, OpenCL crashes run
again with the device compiler's optimizer off, and the report of their outcomes.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .isolation import run_isolated
from .sample import FAILURES, OUTCOMES, TARGETS
from .spaces import SPACES, draw_samples


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
