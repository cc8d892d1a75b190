"""The ``kbench`` command line: only parses arguments and dispatches.

This is a stub until the harness proper lands; it knows ``--version`` and ``version``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from harness import __version__

EXIT_USAGE = 4  # design section 7: 4 means a usage or configuration error


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit with ``EXIT_USAGE`` instead of argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kbench", description="GPU-kernel benchmark and regression harness.")
    parser.add_argument("--version", action="version", version=f"kbench {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.add_parser("version", help="print the installed kbench version")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kbench`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command == "version":
        print(__version__)
        return 0
    parser.error(f"unknown command {args.command!r}")  # unreachable: argparse checks choices


if __name__ == "__main__":
    sys.exit(main())
