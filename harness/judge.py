"""Judging runs against baselines (DESIGN.md 7): which results a baseline means, the verdicts, the
one automatic re-measure of AMBIGUOUS cases, and the exit code. The statistics live in
:mod:`harness.stats`; this module only finds the samples to feed them.

Baseline specs (``kbench run --baseline X``, ``kbench report RUN --baseline X``, ``kbench compare BASE NEW``):

``auto``        per case, the most recent ``ok`` result of an older ordinary run on the same device
                fingerprint (calibration runs never count);
``7``           run 7;
``1,3,5``       runs 1, 3 and 5 with their samples pooled (interleaved A/B rounds);
``NAME``        the run that named baseline ``NAME`` points at (``kbench baseline set NAME RUN``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import stats
from .errors import ExitCode, StoreError, UsageError
from .model import DEFAULT_THRESHOLD, Verdict
from .store import Store, UnknownRun


@dataclass(frozen=True)
class Judgement:
    """The verdicts of one comparison, what it was compared with, and its exit code."""

    verdicts: tuple[Verdict, ...]
    baseline_label: str  # e.g. "run 3", "runs 1,3,5", "baseline nightly (run 3)", "recent history"
    exit_code: ExitCode
    gate: str | None = None  # the --fail-on spec that applied, if any

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.verdicts:
            out[v.verdict] = out.get(v.verdict, 0) + 1
        return out


def parse_runs(store: Store, spec: str, what: str) -> tuple[tuple[int, ...], str]:
    """Run ids and a label for a run spec: ``7``, ``1,3,5`` or a baseline name (not ``auto``).

    Raises
    ------
    harness.errors.UsageError
        Naming ``what`` (e.g. "--baseline") when the spec names no run or baseline in the store.
    """
    text = str(spec).strip()
    if not text:
        raise UsageError(f"{what}: empty run spec (give a run id, ids like 1,3,5, or a baseline name)")
    parts = [p.strip() for p in text.split(",")]
    if all(p.isdigit() for p in parts):
        ids = tuple(int(p) for p in parts)
        for rid in ids:
            if store.get_run(rid) is None:
                raise UsageError(f"{what}: no run {rid} in {store.path}")
        label = f"run {ids[0]}" if len(ids) == 1 else f"runs {','.join(map(str, ids))}"
        return ids, label
    if len(parts) > 1:
        raise UsageError(f"{what}: {text!r} mixes run ids and names; "
                         "give run ids like 1,3,5 or one baseline name")
    base = store.get_baseline(text)
    if base is None:
        names = ", ".join(b["name"] for b in store.list_baselines()) or "none"
        raise UsageError(f"{what}: {text!r} is neither a run id nor a named baseline in {store.path} "
                         f"(named baselines: {names})")
    return (int(base["run_id"]),), f"baseline {text} (run {base['run_id']})"


def suite_thresholds(store: Store, run_id: int) -> tuple[float, dict[str, float]]:
    """(suite threshold, {case key: threshold}) from the suite file a run was made from, when that
    file still exists and parses; else the default 3 % and no overrides."""
    from .suite import SuiteError, load_suite

    run = store.get_run(run_id)
    path = run and run.get("suite_path")
    if not path or not Path(path).is_file():
        return DEFAULT_THRESHOLD, {}
    try:
        suite = load_suite(path)
    except (SuiteError, OSError):
        return DEFAULT_THRESHOLD, {}
    frame = store.results_frame(run_id)
    per_case = {k: suite.threshold(w) for k, w in zip(frame["case_key"], frame["workload"])}
    return suite.regression_threshold, per_case


def _frames(store: Store, new_runs: Sequence[int], base_runs: Sequence[int] | None):
    new = store.results_frame(list(new_runs), with_samples=True)
    if base_runs is not None:
        base = store.results_frame(list(base_runs), with_samples=True)
    else:
        keys = sorted(set(new["case_key"]))
        ids = store.latest_results(keys, before_run=min(new_runs)) if keys else []
        base = store.results_frame(result_ids=ids, with_samples=True) if ids else new.iloc[0:0]
        # only the same device fingerprint counts as history (DESIGN.md 7)
        pairs = set(zip(new["case_key"], new["env_id"]))
        base = base[[(k, e) in pairs for k, e in zip(base["case_key"], base["env_id"])]]
    return new, base


def judge(store: Store, new_spec: str | int, baseline: str = "auto", *, fail_on: str | None = None,
          threshold: float | None = None, thresholds: dict[str, float] | None = None,
          seed: int = 0) -> Judgement:
    """Verdicts of ``new_spec`` (a run id, or ids to pool) against ``baseline`` (see the module doc).

    The practical threshold is, in order: ``--fail-on median:N%``, ``threshold``/``thresholds``
    given by the caller, the suite file's thresholds, 3 %.
    """
    gates = stats.parse_fail_on(fail_on) if fail_on else {}
    new_ids, _ = parse_runs(store, str(new_spec), "new run")
    if str(baseline).strip().lower() == "auto":
        base_ids, label = None, "recent history (same case, same device fingerprint)"
    else:
        base_ids, label = parse_runs(store, str(baseline), "baseline")
        if set(base_ids) & set(new_ids):
            raise UsageError(f"baseline {baseline!r} and the new run share run ids "
                             f"{sorted(set(base_ids) & set(new_ids))}")
    if threshold is None and thresholds is None:
        threshold, thresholds = suite_thresholds(store, new_ids[-1])
    if "threshold" in gates:
        threshold, thresholds = gates["threshold"], None
    new, base = _frames(store, new_ids, base_ids)
    verdicts = stats.compare_frames(new, base, threshold=threshold or DEFAULT_THRESHOLD,
                                      thresholds=thresholds or None, seed=seed,
                                      run_sd=history_spread(store, new, min(new_ids)))
    return _judgement(verdicts, label, fail_on)


#: how many earlier runs of a case give its run-to-run spread
HISTORY_RUNS = 10


def history_spread(store: Store, new, before_run: int) -> dict:
    """Per case key of the frame ``new``: the run-to-run spread of its medians on the same device
    fingerprint over its last :data:`HISTORY_RUNS` ordinary runs before ``before_run``
    (harness.stats.history_sd; cases with fewer than three such runs are left out). This is what
    the verdicts between separate runs add to their CI (harness.stats.widen_ci)."""
    if new is None or len(new) == 0:
        return {}
    keys = sorted(set(new["case_key"]))
    ids = store.latest_results(keys, before_run=before_run, per_key=HISTORY_RUNS)
    if not ids:
        return {}
    hist = store.results_frame(result_ids=ids)
    envs = dict(zip(new["case_key"], new["env_id"]))
    out: dict[str, stats.Spread] = {}
    for key, group in hist.groupby("case_key"):
        same = group[group["env_id"] == envs.get(key)]
        sd = stats.history_sd(same["median_s"].tolist())
        if sd is not None:
            out[str(key)] = sd
    return out


def _judgement(verdicts: Sequence[Verdict], label: str, fail_on: str | None) -> Judgement:
    """Exit code per DESIGN.md 7. Under an explicit ``--fail-on`` gate an inconclusive result (3)
    fails only when the gate lists ``ambiguous``; otherwise the gate passes it (exit 0) while the
    verdicts still show AMBIGUOUS."""
    code = stats.exit_code(verdicts)
    if code == ExitCode.INCONCLUSIVE and fail_on and not stats.parse_fail_on(fail_on)["fail_ambiguous"]:
        code = ExitCode.OK
    return Judgement(tuple(verdicts), label, code, fail_on)


def remeasure_ambiguous(store: Store, run_id: int, judgement: Judgement,
                        rerun: Callable[[set[str]], int], baseline: str = "auto", *,
                        fail_on: str | None = None, seed: int = 0) -> Judgement:
    """DESIGN.md 7: AMBIGUOUS cases are re-measured once. ``rerun(keys)`` runs those case keys again
    as a "remeasure" run of ``run_id`` and returns its id; the cases are judged again on the
    re-measured samples alone, and their verdicts replace the first ones (``remeasured=True``)."""
    keys = {v.case_key for v in judgement.verdicts if v.verdict == "AMBIGUOUS"}
    if not keys:
        return judgement
    again = rerun(keys)
    # the re-measure run comes from the same suite file: judge() reads the same thresholds from it
    second = judge(store, again, baseline, fail_on=fail_on, seed=seed + 1)
    by_key = {v.case_key: v for v in second.verdicts if v.case_key in keys and v.verdict != "MISSING"}
    merged = [dataclasses.replace(by_key[v.case_key], remeasured=True) if v.case_key in by_key else v
              for v in judgement.verdicts]
    return _judgement(merged, judgement.baseline_label, judgement.gate)


def judge_pooled(db: Path, new_ids: Sequence[int], base_ids: Sequence[int],
                 rerun: Callable[[set[str]], tuple[Sequence[int], Sequence[int]]] | None = None, *,
                 fail_on: str | None = None, seed: int = 0) -> Judgement:
    """Verdicts of the runs ``new_ids`` against ``base_ids`` (each side's samples pooled), with the
    one re-measure of DESIGN.md 7 for runs whose sides are timed together (``kbench ab``, ``kbench
    calibrate``): ``rerun(keys)`` times the AMBIGUOUS cases once more as both sides and returns the
    new runs of each side ``(new, base)``; those cases are judged again on all their samples (first
    and second measurement pooled) and marked ``remeasured``."""
    with Store.open(db, create=False) as st:
        first = judge(st, _spec(new_ids), _spec(base_ids), fail_on=fail_on, seed=seed)
    keys = {v.case_key for v in first.verdicts if v.verdict == "AMBIGUOUS"}
    if not keys or rerun is None:
        return first
    more_new, more_base = rerun(keys)
    with Store.open(db, create=False) as st:
        second = judge(st, _spec([*new_ids, *more_new]), _spec([*base_ids, *more_base]), fail_on=fail_on,
                       seed=seed + 1)
    again = {v.case_key: dataclasses.replace(v, remeasured=True)
             for v in second.verdicts if v.case_key in keys}
    merged = [again.get(v.case_key, v) for v in first.verdicts]
    return _judgement(merged, first.baseline_label, fail_on)


def _spec(run_ids: Sequence[int]) -> str:
    return ",".join(str(int(i)) for i in run_ids)


__all__ = ["DEFAULT_THRESHOLD", "Judgement", "judge", "judge_pooled", "parse_runs", "remeasure_ambiguous",
           "suite_thresholds", "StoreError", "UnknownRun"]
