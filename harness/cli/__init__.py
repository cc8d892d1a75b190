"""The ``kbench`` command line: one module per subcommand, each holding its arguments, its printing and
its flow (docs/ARCHITECTURE.md, "The command line").

A subcommand module has ``register(commands)``, which adds its parser(s) to the ``add_subparsers``
object ``commands`` with ``set_defaults(handler=FUNCTION)``; the handler takes the parsed arguments
and the command line and returns the exit code (:class:`harness.errors.ExitCode`). A new subcommand
is a new module of this package plus its name in :data:`SUBCOMMANDS`.

Exit codes: 0 ok, 1 speed regression, 2 correctness failure (wrong, crashed, timeout, build error),
3 inconclusive (or an incomplete run judged), 4 usage or configuration error (a
:class:`harness.errors.KbenchError`), 70 an internal error of kbench (anything else; its traceback is
printed), 130 / 143 / 129 interrupted by SIGINT / SIGTERM / SIGHUP (one line, no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence

from rich.markup import escape

from harness import __version__
from harness.errors import ExitCode, Interrupted, KbenchError

from .common import Parser, err, given_options

#: the subcommand modules of this package, in the order ``kbench --help`` lists their commands
SUBCOMMANDS = ("run", "tune", "verdicts", "calibrate", "ab", "inspect", "imports", "publish")


def build_parser() -> argparse.ArgumentParser:
    """The ``kbench`` parser with every subcommand of :data:`SUBCOMMANDS` registered."""
    parser = Parser(prog="kbench", description="GPU-kernel benchmark and regression harness.")
    parser.add_argument("--version", action="version", version=f"kbench {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.add_parser("version", help="print the installed kbench version").set_defaults(handler=_version)
    for name in SUBCOMMANDS:
        importlib.import_module(f"harness.cli.{name}").register(commands)
    return parser


def _version(args: argparse.Namespace, argv: list[str]) -> int:
    print(__version__)
    return int(ExitCode.OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kbench`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()  # reads the settings (KBENCH_DB, ...) for the defaults it shows
    except KbenchError as exc:
        print(f"kbench: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    return run_handler(args, argv)


def run_handler(args: argparse.Namespace, argv: list[str]) -> int:
    """``args.handler(args, argv)``, its errors turned into messages and exit codes: a
    :class:`~harness.errors.KbenchError` or an OSError (a file the user named) is the user's to fix
    (its message, exit 4, or 70 for the errors that say kbench failed); a signal
    (:class:`~harness.errors.Interrupted`, or Ctrl-C outside a run) is one line and 128 + the signal;
    anything else is a bug in kbench (its traceback, exit 70)."""
    try:
        return int(args.handler(args, argv))
    except Interrupted as exc:  # one line naming the run and how to resume it; no traceback
        err.print(f"[yellow]kbench {args.command}: {escape(exc.message)}[/yellow]", highlight=False,
                  soft_wrap=True)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        err.print(f"[yellow]kbench {args.command}: interrupted by SIGINT[/yellow]", highlight=False)
        return int(ExitCode.INTERRUPTED)
    except KbenchError as exc:  # one line: a file:line or a path stays whole for grep
        where = "" if exc.names_its_place else f"kbench {args.command}: "
        text = where + str(exc) + given_options(exc, args)
        err.print(f"[red]{escape(text)}[/red]", highlight=False, soft_wrap=True)
        return int(exc.exit_code)
    except OSError as exc:
        err.print(f"[red]kbench {args.command}: {escape(str(exc))}[/red]", highlight=False, soft_wrap=True)
        return int(ExitCode.USAGE)
    except Exception:
        err.print(f"[red]kbench {args.command}: internal error (a bug in kbench; please report it with "
                  "the traceback below)[/red]", highlight=False, soft_wrap=True)
        err.print(escape(traceback.format_exc()), highlight=False, soft_wrap=True)
        return int(ExitCode.INTERNAL)


__all__ = ["SUBCOMMANDS", "build_parser", "main", "run_handler"]
