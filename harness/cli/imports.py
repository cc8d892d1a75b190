"""``kbench import SRC [SRC ...] [--db DST]``: copy the runs of machine stores into one store.

Each source (a SQLite file, or a postgresql:// URL) is opened read-only, and must be a kbench store
(anything else is refused before the destination is opened or created); its runs, with
their environments, cases, results and raw samples, are copied into ``--db`` (created when it is a
missing file) in id order, one transaction per run. A run the destination already holds (same UUID)
is skipped and said so (harness.store.importing)."""

from __future__ import annotations

import argparse

from rich.markup import escape

from harness.errors import UsageError
from harness.store import Store, import_store
from harness.store.backend import is_url, redact

from .common import db_arg, out, store_label, store_location


def register(commands: argparse._SubParsersAction) -> None:
    imp = commands.add_parser(
        "import", help="copy the runs of other stores (e.g. machines' SQLite files) into --db",
        description="Copy runs, with their environments, cases, results and samples, from each SRC "
                    "into --db. A run already stored there (same run UUID) is skipped.")
    imp.add_argument("sources", nargs="+", type=store_location, metavar="SRC",
                     help="a store to copy from: a SQLite file or postgresql://user@host:port/db")
    db_arg(imp)
    imp.set_defaults(handler=import_runs)


def _same(a: object, b: object) -> bool:
    if is_url(a) or is_url(b):
        return str(a) == str(b)
    return store_label(a) == store_label(b)  # type: ignore[arg-type]


def import_runs(args: argparse.Namespace, argv: list[str]) -> int:
    for src in args.sources:
        if _same(src, args.db):
            raise UsageError(f"import: source {redact(str(src)) if is_url(src) else src} is the destination"
                             " store itself (--db)")
    for src in args.sources:  # every source is a kbench store, before the destination is opened
        Store.open(src, readonly=True).close()
    copied = skipped = results = 0
    with Store.open(args.db) as dest:
        for src in args.sources:
            label = redact(src) if is_url(src) else str(src)
            with Store.open(src, readonly=True) as source:
                done = import_store(dest, source)
            for run in done:
                if run.skipped:
                    skipped += 1
                    out.print(f"skipped run {run.uuid}: already stored (run {run.dest_id})", highlight=False)
                else:
                    copied += 1
                    results += run.n_results
                    out.print(f"imported run {run.uuid} ({escape(label)} run {run.source_id}) as run "
                              f"{run.dest_id}: {run.n_results} results, {run.n_samples} samples",
                              highlight=False)
    out.print(f"kbench import: {copied} run(s) copied ({results} results), {skipped} already stored, "
              f"into {escape(store_label(args.db))}", highlight=False)
    return 0
