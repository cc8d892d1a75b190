"""``kbench ab SUITE --base-tree DIR``: this checkout against another source tree, timed in one loop.

What a pull request wants to know is whether *its* kernels got slower than the base branch's, on
the same GPU. Two runs made one after the other also see the machine drift between them (clocks,
temperature, other tenants), which the samples of either run do not show, so their verdicts trust a
difference that may not be there (docs/PERF.md: calibration). ``kbench ab`` instead times each case
as two *sides* in one loop, a sample of one, then of the other, in alternating order
(harness.measure.loop.measure_interleaved): the drift falls on both sides alike, and the verdicts use the
rule for interleaved sides (harness.stats.verdicts.judge).

How the two trees meet in one process:

1. The suite is planned here (this checkout's suite file and workload registry; peers are left
   out, both sides would time the same library).
2. The base tree's compiler core builds every case in a process of its own: ``python -m
   harness.execute.portable export`` with a folder on ``PYTHONPATH`` that links ``kernels/`` to the base
   tree's and ``harness/`` to this checkout's (only the compiler core differs between the sides).
   Each case's generated function comes back as data (harness.execute.portable: the source and its launch
   description at the case's shapes).
3. The workers build this checkout's side as ``kbench run`` does and the base side from that data,
   both with this checkout's runtime (compiler flags, launch code), check each against the float64
   reference, and time the two together. Each side is stored as a run of kind ``ab`` (never a
   baseline, never history), the base side's run first.
4. The head side is judged against the base side; AMBIGUOUS cases are timed once more as both sides
   and judged on everything (harness.judge.remeasure_ambiguous). Exit codes as ``kbench compare``.

The inputs and the float64 reference of every case come from this checkout's workload registry, so
both sides are checked against the same answer (a change of a reference shows on both sides).

What is not compared: changes to the runtime (kernels/runtime: compiler flags, launch code) and to
the harness, which this checkout supplies for both sides. ``ci/pr.sh --mode runs`` compares whole
runs of the two checkouts instead (each with its own runtime and harness), with the weaker verdicts
of separate runs.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from harness.errors import ExitCode, compose_exit_code
from harness.model import Case, Side

from .common import (
    db_arg,
    err,
    execution,
    execution_args,
    fail_on_arg,
    out,
    out_dir,
    print_exit_code,
    print_verdicts,
    progress_display,
    store_label,
    store_location,
    write_outputs,
)

if TYPE_CHECKING:  # the statistics load when ab judges (see main)
    from harness.stats import FailOn

#: the two sides, in the order the store gets their runs
SIDES = (Side("base"), Side("head"))


def register(commands: argparse._SubParsersAction) -> None:
    abp = commands.add_parser("ab", help="this checkout against another source tree, timed in one loop")
    abp.add_argument("suite", help="suite file (TOML) of this checkout")
    abp.add_argument("--base-tree", required=True, metavar="DIR",
                     help="root of the other checkout (e.g. a git worktree of main); its kernels/ builds "
                          "the base side")
    execution_args(abp)
    fail_on_arg(abp)
    abp.add_argument("--out", type=out_dir, metavar="DIR",
                     help="write the HTML report and CI outputs (Markdown, JUnit, JSON, CSV) here")
    abp.add_argument("--no-remeasure", action="store_true",
                     help="do not time AMBIGUOUS cases a second time")
    db_arg(abp)
    abp.set_defaults(handler=main)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    targets, overrides = execution(args)
    progress, on_event = progress_display("cases built twice + checked + measured (base/head)")

    def events(kind, payload):
        if kind == "export":
            err.print(f"building {payload} case(s) with the base tree's kernels/ "
                      f"({escape(str(args.base_tree))})")
        elif kind == "run":
            err.print(escape(str(payload)))
        else:
            on_event(kind, payload)

    with progress:
        summary = ab(args.suite, args.base_tree, args.db, args.executor, args.address, targets=targets,
                     measure_overrides=overrides, argv=argv, fail_on=args.fail_on,
                     remeasure=not args.no_remeasure, on_event=events)
    print_verdicts(summary.judgement)
    counts = "; ".join(f"{side} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                       for side, c in summary.counts.items())
    out.print(f"kbench ab: {summary.cases} cases; {counts}; base tree built with {summary.base_kernels} "
              f"({summary.export_s:.1f} s, {summary.export_errors} case(s) it could not build); "
              f"{summary.seconds:.1f} s")
    out.print(f"runs: base {summary.base_run}, head {summary.head_run} (kind ab) "
              f"in {store_label(args.db)}")
    if args.out:
        write_outputs(args.db, summary.head_run, summary.judgement, args.out)
    print_exit_code(summary.exit_code)
    return int(summary.exit_code)


@dataclass
class ABSummary:
    """What ``kbench ab`` did: the two runs, the verdicts and how the base tree's build went."""

    base_run: int
    head_run: int
    cases: int
    counts: dict = field(default_factory=dict)  # side -> {outcome: n}
    judgement: Any = None  # harness.judge.Judgement
    base_tree: str = ""
    base_kernels: str = ""  # where the export process imported kernels from
    export_errors: int = 0  # cases the base tree could not build
    export_s: float = 0.0
    seconds: float = 0.0

    @property
    def exit_code(self) -> ExitCode:
        """The verdicts' exit code, as ``kbench compare`` of the two sides (harness.errors.compose_exit_code:
        a case that failed on the head side is a WRONG verdict there)."""
        if self.judgement is None:
            return ExitCode.OK
        gate = self.judgement.gate
        return compose_exit_code(verdicts=self.judgement.verdicts, incomplete=self.judgement.incomplete,
                                 gated=gate is not None, fail_ambiguous=bool(gate and gate.fail_ambiguous))


def _arch_of(case: Case, models: Sequence[str]) -> str | None:
    """The CUDA architecture to build ``case`` for: its GPU model's, else that of the cluster's only
    model; None lets the base build pick its default (as this checkout's workers do)."""
    # the compiler core (the GPU-model-to-arch table's package) loads only when ab builds a case
    from kernels.target import arch_of_model

    if case.target != "cuda":
        return None
    model = case.gpu_model or (models[0] if len(set(models)) == 1 else "")
    return arch_of_model(model) if model else None


def ab(suite_path: str, base_tree: str | os.PathLike, db: Path, executor_kind: str = "ray",
       address: str | None = None, *, targets: Sequence[str] | None = None,
       measure_overrides: dict | None = None, argv: Sequence[str] = (), fail_on: FailOn | str | None = None,
       remeasure: bool = True, on_event: Callable[[str, object], None] | None = None) -> ABSummary:
    """Time ``suite_path``'s cases built by this checkout and by ``base_tree``, interleaved, and
    judge this checkout's side against the base side (see the module docstring).

    Raises
    ------
    BaseTreeError
        ``base_tree`` has no ``kernels/`` or its build process failed as a whole.
    harness.suite.SuiteError, harness.errors.UsageError, harness.execute.DispatchError
        As ``kbench run`` (a bad suite, ``--fail-on``, or executor).
    """
    # the pipeline (the compiler, Ray) loads only when the command runs: `kbench --help` stays quick
    from harness import judge
    from harness.config import apply_runtime_defaults
    from harness.execute import executor_for
    from harness.execute.portable import check_base_tree, export_base
    from harness.run import RunRequest, SignalHandlers, rerun_keys, run_suite
    from harness.stats import FailOn
    from harness.store import Store
    from harness.suite import load_suite

    t0 = time.time()
    root = check_base_tree(base_tree)
    fail_on = FailOn.of(fail_on)  # a bad gate is a usage error before anything runs
    emit = on_event or (lambda kind, payload: None)
    suite = load_suite(suite_path)
    apply_runtime_defaults()
    summary = ABSummary(0, 0, 0, base_tree=str(root))
    specs: dict[str, Any] = {}
    # a signal anywhere in ab (the base tree's builds, the judging) ends it with one line, as a run
    handlers = SignalHandlers()
    handlers.install()
    try:
        executor = executor_for(suite, executor_kind, address)
    except BaseException:
        handlers.restore()
        raise
    handlers.install()  # again: starting Ray installs a SIGTERM handler of its own
    if hasattr(executor, "poll_hook"):
        executor.poll_hook = handlers.check
    try:
        handlers.check()
        models = executor.gpu_models()

        def side_specs_for(cases: list[Case]) -> dict:
            todo = [c for c in cases if c.key not in specs]
            if todo:
                emit("export", len(todo))
                t = time.time()
                items = [{"case": c.to_json(), "arch": _arch_of(c, models)} for c in todo]
                got, where = export_base(root, items, suite.imports)
                specs.update(got)
                summary.base_kernels = where
                summary.export_s += time.time() - t
                summary.export_errors = sum(1 for c in cases if "error" in specs.get(c.key, {"error": 1}))
            return {c.key: {"base": specs.get(c.key, {"error": "the base tree's build returned nothing"})}
                    for c in cases}

        request = RunRequest(suite_path, store_location(str(db)), executor_kind, address,
                             targets=tuple(targets) if targets else None, argv=tuple(argv),
                             measure={**(measure_overrides or {}), "interleave": SIDES}, kind="ab",
                             with_peers=False)
        emit("run", "base and head, interleaved sample by sample")
        first = run_suite(request, on_event=on_event, executor=executor, side_specs_for=side_specs_for)
        summary.cases = first.planned
        summary.head_run, summary.base_run = first.side_runs["head"], first.side_runs["base"]

        def announce(kind: str, payload: object) -> None:
            if kind == "planned":
                emit("run", f"re-measure of {payload.planned} AMBIGUOUS case(s)")
            (on_event or (lambda k, p: None))(kind, payload)

        handlers.check()  # a signal held back while Ray's code ran between the runs
        again = rerun_keys(request, parent_run=summary.base_run, on_event=announce, executor=executor,
                           side_specs_for=side_specs_for) if remeasure else None
        judgement = judge.judge_runs(store_location(str(db)), [summary.head_run], [summary.base_run],
                                     fail_on=fail_on)
        judgement = judge.remeasure_ambiguous(store_location(str(db)), judgement, again, new_side="head",
                                              base_side="base")
        summary.judgement = replace(judgement, baseline_label=f"base tree {root} (run {summary.base_run})")
    finally:
        executor.close()
        handlers.restore()
    with Store.open(db, create=False) as st:
        for side, rid in (("base", summary.base_run), ("head", summary.head_run)):
            frame = st.results_frame(rid)
            summary.counts[side] = {str(k): int(v) for k, v in frame["outcome"].value_counts().items()}
    summary.seconds = time.time() - t0
    return summary


