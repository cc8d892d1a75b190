"""Testing helpers for TensorIR schedules: replay a schedule's trace and check it reproduces the module."""

from __future__ import annotations

from typing import Union

from ...errors import TVMError
from ..function import IRModule, PrimFunc
from ..structural import structural_equal
from .schedule import Schedule
from .trace import Trace


def verify_trace_roundtrip(sch: Schedule, mod: Union[PrimFunc, IRModule], *,
                           debug_mask: Union[str, int] = "all") -> Schedule:
    """Replay ``sch``'s trace, stored as JSON, on a fresh schedule of ``mod`` and check that it
    reproduces ``sch.mod`` and prints the same trace.

    Parameters
    ----------
    sch : Schedule
        The schedule whose trace is checked.
    mod : PrimFunc or IRModule
        What ``sch`` started from.
    debug_mask : str or int
        Accepted for compatibility (every primitive here is always checked).

    Returns
    -------
    Schedule
        The replayed schedule.

    Raises
    ------
    TVMError
        When the replay gives another module or another trace text.
    """
    trace = sch.trace
    json_obj = trace.as_json()
    new_sch = Schedule(mod, debug_mask=debug_mask)
    Trace.apply_json_to_schedule(json_obj, new_sch)
    if not structural_equal(new_sch.mod, sch.mod):
        raise TVMError("verify_trace_roundtrip: replaying the trace as JSON gives another module than "
                       f"the schedule's:\n{new_sch.mod.script()}\nexpected:\n{sch.mod.script()}")
    old_py, new_py = "\n".join(trace.as_python()), "\n".join(new_sch.trace.as_python())
    if old_py != new_py:
        raise TVMError(f"verify_trace_roundtrip: the replayed trace prints\n{new_py}\ninstead of\n{old_py}")
    return new_sch


__all__ = ["verify_trace_roundtrip"]
