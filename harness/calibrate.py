"""``kbench calibrate SUITE``: how far the verdicts can be trusted on this machine.

Each trial measures the suite as three "sides", with the same code and one executor:

    A   plain                                  \\
    B   plain            -> verdicts of B vs A:  an A/A comparison; every SLOWER/FASTER is a false alarm
    C   slowed by s      -> verdicts of C vs B:  every case is really slower by s; SLOWER is a detection

How the sides share the machine (``interleave``):

- ``"samples"`` (the default): each case is timed once as all three sides in one loop, one
  sample of each side per round in a rotated order (harness.measure.measure_interleaved); the
  sides are stored as three runs. Drift of the machine (other tenants, clocks, thermals) falls on
  all sides alike, and the verdicts use the interleaved decision rule (harness.stats.verdicts.judge).
- ``"runs"``: ``rounds`` rounds (default 3), each a run of the whole suite per side in a rotated
  order (ABC, BCA, CAB), each with 1/rounds of the suite's measuring time; a side's verdict pools
  its rounds. This is how ``ci/pr.sh`` interleaves two checkouts, and what a comparison of two
  separate runs can expect: drift between runs is not in the samples.

"Slowed by s" is ``MeasureConfig.slowdown``: dependent work of ``s`` times the case's own time is
added inside every timed sample (harness.measure.Timer.inject), so the injected change is known.
The verdicts go through the same path as ``kbench compare``; AMBIGUOUS cases are re-measured once
(the two sides again, interleaved the same way, then judged on everything). The runs are stored
with kind "calibration": they are never a baseline and never part of a case's history.

Reported: the false-positive rate (A/A SLOWER or FASTER over A/A comparisons), the A/A rate of
AMBIGUOUS, the detection rate (SLOWER over slowed comparisons), the slowdown actually observed
(median over cases of the ratio of medians of C to B) and the median relative half-width of the
cases' 95 % CIs (what the suite's stopping rule reached: a change of ``s`` past a threshold ``t``
is only found reliably when that is well under ``s - t``).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .model import DEFAULT_THRESHOLD, Verdict


@dataclass
class Calibration:
    """What :func:`calibrate` found (counts are over (trial, case) comparisons)."""

    suite: str
    trials: int
    slowdown: float
    rounds: int
    runs: list[int] = field(default_factory=list)
    aa: Counter = field(default_factory=Counter)  # verdict -> count, A/A
    slowed: Counter = field(default_factory=Counter)  # verdict -> count, injected slowdown
    observed_ratios: list[float] = field(default_factory=list)  # C/B ratio of medians per comparison
    ci_halfwidths: list[float] = field(default_factory=list)  # relative 95 % CI half-width, per result
    interleave: str = "samples"
    threshold: float = DEFAULT_THRESHOLD  # the suite's (smallest) practical threshold
    seconds: float = 0.0

    @staticmethod
    def _timed(counts: Counter) -> int:
        return sum(counts[v] for v in ("SAME", "FASTER", "SLOWER", "AMBIGUOUS"))

    @property
    def aa_comparisons(self) -> int:
        return self._timed(self.aa)

    @property
    def slowed_comparisons(self) -> int:
        return self._timed(self.slowed)

    @property
    def false_positive_rate(self) -> float:
        n = self.aa_comparisons
        return (self.aa["SLOWER"] + self.aa["FASTER"]) / n if n else math.nan

    @property
    def aa_ambiguous_rate(self) -> float:
        n = self.aa_comparisons
        return self.aa["AMBIGUOUS"] / n if n else math.nan

    @property
    def detection_rate(self) -> float:
        n = self.slowed_comparisons
        return self.slowed["SLOWER"] / n if n else math.nan

    @property
    def observed_slowdown(self) -> float:
        return statistics.median(self.observed_ratios) - 1.0 if self.observed_ratios else math.nan

    @property
    def median_ci_halfwidth(self) -> float:
        return statistics.median(self.ci_halfwidths) if self.ci_halfwidths else math.nan

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["aa"], d["slowed"] = dict(self.aa), dict(self.slowed)
        d.update({k: getattr(self, k) for k in ("aa_comparisons", "slowed_comparisons", "false_positive_rate",
                                                  "aa_ambiguous_rate", "detection_rate", "observed_slowdown",
                                                  "median_ci_halfwidth")})
        return d

    def write_json(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, default=float))
        return path


def calibrate(suite_path: str, db: Path, *, trials: int = 3, slowdown: float = 0.05, rounds: int = 3,
              interleave: str = "samples", executor_kind: str = "ray",
              address: str | None = None, targets: Sequence[str] | None = None,
              measure_overrides: dict | None = None, argv: Sequence[str] = (),
              on_event: Callable[[str, object], None] | None = None) -> Calibration:
    """Run the calibration described in the module docstring and return its figures.

    ``measure_overrides`` replace fields of the suite's MeasureConfig (stopping rule) for every
    side; with ``interleave="runs"`` the suite's times are first split over the rounds.

    Raises
    ------
    harness.errors.UsageError
        ``trials`` or ``rounds`` < 1, ``slowdown`` not in (0, 1], an unknown ``interleave``.
    """
    import time

    from . import judge
    from .execute import make_executor
    from .config import apply_runtime_defaults
    from .run import run_suite
    from .store import Store
    from .suite import load_suite

    if trials < 1:
        raise UsageError(f"--trials must be at least 1, got {trials}")
    if rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {rounds}")
    if not 0 < slowdown <= 1:
        raise UsageError(f"--slowdown must be a fraction in (0, 1], got {slowdown}")
    if interleave not in ("samples", "runs"):
        raise UsageError(f"--interleave must be 'samples' or 'runs', got {interleave!r}")
    emit = on_event or (lambda kind, payload: None)
    suite = load_suite(suite_path)
    t0 = time.time()
    cal = Calibration(suite.name, trials, slowdown, rounds, interleave=interleave,
                      threshold=min([suite.regression_threshold, *(t for _, t in suite.thresholds)]))
    base: dict[str, Any] = {}
    if interleave == "runs":  # each side's measuring time is split over the rounds
        base = {"max_time_s": suite.measure.max_time_s / rounds,
                "min_time_s": suite.measure.min_time_s / rounds}
    base.update(measure_overrides or {})
    slowed = {"A": 0.0, "B": 0.0, "C": slowdown}
    apply_runtime_defaults()
    executor = make_executor(executor_kind, address=address, imports=tuple(suite.imports))
    try:
        def one(label: str, names: str, **kw: Any) -> dict[str, list[int]]:
            """The sides ``names`` timed once, interleaved as asked: side -> its run ids."""
            ids: dict[str, list[int]] = {n: [] for n in names}
            if interleave == "samples":
                emit("run", f"{label}: sides {', '.join(names)} interleaved sample by sample")
                sides = tuple((n, slowed[n]) for n in names)
                summary = run_suite(suite_path, db, executor_kind, address, targets=targets, argv=argv,
                                    measure_overrides={**base, "interleave": sides}, kind="calibration",
                                    executor=executor, **kw)
                for n in names:
                    ids[n].append(summary.side_runs[n])
            else:
                for r in range(rounds):
                    for n in names[r % len(names):] + names[:r % len(names)]:
                        emit("run", f"{label}: {n} round {r + 1}/{rounds}")
                        summary = run_suite(suite_path, db, executor_kind, address, targets=targets,
                                            argv=argv, measure_overrides={**base, "slowdown": slowed[n]},
                                            kind="calibration", executor=executor, **kw)
                        ids[n].append(summary.run_id)
            cal.runs.extend(i for n in names for i in ids[n])
            return ids

        def verdicts(new: list[int], old: list[int], names: str, label: str) -> tuple:
            """Judge ``new`` against ``old``; AMBIGUOUS cases are timed once more (both sides,
            interleaved the same way) and judged again on everything (harness.judge.judge_pooled)."""
            def rerun(keys: set[str]) -> tuple[list[int], list[int]]:
                more = one(f"{label}: re-measure of {len(keys)} AMBIGUOUS case(s)", names, only_keys=keys)
                return more[names[1]], more[names[0]]

            return judge.judge_pooled(Path(db), new, old, rerun).verdicts

        for trial in range(trials):
            label = f"trial {trial + 1}/{trials}"
            ids = one(label, "ABC")
            aa = verdicts(ids["B"], ids["A"], "AB", label)
            sl = verdicts(ids["C"], ids["B"], "BC", label)
            cal.aa.update(v.verdict for v in aa)
            cal.slowed.update(v.verdict for v in sl)
            cal.observed_ratios += [v.ratio for v in sl if _timed(v)]
            with Store.open(db) as st:
                frame = st.results_frame([i for n in "ABC" for i in ids[n]])
            ok = frame[(frame["outcome"] == "ok") & (frame["median_s"] > 0)]
            cal.ci_halfwidths += [float(x) for x in ((ok["ci_high_s"] - ok["ci_low_s"]) / 2 / ok["median_s"])
                                  if x == x]
            emit("trial", (trial, aa, sl))
    finally:
        executor.close()
    cal.seconds = time.time() - t0
    return cal


def _timed(v: Verdict) -> bool:
    return (v.ratio is not None and v.ratio == v.ratio
            and v.verdict in ("SAME", "FASTER", "SLOWER", "AMBIGUOUS"))


__all__ = ["Calibration", "calibrate"]
