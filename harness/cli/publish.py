"""``kbench publish --out SITE``: the whole result store as a static site (index of suites, GPU
generations and latest verdicts; per-case trends; per-workload variants x generations matrices; each
run's report), opened from disk with no server (:mod:`reports.site`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from harness.errors import UsageError
from harness.store import Store

from .common import db_arg, default_out, out


def register(commands: argparse._SubParsersAction) -> None:
    pub = commands.add_parser("publish", help="write a static site of every run in the store")
    pub.add_argument("--out", type=Path, metavar="DIR", default=default_out() / "site",
                     help="the site's folder (default %(default)s); open DIR/index.html in a browser")
    pub.add_argument("--no-reports", action="store_true",
                     help="do not write the runs' HTML reports into DIR/runs")
    pub.add_argument("--no-verdicts", action="store_true",
                     help="do not judge runs against their history (the latest run of each suite on "
                          "each GPU generation, and the runs whose reports are written)")
    db_arg(pub)
    pub.set_defaults(handler=publish)


def publish(args: argparse.Namespace, argv: list[str]) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    # the reports load matplotlib and jinja2 (about a second), which only this command needs
    from reports.site import publish as write_site

    with Store.open(args.db, readonly=True) as st:
        summary = write_site(st, args.out, reports=not args.no_reports, judge=not args.no_verdicts,
                             on_progress=lambda text: out.print(escape(text), highlight=False))
    for note in summary.notes:
        out.print(f"[yellow]{escape(note)}[/yellow]")
    counts = ", ".join(_n(n, what) for n, what in ((summary.runs, "run"), (summary.workloads, "workload"),
                                                   (summary.cases, "case")))
    out.print(f"site: {escape(str(summary.index))} ({counts}; {_n(len(summary.reports_written), 'report')} "
              f"and {_n(summary.case_pages_written, 'case page')} written; {summary.seconds:.1f} s)",
              highlight=False)
    return 0


def _n(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"
