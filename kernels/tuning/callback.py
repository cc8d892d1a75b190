"""Tuner callbacks: ``callback(tuner, inputs, results)`` after every measured batch."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable, Sequence, Union

from .record import encode

__all__ = ["log_to_file", "progress_bar"]

logger = logging.getLogger("autotvm")


def log_to_file(file_out: Union[str, os.PathLike, Any], protocol: str = "json") -> Callable:
    """Append every measured candidate to ``file_out`` (a path or an open file) as a JSON record
    (:mod:`kernels.tuning.record`)."""
    if protocol != "json":
        raise ValueError(f"log_to_file: protocol {protocol!r} is not supported (use 'json')")

    def _callback(_tuner: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        if isinstance(file_out, (str, os.PathLike)):
            with open(file_out, "a") as fh:
                for inp, res in zip(inputs, results):
                    fh.write(encode(inp, res) + "\n")
        else:
            for inp, res in zip(inputs, results):
                file_out.write(encode(inp, res) + "\n")

    return _callback


def progress_bar(total: int, prefix: str = "", si_prefix: str = "G") -> Callable:
    """Print the current and best throughput after every batch (to stdout, one line, rewritten)."""
    scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[si_prefix]
    state = {"done": 0, "start": time.time()}

    def _callback(tuner: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        state["done"] += len(inputs)
        cur = max((tuner.task.flop / r.mean for r in results if r.ok and r.mean > 0), default=0.0)
        sys.stdout.write(f"\r{prefix}Current/Best: {cur / scale:7.2f}/{tuner.best_flops / scale:7.2f} "
                         f"{si_prefix}FLOPS | Progress: ({state['done']}/{total}) | "
                         f"{time.time() - state['start']:.2f} s")
        if state["done"] >= total:
            sys.stdout.write("\n")
        sys.stdout.flush()

    return _callback
