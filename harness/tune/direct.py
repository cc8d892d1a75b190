"""Tuning a variant that is not a kbench schedule (a CUDA-source or callable variant:
kernels.workloads.cuda_source, device_callable): the tuning engine's templates instantiate schedules,
so these are searched here instead, configuration by configuration in grid order, each one built,
checked against the float64 reference and timed exactly as ``kbench run`` does
(harness.execute.worker.run_case, the suite's ``[measure]`` rules: for a Triton kernel, its autotune
configurations given as knob values are timed with the harness's own clock). Each configuration
becomes a trial of the session (its median as its cost, or why it has none), so the best is stored,
picked by ``kbench run`` and reported like that of an engine-tuned variant.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.execute.worker import run_case
from harness.model import Case, MeasureConfig, pairs
from kernels.tuning import MeasureErrorNo, MeasureResult

__all__ = ["configurations", "measure_configuration", "untried"]


def configurations(space: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
    """Every point of ``space`` (``[(knob, values), ...]``) in grid order, the last knob fastest."""
    names = [k for k, _ in space]
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in space))]


def untried(space: Sequence[tuple[str, Sequence[Any]]], tried: Sequence[Mapping[str, Any]]
            ) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index in grid order, knobs)`` of the points of ``space`` no trial in ``tried`` measured."""
    seen = [dict(t) for t in tried]
    for index, knobs in enumerate(configurations(space)):
        if knobs not in seen:
            yield index, knobs


#: the outcome of a case -> the error number its trial is recorded with
_ERRORS = {"wrong": MeasureErrorNo.WRONG_ANSWER, "build_error": MeasureErrorNo.COMPILE_DEVICE,
           "timeout": MeasureErrorNo.RUN_TIMEOUT, "crashed": MeasureErrorNo.RUNTIME_DEVICE}


def measure_configuration(case: Case, knobs: Mapping[str, Any], config: MeasureConfig) -> MeasureResult:
    """Check and time the tuned ``case`` with ``knobs`` as ``kbench run`` would (one case of those
    knobs); its median is the trial's cost, a case that is not ``ok`` its error."""
    t0 = time.perf_counter()
    one = dataclasses.replace(case, knobs=pairs(dict(knobs)), tuned=False)
    result = run_case(one, config)
    spent = time.perf_counter() - t0
    if result.outcome == "ok" and result.timing is not None and result.timing.median > 0:
        return MeasureResult((float(result.timing.median),), int(MeasureErrorNo.NO_ERROR), spent, time.time())
    error = _ERRORS.get(result.outcome, MeasureErrorNo.UNKNOWN_ERROR)
    return MeasureResult((f"{result.outcome}: {result.message}".strip(),), int(error), spent, time.time())
