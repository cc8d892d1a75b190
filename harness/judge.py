"""Judging runs against baselines (docs/ARCHITECTURE.md, "Verdicts"): which results a baseline
means, the thresholds that apply, the verdicts, the one re-measure of AMBIGUOUS cases, and the exit
code. The statistics live in :mod:`harness.stats`; this module only finds the samples to feed them.

Baseline specs (``kbench run --baseline X``, ``kbench report RUN --baseline X``, ``kbench compare
BASE NEW``):

``auto``        per case, the most recent ``ok`` result of an older ordinary run on the same device
                fingerprint (calibration and ``kbench ab`` runs never count);
``7``           run 7;
``1,3,5``       runs 1, 3 and 5 with their samples pooled (interleaved A/B rounds);
``NAME``        the run that named baseline ``NAME`` points at (``kbench baseline set NAME RUN``).

The re-measure policy (:func:`remeasure_ambiguous`) is the one place AMBIGUOUS cases are timed once
more: every command that judges (``kbench run --baseline``, ``kbench ab``, ``kbench calibrate``)
hands it how to time some case keys again, and it judges those cases again and marks them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import stats
from .errors import ExitCode, UsageError, compose_exit_code
from .model import DEFAULT_THRESHOLD, Verdict
from .stats import FailOn
from .store import Store
from .suite import SuiteError, load_suite

#: how many earlier runs of a case give its run-to-run spread
HISTORY_RUNS = 10

#: how AMBIGUOUS cases are timed again: case keys -> {side: the runs made for it} (side "" for a
#: plain run); see :func:`remeasure_ambiguous` and :func:`harness.run.rerun_keys`
Again = Callable[[set[str]], Mapping[str, Sequence[int]]]


@dataclass(frozen=True)
class Judgement:
    """The verdicts of one comparison, what it was compared with, and its exit code.

    ``new_runs`` are the judged runs (pooled); ``baseline`` is the baseline spec as given (``"auto"``,
    run ids, a name) and ``base_runs`` the runs it named (empty for ``auto``).

    A judgement is *incomplete* when a judged run is not ``done`` (``unfinished``: its id and status)
    or lacks cases its baseline has (``missing``, the MISSING verdicts): it never passes (exit 3
    at least, under a ``--fail-on`` gate too), whatever its cases' verdicts say.
    """

    verdicts: tuple[Verdict, ...]
    baseline_label: str  # e.g. "run 3", "runs 1,3,5", "baseline nightly (run 3)", "recent history"
    exit_code: ExitCode
    gate: FailOn | None = None  # the --fail-on gate that applied, if any
    new_runs: tuple[int, ...] = ()
    baseline: str = "auto"
    base_runs: tuple[int, ...] = ()
    unfinished: tuple[tuple[int, str], ...] = ()  # judged runs that are not "done": (run, status)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.verdicts:
            out[v.verdict] = out.get(v.verdict, 0) + 1
        return out

    @property
    def missing(self) -> int:
        """How many cases of the baseline the judged runs lack (MISSING verdicts)."""
        return sum(1 for v in self.verdicts if v.verdict == "MISSING")

    @property
    def incomplete(self) -> bool:
        """A judged run is not ``done`` or lacks cases of its baseline."""
        return bool(self.unfinished) or self.missing > 0

    def incomplete_text(self) -> str:
        """Why the judgement is incomplete, for people ("" when it is complete)."""
        parts = [f"run {rid} is {status}, not done" for rid, status in self.unfinished]
        if self.missing:
            parts.append(f"{self.missing} case(s) of the baseline missing")
        return "; ".join(parts)


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


def run_thresholds(store: Store, run_id: int) -> tuple[float, dict[str, float]]:
    """(threshold, {case key: threshold}) run ``run_id`` is judged with: the practical thresholds
    stored with it (its suite's, per workload where the suite overrides it), whatever its suite file
    says now.

    A run stored before the store kept thresholds (schema version 3 and older) has none: its suite
    file gives them when it still has the content the run was made from (the same sha256), else the
    default :data:`harness.model.DEFAULT_THRESHOLD` with no overrides.
    """
    run = store.get_run(run_id) or {}
    if run.get("regression_threshold") is not None:
        default = float(run["regression_threshold"])
        per_workload = {str(w): float(t) for w, t in (run.get("thresholds") or {}).items()}
    else:
        default, per_workload = _legacy_thresholds(run)
    frame = store.results_frame(run_id)
    per_case = {k: per_workload.get(w, default) for k, w in zip(frame["case_key"], frame["workload"])}
    return default, per_case


def _legacy_thresholds(run: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
    """A pre-version-4 run's thresholds from its suite file, when that file is unchanged since; else
    the default threshold without overrides (the one place a judged run falls back to it)."""
    suite = _unchanged_suite(run)
    if suite is None:
        return DEFAULT_THRESHOLD, {}
    return suite.regression_threshold, dict(suite.thresholds)


def _unchanged_suite(run: Mapping[str, Any]):
    """The suite file run ``run`` was made from, when it still has that content (else None)."""
    path, sha = run.get("suite_path"), run.get("suite_sha256")
    if not path or not sha or not Path(path).is_file():
        return None
    try:
        suite = load_suite(path)
    except (SuiteError, OSError):
        return None
    return suite if suite.sha256 == sha else None


def _frames(store: Store, new_runs: Sequence[int], base_runs: Sequence[int] | None, history_before: int):
    new = store.results_frame(list(new_runs), with_samples=True)
    if base_runs is not None:
        base = store.results_frame(list(base_runs), with_samples=True)
    else:
        keys = sorted(set(new["case_key"]))
        ids = store.latest_results(keys, before_run=history_before) if keys else []
        base = store.results_frame(result_ids=ids, with_samples=True) if ids else new.iloc[0:0]
        # only the same device fingerprint counts as history
        pairs = set(zip(new["case_key"], new["env_id"]))
        base = base[[(k, e) in pairs for k, e in zip(base["case_key"], base["env_id"])]]
    return new, base


def judge(store: Store, new_spec: str | int, baseline: str = "auto", *, fail_on: FailOn | str | None = None,
          threshold: float | None = None, thresholds: dict[str, float] | None = None,
          seed: int = 0, history_before: int | None = None) -> Judgement:
    """Verdicts of ``new_spec`` (a run id, or ids to pool) against ``baseline`` (see the module doc).

    The practical threshold is, in order: ``--fail-on median:N%``, ``threshold``/``thresholds``
    given by the caller, the thresholds stored with the (last) new run (:func:`run_thresholds`).
    ``history_before``: with ``baseline="auto"``, the history is the runs before this one (default:
    the first new run; a re-measure passes the run it re-measures).

    Raises
    ------
    harness.errors.UsageError
        A run spec names nothing in the store, the two sides share runs, or ``fail_on`` is malformed.
    """
    gate = FailOn.of(fail_on)
    new_ids, _ = parse_runs(store, str(new_spec), "new run")
    base_ids: tuple[int, ...] | None
    if str(baseline).strip().lower() == "auto":
        base_ids, label = None, "recent history (same case, same device fingerprint)"
    else:
        base_ids, label = parse_runs(store, str(baseline), "baseline")
        if set(base_ids) & set(new_ids):
            raise UsageError(f"baseline {baseline!r} and the new run share run ids "
                             f"{sorted(set(base_ids) & set(new_ids))}")
    if gate is not None and gate.threshold is not None:
        threshold, thresholds = gate.threshold, None
    elif threshold is None:
        threshold, stored = run_thresholds(store, new_ids[-1])
        thresholds = stored if thresholds is None else thresholds
    before = min(new_ids) if history_before is None else history_before
    new, base = _frames(store, new_ids, base_ids, before)
    verdicts = stats.compare_frames(new, base, threshold=threshold, thresholds=thresholds or None,
                                    seed=seed, run_sd=history_spread(store, new, before))
    unfinished = tuple((rid, str(store.get_run(rid)["status"])) for rid in new_ids
                       if store.get_run(rid)["status"] != "done")
    return _judgement(verdicts, label, gate, new_runs=new_ids, baseline=str(baseline),
                      base_runs=base_ids or (), unfinished=unfinished)


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


def _judgement(verdicts: Sequence[Verdict], label: str, gate: FailOn | None, **compared: Any) -> Judgement:
    """The judgement and its exit code (harness.errors.compose_exit_code). Under an explicit
    ``--fail-on`` gate an inconclusive verdict fails only when the gate lists ``ambiguous`` (the gate
    passes it, exit 0, while the verdicts still show AMBIGUOUS); an incomplete run fails every gate."""
    judgement = Judgement(tuple(verdicts), label, ExitCode.OK, gate, **compared)
    code = compose_exit_code(verdicts=verdicts, incomplete=judgement.incomplete, gated=gate is not None,
                             fail_ambiguous=bool(gate and gate.fail_ambiguous))
    return dataclasses.replace(judgement, exit_code=code)


def judge_runs(db: Path, new_runs: Sequence[int], baseline: str | Sequence[int] = "auto", *,
               fail_on: FailOn | str | None = None, seed: int = 0) -> Judgement:
    """:func:`judge` of the runs ``new_runs`` (pooled) against ``baseline`` (a spec, or run ids to
    pool), opening the store at ``db`` for it."""
    base = baseline if isinstance(baseline, str) else _spec(baseline)
    with Store.open(db, readonly=True) as st:
        return judge(st, _spec(new_runs), base, fail_on=fail_on, seed=seed)


def remeasure_ambiguous(db: Path, first: Judgement, again: Again | None, *, new_side: str = "",
                        base_side: str | None = None, seed: int = 0) -> Judgement:
    """The one re-measure of AMBIGUOUS cases: ``again(keys)`` times those case keys once more and
    returns the runs it made per side; the cases are judged again and their verdicts replace the
    first ones, marked ``remeasured`` (a case the second judgement lacks keeps its first verdict).

    - Separate runs (``base_side`` None: a run judged against stored results, ``kbench run
      --baseline``): the re-measured run of ``new_side`` alone is judged against the same baseline
      (with ``auto``, the history before the first judged run).
    - Sides timed together (``kbench ab``, ``kbench calibrate``): both sides were timed again, and
      each case is judged on all its samples, the first and the second measurement pooled per side.

    Nothing happens when no case is AMBIGUOUS or ``again`` is None.
    """
    keys = {v.case_key for v in first.verdicts if v.verdict == "AMBIGUOUS"}
    if not keys or again is None:
        return first
    made = again(keys)
    more_new = [int(r) for r in made.get(new_side, ())]
    with Store.open(db, readonly=True) as st:
        if base_side is None:
            second = judge(st, _spec(more_new), first.baseline, fail_on=first.gate, seed=seed + 1,
                           history_before=min(first.new_runs) if first.new_runs else None)
        else:
            more_base = [int(r) for r in made.get(base_side, ())]
            second = judge(st, _spec([*first.new_runs, *more_new]), _spec([*first.base_runs, *more_base]),
                           fail_on=first.gate, seed=seed + 1)
    by_key = {v.case_key: dataclasses.replace(v, remeasured=True)
              for v in second.verdicts if v.case_key in keys and v.verdict != "MISSING"}
    merged = [by_key.get(v.case_key, v) for v in first.verdicts]
    return _judgement(merged, first.baseline_label, first.gate, new_runs=first.new_runs,
                      baseline=first.baseline, base_runs=first.base_runs, unfinished=first.unfinished)


def _spec(run_ids: Collection[int]) -> str:
    return ",".join(str(int(i)) for i in run_ids)


__all__ = ["HISTORY_RUNS", "Again", "Judgement", "history_spread", "judge", "judge_runs", "parse_runs",
           "remeasure_ambiguous", "run_thresholds"]
