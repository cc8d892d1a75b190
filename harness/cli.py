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
from harness.errors import ExitCode, KbenchError

EXIT_USAGE = int(ExitCode.USAGE)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit with ``EXIT_USAGE`` instead of argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _db_arg(p: argparse.ArgumentParser) -> None:
    from .config import settings

    p.add_argument("--db", type=Path, default=settings().db,
                   help="result store (SQLite file; default %(default)s)")


def _default_out() -> Path:
    from .config import settings

    return settings().out_dir


def _verdict_args(p: argparse.ArgumentParser, baseline_help: str) -> None:
    p.add_argument("--baseline", metavar="SPEC", help=baseline_help)
    p.add_argument("--fail-on", metavar="SPEC",
                   help='gate, e.g. "median:3%%": SLOWER beyond 3 %% fails (exit 1); add ",ambiguous" '
                        "to fail on "
                        "inconclusive cases (exit 3), which the gate otherwise passes; default: the suite "
                        "threshold, and inconclusive exits 3")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="write the HTML report and CI outputs (Markdown, JUnit, JSON, CSV) here")


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1), got {text}")
    return v


def _execution_args(p: argparse.ArgumentParser) -> None:
    """Where and how a suite's cases run: shared by ``run`` and ``calibrate``."""
    p.add_argument("--executor", choices=["ray", "local"], default="ray",
                   help="ray (default: an embedded local Ray, or --address) or local (in-process)")
    p.add_argument("--address", help="join this Ray cluster instead of starting one")
    p.add_argument("--targets", help="comma-separated subset of targets (c,opencl,cuda)")
    p.add_argument("--max-time", type=float, metavar="S", help="cap on measuring time per case (seconds)")
    p.add_argument("--min-time", type=float, metavar="S", help="least measuring time per case (seconds)")
    p.add_argument("--max-rel-ci", type=_fraction, metavar="F",
                   help="stop a case once the 95 %% CI half-width of its median is at most F of it "
                        "(e.g. 0.005)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kbench", description="GPU-kernel benchmark and regression harness.")
    parser.add_argument("--version", action="version", version=f"kbench {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.add_parser("version", help="print the installed kbench version")

    run = commands.add_parser("run", help="build, check and time every case of a suite")
    run.add_argument("suite", help="suite file (TOML), e.g. suites/tutorials.toml")
    _db_arg(run)
    _execution_args(run)
    run.add_argument("--resume", type=int, metavar="RUN_ID", help="run only what RUN_ID still lacks")
    run.add_argument("--compare-gpus", action="store_true",
                     help="run each CUDA case on every GPU model in the cluster")
    _verdict_args(run, baseline_help="judge the run against RUN, runs R1,R2,.. (pooled), a named baseline, "
                  "or 'auto' (each case's most recent result on the same device)")
    run.add_argument("--no-remeasure", action="store_true",
                     help="do not re-measure AMBIGUOUS cases once (the default does)")

    cmp_ = commands.add_parser("compare", help="judge one run (or pooled runs) against another")
    cmp_.add_argument("base", help="baseline: RUN, R1,R2,.. (samples pooled) or a baseline name")
    cmp_.add_argument("new", help="new: RUN or R1,R2,.. (samples pooled)")
    cmp_.add_argument("--fail-on", metavar="SPEC", help='gate, e.g. "median:3%%" or "median:3%%,ambiguous" '
                      "(see kbench run --help)")
    cmp_.add_argument("--out", type=Path, metavar="DIR", help="write the report and CI outputs of NEW here")
    _db_arg(cmp_)

    rep = commands.add_parser("report", help="write a run's HTML report and CI outputs")
    rep.add_argument("run_id", type=int)
    rep.add_argument("--baseline", metavar="SPEC", help="RUN, R1,R2,.., a baseline name or 'auto'")
    rep.add_argument("--out", type=Path, metavar="DIR", help="output folder (default %(default)s)",
                     default=_default_out())
    _db_arg(rep)

    bl = commands.add_parser("baseline", help="named baselines: set, list, show, delete")
    bl_sub = bl.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    bl_set = bl_sub.add_parser("set", help="point NAME at RUN")
    bl_set.add_argument("name")
    bl_set.add_argument("run_id", type=int)
    bl_set.add_argument("--note", default="")
    _db_arg(bl_set)
    _db_arg(bl_sub.add_parser("list", help="list named baselines"))
    for action in ("show", "delete"):
        b = bl_sub.add_parser(action, help=f"{action} baseline NAME")
        b.add_argument("name")
        _db_arg(b)

    cal = commands.add_parser("calibrate",
                              help="A/A false-positive rate and injected-slowdown detection rate")
    cal.add_argument("suite")
    cal.add_argument("--trials", type=int, default=3, help="trials of A, A, A-slowed (default %(default)s)")
    cal.add_argument("--interleave", choices=["samples", "runs"], default="samples",
                     help="samples (default): the three sides of a case timed in one loop, sample by "
                          "sample; runs: whole runs of the suite per side in rotated rounds (as ci/pr.sh)")
    cal.add_argument("--rounds", type=int, default=3,
                     help="--interleave runs: rounds per side and trial (default %(default)s)")
    cal.add_argument("--slowdown", type=float, default=0.05,
                     help="injected slowdown (default %(default)s = 5 %%)")
    _execution_args(cal)
    cal.add_argument("--out", type=Path, metavar="DIR", default=_default_out(),
                     help="write calibration.json here (default %(default)s)")
    _db_arg(cal)

    abp = commands.add_parser("ab", help="this checkout against another source tree, timed in one loop")
    abp.add_argument("suite", help="suite file (TOML) of this checkout")
    abp.add_argument("--base-tree", required=True, metavar="DIR",
                     help="root of the other checkout (e.g. a git worktree of main); its kernels/ builds "
                          "the base side")
    _execution_args(abp)
    abp.add_argument("--fail-on", metavar="SPEC", help='gate, as for kbench run (e.g. "median:3%%")')
    abp.add_argument("--out", type=Path, metavar="DIR",
                     help="write the HTML report and CI outputs (Markdown, JUnit, JSON, CSV) here")
    abp.add_argument("--no-remeasure", action="store_true",
                     help="do not time AMBIGUOUS cases a second time")
    _db_arg(abp)

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
    try:
        parser = _build_parser()  # reads the settings (KBENCH_DB, ...) for the defaults it shows
    except KbenchError as exc:
        print(f"kbench: {exc}", file=sys.stderr)
        return int(exc.exit_code)
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
