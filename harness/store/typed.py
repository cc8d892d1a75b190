"""The typed columns of a result (schema version 9): what :class:`harness.model.Result` notes of a
case besides its timing (its :class:`~harness.model.Phases`, :class:`~harness.model.Timeline`,
``inputs_version``, ``variant_kind``, :class:`~harness.model.Peaks` and
:class:`~harness.model.TuningRef`), one column per value, written by
:meth:`harness.store.Store.record_result` and read back by :meth:`~harness.store.Store.get_results`
and the results frame (:mod:`harness.store.frames`). A value a result does not have is NULL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.model import PHASE_NAMES, Peaks, Phases, Result, Timeline, TuningRef

__all__ = ["FLOAT_COLUMNS", "INTEGER_COLUMNS", "TYPED_COLUMNS", "typed_fields", "typed_values"]

_TIMELINE = ("build_start", "build_end", "start", "end")
_PEAKS = (("peak_bw_kind", "bandwidth"), ("peak_bw_gbps", "bandwidth_gbps"), ("peak_flops_kind", "flops"))
_TUNING = (("tuning_source", "source"), ("tuning_device", "device"), ("tuning_session_id", "session_id"),
           ("tuning_trial_id", "trial_id"), ("tuning_cost_s", "cost_s"))

#: the typed columns of ``results``, in the order the frame shows them
TYPED_COLUMNS = (
    "variant_kind", "inputs_version", *(c for c, _ in _PEAKS), *(c for c, _ in _TUNING),
    *(f"phase_{p}_s" for p in PHASE_NAMES), *(f"timeline_{t}" for t in _TIMELINE),
)
#: those holding numbers: floats, and nullable integers
FLOAT_COLUMNS = ("peak_bw_gbps", "tuning_cost_s", *(f"phase_{p}_s" for p in PHASE_NAMES),
                 *(f"timeline_{t}" for t in _TIMELINE))
INTEGER_COLUMNS = ("inputs_version", "tuning_session_id", "tuning_trial_id")


def typed_values(result: Result) -> dict[str, Any]:
    """The typed columns' values of ``result`` (None where it has no such value)."""
    phases, timeline, peaks, tuning = result.phases, result.timeline, result.peaks, result.tuning
    row: dict[str, Any] = {"variant_kind": result.variant_kind, "inputs_version": result.inputs_version}
    row.update((c, getattr(peaks, f) if peaks is not None else None) for c, f in _PEAKS)
    row.update((c, getattr(tuning, f) if tuning is not None else None) for c, f in _TUNING)
    row.update((f"phase_{p}_s", getattr(phases, p) if phases is not None else None) for p in PHASE_NAMES)
    row.update((f"timeline_{t}", getattr(timeline, t) if timeline is not None else None) for t in _TIMELINE)
    return row


def typed_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The Result fields a stored row's typed columns give (``phases`` etc. None where every column
    of theirs is NULL)."""
    phases = {p: row[f"phase_{p}_s"] for p in PHASE_NAMES}
    timeline = {t: row[f"timeline_{t}"] for t in _TIMELINE}
    peaks = {f: row[c] for c, f in _PEAKS}
    tuning = {f: row[c] for c, f in _TUNING}
    return {
        "variant_kind": row["variant_kind"] or "",
        "inputs_version": row["inputs_version"],
        "phases": Phases(**phases) if any(v is not None for v in phases.values()) else None,
        "timeline": Timeline(**timeline) if any(v is not None for v in timeline.values()) else None,
        "peaks": Peaks(**peaks) if any(v is not None for v in peaks.values()) else None,
        "tuning": TuningRef(**tuning) if tuning["source"] is not None else None,
    }
