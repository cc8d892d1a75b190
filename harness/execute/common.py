"""What both executors share: the kind of worker a case needs, batches cut to one kind of worker, the
exactly-once hand-over of results, and short error messages for the store.

An executor (:class:`harness.execute.Executor`) takes batches (lists of cases;
:func:`harness.plan.batches` makes them) and calls ``on_result`` exactly once per distinct case key.
A batch that mixes placements (CPU and GPU cases, or two GPU models) is split into consecutive runs of
one placement; a case key seen before in the same call is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from harness.errors import ConfigError
from harness.model import Case, MeasureConfig, Result

__all__ = ["DispatchError", "Emitter", "Executor", "OnResult", "Slot", "clean_message", "describe",
           "gpu_model_from_name", "homogeneous", "needs_gpu", "slot_of", "take"]

OnResult = Callable[[Result], None]


class Executor(Protocol):
    """What runs a run's batches: :class:`~harness.execute.local.LocalExecutor` or
    :class:`~harness.execute.ray_executor.RayExecutor` (:func:`harness.execute.make_executor`)."""

    kind: str

    def run(self, batches: Sequence[Sequence[Case]], config: MeasureConfig, on_result: OnResult,
            side_specs: dict | None = None) -> None:
        """Run ``batches`` and call ``on_result`` once per case key, as each result is known."""

    def gpu_models(self) -> list[str]:
        """The GPU models it can run cases on."""

    def cluster_summary(self) -> dict[str, Any]:
        """Its nodes, CPUs, GPUs and GPU models, for people."""

    def close(self) -> None:
        """Release what it holds (the embedded Ray cluster)."""


class DispatchError(ConfigError):
    """A configuration problem of the executor: an unknown executor kind, Ray missing, or cases no
    node of the cluster can run (e.g. a GPU model the cluster lacks)."""


#: the kind of worker a case needs: (needs a GPU, GPU model or "")
Slot = tuple[bool, str]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MAX_MESSAGE = 4000


def needs_gpu(case: Case) -> bool:
    """True when the case must run on a GPU worker: a ``cuda`` target or a named ``gpu_model``."""
    return case.target == "cuda" or bool(case.gpu_model)


def slot_of(case: Case) -> Slot:
    """What kind of worker slot the case needs: (needs a GPU, GPU model or "")."""
    return (True, case.gpu_model) if needs_gpu(case) else (False, "")


def homogeneous(batches: Sequence[Sequence[Case]]) -> list[list[Case]]:
    """Split batches into consecutive runs of one slot; drop case keys already seen."""
    seen: set = set()
    out: list[list[Case]] = []
    for batch in batches:
        run: list[Case] = []
        for case in batch:
            if case.key in seen:
                continue
            seen.add(case.key)
            if run and slot_of(run[-1]) != slot_of(case):
                out.append(run)
                run = []
            run.append(case)
        if run:
            out.append(run)
    return out


def clean_message(text: str) -> str:
    text = _ANSI.sub("", text).strip()
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " ..."


def describe(exc: BaseException) -> str:
    return clean_message(f"{type(exc).__name__}: {exc}")


def gpu_model_from_name(name: str) -> str:
    """A GPU model as Ray spells accelerator types, from a device name: "NVIDIA H100 80GB HBM3" ->
    "H100", "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA GeForce RTX 4090" -> "GeForce-RTX-4090"."""
    cleaned = re.sub(r"^(NVIDIA\s+)?(Tesla\s+)?", "", name.strip())
    first = cleaned.split(" ")[0] if cleaned else ""
    head = first.split("-")[0]
    if re.fullmatch(r"[A-Z]+[0-9]+[A-Z]*", head):
        return head
    return cleaned.replace(" ", "-")


class Emitter:
    """Calls ``on_result`` at most once per case key."""

    def __init__(self, on_result: OnResult):
        self.on_result = on_result
        self.done: set = set()

    def __call__(self, result: Result) -> bool:
        key = result.case.key
        if key in self.done:
            return False
        self.done.add(key)
        self.on_result(result)
        return True


def take(rest: list[Case], result: Result) -> None:
    """Remove the case ``result`` answers from ``rest`` (normally its head)."""
    key = result.case.key
    if rest and rest[0].key == key:
        rest.pop(0)
        return
    for i, case in enumerate(rest):
        if case.key == key:
            del rest[i]
            return


