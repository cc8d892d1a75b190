"""Tuning records: one JSON object per line, in autotvm's v0.2 layout, and the best configuration
per (target, workload) read back from them.

A line::

    {"input": ["cuda -keys=cuda,gpu", "tutorial/auto_tensorcore/test_gemm", [512, 512, 512,
     "float16", "NN"], {}], "config": {"index": 17, "code_hash": null, "entity": [["bx", "ot", 4],
     ...]}, "result": [[0.000123, 0.000121], 0, 1.9, 1700000000.0], "version": 0.2,
     "tvm_version": "kbench"}

``result`` is ``[costs, error_no, all_cost, timestamp]``; a failed candidate has its message as the
only cost. :class:`ApplyHistoryBest` is the dispatch context autotvm's ``apply_history_best``
returns: inside it a template built for a target and workload that a record covers runs with the
fastest recorded configuration (the fallback configuration otherwise).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Dict, Iterable, Iterator, List, Tuple, Union

from ..errors import TVMError
from .measure import MeasureErrorNo, MeasureInput, MeasureResult
from .space import ConfigEntity
from .task import DispatchContext, FallbackContext

__all__ = ["encode", "decode", "load_from_file", "save_to_file", "ApplyHistoryBest", "apply_history_best",
           "RecordError", "VERSION"]

logger = logging.getLogger("autotvm")

#: the record layout version written (autotvm's)
VERSION = 0.2


class RecordError(TVMError):
    """A tuning log line that cannot be read (its file and line are named)."""


def _jsonable(x: Any) -> Any:
    if isinstance(x, tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


def _tupled(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_tupled(v) for v in x)
    return x


def encode(inp: MeasureInput, result: MeasureResult) -> str:
    """One log line for a measured candidate."""
    workload = inp.task.workload
    costs = [c if isinstance(c, (int, float)) else str(c) for c in result.costs]
    obj = {
        "input": [str(inp.target), workload[0], _jsonable(list(workload[1:])), {}],
        "config": inp.config.to_json_dict(),
        "result": [costs, int(result.error_no), float(result.all_cost), float(result.timestamp)],
        "version": VERSION,
        "tvm_version": "kbench",
    }
    return json.dumps(obj)


class _RecordedTask:
    """What a record knows of its task: the target string and the workload key."""

    def __init__(self, target: str, workload: Tuple[Any, ...]):
        self.target = target
        self.workload = workload


def decode(line: str, where: str = "") -> Tuple[MeasureInput, MeasureResult]:
    """``(MeasureInput, MeasureResult)`` of a log line; the task is only its target and workload."""
    try:
        obj = json.loads(line)
        target, name, args, _kwargs = obj["input"]
        workload = (name,) + tuple(_tupled(a) for a in args)
        config = ConfigEntity.from_json_dict(obj["config"])
        costs, error_no, all_cost, timestamp = obj["result"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"{where or 'record'}: not a tuning record ({type(exc).__name__}: {exc})") from None
    task = _RecordedTask(target, workload)
    return MeasureInput(target, task, config), MeasureResult(tuple(costs), int(error_no), float(all_cost),
                                                             float(timestamp))


def load_from_file(filename: Union[str, os.PathLike]) -> Iterator[Tuple[MeasureInput, MeasureResult]]:
    """Every record of a log file, in order (blank lines skipped; a bad line is an error naming
    ``file:line``)."""
    with open(filename) as fh:
        for k, line in enumerate(fh, 1):
            if line.strip():
                yield decode(line, f"{filename}:{k}")


def save_to_file(pairs: Iterable[Tuple[MeasureInput, MeasureResult]],
                 filename: Union[str, os.PathLike]) -> None:
    """Append records to a log file."""
    with open(filename, "a") as fh:
        for inp, res in pairs:
            fh.write(encode(inp, res) + "\n")


def _record_key(target: Any, workload: Any) -> Tuple[str, Tuple[Any, ...]]:
    """What identifies a tuning problem in the records: the target's kind (``cuda``, ``opencl``,
    ``c``; its options do not matter) and the workload."""
    kind = str(target).split()[0] if target is not None and str(target).split() else ""
    return kind, tuple(workload)


class ApplyHistoryBest(DispatchContext):
    """The fastest recorded configuration per (target kind, workload) from logs or records.

    Parameters
    ----------
    records : str, path, or iterable of (MeasureInput, MeasureResult)
        A log file, several of them, or records.
    """

    def __init__(self, records: Any):
        super().__init__()
        self.best: Dict[Tuple[str, Tuple[Any, ...]], Tuple[ConfigEntity, float]] = {}
        self._fallback = FallbackContext()
        self.load(records)

    def load(self, records: Any) -> None:
        if isinstance(records, (str, os.PathLike)):
            records = load_from_file(records)
        elif isinstance(records, (list, tuple)) and records and isinstance(records[0], (str, os.PathLike)):
            for r in records:
                self.load(r)
            return
        n = 0
        for inp, res in records:
            n += 1
            if res.error_no != MeasureErrorNo.NO_ERROR:
                continue
            cost = float(sum(res.costs) / len(res.costs))
            key = _record_key(inp.target, inp.task.workload)
            if key not in self.best or cost < self.best[key][1]:
                self.best[key] = (inp.config, cost)
        logger.debug("ApplyHistoryBest: %d records, %d best configurations", n, len(self.best))

    def query(self, target: Any, workload: Any) -> Any:
        if workload is None:
            return self._fallback.query(target, workload)
        key = _record_key(target, workload)
        got = self.best.get(key)
        if got is None:
            return self._fallback.query(target, workload)
        return got[0]


def apply_history_best(log: Any) -> ApplyHistoryBest:
    """The dispatch context that applies the best configurations of ``log`` (autotvm's)."""
    return ApplyHistoryBest(log)


def best_records(filename: Union[str, os.PathLike]) -> List[Tuple[MeasureInput, MeasureResult]]:
    """The fastest successful record per (target kind, workload) of a log, in first-seen order."""
    best: Dict[Tuple[str, Tuple[Any, ...]], Tuple[MeasureInput, MeasureResult]] = {}
    for inp, res in load_from_file(filename):
        if res.error_no != MeasureErrorNo.NO_ERROR:
            continue
        key = _record_key(inp.target, inp.task.workload)
        if key not in best or res.mean < best[key][1].mean:
            best[key] = (inp, res)
    return list(best.values())


def pick_best(in_file: str, out_file: str) -> None:
    """Write the best record per (target, workload) of ``in_file`` to ``out_file``."""
    save_to_file(best_records(in_file), out_file)


