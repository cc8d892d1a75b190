"""The suite's values: :class:`Suite` (a parsed, expanded suite), :class:`SuiteError` and the
format's names (targets, keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError, ExitCode
from harness.model import Case, MeasureConfig

__all__ = ["DEFAULT_TIMEOUT_S", "EXIT_CONFIG", "MEASURE_MODES", "SUITE_KEYS", "TARGETS", "TOP_KEYS",
           "VARIANT_KEYS", "WORKLOAD_KEYS", "Space", "Suite", "SuiteError", "Where"]

#: exit code of the CLI for a malformed suite (a usage or configuration error)
EXIT_CONFIG = ExitCode.USAGE

#: the targets a suite may name
TARGETS = ("c", "opencl", "cuda")

DEFAULT_TIMEOUT_S = 120.0

TOP_KEYS = ("suite", "measure", "workload")
SUITE_KEYS = ("name", "description", "targets", "regression_threshold", "timeout_s", "imports",
              "import_paths")
WORKLOAD_KEYS = ("name", "params", "dtypes", "variants", "targets", "rtol", "atol",
                 "regression_threshold", "timeout_s", "peers", "gpu_models")
VARIANT_KEYS = ("name", "knobs", "tuned")
MEASURE_MODES = ("cold", "hot")

#: a tuning space: (knob, candidate values) in the variant's knob order
Space = tuple[tuple[str, tuple[Any, ...]], ...]

Where = tuple[Any, ...]  # ("workload", 2, "params", "n"): a table path, an index after an array name


class SuiteError(ConfigError):
    """A malformed suite (or a plan that cannot be made from it).

    Attributes
    ----------
    path : str
        The suite file ("<string>" for text parsed directly).
    line : int or None
        1-based line of the offending key or value; None only when the file cannot be read.
    message : str
        What is wrong, naming the table, the key and what would be accepted.
    """

    names_its_place = True  # printed as file:line: message

    def __init__(self, path: str, line: int | None, message: str):
        super().__init__(path, line, message)
        self.path = str(path)
        self.line = line
        self.message = message

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Suite:
    """A parsed, validated and expanded suite.

    Per-workload settings are tuples of pairs (hashable); use :meth:`threshold`,
    :meth:`gpu_models_for` and :meth:`peers_for` to read them.
    """

    name: str
    path: str
    description: str
    cases: tuple[Case, ...]
    regression_threshold: float
    thresholds: tuple[tuple[str, float], ...]  # workload -> threshold, where overridden
    peers: tuple[tuple[str, str], ...]  # (workload, peer name)
    measure: MeasureConfig
    imports: tuple[str, ...]
    sha256: str  # of the file's bytes
    gpu_models: tuple[tuple[str, tuple[str, ...]], ...]  # workload -> GPU models its cuda cases need
    gpu_model_lines: tuple[tuple[str, int], ...] = ()  # workload -> line of its gpu_models (errors)
    # tuned variants (``tuned = true``): Case.tuning_key -> its tuning space (the knob lists)
    spaces: tuple[tuple[str, Space], ...] = ()
    # absolute folders searched for ``imports``: the suite file's own, then ``[suite] import_paths``;
    # the modules of ``imports`` found there travel to the Ray workers (harness.execute.cluster)
    import_folders: tuple[str, ...] = ()

    def space_for(self, case: Case) -> Space:
        """The tuning space of a tuned case (its variant's knob lists in the suite).

        Raises
        ------
        KeyError
            ``case`` is not a tuned case of this suite.
        """
        return dict(self.spaces)[case.tuning_key]

    @property
    def tuned_cases(self) -> tuple[Case, ...]:
        """The cases of tuned variants, in suite order."""
        return tuple(c for c in self.cases if c.tuned)

    def threshold(self, workload: str) -> float:
        """The practical regression threshold (a fraction) for the cases of ``workload``."""
        return dict(self.thresholds).get(workload, self.regression_threshold)

    def gpu_models_for(self, workload: str) -> tuple[str, ...]:
        """The GPU models ``workload``'s cuda cases are restricted to (() = no restriction)."""
        return dict(self.gpu_models).get(workload, ())

    def peers_for(self, workload: str) -> tuple[str, ...]:
        """The peers to time next to ``workload``, in suite order."""
        return tuple(p for w, p in self.peers if w == workload)

    @property
    def workloads(self) -> tuple[str, ...]:
        """The workloads of the suite, in order of first appearance."""
        return tuple(dict.fromkeys(c.workload for c in self.cases))

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets the cases use, in order of first appearance."""
        return tuple(dict.fromkeys(c.target for c in self.cases))


