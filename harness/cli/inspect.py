"""Looking at what kbench knows: ``kbench list`` (workloads, variants, suites or runs), ``kbench show
RUN`` (one run's results) and ``kbench export FILE`` (results to CSV or Parquet)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from harness.errors import UsageError
from harness.store import Store, export

from .common import db_arg, out, print_run_table


def register(commands: argparse._SubParsersAction) -> None:
    lst = commands.add_parser("list", help="list workloads, variants, suites or runs")
    lst.add_argument("what", choices=["workloads", "variants", "suites", "runs"])
    lst.add_argument("--suites-dir", type=Path, default=Path("suites"))
    db_arg(lst)
    lst.set_defaults(handler=list_things)

    show = commands.add_parser("show", help="show one run's results")
    show.add_argument("run_id", type=int)
    db_arg(show)
    show.set_defaults(handler=show_run)

    exp = commands.add_parser("export", help="export results to CSV or Parquet")
    exp.add_argument("out", type=Path, help="output file (.csv or .parquet)")
    exp.add_argument("--run", type=int, dest="run_id", help="only this run (default: all)")
    db_arg(exp)
    exp.set_defaults(handler=export_results)


def list_things(args: argparse.Namespace, argv: list[str]) -> int:
    if args.what in ("workloads", "variants"):
        # the compiler (a second to import) loads only for the commands that list its workloads
        from kernels import workloads

        for name in workloads.names():
            w = workloads.get(name)
            if args.what == "workloads":
                out.print(f"{name}: {w.description} (params {', '.join(w.params)}; "
                          f"variants {', '.join(w.variants)})")
                continue
            for v in w.variants.values():
                knobs = ", ".join(f"{k}={d}" for k, d in v.knobs) or "-"
                out.print(f"{name}/{v.name}: targets {', '.join(v.targets)}; knobs {knobs}; {v.description}")
    elif args.what == "suites":
        # suites load the measuring side (numpy, the stopping rule) only when one is read
        from harness.suite import load_suite

        for path in sorted(Path(args.suites_dir).glob("*.toml")):
            s = load_suite(path)
            out.print(f"{path}: {s.name}, {len(s.cases)} cases")
    else:
        with Store.open(args.db, readonly=True) as st:
            for r in st.list_runs():
                out.print(" ".join(f"{k}={r[k]}"
                                   for k in ("id", "status", "suite_name", "started_at", "git_commit",
                                             "kbench_commit", "suite_commit")
                                   if k in r.keys()), highlight=False, soft_wrap=True)
    return 0


def show_run(args: argparse.Namespace, argv: list[str]) -> int:
    with Store.open(args.db, readonly=True) as st:
        run = st.get_run(args.run_id)
        if run is None:
            raise UsageError(f"no run {args.run_id} in {args.db}")
    print_run_table(args.db, args.run_id)
    out.print(run_header(run), highlight=False, soft_wrap=True)
    return 0


def run_header(run: dict) -> str:
    """One line on where a run's code came from: its suite, the commit of the suite's repository and
    the commit of kbench itself (schema version 8; "unknown" for runs stored before, or outside a
    git checkout)."""
    suite = f"{run['suite_name']}" + (f" ({run['suite_path']})" if run.get("suite_path") else "")
    return (f"run {run['id']} ({run['status']}): suite {escape(suite)} at commit "
            f"{run.get('suite_commit') or 'unknown'}; kbench {run.get('kbench_version')} at commit "
            f"{run.get('kbench_commit') or 'unknown'}")


def export_results(args: argparse.Namespace, argv: list[str]) -> int:
    export(args.db, args.out, run_id=args.run_id)
    out.print(f"wrote {args.out}")
    return 0
