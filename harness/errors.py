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

A run ended by a signal raises :class:`Interrupted` (a ``BaseException``, as ``KeyboardInterrupt``,
so that no ``except Exception`` on the way charges it to a case); the CLI prints its one line and
exits ``128 + signal``: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP.

:func:`compose_exit_code` is the one place the exit code of a command that runs or judges cases is
composed from what it found.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of ``kbench`` (and of ``ci/nightly.sh`` / ``ci/pr.sh``).

    0 ok, 1 a speed regression (SLOWER), 2 a correctness failure (wrong, crashed, timeout or build
    error), 3 inconclusive (AMBIGUOUS, or an incomplete run judged), 4 a usage or configuration
    error, 70 an internal error of kbench (``EX_SOFTWARE`` of sysexits.h); a run ended by a signal
    exits 128 + the signal's number, as a shell reports it: 129 SIGHUP, 130 SIGINT, 143 SIGTERM.
    """

    OK = 0
    SLOWER = 1
    WRONG = 2
    INCONCLUSIVE = 3
    USAGE = 4
    INTERNAL = 70
    HANGUP = 128 + signal.SIGHUP
    INTERRUPTED = 128 + signal.SIGINT
    TERMINATED = 128 + signal.SIGTERM

    @classmethod
    def of_signal(cls, signum: int) -> ExitCode:
        """The exit code of a run ended by signal ``signum`` (SIGHUP, SIGINT or SIGTERM)."""
        return cls(128 + int(signum))


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


class Interrupted(BaseException):  # noqa: N818 (a signal, as KeyboardInterrupt, not an error)
    """A run was ended by SIGINT, SIGTERM or SIGHUP (harness.run installs the handlers for the length
    of a run). A ``BaseException``: an ``except Exception`` of an executor or a worker must not take
    it for a case's failure.

    Attributes
    ----------
    signum : int
        The signal.
    message : str
        The one line the CLI prints (harness.run fills in the run and the ``--resume`` command).
    """

    def __init__(self, signum: int, message: str = ""):
        self.signum = int(signum)
        self.message = message or f"interrupted by {signal.Signals(self.signum).name}"
        super().__init__(self.message)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.of_signal(self.signum)


#: the verdicts that are a correctness failure, a regression and inconclusive (harness.model.VERDICTS)
_WRONG, _SLOWER, _AMBIGUOUS = "WRONG", "SLOWER", "AMBIGUOUS"
#: outcomes of a case that are a correctness failure (harness.model.OUTCOMES but "ok")
FAILED_OUTCOMES = ("wrong", "timeout", "crashed", "build_error")


def compose_exit_code(*, outcomes: Iterable[str] = (), verdicts: Iterable[object] = (),
                      incomplete: bool = False, gated: bool = False,
                      fail_ambiguous: bool = False) -> ExitCode:
    """The exit code of ``kbench run``/``compare``/``report``/``ab``/``calibrate``: the one place it is
    composed.

    Parameters
    ----------
    outcomes : iterable of str
        The outcomes of the cases the command ran (harness.model.OUTCOMES); any but ``ok`` is a
        correctness failure.
    verdicts : iterable of harness.model.Verdict (or verdict names)
        The verdicts of a comparison, when there is one.
    incomplete : bool
        The judged run is not ``done``, or lacks cases its baseline has: never a pass.
    gated : bool
        A ``--fail-on`` gate applies.
    fail_ambiguous : bool
        The gate lists ``ambiguous``.

    Returns
    -------
    ExitCode
        In order: 2 when a case failed or is WRONG (correctness first), 1 when one is SLOWER, 3 when
        the judged run is incomplete (gate or not: a run that lacks cases passes no gate) or a case
        is AMBIGUOUS (under a gate only when it lists ``ambiguous``), else 0.
    """
    names = {str(getattr(v, "verdict", v)) for v in verdicts}
    if any(o in FAILED_OUTCOMES for o in outcomes) or _WRONG in names:
        return ExitCode.WRONG
    if _SLOWER in names:
        return ExitCode.SLOWER
    if incomplete:
        return ExitCode.INCONCLUSIVE
    if _AMBIGUOUS in names and (fail_ambiguous or not gated):
        return ExitCode.INCONCLUSIVE
    return ExitCode.OK


__all__ = ["FAILED_OUTCOMES", "ConfigError", "ExitCode", "Interrupted", "InvalidSetting", "KbenchError", "StoreError",
           "UsageError", "compose_exit_code"]
