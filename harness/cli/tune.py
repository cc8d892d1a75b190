"""``kbench tune SUITE``: search the configurations of every tuned variant of a suite on this
cluster's devices (per GPU model), store every trial and the best configuration per device, which
``kbench run`` then uses for the variant (harness.tune)."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.errors import ExitCode

from .common import (
    db_arg,
    err,
    fmt_time,
    out,
    print_exit_code,
    print_run_summary,
    progress_display,
    store_label,
)

#: ``--tuner`` choices (harness.tune.session.TUNERS, repeated here so `kbench --help` loads no tuner)
TUNER_CHOICES = ("xgb", "random", "grid")
#: ``--clock`` choices (harness.tune.runner.CLOCKS, repeated for the same reason)
CLOCK_CHOICES = ("harness", "time_evaluator")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def _non_negative(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {text}")
    return v


def _positive(text: str) -> float:
    v = _non_negative(text)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return v


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("tune",
                            help="tune the variants a suite marks tuned; store the best configurations")
    p.add_argument("suite", help="suite file (TOML) with variants marked `tuned = true`")
    p.add_argument("--trials", type=_positive_int, default=64, metavar="N",
                   help="configurations to measure per tuned case and device (default 64; fewer when the "
                        "space has fewer left)")
    p.add_argument("--tuner", choices=TUNER_CHOICES, default="xgb",
                   help="xgb (cost model, default), random or grid (every configuration in order)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local (in-process, default) or ray (builds on CPU workers, runs on GPU workers)")
    p.add_argument("--address", help="join this Ray cluster (--executor ray)")
    p.add_argument("--gpu-model", default="", metavar="M",
                   help="tune on this GPU model of the cluster only (default: every model, one session each)")
    p.add_argument("--targets", help="comma-separated subset of targets (c,opencl,cuda)")
    p.add_argument("--clock", choices=CLOCK_CHOICES, default="harness",
                   help="harness (default): time each candidate as `kbench run` times a case (its timer, "
                        "cache flush, warm-up and stopping rule, capped by --max-time; the cost is the "
                        "median); time_evaluator: means of back-to-back launches, caches warm (autotvm's)")
    p.add_argument("--max-time", type=_positive, default=1.0, metavar="S",
                   help="harness clock: seconds of measuring per candidate at most (default 1; the suite's "
                        "[measure] max_time_s when smaller)")
    p.add_argument("--number", type=_positive_int, default=4,
                   help="time_evaluator clock: launches per repeat (default 4)")
    p.add_argument("--repeat", type=_positive_int, default=3,
                   help="time_evaluator clock: costs per candidate (default 3)")
    p.add_argument("--min-repeat-ms", type=_non_negative, default=None, metavar="MS",
                   help="time_evaluator clock: raise --number until a repeat takes this long (default 100 "
                        "for cuda, 0 otherwise)")
    p.add_argument("--timeout", type=_non_negative, default=None, metavar="S",
                   help="seconds per candidate to build and to run (default: the case's timeout)")
    p.add_argument("--seed", type=int, default=None, help="seed of the random and xgb tuners")
    p.add_argument("--then-run", action="store_true",
                   help="then run the suite (as `kbench run` with the same --executor, --address and "
                        "--targets; tuned variants at their best configurations) on the same executor: "
                        "one cluster start for both; the exit code is the run's")
    db_arg(p)
    p.set_defaults(handler=main)


def _varied(knobs: dict, summary, case) -> str:
    """The knobs of a configuration that the case's space varies (the others are fixed), as text."""
    space = dict(summary.suite.space_for(case))
    return ", ".join(f"{k}={v}" for k, v in knobs.items() if len(space.get(k, ())) > 1) or "-"


def _progress():
    """A progress display of the sessions and the ``on_event`` feeding it."""
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("ok {task.fields[ok]}  failed {task.fields[failed]}  "
                                   "best {task.fields[best]}"),
                        TimeElapsedColumn(), console=err, transient=False, disable=not err.is_terminal)
    tasks: dict[int, int] = {}
    state: dict[str, object] = {}

    def on_event(kind: str, payload: object) -> None:
        if kind == "planned":
            state["summary"] = payload
            if payload.skipped_targets:
                skipped = ", ".join(payload.skipped_targets)
                err.print(f"[yellow]not available here, skipped: {skipped}[/yellow]")
            err.print(f"tuning {len(payload.sessions)} case(s) x device(s)", soft_wrap=True)
        elif kind == "session":
            s = payload
            label = f"{s.case.tuning_key} on {s.device}"
            if s.session_id is None:
                err.print(f"{escape(label)}: nothing left to measure ({escape(s.note)})", highlight=False,
                          soft_wrap=True)
                return
            hist = f" ({s.history} earlier trials)" if s.history else ""
            err.print(f"session {s.session_id}: {escape(label)}{hist}", highlight=False, soft_wrap=True)
            tasks[id(s)] = progress.add_task(escape(s.case.workload + "/" + s.case.variant), total=s.planned,
                                             ok=0, failed=0, best="-")
        elif kind == "trials":
            s, rows = payload
            task = tasks[id(s)]
            ok = sum(r["ok"] for r in rows)
            t = progress.tasks[task]
            progress.update(task, advance=len(rows), ok=t.fields["ok"] + ok,
                            failed=t.fields["failed"] + len(rows) - ok, best=fmt_time(s.session_best_s))
            for r in rows:
                knobs = escape(_varied(r["knobs"], state["summary"], s.case))
                if not r["ok"]:
                    first = r["error"].splitlines()[0] if r["error"] else ""
                    progress.console.print(f"[red]trial {r['trial']} failed[/red] {knobs}: {escape(first)}",
                                           highlight=False, soft_wrap=True)
                elif not err.is_terminal:
                    progress.console.print(f"trial {r['trial']} {fmt_time(r['cost_s'])} {knobs}",
                                           highlight=False, soft_wrap=True)

    return progress, on_event


def print_summary(summary) -> None:
    """The sessions as a table: case, device, trials, failures, this session's best, the stored best."""
    table = Table(title=f"kbench tune {summary.suite.name}")
    # here, not at the top: harness.stats loads numpy and scipy, which `kbench --help` does without
    from harness.stats.peaks import ops_unit, rate_text

    for col in ("case", "device", "session", "trials", "failed", "session best", "stored best", "rate",
                "best configuration (tuned knobs)"):
        table.add_column(col, justify="right" if col in ("trials", "failed", "session best", "stored best",
                                                         "rate") else "left")
    for s in summary.sessions:
        failed = sum(n for k, n in s.counts.items() if k != "ok")
        best = s.best or {}
        gflops = best.get("gflops")
        knobs = _varied(best.get("knobs") or {}, summary, s.case)
        table.add_row(escape(s.case.tuning_key), escape(s.device),
                      "-" if s.session_id is None else str(s.session_id), str(s.measured), str(failed),
                      fmt_time(s.session_best_s), fmt_time(best.get("cost_s")),
                      rate_text(gflops, ops_unit(s.case.dtype)) or "-", escape(knobs))
    out.print(table)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    # the pipeline (compiler, tuners, xgboost, Ray) loads when the command runs: `kbench --help` stays quick
    from harness.suite import load_suite
    from harness.tune.runner import RunnerSettings
    from harness.tune.session import TuneRequest

    targets = tuple(t.strip() for t in args.targets.split(",")) if args.targets else None
    suite = load_suite(args.suite)  # a malformed suite is reported before anything starts
    settings = RunnerSettings(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                              timeout_s=args.timeout or None, seed=int(suite.measure.seed), clock=args.clock,
                              max_time_s=args.max_time,
                              min_time_s=min(RunnerSettings.min_time_s, args.max_time))
    request = TuneRequest(args.suite, args.db, tuner=args.tuner, n_trial=args.trials,
                          executor_kind=args.executor, address=args.address, gpu_model=args.gpu_model,
                          targets=targets, settings=settings, seed=args.seed, argv=tuple(argv))
    if not args.then_run:
        _tune(request, None)
        return int(ExitCode.OK)
    # the run's pipeline (executor, Ray) loads only when --then-run asks for it
    from harness.errors import compose_exit_code
    from harness.execute import executor_for
    from harness.run import RunRequest, run_suite

    executor = executor_for(suite, args.executor, args.address)
    try:
        _tune(request, executor)
        run_request = RunRequest(args.suite, args.db, args.executor, args.address, targets=targets,
                                 argv=tuple(argv))
        progress, on_event = progress_display()
        with progress:
            summary = run_suite(run_request, on_event=on_event, executor=executor)
    finally:
        executor.close()
    print_run_summary(args.db, summary)
    code = compose_exit_code(outcomes=summary.stored.elements(), verdicts=(), incomplete=False, gated=False,
                             fail_ambiguous=False)
    print_exit_code(code)
    return int(code)


def _tune(request, executor):
    """Tune, showing progress, then print the sessions' table and the totals."""
    # the tuning pipeline (compiler, tuners, xgboost) loads when the command runs
    from harness.tune.session import tune_suite

    progress, on_event = _progress()
    with progress:
        summary = tune_suite(request, on_event=on_event, executor=executor)
    print_summary(summary)
    measured = sum(s.measured for s in summary.sessions)
    out.print(f"tuned {len(summary.sessions)} case(s) x device(s): {measured} trials in "
              f"{summary.seconds:.1f} s on the {request.settings.clock} clock; "
              f"results: {store_label(request.db)}")
    return summary
