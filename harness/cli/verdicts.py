"""Verdicts of stored runs: ``kbench compare BASE NEW`` (judge one run, or pooled runs, against
another), ``kbench report RUN`` (a run's HTML report and CI outputs) and ``kbench baseline`` (named
baselines: set, list, show, delete)."""

from __future__ import annotations

import argparse

from rich.markup import escape

from harness.errors import ExitCode, UsageError
from harness.store import Store

from .common import (
    Parser,
    db_arg,
    default_out,
    fail_on_arg,
    out,
    out_dir,
    print_exit_code,
    print_verdicts,
    write_outputs,
)


def register(commands: argparse._SubParsersAction) -> None:
    cmp_ = commands.add_parser("compare", help="judge one run (or pooled runs) against another")
    cmp_.add_argument("base", help="baseline: RUN, R1,R2,.. (samples pooled) or a baseline name")
    cmp_.add_argument("new", help="new: RUN or R1,R2,.. (samples pooled)")
    fail_on_arg(cmp_)
    cmp_.add_argument("--out", type=out_dir, metavar="DIR", help="write the report and CI outputs of NEW here")
    db_arg(cmp_)
    cmp_.set_defaults(handler=compare)

    rep = commands.add_parser("report", help="write a run's HTML report and CI outputs")
    rep.add_argument("run_id", type=int)
    rep.add_argument("--baseline", metavar="SPEC", help="RUN, R1,R2,.., a baseline name or 'auto'")
    rep.add_argument("--out", type=out_dir, metavar="DIR", help="output folder (default %(default)s)",
                     default=str(default_out()))
    db_arg(rep)
    rep.set_defaults(handler=report)

    bl = commands.add_parser("baseline", help="named baselines: set, list, show, delete")
    bl_sub = bl.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser, required=True)
    bl_set = bl_sub.add_parser("set", help="point NAME at RUN")
    bl_set.add_argument("name")
    bl_set.add_argument("run_id", type=int)
    bl_set.add_argument("--note", default="")
    db_arg(bl_set)
    db_arg(bl_sub.add_parser("list", help="list named baselines"))
    for action in ("show", "delete"):
        b = bl_sub.add_parser(action, help=f"{action} baseline NAME")
        b.add_argument("name")
        db_arg(b)
    bl.set_defaults(handler=baseline)


def compare(args: argparse.Namespace, argv: list[str]) -> int:
    # the statistics load when a command judges: `kbench --help` stays quick
    from harness import judge

    with Store.open(args.db, readonly=True) as st:
        judgement = judge.judge(st, args.new, args.base, fail_on=args.fail_on)
    print_verdicts(judgement)
    if args.out:
        write_outputs(args.db, judgement.new_runs[-1], judgement, args.out)
    print_exit_code(judgement.exit_code)
    return int(judgement.exit_code)


def report(args: argparse.Namespace, argv: list[str]) -> int:
    # the statistics load when a command judges: `kbench --help` stays quick
    from harness import judge

    judgement = None
    with Store.open(args.db, readonly=True) as st:
        if st.get_run(args.run_id) is None:
            raise UsageError(f"no run {args.run_id} in {args.db}")
        if args.baseline:
            judgement = judge.judge(st, args.run_id, args.baseline)
    if judgement:
        print_verdicts(judgement)
    write_outputs(args.db, args.run_id, judgement, args.out)
    if judgement is not None:
        out.print(f"(a report is not a gate: `kbench compare {escape(args.baseline)} {args.run_id}` exits "
                  f"with the verdicts, {int(judgement.exit_code)} here)", highlight=False, soft_wrap=True)
    # a report writes what it found and exits 0; the gate is `kbench compare` / `kbench run --baseline`
    print_exit_code(ExitCode.OK)
    return int(ExitCode.OK)


def baseline(args: argparse.Namespace, argv: list[str]) -> int:
    # only "set" and "delete" write; "set" creates a missing store
    with Store.open(args.db, create=args.action == "set", readonly=args.action in ("list", "show")) as st:
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
