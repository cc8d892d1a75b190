"""The ``kbench`` command line: parses arguments and dispatches to one module per subcommand.

Exit codes (DESIGN.md 7): 0 ok, 1 speed regression, 2 correctness failure (wrong, crashed, timeout,
build error), 3 inconclusive, 4 usage or configuration error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from harness import __version__

EXIT_USAGE = 4


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit with ``EXIT_USAGE`` instead of argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _db_arg(p: argparse.ArgumentParser) -> None:
    from .config import settings

    p.add_argument("--db", type=Path, default=settings().db, help="result store (SQLite file; default %(default)s)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kbench", description="GPU-kernel benchmark and regression harness.")
    parser.add_argument("--version", action="version", version=f"kbench {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.add_parser("version", help="print the installed kbench version")

    run = commands.add_parser("run", help="build, check and time every case of a suite")
    run.add_argument("suite", help="suite file (TOML), e.g. suites/tutorials.toml")
    _db_arg(run)
    run.add_argument("--executor", choices=["ray", "local"], default="ray",
                     help="ray (default: an embedded local Ray, or --address) or local (in-process)")
    run.add_argument("--address", help="join this Ray cluster instead of starting one")
    run.add_argument("--resume", type=int, metavar="RUN_ID", help="run only what RUN_ID still lacks")
    run.add_argument("--compare-gpus", action="store_true",
                     help="run each CUDA case on every GPU model in the cluster")
    run.add_argument("--targets", help="comma-separated subset of targets (c,opencl,cuda)")
    run.add_argument("--max-time", type=float, metavar="S", help="cap on measuring time per case (seconds)")
    run.add_argument("--min-time", type=float, metavar="S", help="least measuring time per case (seconds)")

    lst = commands.add_parser("list", help="list workloads, variants, suites or runs")
    lst.add_argument("what", choices=["workloads", "variants", "suites", "runs"])
    lst.add_argument("--suites-dir", type=Path, default=Path("suites"))
    _db_arg(lst)

    show = commands.add_parser("show", help="show one run's results")
    show.add_argument("run_id", type=int)
    _db_arg(show)

    exp = commands.add_parser("export", help="export results to CSV or Parquet")
    exp.add_argument("out", type=Path, help="output file (.csv or .parquet)")
    exp.add_argument("--run", type=int, dest="run_id", help="only this run (default: all)")
    _db_arg(exp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kbench`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command == "version":
        print(__version__)
        return 0
    from . import commands

    return commands.dispatch(args, argv)


if __name__ == "__main__":
    sys.exit(main())
