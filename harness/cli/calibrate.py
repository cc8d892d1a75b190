"""``kbench calibrate SUITE``: how far the verdicts can be trusted on this machine.

Each trial measures the suite as three "sides", with the same code and one executor:

    A   plain                                  \\
    B   plain            -> verdicts of B vs A:  an A/A comparison; every SLOWER/FASTER is a false alarm
    C   slowed by s      -> verdicts of C vs B:  every case is really slower by s; SLOWER is a detection

How the sides share the machine (``interleave``):

- ``"samples"`` (the default): each case is timed once as all three sides in one loop, one
  sample of each side per round in a rotated order (harness.measure.loop.measure_interleaved); the
  sides are stored as three runs. Drift of the machine (other tenants, clocks, thermals) falls on
  all sides alike, and the verdicts use the interleaved decision rule (harness.stats.verdicts.judge).
- ``"runs"``: ``rounds`` rounds (default 3), each a run of the whole suite per side in a rotated
  order (ABC, BCA, CAB), each with 1/rounds of the suite's measuring time; a side's verdict pools
  its rounds. This is how ``ci/pr.sh`` interleaves two checkouts, and what a comparison of two
  separate runs can expect: drift between runs is not in the samples.

"Slowed by s" is ``MeasureConfig.slowdown``: dependent work of ``s`` times the case's own time is
added inside every timed sample (harness.measure.timers.Timer.inject), so the injected change is known.
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

import argparse
import json
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from harness.errors import UsageError
from harness.model import DEFAULT_THRESHOLD, Side, Verdict

from .common import db_arg, default_out, err, execution, execution_args, out, out_dir, store_location


def register(commands: argparse._SubParsersAction) -> None:
    cal = commands.add_parser("calibrate",
                              help="A/A false-positive rate and injected-slowdown detection rate")
    cal.add_argument("suite")
    cal.add_argument("--trials", type=int, default=3, help="trials of A, A, A-slowed (default %(default)s)")
    cal.add_argument("--interleave", choices=["samples", "runs"], default="samples",
                     help="samples (default): the three sides of a case timed in one loop, sample by "
                          "sample; runs: whole runs of the suite per side in rotated rounds (as ci/pr.sh)")
    cal.add_argument("--rounds", type=int, default=3,
                     help="--interleave runs: rounds per side and trial (default %(default)s)")
    cal.add_argument("--slowdown", type=float, default=0.05,
                     help="injected slowdown (default %(default)s = 5 %%)")
    execution_args(cal)
    cal.add_argument("--out", type=out_dir, metavar="DIR", default=str(default_out()),
                     help="write calibration.json here (default %(default)s)")
    db_arg(cal)
    cal.set_defaults(handler=main)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    targets, overrides = execution(args)

    def on_event(kind, payload):
        if kind == "run":
            err.print(payload)

    cal = calibrate(args.suite, args.db, trials=args.trials, slowdown=args.slowdown, rounds=args.rounds,
                    interleave=args.interleave, executor_kind=args.executor,
                    address=args.address, targets=targets, measure_overrides=overrides, argv=argv,
                    on_event=on_event)
    how = ("sides interleaved sample by sample" if cal.interleave == "samples"
           else f"{cal.rounds} interleaved round(s) of whole runs")
    table = Table(title=f"calibration of {escape(cal.suite)}: {cal.trials} trial(s), {how}")
    for col in ("check", "comparisons", "SAME", "FASTER", "SLOWER", "AMBIGUOUS", "rate"):
        table.add_column(col, justify="left" if col == "check" else "right")
    for name, counts, n, rate, what in (
            ("A/A (same code twice)", cal.aa, cal.aa_comparisons, cal.false_positive_rate, "false alarms"),
            (f"injected {cal.slowdown:.0%} slowdown", cal.slowed, cal.slowed_comparisons, cal.detection_rate,
             "detected")):
        table.add_row(name, str(n), *(str(counts[v]) for v in ("SAME", "FASTER", "SLOWER", "AMBIGUOUS")),
                      f"{rate:.1%} {what}" if rate == rate else "-")
    out.print(table)
    out.print(f"observed slowdown of the injected runs: {cal.observed_slowdown:+.1%} "
              f"(asked {cal.slowdown:.0%}); "
              f"runs {cal.runs[0]}..{cal.runs[-1]} in {args.db} (kind calibration); {cal.seconds:.0f} s")
    half, gap = cal.median_ci_halfwidth, cal.slowdown - cal.threshold
    out.print(f"median 95 % CI half-width of the cases: {half:.2%} (threshold {cal.threshold:.0%})")
    if half == half and gap > 0 and half > 0.6 * gap:
        out.print(f"[yellow]hint:[/] a {cal.slowdown:.0%} change past a {cal.threshold:.0%} threshold "
                  "is found reliably "
                  f"when the CIs are under about {0.6 * gap:.1%}: measure longer, e.g. "
                  f"--max-rel-ci {0.6 * gap:.3f} --max-time 30")
    path = cal.write_json(Path(args.out) / "calibration.json")
    out.print(f"calibration: {path}")
    return 0


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
    # the pipeline (the compiler, Ray) loads only when the command runs: `kbench --help` stays quick
    from harness import judge
    from harness.config import apply_runtime_defaults
    from harness.execute import executor_for
    from harness.run import RunRequest, run_suite
    from harness.store import Store
    from harness.suite import load_suite

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
    request = RunRequest(suite_path, store_location(str(db)), executor_kind, address,
                         targets=tuple(targets) if targets else None, argv=tuple(argv), kind="calibration")
    apply_runtime_defaults()
    executor = executor_for(suite, executor_kind, address)
    try:
        def one(label: str, names: str, **kw: Any) -> dict[str, list[int]]:
            """The sides ``names`` timed once, interleaved as asked: side -> its run ids."""
            ids: dict[str, list[int]] = {n: [] for n in names}
            if interleave == "samples":
                emit("run", f"{label}: sides {', '.join(names)} interleaved sample by sample")
                sides = tuple(Side(n, slowed[n]) for n in names)
                summary = run_suite(replace(request, measure={**base, "interleave": sides}),
                                    executor=executor, **kw)
                for n in names:
                    ids[n].append(summary.side_runs[n])
            else:
                for r in range(rounds):
                    for n in names[r % len(names):] + names[:r % len(names)]:
                        emit("run", f"{label}: {n} round {r + 1}/{rounds}")
                        summary = run_suite(replace(request, measure={**base, "slowdown": slowed[n]}),
                                            executor=executor, **kw)
                        ids[n].append(summary.run_id)
            cal.runs.extend(i for n in names for i in ids[n])
            return ids

        def verdicts(new: list[int], old: list[int], names: str, label: str) -> tuple[Verdict, ...]:
            """Judge ``new`` against ``old``; AMBIGUOUS cases are timed once more (both sides,
            interleaved the same way) and judged again on everything (harness.judge)."""
            def again(keys: set[str]) -> dict[str, list[int]]:
                return one(f"{label}: re-measure of {len(keys)} AMBIGUOUS case(s)", names, only_keys=keys)

            first = judge.judge_runs(store_location(str(db)), new, old)
            return judge.remeasure_ambiguous(store_location(str(db)), first, again, new_side=names[1],
                                             base_side=names[0]).verdicts

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


