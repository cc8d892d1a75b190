"""The trace of a schedule: the primitives applied, printable as Python and replayable.

Each :class:`Instruction` has a kind (:class:`InstructionKind`, e.g. ``"Split"``), its inputs (the
handles and values it takes: ``[loop, None, 128]``), its attributes (the other arguments:
``[True]`` for ``preserve_unit_iters``) and its outputs (the handles it returned). A sampling
instruction also has a decision, kept in :attr:`Trace.decisions`. ``str(sch.trace)`` is a Python
function that redoes the scheduling on a fresh schedule::

    # from kernels import tir
    def apply_trace(sch: tir.Schedule) -> None:
      b0 = sch.get_block(name="C", func_name="main")
      l1, = sch.get_loops(block=b0)
      l2, l3 = sch.split(loop=l1, factors=[None, 128], preserve_unit_iters=True)
      sch.bind(loop=l2, thread_axis="blockIdx.x")

``trace.apply_to_schedule(sch)`` replays it; ``as_json`` / ``Trace.apply_json_to_schedule`` store and
replay it as JSON-style data: ``[[[kind, inputs, attrs, outputs], ...], [[index, decision], ...]]``
with handles written as their names (``"b0"``, ``"l1"``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...errors import TVMError


@dataclass(frozen=True, eq=False)
class InstructionKind:
    """A kind of schedule instruction: its name, the schedule method that applies it, the names of
    its inputs (``*loops``: the rest, passed positionally; ``+factors``: the rest, passed as one
    list) and attributes, whether it is pure (no effect but its outputs) and whether it samples (its
    decision is passed back as ``decision=``). ``optional`` attributes are left out of the call when
    None and may hold handles (``consumer_blocks``); other attributes are plain values."""

    name: str
    method: str
    inputs: Tuple[str, ...] = ()
    attrs: Tuple[str, ...] = ()
    is_pure: bool = False
    list_output: bool = False
    samples: bool = False
    optional: Tuple[str, ...] = ()

    @staticmethod
    def get(name: str) -> "InstructionKind":
        """The kind registered as ``name`` (``"GetLoops"``, ``"Split"``...)."""
        kind = _KINDS.get(name)
        if kind is None:
            raise TVMError(f"InstructionKind.get: unknown instruction kind {name!r}; known kinds are "
                           f"{', '.join(sorted(_KINDS))}")
        return kind

    def same_as(self, other: Any) -> bool:
        return self is other

    def __repr__(self) -> str:
        return self.name


def _k(name, method, inputs=(), attrs=(), pure=False, lst=False, samples=False, optional=()):
    return InstructionKind(name, method, tuple(inputs), tuple(attrs), pure, lst, samples, tuple(optional))


_KINDS: Dict[str, InstructionKind] = {k.name: k for k in [
    _k("GetBlock", "get_block", (), ("name", "func_name"), pure=True),
    _k("GetLoops", "get_loops", ("block",), pure=True, lst=True),
    _k("GetChildBlocks", "get_child_blocks", ("block_or_loop",), pure=True, lst=True),
    _k("GetProducers", "get_producers", ("block",), pure=True, lst=True),
    _k("GetConsumers", "get_consumers", ("block",), pure=True, lst=True),
    _k("GetSRef", "get_sref", ("rand_var",), pure=True),
    _k("Split", "split", ("loop", "+factors"), ("preserve_unit_iters",), lst=True),
    _k("Fuse", "fuse", ("*loops",), ("preserve_unit_iters",)),
    _k("Reorder", "reorder", ("*ordered_loops",)),
    _k("Parallel", "parallel", ("loop",)),
    _k("Vectorize", "vectorize", ("loop",)),
    _k("Unroll", "unroll", ("loop",)),
    _k("Bind", "bind", ("loop",), ("thread_axis",)),
    _k("CacheRead", "cache_read", ("block",), ("read_buffer_index", "storage_scope", "consumer_blocks"),
       optional=("consumer_blocks",)),
    _k("CacheWrite", "cache_write", ("block",), ("write_buffer_index", "storage_scope", "consumer_blocks"),
       optional=("consumer_blocks",)),
    _k("ComputeAt", "compute_at", ("block", "loop"), ("preserve_unit_loops", "index")),
    _k("ReverseComputeAt", "reverse_compute_at", ("block", "loop"), ("preserve_unit_loops", "index")),
    _k("ComputeInline", "compute_inline", ("block",)),
    _k("ReverseComputeInline", "reverse_compute_inline", ("block",)),
    _k("DecomposeReduction", "decompose_reduction", ("block", "loop")),
    _k("RFactor", "rfactor", ("loop",), ("factor_axis",)),
    _k("StorageAlign", "storage_align", ("block",), ("buffer_index", "axis", "factor", "offset")),
    _k("SetScope", "set_scope", ("block",), ("buffer_index", "storage_scope")),
    _k("Annotate", "annotate", ("block_or_loop",), ("ann_key", "ann_val")),
    _k("Unannotate", "unannotate", ("block_or_loop",), ("ann_key",)),
    _k("SampleCategorical", "sample_categorical", (), ("candidates", "probs"), pure=True, samples=True),
    _k("SamplePerfectTile", "sample_perfect_tile", ("loop",), ("n", "max_innermost_factor"), pure=True,
       lst=True, samples=True),
    _k("EnterPostproc", "enter_postproc"),
]}


def _is_rv(x) -> bool:
    return type(x).__name__ in ("BlockRV", "LoopRV", "ExprRV")


def _prefix(rv) -> str:
    return {"BlockRV": "b", "LoopRV": "l"}.get(type(rv).__name__, "v")


class Instruction:
    """One primitive call: ``Instruction(kind, inputs, attrs, outputs)``.

    Parameters
    ----------
    kind : InstructionKind or str
    inputs : list
        Handles and values, in the order of ``kind.inputs``.
    attrs : list
        The other arguments, in the order of ``kind.attrs``.
    outputs : list
        The handles the primitive returned.
    """

    def __init__(self, kind, inputs: Sequence = (), attrs: Sequence = (), outputs: Sequence = ()):
        self.kind = kind if isinstance(kind, InstructionKind) else InstructionKind.get(kind)
        self.inputs = list(inputs)
        self.attrs = list(attrs)
        self.outputs = list(outputs)

    def same_as(self, other: Any) -> bool:
        return self is other

    def call_args(self, value) -> Tuple[List[Any], Dict[str, Any]]:
        """Positional and keyword arguments of the schedule method, each input and attribute passed
        through ``value``."""
        pos: List[Any] = []
        kw: Dict[str, Any] = {}
        ins = list(self.inputs)
        for name in self.kind.inputs:
            if name[0] == "*":
                pos += [value(x) for x in ins]
                ins = []
            elif name[0] == "+":
                kw[name[1:]] = [value(x) for x in ins]
                ins = []
            else:
                if not ins:
                    raise TVMError(f"instruction {self.kind.name}: input {name} is missing")
                kw[name] = value(ins.pop(0))
        for name, v in zip(self.kind.attrs, self.attrs):
            if name in self.kind.optional and v is None:
                continue
            kw[name] = value(v)
        return pos, kw

    def python(self, names: Dict[int, str], decision: Any = None) -> str:
        """The instruction as one Python statement; handles not in ``names`` print as ``_``."""

        def val(x) -> str:
            if _is_rv(x):
                return names.get(id(x), "_")
            if isinstance(x, (list, tuple)):
                return "[" + ", ".join(val(y) for y in x) + "]"
            if isinstance(x, str):
                return json.dumps(x)
            if x is None or isinstance(x, (bool, int, float)):
                return repr(x)
            if type(x).__name__ == "IntImm":
                return repr(int(x.value))
            from ...script.printer import py_value

            return py_value(x)

        pos, kw = self.call_args(lambda x: x)
        parts = [val(x) for x in pos] + [f"{k}={val(v)}" for k, v in kw.items()]
        if self.kind.samples and decision is not None:
            parts.append(f"decision={val(_plain_decision(decision))}")
        call = f"sch.{self.kind.method}({', '.join(parts)})"
        outs = [names.get(id(o), "_") for o in self.outputs]
        if self.kind.list_output:
            lhs = (", ".join(outs) + ("," if len(outs) == 1 else "")) if outs else ""
        else:
            lhs = outs[0] if outs else ""
        return f"{lhs} = {call}" if lhs else call

    def __str__(self) -> str:
        return self.python({})

    def __repr__(self) -> str:
        return f"Instruction({self.kind.name})"


def _plain_decision(d):
    if type(d).__name__ == "IntImm":
        return int(d.value)
    if isinstance(d, (list, tuple)):
        return [_plain_decision(x) for x in d]
    return d


class Trace:
    """The instructions applied to a schedule, in order, and the decisions of its sampling
    instructions.

    Attributes
    ----------
    insts : list of Instruction
    decisions : dict
        Sampling instruction -> its decision (an index into the candidates for
        ``sample_categorical``, the factors for ``sample_perfect_tile``).
    """

    def __init__(self, insts=None, decisions=None):
        self.insts: List[Instruction] = list(insts or [])
        self.decisions: Dict[Instruction, Any] = dict(decisions or {})

    def append(self, inst: Instruction, decision: Any = None) -> None:
        """Add ``inst`` (with its decision, for a sampling instruction) at the end."""
        self.insts.append(inst)
        if decision is not None:
            self.decisions[inst] = decision

    def pop(self) -> Optional[Instruction]:
        """Remove and return the last instruction (None when empty)."""
        if not self.insts:
            return None
        inst = self.insts.pop()
        self.decisions.pop(inst, None)
        return inst

    def get_decision(self, inst: Instruction) -> Any:
        """The decision of ``inst`` (None for an instruction that does not sample)."""
        return self.decisions.get(inst)

    def with_decision(self, inst: Instruction, decision: Any, remove_postproc: bool) -> "Trace":
        """A copy with ``inst``'s decision replaced."""
        out = self.simplified(remove_postproc) if remove_postproc else Trace(self.insts, self.decisions)
        out.decisions[inst] = decision
        return out

    def _kept(self, remove_postproc: bool) -> List[Instruction]:
        out = []
        for inst in self.insts:
            if remove_postproc and inst.kind.name == "EnterPostproc":
                break
            out.append(inst)
        return out

    def _names(self, insts) -> Dict[int, str]:
        names: Dict[int, str] = {}
        n = 0
        for inst in insts:
            for rv in inst.outputs:
                if id(rv) not in names:
                    names[id(rv)] = f"{_prefix(rv)}{n}"
                    n += 1
        return names

    def as_python(self, remove_postproc: bool = False) -> List[str]:
        """The trace as Python statements, one per instruction."""
        insts = self._kept(remove_postproc)
        names = self._names(insts)
        return [inst.python(names, self.decisions.get(inst)) for inst in insts]

    def __str__(self) -> str:
        body = self.as_python() or ["pass"]
        return "# from kernels import tir\ndef apply_trace(sch: tir.Schedule) -> None:\n" + \
            "\n".join("  " + x for x in body)

    __repr__ = __str__

    def show(self, style=None, black_format: bool = False) -> None:
        print(str(self))

    def apply_to_schedule(self, sch, remove_postproc: bool = False, decision_provider=None) -> None:
        """Redo every instruction on ``sch`` (usually a fresh schedule of the same module).
        ``decision_provider(inst, inputs, attrs, decision)`` may change a sampling decision."""
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

        for inst in self._kept(remove_postproc):
            decision = self.decisions.get(inst)
            if decision_provider is not None and inst.kind.samples:
                decision = decision_provider(inst, [m(x) for x in inst.inputs], inst.attrs, decision)
            outs = _apply(sch, inst, m, decision)
            if len(outs) != len(inst.outputs):
                raise TVMError(f"trace: {inst.kind.method} returned {len(outs)} values on replay, "
                               f"{len(inst.outputs)} when recorded")
            for a, b in zip(inst.outputs, outs):
                rv_map[id(a)] = b

    def as_json(self, remove_postproc: bool = False) -> list:
        """``[instructions, decisions]``: each instruction ``[kind, inputs, attrs, outputs]`` with
        handles written as their names; each decision ``[instruction index, decision]``."""
        insts = self._kept(remove_postproc)
        names = self._names(insts)

        def enc(x):
            if _is_rv(x):
                if id(x) not in names:
                    raise TVMError(f"trace JSON: {type(x).__name__} is used before the instruction that "
                                   "made it")
                return names[id(x)]
            if isinstance(x, (list, tuple)):
                return [enc(y) for y in x]
            if type(x).__name__ == "IntImm":
                return int(x.value)
            if x is None or isinstance(x, (bool, int, float, str)):
                return x
            from ...script.printer import py_value

            return {"expr": py_value(x)}

        out = [[inst.kind.name, [enc(x) for x in inst.inputs], [enc(x) for x in inst.attrs],
                [names[id(o)] for o in inst.outputs]] for inst in insts]
        decisions = [[k, enc(_plain_decision(self.decisions[inst]))] for k, inst in enumerate(insts)
                     if inst in self.decisions]
        return [out, decisions]

    @staticmethod
    def apply_json_to_schedule(json_obj, sch) -> None:
        """Replay a trace stored with :meth:`as_json` on ``sch``."""
        insts, decisions = json_obj
        by_index = {int(k): d for k, d in decisions}
        env: Dict[str, Any] = {}

        def dec(x):
            if isinstance(x, str) and x in env:
                return env[x]
            if isinstance(x, list):
                return [dec(y) for y in x]
            if isinstance(x, dict) and "expr" in x:
                raise TVMError(f"trace JSON: expression arguments cannot be replayed ({x['expr']})")
            return x

        for k, entry in enumerate(insts):
            if len(entry) != 4:
                raise TVMError(f"trace JSON: instruction {k} has {len(entry)} fields, expected 4 "
                               "([kind, inputs, attrs, outputs])")
            kind_name, inputs, attrs, outs = entry
            kind = InstructionKind.get(kind_name)
            for x in inputs:
                if isinstance(x, str) and x not in env and _looks_like_rv(x):
                    raise TVMError(f"trace JSON: {x} is used before it is defined (instruction {k}, "
                                   f"{kind_name})")
            attrs = [dec(a) if name in kind.optional else a for name, a in zip(kind.attrs, attrs)]
            inst = Instruction(kind, [dec(x) for x in inputs], attrs, [None] * len(outs))
            got = _apply(sch, inst, lambda x: x, by_index.get(k))
            if len(got) != len(outs):
                raise TVMError(f"trace JSON: {kind_name} returned {len(got)} values, expected {len(outs)}")
            for name, rv in zip(outs, got):
                env[name] = rv

    def simplified(self, remove_postproc: bool) -> "Trace":
        """A copy without the pure instructions whose outputs nothing uses (and, with
        ``remove_postproc``, without the post-processing from ``enter_postproc`` on)."""
        insts = self._kept(remove_postproc)
        used: set = set()
        kept: List[Instruction] = []

        def uses(x):
            if _is_rv(x):
                used.add(id(x))
            elif isinstance(x, (list, tuple)):
                for y in x:
                    uses(y)

        for inst in reversed(insts):
            if inst.kind.is_pure and not any(id(o) in used for o in inst.outputs):
                continue
            kept.append(inst)
            uses(inst.inputs)
            uses(inst.attrs)
        kept.reverse()
        return Trace(kept, {i: d for i, d in self.decisions.items() if i in kept})


def _looks_like_rv(x: str) -> bool:
    return len(x) > 1 and x[0] in "blv" and x[1:].isdigit()


def _apply(sch, inst: Instruction, value, decision) -> List[Any]:
    pos, kw = inst.call_args(value)
    if inst.kind.samples and decision is not None:
        kw["decision"] = _plain_decision(decision)
    result = getattr(sch, inst.kind.method)(*pos, **kw)
    if inst.kind.list_output:
        return list(result)
    return [] if result is None else [result]


__all__ = ["Instruction", "InstructionKind", "Trace"]
