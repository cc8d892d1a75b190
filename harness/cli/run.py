"""``kbench run SUITE``: build, check and time every case of a suite, store each result, and with
``--baseline`` judge the run (AMBIGUOUS cases re-measured once) and exit with the verdict."""

from __future__ import annotations

import argparse

from harness.errors import compose_exit_code

from .common import (
    db_arg,
    err,
    execution,
    execution_args,
    print_exit_code,
    print_run_summary,
    print_verdicts,
    progress_display,
    verdict_args,
    write_outputs,
)


def register(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="build, check and time every case of a suite")
    run.add_argument("suite", help="suite file (TOML), e.g. suites/tutorials.toml")
    db_arg(run)
    execution_args(run)
    run.add_argument("--resume", type=int, metavar="RUN_ID",
                     help="run only what RUN_ID still lacks (the same suite file, one process at a time)")
    run.add_argument("--retry-failed", action="store_true",
                     help="with --resume: also run again the cases recorded crashed or timeout")
    run.add_argument("--compare-gpus", action="store_true",
                     help="run each CUDA case on every GPU model in the cluster")
    verdict_args(run, baseline_help="judge the run against RUN, runs R1,R2,.. (pooled), a named baseline, "
                 "or 'auto' (each case's most recent result on the same device)")
    run.add_argument("--no-remeasure", action="store_true",
                     help="do not re-measure AMBIGUOUS cases once (the default does)")
    run.set_defaults(handler=main)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    # the pipeline (compiler, Ray, statistics) loads when the command runs: `kbench --help` stays quick
    from harness import judge
    from harness.errors import UsageError
    from harness.run import RunRequest, rerun_keys, run_suite

    if args.retry_failed and args.resume is None:
        raise UsageError("--retry-failed needs --resume RUN_ID (it runs a stored run's crashed and "
                         "timed-out cases again)")
    targets, overrides = execution(args)
    request = RunRequest(args.suite, args.db, args.executor, args.address, targets=targets, argv=tuple(argv),
                         measure=overrides, compare_gpus=args.compare_gpus)
    progress, on_event = progress_display()
    with progress:
        summary = run_suite(request, on_event=on_event, resume=args.resume, retry_failed=args.retry_failed)
    print_run_summary(args.db, summary, retry_failed=args.retry_failed)
    judgement = None
    if args.baseline:
        judgement = judge.judge_runs(args.db, [summary.run_id], args.baseline, fail_on=args.fail_on)
        if not args.no_remeasure:
            def announce(kind: str, payload: object) -> None:
                if kind == "planned":
                    err.print(f"re-measuring {payload.planned} AMBIGUOUS case(s) once")

            again = rerun_keys(request, parent_run=summary.run_id, on_event=announce)
            judgement = judge.remeasure_ambiguous(args.db, judgement, again)
        print_verdicts(judgement)
    # a correctness failure (2) outranks a speed verdict (1 slower, 3 inconclusive)
    code = compose_exit_code(
        outcomes=summary.stored.elements(), verdicts=judgement.verdicts if judgement else (),
        incomplete=bool(judgement and judgement.incomplete), gated=args.fail_on is not None,
        fail_ambiguous=bool(args.fail_on and args.fail_on.fail_ambiguous))
    if args.out:
        write_outputs(args.db, summary.run_id, judgement, args.out)
    print_exit_code(code)
    return int(code)
