"""What a report shows, gathered once from the result store: :class:`ReportData` and :func:`collect`.

Every writer in this package (HTML, Markdown, JUnit, pytest-benchmark JSON, CSV/Parquet) takes a
:class:`ReportData` and nothing else, so a report never queries the store twice and the writers can
be tested on hand-made data. The helpers at the bottom (:func:`case_rows`, :func:`verdict_counts`,
:func:`summary_sentence`, the formatters) are the one place where a case's row, its verdict and
its numbers are put together, so the HTML table, the Markdown comment and the JUnit file agree.

Size: the gathering (runs, sides, history, tuning, peaks and variant kinds) and those shared
helpers belong together: splitting them would let two writers format one number two ways.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.model import DEFAULT_THRESHOLD, VERDICTS, Case, Verdict
from harness.stats import detect_steps
from harness.stats.peaks import peak_bw_kind, peak_flops_kind
from harness.store import NOT_HISTORY, UnknownRun

if TYPE_CHECKING:
    from harness.store import Store

#: columns of :attr:`ReportData.history`
HISTORY_COLUMNS = ("run_id", "run_started_at", "git_commit", "case_key", "env_id", "device", "median_s",
                   "ci_low_s", "ci_high_s", "outcome")

_KEY_CHUNK = 400  # case keys per results_frame query (SQLite's bound-parameter limit)


@dataclass
class ReportData:
    """Everything one report of one run shows.

    Attributes
    ----------
    run : dict
        :meth:`harness.store.Store.get_run` of the reported run.
    environments : dict
        env_id -> fingerprint dict (:func:`harness.env.fingerprint`) of every environment the run's
        results were measured in.
    results : pandas.DataFrame
        ``store.results_frame(run_id, with_samples=True)``: one row per case of the run.
    verdicts : list of harness.model.Verdict
        The run judged against its baseline; empty when there is no baseline.
    baseline_label : str or None
        What the verdicts compared with, for people ("run 3", "baseline nightly").
    history : pandas.DataFrame
        Every stored result of the run's case keys in runs up to and including this one, ordered
        by run; columns :data:`HISTORY_COLUMNS`.
    steps : dict
        case_key -> list of ``harness.stats.Step(index, before, after, ratio)`` found in that
        case's history of medians on the run's device. ``index`` counts positions in
        :func:`case_history` (ok results only, in run order).
    baseline_samples : dict
        case_key -> ``{"samples": [...], "clocks": [...]}``, the raw samples (seconds) and SM clocks
        (MHz, None where unknown) of the baseline results named by the verdicts.
    notes : list of str
        Things the report could not do (e.g. no step detection available), shown in the report.
    tuning : pandas.DataFrame
        The stored tuning trials of the run's tuned cases (``store.trials_frame``: session, tuner,
        device, trial index, cost, GFLOP/s, error number and the best so far within the session),
        on the device each case ran on, with ``case_key`` (the run's case) added; empty without
        tuned cases.
    """

    run: dict[str, Any]
    environments: dict[str, dict[str, Any]]
    results: pd.DataFrame
    verdicts: list[Verdict] = field(default_factory=list)
    baseline_label: str | None = None
    history: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(HISTORY_COLUMNS)))
    steps: dict[str, list[Any]] = field(default_factory=dict)
    baseline_samples: dict[str, dict[str, list]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tuning: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def run_id(self) -> int:
        """The reported run's id."""
        return int(self.run["id"])

    def verdict_by_key(self) -> dict[str, Verdict]:
        """case_key -> its verdict (cases without a verdict are absent)."""
        return {v.case_key: v for v in self.verdicts}


def collect(store: Store, run_id: int, verdicts: Iterable[Verdict] = (),
            baseline_label: str | None = None) -> ReportData:
    """Gather the report of run ``run_id`` from ``store``.

    Parameters
    ----------
    store : harness.store.Store
        An open result store.
    run_id : int
        The run to report on.
    verdicts : iterable of harness.model.Verdict
        The run judged against a baseline (``harness.stats``); empty for a run on its own.
    baseline_label : str, optional
        What the verdicts compared with ("run 3", "baseline nightly"); default derived from the
        verdicts' ``base_run_ids``.

    Returns
    -------
    ReportData

    Raises
    ------
    harness.store.UnknownRun
        No run ``run_id`` in the store.
    """
    run = store.get_run(run_id)
    if run is None:
        raise UnknownRun(f"no run {run_id} in {store.path}")
    verdicts = list(verdicts)
    results = store.results_frame(run_id, with_samples=True)
    environments = {}
    for env_id in results["env_id"].dropna().unique():
        fp = store.get_environment(str(env_id))
        if fp is not None:
            environments[str(env_id)] = fp
    history = _history(store, run_id, results["case_key"].tolist())
    if baseline_label is None and verdicts:
        baseline_label = _default_baseline_label(verdicts)
    data = ReportData(run=run, environments=environments, results=results, verdicts=verdicts,
                      baseline_label=baseline_label, history=history)
    data.baseline_samples = _baseline_samples(store, verdicts)
    data.steps = _steps(data)
    data.tuning = _tuning(store, results)
    return data


def _tuning(store: Store, results: pd.DataFrame) -> pd.DataFrame:
    """The tuning trials behind the run's tuned cases (see :attr:`ReportData.tuning`)."""
    frames = []
    for _, r in results.iterrows():
        case = Case.from_json(str(r["case_json"]))
        if not case.tuned:
            continue
        device = r.get("tuning_device")  # the device its configuration was picked for
        device = device if isinstance(device, str) else None
        trials = store.trials_frame([case.tuning_key])
        if device:
            trials = trials[trials["device"] == device]
        if not trials.empty:
            frames.append(trials.assign(case_key=r["case_key"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _history(store: Store, run_id: int, keys: Sequence[str]) -> pd.DataFrame:
    frames = []
    for i in range(0, len(keys), _KEY_CHUNK):
        frames.append(store.results_frame(case_key=list(keys[i:i + _KEY_CHUNK])))
    if not frames:
        return pd.DataFrame(columns=list(HISTORY_COLUMNS))
    hist = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    # calibration runs (injected slowdowns) and kbench ab sides are not history; the run itself stays
    hist = hist[(hist["run_id"] <= run_id)
                & (~hist["run_kind"].isin(NOT_HISTORY) | (hist["run_id"] == run_id))]
    hist = hist.sort_values(["run_id", "result_id"], kind="stable")
    return hist.loc[:, list(HISTORY_COLUMNS)].reset_index(drop=True)


def _default_baseline_label(verdicts: Sequence[Verdict]) -> str | None:
    runs = sorted({r for v in verdicts for r in v.base_run_ids})
    if not runs:
        return None
    if len(runs) == 1:
        return f"run {runs[0]}"
    return f"runs {runs[0]}–{runs[-1]}" if len(runs) > 3 else "runs " + ", ".join(map(str, runs))


def _baseline_samples(store: Store, verdicts: Sequence[Verdict]) -> dict[str, dict[str, list]]:
    wanted = {v.case_key: v.base_result_ids for v in verdicts if v.base_result_ids}
    ids = sorted({i for ids in wanted.values() for i in ids})
    if not ids:
        return {}
    frame = store.samples_frame(ids)
    by_result = {int(rid): g for rid, g in frame.groupby("result_id", sort=False)}
    out: dict[str, dict[str, list]] = {}
    for key, rids in wanted.items():
        samples: list[float] = []
        clocks: list[float | None] = []
        for rid in rids:
            g = by_result.get(int(rid))
            if g is None:
                continue
            samples += g["value_s"].tolist()
            clocks += [None if math.isnan(c) else float(c) for c in g["sm_clock_mhz"].tolist()]
        if samples:
            out[key] = {"samples": samples, "clocks": clocks}
    return out


def _steps(data: ReportData) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for row in data.results.itertuples(index=False):
        hist = case_history(data, row.case_key, row.device)
        values = hist["median_s"].tolist()
        if len(values) < 3:
            continue
        steps = list(detect_steps(values))
        if steps:
            out[row.case_key] = steps
    return out


# ---------------------------------------------------------------------------------------------
# views shared by the writers
# ---------------------------------------------------------------------------------------------


def case_history(data: ReportData, case_key: str, device: str | None = None) -> pd.DataFrame:
    """The ok results of ``case_key`` (on ``device`` when given) in run order, one row per run.

    The positions of this frame are what :attr:`ReportData.steps` indexes.
    """
    h = data.history
    mask = (h["case_key"] == case_key) & (h["outcome"] == "ok") & h["median_s"].notna()
    if device is not None:
        mask &= h["device"] == device
    return h[mask].reset_index(drop=True)


def _opt(x: Any) -> float | None:
    """A float, or None for None/NaN/pandas NA."""
    if x is None or x is pd.NA:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def pairs_text(text: Any) -> str:
    """'{"m": 512, "n": 1024}' -> 'm=512, n=1024'."""
    if not isinstance(text, str) or not text:
        return ""
    try:
        d = json.loads(text)
    except ValueError:
        return text
    if isinstance(d, dict):
        return ", ".join(f"{k}={v}" for k, v in d.items())
    return str(d)


def _list(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return []
    return list(x)


def ci_too_few(n_samples: Any, min_samples: Any) -> bool:
    """Whether a result of ``n_samples`` samples is too few for a CI of its median: fewer than its run's
    ``min_samples`` (the column ``run_min_samples`` of a results frame; unknown counts as enough)."""
    known = not any(x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))
                    for x in (n_samples, min_samples))
    return known and int(n_samples) < int(min_samples)


def case_rows(data: ReportData) -> list[dict[str, Any]]:
    """One dict per case of the run, joined with its verdict, sorted by workload, variant, key.

    Keys: case_key, workload, variant, knobs, shape, dtype, target, device, env_id, outcome,
    message, median_s, ci_low_s, ci_high_s, n_samples, gbps, gflops, pct_peak_bw,
    pct_peak_flops, peak_bw ("read" or "copy": the peak pct_peak_bw is of), peak_flops (the matmul peak
    pct_peak_flops is of, or None), verdict ("" when none),
    ratio, ratio_lo, ratio_hi, delta_pct, p_value, q_value, threshold, base_median_s, samples, clocks,
    result_id, verdict_message, tuning_cost_s (the tuning's cost of the stored best a tuned case ran,
    else None).
    """
    vmap = data.verdict_by_key()
    rows = []
    for r in data.results.itertuples(index=False):
        v = vmap.get(r.case_key)
        ratio = v.ratio if v is not None else None
        lo, hi = (v.ratio_ci if v is not None and v.ratio_ci else (None, None))
        n = r.n_samples
        # no CI of the median from fewer samples than the run asked for (a case its time limit cut short)
        few = ci_too_few(n, getattr(r, "run_min_samples", None))
        rows.append({
            "case_key": r.case_key,
            "workload": r.workload,
            "variant": r.variant,
            "knobs": pairs_text(r.knobs),
            "shape": pairs_text(r.params),
            "dtype": r.dtype,
            "target": r.target,
            "device": r.device or "",
            "env_id": r.env_id if isinstance(r.env_id, str) else "",
            "outcome": r.outcome,
            "message": r.message or "",
            "median_s": _opt(r.median_s),
            "ci_low_s": None if few else _opt(r.ci_low_s),
            "ci_high_s": None if few else _opt(r.ci_high_s),
            "n_samples": None if n is None or n is pd.NA else int(n),
            "gbps": _opt(r.gbps),
            "gflops": _opt(r.gflops),
            "pct_peak_bw": _opt(r.pct_peak_bw),
            "pct_peak_flops": _opt(r.pct_peak_flops),
            # which bandwidth peak pct_peak_bw is of: "read" or "copy" (harness.stats.peaks)
            "peak_bw": peak_bw_kind(getattr(r, "peak_bw_kind", None)),
            # the matmul peak pct_peak_flops is of (matmul_fp32_gflops, matmul_int8_gops, ...; None: unknown)
            "peak_flops": peak_flops_kind(getattr(r, "peak_flops_kind", None)),
            "verdict": v.verdict if v is not None else "",
            "ratio": _opt(ratio),
            "ratio_lo": _opt(lo),
            "ratio_hi": _opt(hi),
            "delta_pct": None if _opt(ratio) is None else (ratio - 1.0) * 100.0,
            "p_value": _opt(v.p_value) if v is not None else None,
            "q_value": _opt(v.q_value) if v is not None else None,
            "threshold": v.threshold if v is not None else None,
            "base_median_s": _opt(v.base_median_s) if v is not None else None,
            "verdict_message": v.message if v is not None else "",
            "samples": _list(r.samples) if "samples" in data.results.columns else [],
            "clocks": _list(r.sm_clocks_mhz) if "sm_clocks_mhz" in data.results.columns else [],
            "result_id": int(r.result_id),
            # a tuned case that ran its stored best: the cost the tuning measured for it
            "tuning_cost_s": _opt(getattr(r, "tuning_cost_s", None)),
        })
    rows.sort(key=lambda d: (d["workload"], d["variant"], d["case_key"]))
    return rows


def missing_verdicts(data: ReportData) -> list[Verdict]:
    """Verdicts of baseline cases this run lacks (``MISSING``)."""
    return [v for v in data.verdicts if v.verdict == "MISSING"]


def verdict_counts(data: ReportData) -> dict[str, int]:
    """verdict -> count, in :data:`harness.model.VERDICTS` order, verdicts that occur only."""
    c = Counter(v.verdict for v in data.verdicts)
    return {name: c[name] for name in VERDICTS if c[name]}


def outcome_counts(data: ReportData) -> dict[str, int]:
    """outcome -> count over the run's results (ok first)."""
    c = Counter(data.results["outcome"].tolist())
    return dict(sorted(c.items(), key=lambda kv: (kv[0] != "ok", kv[0])))


def threshold_pct(data: ReportData) -> float:
    """The practical threshold of most verdicts, in percent (3.0 when there are none)."""
    c = Counter(v.threshold for v in data.verdicts if v.threshold is not None)
    return 100.0 * (c.most_common(1)[0][0] if c else DEFAULT_THRESHOLD)


def _cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def summary_sentence(data: ReportData) -> str:
    """One plain sentence saying what the run found, for someone who never saw kbench."""
    n = len(data.results)
    outcomes = outcome_counts(data)
    not_ok = n - outcomes.get("ok", 0)
    if not data.verdicts:
        text = f"Run {data.run_id} measured {_cases(n)}; there is no baseline, so nothing was judged."
        if not_ok:
            text += f" {_cases(not_ok)} did not finish correctly ({_join_counts(outcomes, skip='ok')})."
        return text
    counts = verdict_counts(data)
    base = data.baseline_label or "the baseline"
    thr = f"{threshold_pct(data):g} %"
    parts = []
    if counts.get("SLOWER"):
        parts.append(f"{_cases(counts['SLOWER'])} slower than {base} by more than {thr}")
    if counts.get("FASTER"):
        parts.append(f"{_cases(counts['FASTER'])} faster by more than {thr}")
    if counts.get("WRONG"):
        parts.append(f"{_cases(counts['WRONG'])} wrong or failed")
    if counts.get("AMBIGUOUS"):
        parts.append(f"{_cases(counts['AMBIGUOUS'])} inconclusive (re-measure)")
    if counts.get("MISSING"):
        parts.append(f"{_cases(counts['MISSING'])} in {base} but missing here")
    if counts.get("NEW"):
        parts.append(f"{_cases(counts['NEW'])} new (nothing to compare with)")
    same = counts.get("SAME", 0)
    if not parts:
        return f"All {_cases(same)} run as fast as in {base} (no change beyond {thr} that the " \
               f"statistics can confirm)."
    text = "; ".join(parts)
    if same:
        text += f"; {same} unchanged"
    return text[0].upper() + text[1:] + "."


def _join_counts(counts: dict[str, int], skip: str = "") -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items() if k != skip)


# -- formatting -------------------------------------------------------------------------------


def fmt_time(seconds: Any) -> str:
    """12.3 ns / 4.56 µs / 7.89 ms / 1.23 s; '—' when unknown."""
    s = _opt(seconds)
    if s is None:
        return "—"
    a = abs(s)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if a >= scale or unit == "ns":
            v = s / scale
            return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:.0f} {unit}"
    return f"{s:g} s"  # pragma: no cover


def time_unit(seconds: Iterable[float]) -> tuple[float, str]:
    """(scale, unit) that suits the largest finite value of ``seconds`` (for chart axes)."""
    vals = [abs(v) for v in (_opt(x) for x in seconds) if v is not None]
    top = max(vals) if vals else 1.0
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if top >= scale:
            return scale, unit
    return 1e-9, "ns"


def fmt_num(x: Any, digits: int = 3) -> str:
    """A number with ``digits`` significant digits; '—' when unknown."""
    v = _opt(x)
    if v is None:
        return "—"
    if abs(v) >= 10 ** digits:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def fmt_pct(x: Any, signed: bool = False) -> str:
    """'12.3 %' (or '+12.3 %' with ``signed``); '—' when unknown."""
    v = _opt(x)
    if v is None:
        return "—"
    if round(v, 1) == 0:
        v = 0.0  # no "-0.0 %"
    return f"{v:+.1f} %" if signed else f"{v:.1f} %"


def fmt_p(x: Any) -> str:
    """A p- or q-value: '<1e-4', '0.0123'; '—' when unknown."""
    v = _opt(x)
    if v is None:
        return "—"
    if v < 1e-4:
        return "<1e-4"
    return f"{v:.3g}"


def short_commit(commit: Any) -> str:
    """The first 8 hex digits of a commit (keeping a '-dirty' mark); '' when unknown."""
    if not isinstance(commit, str) or not commit:
        return ""
    dirty = commit.endswith("-dirty")
    base = commit[:-len("-dirty")] if dirty else commit
    return base[:8] + ("-dirty" if dirty else "")


# ---------------------------------------------------------------------------------------------
# variants of one workload side by side
# ---------------------------------------------------------------------------------------------

#: a workload whose timed cases do at least this many operations per byte moved is compared in
#: FLOP/s (a matmul: hundreds), below it in GB/s (a row sum: 0.25)
COMPUTE_BOUND_INTENSITY = 8.0

#: how a peer case's variant starts (harness.model.PEER_VARIANT_PREFIX)
PEER_PREFIX = "peer:"


def variant_labels(frame: pd.DataFrame) -> list[str]:
    """Per row: 'variant', or 'variant [knobs]' when that variant appears with several knob settings
    in ``frame`` (one workload's rows)."""
    knob_sets = frame.groupby("variant")["knobs"].nunique()
    out = []
    for v, k in zip(frame["variant"], frame["knobs"]):
        kt = pairs_text(k)
        out.append(f"{v} [{kt}]" if kt and knob_sets.get(v, 1) > 1 else str(v))
    return out


def throughput_metric(frame: pd.DataFrame) -> str | None:
    """'GFLOP/s' for compute-heavy rows (median operations per byte at least
    :data:`COMPUTE_BOUND_INTENSITY`), 'GB/s' for the others, None when the timed rows lack the
    rate. Only rows with outcome ok and a median count."""
    ok = frame[(frame["outcome"] == "ok") & frame["median_s"].notna()]
    if ok.empty:
        return None
    have_flops = ok["gflops"].notna().all() and (ok["gflops"] > 0).all()
    have_bw = ok["gbps"].notna().all() and (ok["gbps"] > 0).all()
    if have_flops and have_bw:
        intensity = float((ok["gflops"] / ok["gbps"]).median())
        return "GFLOP/s" if intensity >= COMPUTE_BOUND_INTENSITY else "GB/s"
    if have_bw:
        return "GB/s"
    return "GFLOP/s" if have_flops else None


@dataclass(frozen=True)
class VariantCell:
    """One variant (with its knobs) at one device and shape: outcome, median and throughput, and
    its time relative to the fastest kernel of the row (1.0 for that one)."""

    outcome: str
    median_s: float | None
    rate: float | None
    vs_best: float | None
    best: bool
    case_key: str


@dataclass(frozen=True)
class VariantRow:
    """One device and shape (dtype, target) of a workload: a cell per column that ran there, and
    per peer how fast the best kernel is next to it (peer median / best kernel median: 2.0 = twice
    as fast as the peer)."""

    device: str
    shape: str
    dtype: str
    cells: dict[str, VariantCell]
    best: str | None
    vs_peers: dict[str, float]


@dataclass(frozen=True)
class VariantMatrix:
    """A workload's variants (columns; peers last) at each device and shape (rows); ``kinds``: the
    stored kind of the columns that are not kbench schedules ("cuda_source", "callable:torch")."""

    workload: str
    metric: str | None
    columns: list[str]
    rows: list[VariantRow]
    kinds: dict[str, str] = field(default_factory=dict)  # label -> Result.variant_kind


def variant_matrix(frame: pd.DataFrame, workload: str) -> VariantMatrix:
    """The variants of ``workload`` side by side, from a run's results frame.

    Parameters
    ----------
    frame : pandas.DataFrame
        :attr:`ReportData.results` (rows of other workloads are ignored).
    workload : str

    Returns
    -------
    VariantMatrix
        Columns are the variant labels (:func:`variant_labels`) in order of first appearance, kernel
        variants before peers; rows are (device, shape · dtype · target) in order of appearance.
        The best cell of a row is its fastest ok kernel (peers are not candidates).
    """
    df = frame[frame["workload"] == workload].copy()
    if df.empty:
        return VariantMatrix(workload, None, [], [])
    df["label"] = variant_labels(df)
    df["shape_label"] = [" · ".join(x for x in (pairs_text(p), d, t) if x)
                         for p, d, t in zip(df["params"], df["dtype"], df["target"])]
    df["device_label"] = df["device"].fillna("").astype(str)
    metric = throughput_metric(df)
    labels = list(dict.fromkeys(df["label"]))
    columns = ([x for x in labels if not x.startswith(PEER_PREFIX)]
               + [x for x in labels if x.startswith(PEER_PREFIX)])
    kinds: dict[str, str] = {}
    stored = df["variant_kind"] if "variant_kind" in df.columns else [""] * len(df)
    for label, kind in zip(df["label"], stored):
        if isinstance(kind, str) and kind:
            kinds.setdefault(label, kind)
    rows = []
    for (dev, shape), g in df.groupby(["device_label", "shape_label"], sort=False):
        dtype = str(g["dtype"].iloc[0])
        medians: dict[str, float] = {}
        raw: dict[str, Any] = {}
        for r in g.itertuples(index=False):
            raw.setdefault(r.label, r)
            med = _opt(r.median_s)
            if r.outcome == "ok" and med is not None and med > 0:
                medians.setdefault(r.label, med)
        kernels = {k: v for k, v in medians.items() if not k.startswith(PEER_PREFIX)}
        best = min(kernels, key=kernels.get) if kernels else None
        best_s = kernels[best] if best is not None else None
        cells = {}
        for label, r in raw.items():
            med = medians.get(label)
            rate = _opt(r.gflops if metric == "GFLOP/s" else r.gbps) if metric else None
            cells[label] = VariantCell(outcome=str(r.outcome), median_s=med, rate=rate,
                                       vs_best=(med / best_s) if (med is not None and best_s) else None,
                                       best=label == best, case_key=str(r.case_key))
        vs_peers = {k: medians[k] / best_s for k in medians if k.startswith(PEER_PREFIX) and best_s}
        rows.append(VariantRow(device=str(dev), shape=str(shape), dtype=dtype, cells=cells, best=best,
                               vs_peers=vs_peers))
    return VariantMatrix(workload, metric, columns, rows, kinds)


__all__ = [
    "HISTORY_COLUMNS", "ReportData", "case_history", "case_rows", "collect", "fmt_num",
    "fmt_p", "fmt_pct", "fmt_time", "missing_verdicts", "outcome_counts", "pairs_text", "short_commit",
    "summary_sentence", "threshold_pct", "time_unit", "verdict_counts", "COMPUTE_BOUND_INTENSITY",
    "VariantCell", "VariantMatrix", "VariantRow", "throughput_metric", "variant_labels", "variant_matrix",
]
