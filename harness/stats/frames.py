"""A suite's verdicts from result frames: rows of a new run (or pooled runs) paired with their baseline
rows, each case judged with :func:`harness.stats.verdicts.judge`'s table and the p-values of the suite
corrected together.

The frames are shaped like ``harness.store.Store.results_frame(..., with_samples=True)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.model import DEFAULT_THRESHOLD, Verdict

from .intervals import Spread, sides_sd, widen_ci
from .significance import DEFAULT_ALPHA, benjamini_hochberg
from .verdicts import check_threshold, decide, evidence

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["compare_frames"]


def _value(row: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """``row[name]`` with None for missing columns and NaN/NA cells."""
    v = row.get(name, default)
    if v is None:
        return default
    try:
        import pandas as pd

        if not isinstance(v, (list, tuple, np.ndarray)) and pd.isna(v):
            return default
    except (TypeError, ValueError):
        pass
    return v


def _row_samples(row: Mapping[str, Any]) -> list[float]:
    """A result's raw samples; its stored median as a single sample when none were kept."""
    samples = _value(row, "samples")
    if samples is not None and len(samples) > 0:
        return [float(s) for s in samples if s is not None and math.isfinite(float(s))]
    median = _value(row, "median_s")
    return [float(median)] if median is not None and math.isfinite(float(median)) else []


def _too_few(samples: Sequence[float], rows: Sequence[Mapping[str, Any]], side: str) -> str:
    """Why ``samples`` (pooled from ``rows``) are too few for a confidence interval: fewer than the
    largest ``run_min_samples`` of their runs (the MeasureConfig they were made with); "" when
    enough, or when no row says."""
    wanted = [int(m) for m in (_value(r, "run_min_samples") for r in rows) if m is not None]
    need = max(wanted, default=1)
    if len(samples) >= need:
        return ""
    return (f"too few samples in the {side} for a confidence interval: {len(samples)}, its runs asked "
            f"for min_samples {need}")


def _ordered_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, oldest first (by run_id, then result_id, when the columns exist)."""
    if frame is None or len(frame) == 0:
        return []
    keys = [c for c in ("run_id", "result_id") if c in frame.columns]
    if keys:
        frame = frame.sort_values(keys, kind="stable")
    return frame.to_dict("records")


def _interleave_group(row: Mapping[str, Any]) -> Any:
    """The row's ``interleave_group`` (results timed in one loop share it; harness.store), or None."""
    group = _value(row, "interleave_group")
    return None if group is None else int(group)


def _interleaved(new_rows: Sequence[Mapping[str, Any]], base_rows: Sequence[Mapping[str, Any]]) -> bool:
    """True when every new and baseline row was timed interleaved and both sides cover the same
    interleave groups (each new row's samples have partners taken in the same loop)."""
    groups = [_interleave_group(r) for r in (*new_rows, *base_rows)]
    if not new_rows or not base_rows or any(g is None for g in groups):
        return False
    return {_interleave_group(r) for r in new_rows} == {_interleave_group(r) for r in base_rows}


def _run_medians(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """The median of each run among ``rows`` (its samples pooled when a run has several rows)."""
    by_run: dict[Any, list[float]] = {}
    for r in rows:
        by_run.setdefault(_value(r, "run_id", id(r)), []).extend(_row_samples(r))
    return [float(np.median(v)) for v in by_run.values() if v]


def _ids(rows: Sequence[Mapping[str, Any]], column: str) -> tuple[int, ...]:
    return tuple(int(v) for v in (_value(r, column) for r in rows) if v is not None)


def compare_frames(new: pd.DataFrame, base: pd.DataFrame, *, threshold: float = DEFAULT_THRESHOLD,
                   thresholds: Mapping[str, float] | None = None, alpha: float = DEFAULT_ALPHA,
                   n_boot: int = 2000, seed: int = 0,
                   match_on: Sequence[str] = ("case_key", "device"),
                   run_sd: Mapping[str, Spread] | None = None) -> list[Verdict]:
    """Judge every case of a new run against its baseline rows.

    Parameters
    ----------
    new, base : pandas.DataFrame
        Frames shaped like ``Store.results_frame(..., with_samples=True)``: at least the
        ``match_on`` columns and ``outcome``; ``samples`` (list of seconds; without it, or when
        empty, the row's ``median_s`` counts as one sample), ``result_id``, ``run_id``,
        ``workload``, ``variant``, ``target``, ``device``, ``env_id``, ``message`` are used when
        present. ``base`` may hold several rows per key (recent runs): the samples of its ``ok``
        rows are pooled. ``new`` may too (interleaved rounds): when all of a key's rows are ``ok``
        their samples are pooled, else the most recent row that is not ``ok`` makes it WRONG;
        ``new_result_id`` is the most recent row's id.
    threshold : float
        Default practical threshold (0.03 = 3 %).
    thresholds : mapping of str to float, optional
        Per-case_key thresholds overriding ``threshold``.
    alpha : float
        Significance level for the BH q-values.
    n_boot, seed
        Bootstrap replicates and seed (the same seed for every case: verdicts do not depend on
        the order of the frames).
    match_on : sequence of str
        Columns that pair a new row with its baseline rows (same case on the same device).
    run_sd : mapping of str to Spread, optional
        Per case_key, the run-to-run spread of the case's medians on this device from its history
        (:func:`history_sd`; harness.judge supplies it).

    Returns
    -------
    list of Verdict
        One per key of ``new`` or ``base``, ordered by case_key (then the other ``match_on``
        values):

        - new outcome not ``ok``: WRONG (``base_outcome``: the most recent baseline outcome, or
          None; ``Verdict.regression`` tells a correctness regression from an old failure);
        - new ``ok``, no baseline rows: NEW; baseline rows but none ``ok``: NEW with message
          "baseline was <outcome>" (a fix, not a regression);
        - both ``ok``: :func:`judge` on the pooled samples, the p-values of all judged cases
          corrected together with :func:`benjamini_hochberg` and the verdicts decided on the
          q-values (``interleaved`` when every row of both sides has an ``interleave_group``
          and both sides cover the same groups); a side without any sample, or with fewer than
          the ``run_min_samples`` its rows carry (the runs' ``MeasureConfig.min_samples``), is
          AMBIGUOUS without a CI and left out of the correction. For sides that are separate runs (not
          interleaved) the CI is widened by the run-to-run spread (:func:`widen_ci`): the larger
          of ``run_sd[case_key]`` and the spread between the runs pooled on either side;
        - a baseline key absent from ``new``: MISSING.

        ``base_result_ids``/``base_run_ids`` list the baseline rows whose samples were pooled for
        judged (and MISSING) cases, all baseline rows of the key otherwise.
    """
    check_threshold(threshold)
    thresholds = dict(thresholds or {})
    for key, t in thresholds.items():
        try:
            check_threshold(t)
        except ValueError as err:
            raise ValueError(f"thresholds[{key!r}]: {err}") from None
    match_on = tuple(match_on)

    def key_of(row: Mapping[str, Any]) -> tuple:
        return tuple("" if _value(row, c) is None else _value(row, c) for c in match_on)

    new_by: dict[tuple, dict[str, Any]] = {}
    new_all: dict[tuple, list[dict[str, Any]]] = {}
    for row in _ordered_records(new):
        new_all.setdefault(key_of(row), []).append(row)
    for key, rows in new_all.items():
        # several new rows (interleaved A/B rounds): judged on their pooled samples when all are
        # ok; a round that is not ok makes the case WRONG (the most recent such round reports)
        bad = [r for r in rows if _value(r, "outcome") != "ok"]
        new_by[key] = bad[-1] if bad else rows[-1]
    base_by: dict[tuple, list[dict[str, Any]]] = {}
    for row in _ordered_records(base):
        base_by.setdefault(key_of(row), []).append(row)

    verdicts: dict[tuple, Verdict] = {}
    pending: list[tuple[tuple, dict[str, Any]]] = []  # judged cases awaiting the BH step
    for key, row in new_by.items():
        case_key = str(_value(row, "case_key", ""))
        t = float(thresholds.get(case_key, threshold))
        rows = base_by.get(key, [])
        ok_rows = [r for r in rows if _value(r, "outcome") == "ok"]
        base_outcome = _value(rows[-1], "outcome") if rows else None
        new_outcome = _value(row, "outcome")
        new_samples = ([x for r in new_all[key] for x in _row_samples(r)] if new_outcome == "ok" else [])
        common: dict[str, Any] = {
            "case_key": case_key, "workload": str(_value(row, "workload", "")),
            "variant": str(_value(row, "variant", "")), "target": str(_value(row, "target", "")),
            "device": str(_value(row, "device", "")), "env_id": str(_value(row, "env_id", "")),
            "new_outcome": new_outcome, "base_outcome": base_outcome, "threshold": t,
            "new_result_id": None if _value(row, "result_id") is None else int(row["result_id"])}
        if new_outcome != "ok":
            if base_outcome is None:
                why = "no baseline"
            elif base_outcome == "ok":
                why = "correctness regression: baseline was ok"
            else:
                why = f"already failing: baseline was {base_outcome}"
            detail = _value(row, "message", "")
            message = f"{new_outcome}; {why}" + (f"; {detail}" if detail else "")
            verdicts[key] = Verdict(verdict="WRONG", message=message, base_result_ids=_ids(rows, "result_id"),
                                    base_run_ids=_ids(rows, "run_id"), **common)
            continue
        new_med = float(np.median(new_samples)) if new_samples else None
        if not ok_rows:
            message = "no baseline" if not rows else f"baseline was {base_outcome}"
            verdicts[key] = Verdict(verdict="NEW", message=message, new_median_s=new_med,
                                    n_new=len(new_samples), base_result_ids=_ids(rows, "result_id"),
                                    base_run_ids=_ids(rows, "run_id"), **common)
            continue
        pooled = [s for r in ok_rows for s in _row_samples(r)]
        common.update(new_median_s=new_med, n_new=len(new_samples), n_base=len(pooled),
                      base_median_s=float(np.median(pooled)) if pooled else None,
                      base_result_ids=_ids(ok_rows, "result_id"),
                      base_run_ids=tuple(dict.fromkeys(_ids(ok_rows, "run_id"))))
        if not new_samples or not pooled:
            side = "new run" if not new_samples else "baseline"
            verdicts[key] = Verdict(verdict="AMBIGUOUS", message=f"no timing samples in the {side}",
                                    **common)
            continue
        few = _too_few(new_samples, new_all[key], "new run") or _too_few(pooled, ok_rows, "baseline")
        if few:
            # a CI from fewer samples than the run asked for is not shown, nor decided on
            base_med = common["base_median_s"]
            verdicts[key] = Verdict(verdict="AMBIGUOUS", ratio=common["new_median_s"] / base_med if base_med
                                    else None, message=few, **common)
            continue
        ratio, ci, p = evidence(np.asarray(pooled), np.asarray(new_samples), n_boot, seed)
        interleaved = _interleaved(new_all[key], ok_rows)
        if not interleaved:
            new_runs, base_runs = _run_medians(new_all[key]), _run_medians(ok_rows)
            spreads = [x for x in ((run_sd or {}).get(case_key), sides_sd([new_runs, base_runs]))
                       if x is not None]
            if spreads:
                spread = max(spreads, key=lambda x: x.sd)  # the larger estimate, with its df
                common["run_sd"] = spread.sd
                ci = widen_ci(ratio, ci, spread.sd, len(base_runs), len(new_runs), spread.df)
        common.update(ratio=ratio, ratio_ci=ci, p_value=p, interleaved=interleaved)
        pending.append((key, common))

    # Benjamini-Hochberg over every judged case of the suite, then the per-case decision on q.
    qs = benjamini_hochberg([c["p_value"] for _, c in pending])
    for (key, fields), q in zip(pending, qs):
        q = float(q)
        verdict = decide(fields["ratio"], fields["ratio_ci"], q, fields["threshold"], alpha,
                          fields["interleaved"])
        verdicts[key] = Verdict(verdict=verdict, q_value=q, **fields)

    for key, rows in base_by.items():
        if key in new_by:
            continue
        last = rows[-1]
        ok_rows = [r for r in rows if _value(r, "outcome") == "ok"]
        used = ok_rows or rows
        pooled = [s for r in ok_rows for s in _row_samples(r)]
        case_key = str(_value(last, "case_key", ""))
        verdicts[key] = Verdict(
            case_key=case_key, verdict="MISSING", workload=str(_value(last, "workload", "")),
            variant=str(_value(last, "variant", "")), target=str(_value(last, "target", "")),
            device=str(_value(last, "device", "")), env_id=str(_value(last, "env_id", "")),
            base_outcome=_value(last, "outcome"), n_base=len(pooled),
            base_median_s=float(np.median(pooled)) if pooled else None,
            threshold=float(thresholds.get(case_key, threshold)),
            base_result_ids=_ids(used, "result_id"),
            base_run_ids=tuple(dict.fromkeys(_ids(used, "run_id"))),
            message="in the baseline, not in the new run")

    def order(item: tuple[tuple, Verdict]) -> tuple:
        key, v = item
        return (v.case_key, tuple(str(k) for k in key))

    return [v for _, v in sorted(verdicts.items(), key=order)]


