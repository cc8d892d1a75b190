"""``kbench calibrate SUITE``: how far the verdicts can be trusted on this machine.

Each trial measures the suite as three "sides", with the same code and one executor:

    A   plain                                  \\
    B   plain            -> verdicts of B vs A:  an A/A comparison; every SLOWER/FASTER is a false alarm
    C   slowed by s      -> verdicts of C vs B:  every case is really slower by s; SLOWER is a detection

interleaved the way ``ci/pr.sh`` interleaves an A/B comparison: ``rounds`` rounds (default 3), each
a run of every side in a rotated order (ABC, BCA, CAB), each run with 1/rounds of the suite's
measuring time; a side's verdict pools the samples of its rounds. Interleaving spreads slow drift
of the machine (other tenants, clocks, thermals) over all sides alike instead of letting it fall
between two back-to-back runs.

"Slowed by s" is ``MeasureConfig.slowdown``: dependent work of ``s`` times the case's own time is
added inside every timed sample (harness.measure.Timer.inject), so the injected change is known.
The verdicts go through the same path as ``kbench compare`` with pooled runs; AMBIGUOUS cases are
re-measured once (one more interleaved set of rounds of both sides, then judged on all rounds).
The runs are stored with kind "calibration": they are never a baseline and never part of a case's
history.

Reported: the false-positive rate (A/A SLOWER or FASTER over A/A comparisons), the A/A rate of
AMBIGUOUS, the detection rate (SLOWER over slowed comparisons) and the slowdown actually observed
(median over cases of the ratio of medians of C to B).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .model import Verdict


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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["aa"], d["slowed"] = dict(self.aa), dict(self.slowed)
        d.update({k: getattr(self, k) for k in ("aa_comparisons", "slowed_comparisons", "false_positive_rate",
                                                  "aa_ambiguous_rate", "detection_rate", "observed_slowdown")})
        return d

    def write_json(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, default=float))
        return path


def calibrate(suite_path: str, db: Path, *, trials: int = 3, slowdown: float = 0.05, rounds: int = 3,
              executor_kind: str = "ray",
              address: str | None = None, targets: Sequence[str] | None = None,
              measure_overrides: dict | None = None, argv: Sequence[str] = (),
              on_event: Callable[[str, object], None] | None = None) -> Calibration:
    """Run the calibration described in the module docstring and return its figures.

    Raises
    ------
    ValueError
        ``trials`` < 1 or ``slowdown`` not in (0, 1].
    """
    import time

    from . import dispatch, judge
    from .config import apply_runtime_defaults
    from .run import run_suite
    from .store import Store
    from .suite import load_suite

    if trials < 1:
        raise ValueError(f"--trials must be at least 1, got {trials}")
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    if not 0 < slowdown <= 1:
        raise ValueError(f"--slowdown must be a fraction in (0, 1], got {slowdown}")
    emit = on_event or (lambda kind, payload: None)
    suite = load_suite(suite_path)
    t0 = time.time()
    cal = Calibration(suite.name, trials, slowdown, rounds)
    # each side's measuring time is split over the rounds, so a trial costs what 3 runs cost
    base = {"max_time_s": suite.measure.max_time_s / rounds, "min_time_s": suite.measure.min_time_s / rounds,
            **(measure_overrides or {})}
    sides = {"A": {}, "B": {}, "C": {"slowdown": slowdown}}
    apply_runtime_defaults()
    executor = dispatch.make_executor(executor_kind, address=address, imports=tuple(suite.imports))
    try:
        def one(side: str, trial: int, label: str, **kw: Any) -> int:
            emit("run", f"trial {trial + 1}/{trials}: {side} {label}")
            summary = run_suite(suite_path, db, executor_kind, address, targets=targets, argv=argv,
                                measure_overrides={**base, **sides[side]}, kind="calibration",
                                executor=executor, **kw)
            cal.runs.append(summary.run_id)
            return summary.run_id

        def interleaved(trial: int, names: str, label: str, **kw: Any) -> dict[str, list[int]]:
            """``rounds`` rounds of the sides ``names``, each round in a rotated order."""
            ids: dict[str, list[int]] = {n: [] for n in names}
            for r in range(rounds):
                for side in names[r % len(names):] + names[:r % len(names)]:
                    ids[side].append(one(side, trial, f"{label} round {r + 1}/{rounds}", **kw))
            return ids

        def verdicts(new: list[int], old: list[int], names: str, trial: int) -> tuple:
            """Judge ``new`` against ``old`` (pooled rounds); AMBIGUOUS cases get one more
            interleaved set of rounds of both sides, and are judged again on everything."""
            with Store.open(db) as st:
                first = judge.judge(st, _spec(new), _spec(old))
            keys = {v.case_key for v in first.verdicts if v.verdict == "AMBIGUOUS"}
            if not keys:
                return first.verdicts
            more = interleaved(trial, names, "re-measure of AMBIGUOUS cases", only_keys=keys)
            with Store.open(db) as st:
                second = judge.judge(st, _spec(new + more[names[1]]), _spec(old + more[names[0]]))
            again = {v.case_key: replace(v, remeasured=True) for v in second.verdicts if v.case_key in keys}
            return tuple(again.get(v.case_key, v) for v in first.verdicts)

        for trial in range(trials):
            ids = interleaved(trial, "ABC", "")
            aa = verdicts(ids["B"], ids["A"], "AB", trial)
            sl = verdicts(ids["C"], ids["B"], "BC", trial)
            cal.aa.update(v.verdict for v in aa)
            cal.slowed.update(v.verdict for v in sl)
            cal.observed_ratios += [v.ratio for v in sl if _timed(v)]
            emit("trial", (trial, aa, sl))
    finally:
        executor.close()
    cal.seconds = time.time() - t0
    return cal


def _spec(run_ids: Sequence[int]) -> str:
    return ",".join(map(str, run_ids))


def _timed(v: Verdict) -> bool:
    return v.ratio is not None and v.ratio == v.ratio and v.verdict in ("SAME", "FASTER", "SLOWER", "AMBIGUOUS")


__all__ = ["Calibration", "calibrate"]
