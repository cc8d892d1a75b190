"""What the subcommands of ``kbench`` share: the consoles, the argument parser class and the options
several commands take, and the printing of runs, verdicts and reports."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from harness.config import settings
from harness.errors import ExitCode, InvalidSetting, UsageError
from harness.model import check_measure_settings
from harness.store import Store, load_results
from harness.store.backend import is_url, redact

__all__ = [
    "Parser", "db_arg", "default_out", "err", "execution", "execution_args", "fail_on_arg", "fmt_time",
    "given_options", "out", "out_dir", "print_exit_code", "print_run_table", "print_verdicts",
    "progress_display", "store_label",
    "store_location", "verdict_args", "write_outputs",
]

err = Console(stderr=True)
# piped (CI logs): tables 200 columns wide, so case keys are not folded, and lines of text never
# folded (a summary line holds paths of any length, and scripts grep it)
_PIPED = not Console().is_terminal
out = Console(width=200 if _PIPED else None, soft_wrap=_PIPED)


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit with ``ExitCode.USAGE`` (4) instead of argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(int(ExitCode.USAGE), f"{self.prog}: error: {message}\n")


# -- options --------------------------------------------------------------------------------------


def store_location(text: str) -> Path | str:
    """A ``--db`` value: a SQLite file's path, or a PostgreSQL URL kept as text."""
    return text if is_url(text) else Path(text)


def store_label(db: Path | str) -> str:
    """``db`` for messages: a file's absolute path, or the URL without its password."""
    return redact(db) if is_url(db) else str(Path(db).resolve())


def db_arg(p: argparse.ArgumentParser) -> None:
    """``--db``: the result store (default ``KBENCH_DB``, else ``kbench.db``)."""
    default = settings().db
    p.add_argument("--db", type=store_location, default=default,
                   help="result store: a SQLite file or postgresql://user@host:port/db "
                        f"(default {redact(default) if is_url(default) else default})")


def default_out() -> Path:
    """Where reports go when ``--out`` is not given (``KBENCH_OUT``, else ``kbench-out``)."""
    return settings().out_dir


def out_dir(text: str) -> Path:
    """An ``--out`` value, checked before any work starts: a folder that exists, or can be made under
    its nearest existing parent, and that a file can be written into (a temporary file, removed)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a folder")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: {probe} is not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".kbench-out-check-"):
            pass
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot write into {probe}: {e.strerror or e}") from None
    return path


def _gate(text: str):
    """A ``--fail-on`` value parsed into a harness.stats.FailOn (argparse's ``type``)."""
    # the statistics load only when a gate is given: `kbench --help` stays quick
    from harness.stats.verdicts import FailOn

    try:
        return FailOn.parse(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fail_on_arg(p: argparse.ArgumentParser) -> None:
    """``--fail-on SPEC``, parsed once into a harness.stats.FailOn (``args.fail_on``; None without)."""
    p.add_argument("--fail-on", metavar="SPEC", type=_gate,
                   help='gate, e.g. "median:3%%": SLOWER beyond 3 %% fails (exit 1); add ",ambiguous" '
                        "to fail on inconclusive cases (exit 3), which the gate otherwise passes; an "
                        "incomplete run (interrupted, or lacking cases of its baseline) never passes; "
                        "default: the suite threshold, and inconclusive exits 3")


def verdict_args(p: argparse.ArgumentParser, baseline_help: str) -> None:
    """``--baseline``, ``--fail-on`` and ``--out`` of a command that judges a run."""
    p.add_argument("--baseline", metavar="SPEC", help=baseline_help)
    fail_on_arg(p)
    p.add_argument("--out", type=out_dir, metavar="DIR",
                   help="write the HTML report and CI outputs (Markdown, JUnit, JSON, CSV) here")


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1), got {text}")
    return v


def execution_args(p: argparse.ArgumentParser) -> None:
    """Where and how a suite's cases run: shared by ``run``, ``calibrate`` and ``ab``."""
    p.add_argument("--executor", choices=["ray", "local", "inproc"], default="ray",
                   help="ray (default: an embedded local Ray, or --address), local (this machine, each case "
                        "in a child process) or inproc (in kbench's own process, for debugging: no "
                        "timeouts, a crash ends kbench)")
    p.add_argument("--address", help="join this Ray cluster instead of starting one")
    p.add_argument("--targets", help="comma-separated subset of targets (c,opencl,cuda)")
    p.add_argument("--max-time", type=float, metavar="S", help="cap on measuring time per case (seconds)")
    p.add_argument("--min-time", type=float, metavar="S", help="least measuring time per case (seconds)")
    p.add_argument("--max-rel-ci", type=_fraction, metavar="F",
                   help="stop a case once the 95 %% CI half-width of its median is at most F of it "
                        "(e.g. 0.005)")


#: the options of :func:`execution_args` that set a MeasureConfig field
MEASURE_OPTIONS = {"max_time_s": "--max-time", "min_time_s": "--min-time", "max_rel_ci": "--max-rel-ci"}


def given_options(exc: BaseException, args: argparse.Namespace) -> str:
    """For a setting refused once the suite's and the command line's settings meet (a ``--min-time``
    above the suite's ``max_time_s``): " (--min-time 20.0 given on the command line)"; "" otherwise."""
    if not isinstance(exc, InvalidSetting):
        return ""
    values = {k: getattr(args, option[2:].replace("-", "_"), None) for k, option in MEASURE_OPTIONS.items()}
    given = [f"{MEASURE_OPTIONS[k]} {values[k]}" for k in exc.settings if values.get(k) is not None]
    return f" ({' and '.join(given)} given on the command line)" if given else ""


def execution(args: argparse.Namespace) -> tuple[tuple[str, ...] | None, dict[str, Any]]:
    """(targets or None, MeasureConfig overrides) from the options of :func:`execution_args`, checked
    by the rules MeasureConfig itself applies (harness.model.check_measure_settings) before anything
    runs: a bad value is a UsageError naming its option, as a suite's is an error naming its line."""
    targets = None
    if args.targets is not None:
        # here, not at the top: harness.suite loads the measuring side (numpy), which --help does without
        from harness.suite.values import TARGETS

        targets = tuple(t.strip() for t in args.targets.split(","))
        for t in targets:
            if t not in TARGETS:
                raise UsageError(f"--targets {args.targets}: unknown target {t!r} (targets: "
                                 f"{', '.join(TARGETS)})")
    given = {k: getattr(args, opt[2:].replace("-", "_")) for k, opt in MEASURE_OPTIONS.items()}
    overrides = {k: v for k, v in given.items() if v is not None}
    try:
        check_measure_settings(overrides)
    except InvalidSetting as e:
        options = " and ".join(MEASURE_OPTIONS[k] for k in e.settings if k in MEASURE_OPTIONS)
        raise UsageError(f"{options}: {e.detail}") from None
    return targets, overrides


# -- printing -------------------------------------------------------------------------------------


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


#: how a run's progress names the phases of a case's wall time (harness.model.Phases)
PHASE_LABELS = {"build_wait": "waiting for the build", "warmup": "warm-up", "measure": "measuring"}


def phases_text(result) -> str:
    """``[inputs 0.21 s, reference 0.00 s, ...]`` for a result that carries its phases, else ""."""
    phases = result.phases if result is not None else None
    if phases is None or not phases.items():
        return ""
    return "[" + ", ".join(f"{PHASE_LABELS.get(k, k)} {s:.2f} s" for k, s in phases.items()) + "]"


def progress_display(title: str = "cases built + checked + measured"):
    """A rich progress display of a run's cases and the ``on_event`` callback of
    harness.run.run_suite feeding it (one bar per planned run, failures printed as they come; a line
    per case when not a terminal)."""
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("ok {task.fields[ok]}  failed {task.fields[failed]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err,
                        transient=False, disable=not err.is_terminal)
    state = {}

    def on_event(kind, payload):
        if kind == "planned":
            if payload.skipped_targets:
                err.print("[yellow]not available here, skipped: "
                          f"{', '.join(payload.skipped_targets)}[/yellow]")
            for pick in getattr(payload, "tuned_picks", ()):
                if pick.source == "best":
                    knobs = ", ".join(f"{k}={v}" for k, v in pick.knobs)
                    err.print(f"{escape(pick.case_key)}: the best configuration of tuning session "
                              f"{pick.session_id} on {escape(pick.device)} ({escape(knobs)})",
                              highlight=False, soft_wrap=True)
                else:
                    err.print(f"[yellow]{escape(pick.case_key)}: no tuned configuration stored for "
                              f"{escape(pick.device or 'this device')}; it runs the first configuration of "
                              "its space (run `kbench tune` on the suite to tune it)[/yellow]",
                              highlight=False, soft_wrap=True)
            state["task"] = progress.add_task(title, total=payload.planned, ok=0, failed=0)
            runs = ", ".join(f"{side} run {rid}" for side, rid in payload.side_runs.items())
            err.print(f"run {payload.run_id}: {payload.planned} cases" if not runs
                      else f"{runs}: {payload.planned} cases")
        elif kind == "waiting":
            err.print("waiting for the store lock (another process is writing the store; to "
                      f"{escape(payload)})", highlight=False, soft_wrap=True)
        elif kind == "result":
            task = state["task"]
            t = progress.tasks[task]
            sides = {r.side: r for r in payload.sides} or {"": payload}
            bad = {side: r for side, r in sides.items() if r.outcome != "ok"}
            progress.update(task, advance=1, ok=t.fields["ok"] + (not bad),
                            failed=t.fields["failed"] + bool(bad))
            for side, r in bad.items():
                first = r.message.splitlines()[0] if r.message else ""
                where = f" ({side})" if side else ""
                progress.console.print(f"[red]{r.outcome}[/red]{where} {escape(r.case.key)}: {escape(first)}",
                                       highlight=False)
            if not bad and not err.is_terminal:
                times = "  ".join(f"{side + ' ' if side else ''}"
                                  f"{fmt_time(r.timing.median if r.timing else None)}"
                                  for side, r in sides.items())
                phases = phases_text(payload)
                tail = f"  {escape(phases)}" if phases else ""
                progress.console.print(f"ok {escape(payload.case.key)} {times}{tail}", highlight=False,
                                       soft_wrap=True)

    return progress, on_event


def _num(x):
    """A stored number, or None for a missing value (None or NaN in the DataFrame)."""
    return None if x is None or x != x else x


def _count(x) -> int | None:
    """A stored count, or None when missing (None, NaN, or pandas' NA of an Int64 column)."""
    try:
        return None if x is None or x != x else int(x)
    except (TypeError, ValueError):  # bool(pd.NA) refuses
        return None


def print_run_table(db: Path | str, run_id: int) -> None:
    """One run's results as a table: case, outcome, median, CI, bandwidth and compute rates scaled for
    people (2.5 TB/s, 362.5 TFLOP/s: harness.stats.peaks.rate_text), % of peak (of the FLOP peak
    where the kernel is nearer it, else of the bandwidth peak matching its traffic: read or copy peak,
    harness.stats.peaks), device."""
    # here, not at the top: harness.stats loads pandas and scipy, which `kbench --help` does without
    from harness.stats.peaks import ops_unit, peak_share_text, rate_text

    df = load_results(db, run_id=run_id)
    table = Table(title=f"run {run_id}")
    for col in ("case", "outcome", "median", "95% CI", "bandwidth", "compute", "% of peak", "device"):
        table.add_column(col, justify="right" if col in ("median", "bandwidth", "compute", "% of peak")
                         else "left")
    for _, r in df.iterrows():
        lo, hi, med, gbps = (_num(r.get(k)) for k in ("ci_low_s", "ci_high_s", "median_s", "gbps"))
        n, need = _count(r.get("n_samples")), _count(r.get("run_min_samples"))
        few = n is not None and need is not None and n < need  # no CI from fewer than min_samples
        ci = "-" if lo is None else (f"- ({int(n)} samples)" if few else f"{fmt_time(lo)} .. {fmt_time(hi)}")
        pct = peak_share_text(_num(r.get("pct_peak_bw")), _num(r.get("pct_peak_flops")),
                              r.get("peak_bw_kind"), r.get("peak_flops_kind")) or "-"
        table.add_row(escape(str(r["case_key"])), str(r["outcome"]), fmt_time(med), ci,
                      rate_text(gbps) or "-",
                      rate_text(_num(r.get("gflops")), ops_unit(r.get("dtype"))) or "-",
                      pct, escape(str(r.get("device") or "")))
    out.print(table)
    # a tuned case ran its stored best: the cost the tuning measured for it, and the run's median over it
    for _, r in df.iterrows():
        cost = _num(r.get("tuning_cost_s")) if "tuning_cost_s" in df.columns else None
        if cost is not None:
            out.print(f"tuned {escape(str(r['case_key']))}: {_tuned_text(_num(r.get('median_s')), cost)}",
                      highlight=False, soft_wrap=True)


def _tuned_text(median_s: float | None, cost_s: float) -> str:
    """The tuning's cost of a tuned case's configuration and the run's median over it: ``"tuning
    63.6 us, run 64.8 us, run/tune 1.02x"``."""
    if median_s is None or not cost_s > 0:
        return f"tuning {fmt_time(cost_s)}"
    return f"tuning {fmt_time(cost_s)}, run {fmt_time(median_s)}, run/tune {median_s / cost_s:.2f}x"


def _pct(x) -> str:
    return "-" if x is None or x != x else f"{(x - 1) * 100:+.1f}%"


_VERDICT_STYLE = {"SAME": "green", "FASTER": "cyan", "SLOWER": "red", "AMBIGUOUS": "yellow", "WRONG": "red",
                  "NEW": "blue", "MISSING": "magenta"}


def print_verdicts(judgement) -> None:
    """A judgement's verdicts as a table, then its counts and exit code (harness.judge.Judgement)."""
    table = Table(title=f"verdicts vs {escape(judgement.baseline_label)}")
    for col in ("case", "verdict", "base", "new", "change", "95% CI of change", "q"):
        table.add_column(col, justify="left" if col in ("case", "verdict") else "right")
    for v in judgement.verdicts:
        ci = "-" if not v.ratio_ci else f"{_pct(v.ratio_ci[0])} .. {_pct(v.ratio_ci[1])}"
        style = _VERDICT_STYLE.get(v.verdict, "white")
        mark = " (re-measured)" if v.remeasured else ""
        table.add_row(escape(v.case_key), f"[{style}]{v.verdict}[/{style}]{mark}", fmt_time(v.base_median_s),
                      fmt_time(v.new_median_s), _pct(v.ratio), ci,
                      "-" if v.q_value is None else f"{v.q_value:.3g}")
    out.print(table)
    counts = ", ".join(f"{k} {n}" for k, n in sorted(judgement.counts().items()))
    incomplete = judgement.incomplete_text()
    out.print(f"verdicts vs {escape(judgement.baseline_label)}: {counts or 'nothing compared'}"
              + (f"; INCOMPLETE: {escape(incomplete)}" if incomplete else ""), highlight=False,
              soft_wrap=True)


def print_exit_code(code: int) -> None:
    """The line that says what ``kbench`` exits with (printed by the command, then returned)."""
    out.print(f"exit code {int(code)}", highlight=False)


def write_outputs(db: Path | str, run_id: int, judgement, out_dir: Path) -> None:
    """The HTML report and the CI outputs of run ``run_id`` into ``out_dir`` (see reports/), and a
    line per file written."""
    # imported here: reports load matplotlib and jinja2 (about a second), which only this needs
    import reports

    with Store.open(db, readonly=True) as st:
        data = reports.collect(st, run_id, verdicts=judgement.verdicts if judgement else (),
                               baseline_label=judgement.baseline_label if judgement else None)
    paths = reports.write_all(data, Path(out_dir))
    for kind, path in paths.items():
        out.print(f"{kind}: {path}")


#: the phases of a run's summary line, in order, with their labels
PHASES = (("executor", "executor start"), ("store_lock", "waiting for the store lock"), ("plan", "planning"),
          ("first_result", "first result after"),
          ("runners_ready", "GPU runners ready after"), ("runner_prepare", "runner warm-up"),
          ("close", "executor close"))


def print_run_summary(db, summary, *, retry_failed: bool = False) -> None:
    """What ``kbench run`` prints once the run ended: the results table, the counts, where the time
    went and where the results are (``kbench tune --then-run`` prints the same)."""
    print_run_table(db, summary.run_id)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing to do"
    out.print(f"run {summary.run_id}: {counts}; nvcc calls {summary.nvcc_calls}; {summary.seconds:.1f} s "
              f"({summary.dispatch_s:.1f} s dispatching)")
    kept = {o: n for o, n in summary.stored.items() if o in ("crashed", "timeout")}
    if summary.resumed and kept and not retry_failed:
        out.print(f"run {summary.run_id} keeps {', '.join(f'{n} {o}' for o, n in sorted(kept.items()))} "
                  "case(s) of an earlier attempt (--resume --retry-failed runs them again)")
    ph = summary.phases
    if ph:
        out.print("time: " + ", ".join(f"{label} {ph[k]:.1f} s" for k, label in PHASES if k in ph))
    out.print(f"results: {store_label(db)} (kbench show {summary.run_id} --db {db})")
