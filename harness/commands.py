"""Presentation of the ``kbench`` subcommands (progress bars, tables); logic lives in run.py,
store.py and suite.py."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import List

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

from .errors import ExitCode, UsageError

err = Console(stderr=True)
# a wide console when piped (CI logs), so case keys are not folded
out = Console(width=None if Console().is_terminal else 200)


def dispatch(args, argv: List[str]) -> int:
    from .errors import ExitCode, KbenchError
    from .suite import SuiteError

    try:
        handlers = {"run": cmd_run, "list": cmd_list, "show": cmd_show, "export": cmd_export,
                    "compare": cmd_compare, "report": cmd_report, "baseline": cmd_baseline,
                    "calibrate": cmd_calibrate, "ab": cmd_ab}
        return int(handlers[args.command](args, argv))
    except SuiteError as exc:  # errors unwrapped: a file:line or a path stays on one line for grep
        err.print(f"[red]{escape(str(exc))}[/red]", highlight=False, soft_wrap=True)
        return int(exc.exit_code)
    except KbenchError as exc:
        err.print(f"[red]kbench {args.command}: {escape(str(exc))}[/red]", highlight=False, soft_wrap=True)
        return int(exc.exit_code)
    except OSError as exc:  # a file the user named cannot be read or written
        err.print(f"[red]kbench {args.command}: {escape(str(exc))}[/red]", highlight=False, soft_wrap=True)
        return int(ExitCode.USAGE)
    except Exception:  # a bug in kbench: its traceback, and an exit code no user error has
        err.print(f"[red]kbench {args.command}: internal error (a bug in kbench; please report it with "
                  "the traceback below)[/red]", highlight=False, soft_wrap=True)
        err.print(escape(traceback.format_exc()), highlight=False, soft_wrap=True)
        return int(ExitCode.INTERNAL)


def _fmt_time(s) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def _progress(title: str = "cases built + checked + measured"):
    """A rich progress display of a run's cases and the ``on_event`` callback of run_suite feeding it
    (one bar per planned run, failures printed as they come; a line per case when not a terminal)."""
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
            state["task"] = progress.add_task(title, total=payload.planned, ok=0, failed=0)
            runs = ", ".join(f"{side} run {rid}" for side, rid in payload.side_runs.items())
            err.print(f"run {payload.run_id}: {payload.planned} cases" if not runs
                      else f"{runs}: {payload.planned} cases")
        elif kind == "result":
            task = state["task"]
            t = progress.tasks[task]
            sides = dict(dict(payload.extra).get("interleaved", ())) or {"": payload}
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
                                  f"{_fmt_time(r.timing.median if r.timing else None)}"
                                  for side, r in sides.items())
                progress.console.print(f"ok {escape(payload.case.key)} {times}", highlight=False)

    return progress, on_event


def cmd_run(args, argv) -> int:
    from .run import run_suite

    targets, overrides = _execution(args)
    progress, on_event = _progress()

    if args.fail_on:
        from .stats import parse_fail_on

        parse_fail_on(args.fail_on)  # a bad gate is a usage error before anything runs
    with progress:
        summary = run_suite(args.suite, args.db, args.executor, args.address, args.resume, args.compare_gpus,
                            targets, argv, on_event, overrides)
    _print_run_table(args.db, summary.run_id)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing to do"
    out.print(f"run {summary.run_id}: {counts}; nvcc calls {summary.nvcc_calls}; {summary.seconds:.1f} s "
              f"({summary.dispatch_s:.1f} s dispatching)")
    ph = summary.phases
    if ph:
        names = (("executor", "executor start"), ("plan", "planning"), ("first_result", "first result after"),
                 ("runners_ready", "GPU runners ready after"), ("runner_prepare", "runner warm-up"),
                 ("close", "executor close"))
        out.print("time: " + ", ".join(f"{label} {ph[k]:.1f} s" for k, label in names if k in ph))
    out.print(f"results: {Path(args.db).resolve()} (kbench show {summary.run_id} --db {args.db})")
    code = summary.exit_code
    judgement = None
    if args.baseline:
        from . import judge
        from .store import Store

        def rerun(keys):
            err.print(f"re-measuring {len(keys)} AMBIGUOUS case(s) once")
            again = run_suite(args.suite, args.db, args.executor, args.address, targets=targets, argv=argv,
                              measure_overrides=overrides, kind="remeasure", parent_run=summary.run_id,
                              only_keys=keys)
            return again.run_id

        with Store.open(args.db) as st:
            judgement = judge.judge(st, summary.run_id, args.baseline, fail_on=args.fail_on)
            if not args.no_remeasure:
                judgement = judge.remeasure_ambiguous(st, summary.run_id, judgement, rerun, args.baseline,
                                                      fail_on=args.fail_on)
        _print_verdicts(judgement)
        # a correctness failure (2) outranks a speed verdict (1 slower, 3 inconclusive)
        code = 2 if 2 in (summary.exit_code, judgement.exit_code) else judgement.exit_code
    if args.out:
        _write_outputs(args.db, summary.run_id, judgement, args.out)
    return code


def _num(x):
    """A stored number, or None for a missing value (None or NaN in the DataFrame)."""
    return None if x is None or x != x else x


def _print_run_table(db, run_id: int) -> None:
    from .store import load_results

    df = load_results(db, run_id=run_id)
    table = Table(title=f"run {run_id}")
    for col in ("case", "outcome", "median", "95% CI", "GB/s", "device"):
        table.add_column(col, justify="right" if col in ("median", "GB/s") else "left")
    for _, r in df.iterrows():
        lo, hi, med, gbps = (_num(r.get(k)) for k in ("ci_low_s", "ci_high_s", "median_s", "gbps"))
        ci = "-" if lo is None else f"{_fmt_time(lo)} .. {_fmt_time(hi)}"
        table.add_row(escape(str(r["case_key"])), str(r["outcome"]), _fmt_time(med), ci,
                      "-" if gbps is None else f"{gbps:.1f}", escape(str(r.get("device") or "")))
    out.print(table)


def _pct(x) -> str:
    return "-" if x is None or x != x else f"{(x - 1) * 100:+.1f}%"


_VERDICT_STYLE = {"SAME": "green", "FASTER": "cyan", "SLOWER": "red", "AMBIGUOUS": "yellow", "WRONG": "red",
                  "NEW": "blue", "MISSING": "magenta"}


def _print_verdicts(judgement) -> None:
    table = Table(title=f"verdicts vs {escape(judgement.baseline_label)}")
    for col in ("case", "verdict", "base", "new", "change", "95% CI of change", "q"):
        table.add_column(col, justify="left" if col in ("case", "verdict") else "right")
    for v in judgement.verdicts:
        ci = "-" if not v.ratio_ci else f"{_pct(v.ratio_ci[0])} .. {_pct(v.ratio_ci[1])}"
        style = _VERDICT_STYLE.get(v.verdict, "white")
        mark = " (re-measured)" if v.remeasured else ""
        table.add_row(escape(v.case_key), f"[{style}]{v.verdict}[/{style}]{mark}", _fmt_time(v.base_median_s),
                      _fmt_time(v.new_median_s), _pct(v.ratio), ci,
                      "-" if v.q_value is None else f"{v.q_value:.3g}")
    out.print(table)
    counts = ", ".join(f"{k} {n}" for k, n in sorted(judgement.counts().items()))
    out.print(f"verdicts vs {escape(judgement.baseline_label)}: {counts or 'nothing compared'}; "
              f"exit code {judgement.exit_code}")


def _write_outputs(db, run_id: int, judgement, out_dir: Path) -> None:
    """The HTML report and the CI outputs of run ``run_id`` into ``out_dir`` (see reports/)."""
    import reports
    from reports.data import collect

    from .store import Store

    with Store.open(db, create=False) as st:
        data = collect(st, run_id, verdicts=judgement.verdicts if judgement else (),
                       baseline_label=judgement.baseline_label if judgement else None)
    paths = reports.write_all(data, Path(out_dir))
    for kind, path in paths.items():
        out.print(f"{kind}: {path}")


def cmd_compare(args, argv) -> int:
    from . import judge
    from .store import Store

    with Store.open(args.db, create=False) as st:
        judgement = judge.judge(st, args.new, args.base, fail_on=args.fail_on)
        new_ids, _ = judge.parse_runs(st, args.new, "new run")
    _print_verdicts(judgement)
    if args.out:
        _write_outputs(args.db, new_ids[-1], judgement, args.out)
    return judgement.exit_code


def cmd_report(args, argv) -> int:
    from . import judge
    from .store import Store

    judgement = None
    with Store.open(args.db, create=False) as st:
        if st.get_run(args.run_id) is None:
            raise UsageError(f"no run {args.run_id} in {args.db}")
        if args.baseline:
            judgement = judge.judge(st, args.run_id, args.baseline)
    if judgement:
        _print_verdicts(judgement)
    _write_outputs(args.db, args.run_id, judgement, args.out)
    return 0


def cmd_baseline(args, argv) -> int:
    from .store import Store

    with Store.open(args.db, create=args.action == "set") as st:
        if args.action == "set":
            st.set_baseline(args.name, args.run_id, args.note)
            out.print(f"baseline {escape(args.name)} -> run {args.run_id}")
        elif args.action == "list":
            for b in st.list_baselines():
                out.print(f"{escape(b['name'])}: run {b['run_id']} (set {b['set_at']}) {escape(b['note'])}")
        elif args.action == "show":
            b = st.get_baseline(args.name)
            if b is None:
                raise UsageError(f"no baseline named {args.name!r} in {args.db}")
            run = st.get_run(b["run_id"])
            out.print(f"{escape(b['name'])}: run {b['run_id']} of suite {escape(run['suite_name'])}, "
                      f"commit {run['git_commit']}, started {run['started_at']}, {run['n_results']} results; "
                      f"set {b['set_at']} {escape(b['note'])}")
        elif not st.delete_baseline(args.name):
            raise UsageError(f"no baseline named {args.name!r} in {args.db}")
        else:
            out.print(f"deleted baseline {escape(args.name)}")
    return 0


def _execution(args) -> tuple:
    """(targets or None, MeasureConfig overrides) from the options of cli._execution_args."""
    targets = [t.strip() for t in args.targets.split(",")] if args.targets else None
    given = (("max_time_s", args.max_time), ("min_time_s", args.min_time), ("max_rel_ci", args.max_rel_ci))
    return targets, {k: v for k, v in given if v is not None}


def cmd_calibrate(args, argv) -> int:
    from .calibrate import calibrate

    targets, overrides = _execution(args)

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


def cmd_list(args, argv) -> int:
    from kernels import workloads

    if args.what == "workloads":
        for name in workloads.names():
            w = workloads.get(name)
            out.print(f"{name}: {w.description} (params {', '.join(w.params)}; "
                      f"variants {', '.join(w.variants)})")
    elif args.what == "variants":
        for name in workloads.names():
            for v in workloads.get(name).variants.values():
                knobs = ", ".join(f"{k}={d}" for k, d in v.knobs) or "-"
                out.print(f"{name}/{v.name}: targets {', '.join(v.targets)}; knobs {knobs}; {v.description}")
    elif args.what == "suites":
        from .suite import load_suite

        for path in sorted(Path(args.suites_dir).glob("*.toml")):
            s = load_suite(path)
            out.print(f"{path}: {s.name}, {len(s.cases)} cases")
    else:
        from .store import Store

        with Store.open(args.db) as st:
            for r in st.list_runs():
                out.print(" ".join(f"{k}={r[k]}"
                                   for k in ("id", "status", "suite_name", "started_at", "git_commit")
                                   if k in r.keys()))
    return 0


def cmd_show(args, argv) -> int:
    from .store import Store

    with Store.open(args.db) as st:
        if st.get_run(args.run_id) is None:
            err.print(f"[red]kbench show: no run {args.run_id} in {args.db}[/red]")
            return ExitCode.USAGE
    _print_run_table(args.db, args.run_id)
    return 0


def cmd_export(args, argv) -> int:
    from .store import export

    export(args.db, args.out, run_id=args.run_id)
    out.print(f"wrote {args.out}")
    return 0



def cmd_ab(args, argv) -> int:
    from .ab import ab

    targets, overrides = _execution(args)
    progress, on_event = _progress("cases built twice + checked + measured (base/head)")

    def events(kind, payload):
        if kind == "export":
            err.print(f"building {payload} case(s) with the base tree's kernels/ "
                      f"({escape(str(args.base_tree))})")
        elif kind == "run":
            err.print(escape(str(payload)))
        else:
            on_event(kind, payload)

    with progress:
        summary = ab(args.suite, args.base_tree, args.db, args.executor, args.address, targets=targets,
                     measure_overrides=overrides, argv=argv, fail_on=args.fail_on,
                     remeasure=not args.no_remeasure, on_event=events)
    _print_verdicts(summary.judgement)
    counts = "; ".join(f"{side} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                       for side, c in summary.counts.items())
    out.print(f"kbench ab: {summary.cases} cases; {counts}; base tree built with {summary.base_kernels} "
              f"({summary.export_s:.1f} s, {summary.export_errors} case(s) it could not build); "
              f"{summary.seconds:.1f} s")
    out.print(f"runs: base {summary.base_run}, head {summary.head_run} (kind ab) "
              f"in {Path(args.db).resolve()}")
    if args.out:
        _write_outputs(args.db, summary.head_run, summary.judgement, args.out)
    return summary.exit_code
