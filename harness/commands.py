"""Presentation of the ``kbench`` subcommands (progress bars, tables); logic lives in run.py,
store.py and suite.py."""

from __future__ import annotations

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

from .run import EXIT_USAGE

err = Console(stderr=True)
# a wide console when piped (CI logs), so case keys are not folded
out = Console(width=None if Console().is_terminal else 200)


def dispatch(args, argv: List[str]) -> int:
    from .dispatch import DispatchError
    from .store import StoreError
    from .suite import SuiteError

    try:
        return {"run": cmd_run, "list": cmd_list, "show": cmd_show, "export": cmd_export}[args.command](args, argv)
    except SuiteError as exc:
        err.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
        return EXIT_USAGE
    except (FileNotFoundError, ValueError, StoreError, DispatchError) as exc:
        err.print(f"[red]kbench {args.command}: {escape(str(exc))}[/red]", highlight=False)
        return EXIT_USAGE


def _fmt_time(s) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def cmd_run(args, argv) -> int:
    from .run import run_suite

    targets = [t.strip() for t in args.targets.split(",")] if args.targets else None
    overrides = {k: v for k, v in (("max_time_s", args.max_time), ("min_time_s", args.min_time)) if v}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("ok {task.fields[ok]}  failed {task.fields[failed]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err,
                        transient=False, disable=not err.is_terminal)
    state = {}

    def on_event(kind, payload):
        if kind == "planned":
            if payload.skipped_targets:
                err.print(f"[yellow]not available here, skipped: {', '.join(payload.skipped_targets)}[/yellow]")
            state["task"] = progress.add_task("cases built + checked + measured", total=payload.planned,
                                              ok=0, failed=0)
            err.print(f"run {payload.run_id}: {payload.planned} cases")
        elif kind == "result":
            task = state["task"]
            t = progress.tasks[task]
            ok = t.fields["ok"] + (payload.outcome == "ok")
            failed = t.fields["failed"] + (payload.outcome != "ok")
            progress.update(task, advance=1, ok=ok, failed=failed)
            if payload.outcome != "ok":
                first = payload.message.splitlines()[0] if payload.message else ""
                progress.console.print(f"[red]{payload.outcome}[/red] {escape(payload.case.key)}: {escape(first)}",
                                       highlight=False)
            elif not err.is_terminal:
                med = payload.timing.median if payload.timing else None
                progress.console.print(f"ok {escape(payload.case.key)} {_fmt_time(med)}", highlight=False)

    with progress:
        summary = run_suite(args.suite, args.db, args.executor, args.address, args.resume, args.compare_gpus,
                            targets, argv, on_event, overrides)
    _print_run_table(args.db, summary.run_id)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing to do"
    out.print(f"run {summary.run_id}: {counts}; nvcc calls {summary.nvcc_calls}; {summary.seconds:.1f} s "
              f"({summary.dispatch_s:.1f} s dispatching)")
    out.print(f"results: {Path(args.db).resolve()} (kbench show {summary.run_id} --db {args.db})")
    return summary.exit_code


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


def cmd_list(args, argv) -> int:
    from kernels import workloads

    if args.what == "workloads":
        for name in workloads.names():
            w = workloads.get(name)
            out.print(f"{name}: {w.description} (params {', '.join(w.params)}; variants {', '.join(w.variants)})")
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
                out.print(" ".join(f"{k}={r[k]}" for k in ("id", "status", "suite_name", "started_at", "git_commit")
                                   if k in r.keys()))
    return 0


def cmd_show(args, argv) -> int:
    from .store import Store

    with Store.open(args.db) as st:
        if st.get_run(args.run_id) is None:
            err.print(f"[red]kbench show: no run {args.run_id} in {args.db}[/red]")
            return EXIT_USAGE
    _print_run_table(args.db, args.run_id)
    return 0


def cmd_export(args, argv) -> int:
    from .store import export

    export(args.db, args.out, run_id=args.run_id)
    out.print(f"wrote {args.out}")
    return 0

