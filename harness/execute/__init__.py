"""Executing a run's cases: where they run (Ray or this process) and what a worker does with each
(build, check against the float64 reference, time).

Modules: :mod:`~harness.execute.common` (what both executors share: slots, batches, the Executor
protocol, exactly-once results), :mod:`~harness.execute.local` (this machine, each case in a child
process),
:mod:`~harness.execute.cluster` (the Ray cluster's lifecycle and placement),
:mod:`~harness.execute.ray_executor` (the scheduling loop), :mod:`~harness.execute.ray_tasks` (what runs
inside Ray's workers), :mod:`~harness.execute.worker` (one case: build, check, time),
:mod:`~harness.execute.build` (case -> source -> binary), :mod:`~harness.execute.ahead` (a batch's builds
in background threads while earlier cases are timed), :mod:`~harness.execute.check` (outputs
against the reference), :mod:`~harness.execute.peers` (library peers), :mod:`~harness.execute.portable`
(a build frozen as data, and the process that exports another source tree's builds for ``kbench ab``).

This package's ``__init__`` imports none of its modules: ``python -m harness.execute.portable export``
runs with *another* source tree's ``kernels/`` (``kbench ab``), and must load nothing but what building
a case needs, which any version of ``kernels/`` provides.
"""

from __future__ import annotations

from typing import Any

from harness.execute.common import DispatchError, Executor


def make_executor(kind: str = "ray", address: str | None = None, **kw: Any) -> Executor:
    """The executor for ``--executor KIND``: ``"ray"`` (:class:`~harness.execute.ray_executor.RayExecutor`;
    ``address`` joins a cluster, None starts the embedded one), ``"local"``
    (:class:`~harness.execute.local.LocalExecutor`: each case in a warm child process, with timeouts
    and crash recording) or ``"inproc"`` (the same in this process, unprotected: for debugging).

    ``module_folders`` (a suite's ``import_folders``) names the folders whose modules of ``imports``
    the Ray executor ships to its workers (:func:`harness.execute.cluster.shipped_modules`); the
    local executor runs where the suite's parser imported them already.

    Raises
    ------
    DispatchError
        An unknown ``kind``, or options the local executor does not take.
    """
    if kind == "ray":
        # imported here, not at the top: see the package docstring (the export process of kbench ab)
        from harness.execute.ray_executor import RayExecutor

        return RayExecutor(address, **kw)
    if kind in ("local", "inproc"):
        if address is not None:
            raise DispatchError("--address needs the ray executor (it joins a Ray cluster)")
        unknown = set(kw) - {"imports", "module_folders"}
        if unknown:
            raise DispatchError(f"the local executor takes no {', '.join(sorted(unknown))}")
        # imported here, not at the top: see the package docstring (the export process of kbench ab)
        from harness.execute.local import LocalExecutor

        kw.pop("module_folders", None)  # this process imported them already (the suite's parser)
        return LocalExecutor(**kw, isolate=kind == "local")
    raise DispatchError(f"unknown executor {kind!r}; executors: ray, local, inproc")


def executor_for(suite: Any, kind: str = "ray", address: str | None = None) -> Executor:
    """:func:`make_executor` for ``suite`` (a loaded :class:`harness.suite.Suite`): its workers import
    the suite's modules (``imports``), shipped from the suite's folders (``import_folders``)."""
    return make_executor(kind, address=address, imports=tuple(suite.imports), module_folders=suite.import_folders)


__all__ = ["DispatchError", "Executor", "executor_for", "make_executor"]
