"""``tvm.driver.build_module``: lower, build and ``schedule_to_module`` (the IRModule of a schedule
before the target passes, what ``tvm.lower`` returns)."""

from __future__ import annotations

from ..build_module import build
from ..lower import lower


def schedule_to_module(sch, args=None, name: str = "main", binds=None):
    """The schedule's loop nest as an IRModule (TVM's ``schedule_to_module``)."""
    return lower(sch, args, name=name, binds=binds)


__all__ = ["build", "lower", "schedule_to_module"]
