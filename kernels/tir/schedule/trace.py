"""The trace of a schedule: the primitives applied, printable as Python and replayable.

``str(sch.trace)`` is a Python function that redoes the scheduling on a fresh schedule::

    # from kernels import tir
    def apply_trace(sch: tir.Schedule) -> None:
      b0 = sch.get_block(name="C", func_name="main")
      l1, = sch.get_loops(block=b0)
      l2, l3 = sch.split(loop=l1, factors=[None, 128], preserve_unit_iters=True)
      sch.bind(loop=l2, thread_axis="blockIdx.x")

``trace.apply_to_schedule(sch)`` replays it; ``as_json`` / ``Trace.apply_json_to_schedule`` store and
replay it as JSON-style data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ...errors import TVMError


@dataclass(frozen=True, eq=False)
class Instruction:
    """One primitive call: its kind (``"Split"``), the schedule method, the arguments (a name that
    starts with ``*`` holds positional arguments) and the random variables it returned."""

    kind: str
    method: str
    args: Tuple[Tuple[str, Any], ...]
    outputs: Tuple[Any, ...]
    list_output: bool = False

    def __repr__(self) -> str:
        return f"Instruction({self.kind})"


def _prefix(rv) -> str:
    return {"BlockRV": "b", "LoopRV": "l"}.get(type(rv).__name__, "v")


def _is_rv(x) -> bool:
    return type(x).__name__ in ("BlockRV", "LoopRV")


class Trace:
    """The instructions applied to a schedule, in order.

    Attributes
    ----------
    insts : list of Instruction
    decisions : dict
        Random decisions (none: every primitive here is deterministic).
    """

    def __init__(self, insts=None, decisions=None):
        self.insts: List[Instruction] = list(insts or [])
        self.decisions: Dict[Instruction, Any] = dict(decisions or {})

    def append(self, inst: Instruction, decision: Any = None) -> None:
        self.insts.append(inst)

    def pop(self):
        return self.insts.pop() if self.insts else None

    def _names(self) -> Dict[int, str]:
        names: Dict[int, str] = {}
        n = 0
        for inst in self.insts:
            for rv in inst.outputs:
                if id(rv) not in names:
                    names[id(rv)] = f"{_prefix(rv)}{n}"
                    n += 1
        return names

    def as_python(self, remove_postproc: bool = False) -> List[str]:
        """The trace as Python statements, one per instruction."""
        names = self._names()

        def val(x) -> str:
            if _is_rv(x):
                return names.get(id(x), "<unknown>")
            if isinstance(x, (list, tuple)):
                return "[" + ", ".join(val(y) for y in x) + "]"
            if isinstance(x, str):
                return json.dumps(x)
            if x is None or isinstance(x, (bool, int, float)):
                return repr(x)
            from ...script.printer import py_value

            return py_value(x)

        out = []
        for inst in self.insts:
            parts = []
            for k, v in inst.args:
                if k.startswith("*"):
                    parts += [val(x) for x in v]
                else:
                    parts.append(f"{k}={val(v)}")
            call = f"sch.{inst.method}({', '.join(parts)})"
            outs = [names[id(o)] for o in inst.outputs]
            if inst.list_output:
                lhs = (", ".join(outs) + ("," if len(outs) == 1 else "")) if outs else ""
            else:
                lhs = outs[0] if outs else ""
            out.append(f"{lhs} = {call}" if lhs else call)
        return out

    def __str__(self) -> str:
        body = self.as_python() or ["pass"]
        return "# from kernels import tir\ndef apply_trace(sch: tir.Schedule) -> None:\n" + \
            "\n".join("  " + x for x in body)

    __repr__ = __str__

    def show(self, style=None, black_format: bool = False) -> None:
        print(str(self))

    def apply_to_schedule(self, sch, remove_postproc: bool = False, decision_provider=None) -> None:
        """Redo every instruction on ``sch`` (usually a fresh schedule of the same module)."""
        rv_map: Dict[int, Any] = {}

        def m(x):
            if _is_rv(x):
                got = rv_map.get(id(x))
                if got is None:
                    raise TVMError(f"trace: {type(x).__name__} used before the instruction that made it")
                return got
            if isinstance(x, list):
                return [m(y) for y in x]
            if isinstance(x, tuple):
                return tuple(m(y) for y in x)
            return x

        for inst in self.insts:
            pos, kw = [], {}
            for k, v in inst.args:
                if k.startswith("*"):
                    pos += [m(x) for x in v]
                else:
                    kw[k] = m(v)
            result = getattr(sch, inst.method)(*pos, **kw)
            outs = list(result) if inst.list_output else ([] if result is None else [result])
            if len(outs) != len(inst.outputs):
                raise TVMError(f"trace: {inst.method} returned {len(outs)} values on replay, "
                               f"{len(inst.outputs)} when recorded")
            for a, b in zip(inst.outputs, outs):
                rv_map[id(a)] = b

    def as_json(self, remove_postproc: bool = False) -> list:
        """``[instructions, decisions]``; random variables are written as ``"$b0"``, ``"$l1"``."""
        names = self._names()

        def enc(x):
            if _is_rv(x):
                return "$" + names[id(x)]
            if isinstance(x, (list, tuple)):
                return [enc(y) for y in x]
            if x is None or isinstance(x, (bool, int, float, str)):
                return x
            from ...script.printer import py_value

            return {"expr": py_value(x)}

        insts = [[inst.kind, inst.method, [[k, enc(v)] for k, v in inst.args],
                  [names[id(o)] for o in inst.outputs], inst.list_output] for inst in self.insts]
        return [insts, []]

    @staticmethod
    def apply_json_to_schedule(json_obj, sch) -> None:
        """Replay a trace stored with :meth:`as_json` on ``sch``."""
        insts, _decisions = json_obj
        env: Dict[str, Any] = {}

        def dec(x):
            if isinstance(x, str) and x.startswith("$"):
                if x[1:] not in env:
                    raise TVMError(f"trace JSON: {x[1:]} is used before it is defined")
                return env[x[1:]]
            if isinstance(x, list):
                return [dec(y) for y in x]
            if isinstance(x, dict) and "expr" in x:
                from ...script.parser import from_source

                raise TVMError(f"trace JSON: expression arguments cannot be replayed ({x['expr']}; "
                               f"{from_source.__name__} parses whole functions only)")
            return x

        for kind, method, args, outs, list_output in insts:
            pos, kw = [], {}
            for k, v in args:
                if k.startswith("*"):
                    pos += [dec(y) for y in v]
                else:
                    kw[k] = dec(v)
            result = getattr(sch, method)(*pos, **kw)
            got = list(result) if list_output else ([] if result is None else [result])
            if len(got) != len(outs):
                raise TVMError(f"trace JSON: {kind} returned {len(got)} values, expected {len(outs)}")
            for name, rv in zip(outs, got):
                env[name] = rv

    def simplified(self, remove_postproc: bool = False) -> "Trace":
        return Trace(self.insts)
