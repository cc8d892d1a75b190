"""The harness's exit codes and its error types (docs/ARCHITECTURE.md, "Errors and exit codes").

Every error the harness raises on purpose is a :class:`KbenchError`. Its class says who is at
fault, and so which exit code ``kbench`` ends with:

- :class:`UsageError`: a bad command-line value (``--fail-on``, a run spec, ``--trials``);
- :class:`ConfigError`: a bad configuration: a suite file, a cluster that cannot run the suite,
  an unusable ``--base-tree`` (harness.suite.SuiteError, harness.plan.PlanError,
  harness.execute.DispatchError, harness.execute.portable.BaseTreeError derive from it);
- :class:`StoreError`: the result store cannot do what was asked (a missing or foreign file, a
  newer schema, an unknown run).

All three exit with :attr:`ExitCode.USAGE` (4). Anything else that escapes a command is a bug in
kbench: the CLI prints its traceback and exits with :attr:`ExitCode.INTERNAL`, never with 4, so a
CI job does not report a crash of kbench as a mistake of its user.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of ``kbench`` (and of ``ci/nightly.sh`` / ``ci/pr.sh``).

    0 ok, 1 a speed regression (SLOWER), 2 a correctness failure (wrong, crashed, timeout or build
    error), 3 inconclusive (AMBIGUOUS), 4 a usage or configuration error, 70 an internal error of
    kbench (``EX_SOFTWARE`` of sysexits.h).
    """

    OK = 0
    SLOWER = 1
    WRONG = 2
    INCONCLUSIVE = 3
    USAGE = 4
    INTERNAL = 70


class KbenchError(Exception):
    """The base of the harness's own errors; ``exit_code`` is what ``kbench`` exits with.

    ``kbench CMD`` prints the message as ``kbench CMD: MESSAGE``, or as it is when
    ``names_its_place`` (a message that starts with the ``file:line`` at fault, which stays first on
    its line for editors and grep).
    """

    exit_code: ExitCode = ExitCode.USAGE
    names_its_place: bool = False


class UsageError(KbenchError, ValueError):
    """A value given on the command line (or to the API standing behind it) is not acceptable; the
    message names the option and what it accepts."""


class ConfigError(KbenchError):
    """A configuration the harness cannot work with: a suite file, the cluster, another source tree."""


class InvalidSetting(ConfigError, ValueError):
    """A setting of a frozen configuration value (``harness.model.MeasureConfig``, ``Case``, ``Side``)
    is out of its range, whoever set it (a suite, an option, the API). ``settings`` names the
    fields at fault; ``detail`` says what is wrong without saying where the value came from, so a
    suite can add its file:line and the command line its option."""

    def __init__(self, settings: tuple[str, ...], detail: str, owner: str = "MeasureConfig"):
        super().__init__(f"{owner}: {detail}")
        self.settings = tuple(settings)
        self.detail = detail


class StoreError(KbenchError):
    """The result store cannot do what was asked (bad file, newer schema, failed write...)."""


__all__ = ["ConfigError", "ExitCode", "InvalidSetting", "KbenchError", "StoreError", "UsageError"]
