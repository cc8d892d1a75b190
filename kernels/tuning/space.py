"""Configuration spaces: the knobs a schedule template defines and the points of the space.

A template asks for its configuration (``cfg = autotvm.get_config()``) and defines knobs on it
(``cfg.define_knob("bx", [2, 4, 8])``, ``cfg.define_split("tile_x", x, num_outputs=2)``), then reads
the chosen values (``cfg["bx"].val``, ``cfg["tile_x"].apply(s, C, x)``). The same template code runs
in three situations, distinguished by the object ``get_config`` returns:

- :class:`ConfigSpace` while a task is created: each define records a knob and answers with its
  first candidate, so the template runs to the end and the space is known;
- :class:`ConfigEntity`, one point of the space (a tuner's candidate, the best one from a log);
- :class:`FallbackConfigEntity` outside any task: defines give defaults (first candidate; splits
  with every factor 1 but the outermost).

The space is the Cartesian product of the knobs, indexed in mixed radix with the first knob fastest
varying (as TVM does), so ``space.get(i)`` and a config's ``index`` identify points across runs.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Optional, Sequence

from ..errors import TVMError


class SpaceError(TVMError):
    """A knob defined twice with different candidates, an unknown knob, an index out of range."""


# -- one knob ---------------------------------------------------------------------------------------


class OtherOptionEntity:
    """The chosen value of a ``define_knob`` knob (``.val``)."""

    def __init__(self, val: Any):
        self.val = val

    def __repr__(self) -> str:
        return repr(self.val)


class SplitEntity:
    """The chosen factors of a ``define_split`` knob: ``size`` lists them outermost first (-1: the
    remainder). ``apply(s, op, axis)`` splits the axis accordingly and returns the new axes."""

    def __init__(self, size: Sequence[int]):
        self.size = list(size)

    @property
    def val(self) -> List[int]:
        return self.size

    def apply(self, sch, op, axis) -> list:
        """Split from the outside in (as TVM): each step splits off the product of the factors
        still inside, so the loops are named x.outer, x.inner.outer, x.inner.inner..."""
        stage = sch[op]
        axes = []
        for k in range(1, len(self.size)):
            outer, axis = stage.split(axis, factor=int(math.prod(self.size[k:])))
            axes.append(outer)
        axes.append(axis)
        return axes

    def __repr__(self) -> str:
        return repr(self.size)


class KnobSpace:
    """The candidates of one knob."""

    kind = "knob"

    def __init__(self, name: str, entities: List[Any]):
        self.name = name
        self.entities = entities

    def __len__(self) -> int:
        return len(self.entities)

    def get(self, i: int):
        return self.entities[i]

    def describe(self) -> str:
        return f"{type(self).__name__}({self.values()!r}) len={len(self)}"

    def values(self) -> list:
        return [e.val for e in self.entities]


class OtherOptionSpace(KnobSpace):
    kind = "knob"

    def describe(self) -> str:
        return f"OtherOption({self.values()!r}) len={len(self)}"


class SplitSpace(KnobSpace):
    kind = "split"

    def __init__(self, name: str, extent: int, num_outputs: int, policy: str = "factors",
                 max_factor: Optional[int] = None, filter=None):
        self.extent = extent
        self.num_outputs = num_outputs
        self.policy = policy
        sizes = _split_candidates(extent, num_outputs, policy, max_factor or extent)
        if filter is not None:
            sizes = [x for x in sizes if filter(SplitEntity(x))]
        if not sizes:
            raise SpaceError(f"define_split({name!r}): no way to split {extent} into {num_outputs} parts "
                             f"under policy {policy!r}")
        super().__init__(name, [SplitEntity(x) for x in sizes])

    def describe(self) -> str:
        return (f"Split(policy={self.policy}, product={self.extent}, num_outputs={self.num_outputs}) "
                f"len={len(self)}")


def _factors(n: int) -> List[int]:
    out = set()
    for d in range(1, int(math.isqrt(n)) + 1):
        if n % d == 0:
            out.update((d, n // d))
    return sorted(out)


def _split_candidates(extent: int, parts: int, policy: str, max_factor: int) -> List[List[int]]:
    """Factorizations of ``extent`` into ``parts`` factors, outermost first (the outer one -1)."""
    if policy == "factors":
        choices = lambda rest: [f for f in _factors(rest) if f <= max_factor]  # noqa: E731
    elif policy == "power2":
        choices = lambda rest: [1 << e for e in range(0, int(math.log2(max(rest, 1))) + 1)  # noqa: E731
                                if (1 << e) <= max_factor]
    else:
        raise SpaceError(f"define_split: unknown policy {policy!r} (factors or power2)")

    def rec(rest: int, k: int) -> Iterator[List[int]]:
        if k == 1:
            yield []
            return
        for f in choices(rest):
            for tail in rec(max(rest // f, 1) if policy == "factors" else rest, k - 1):
                yield [f] + tail

    out = []
    for tail in rec(extent, parts):
        out.append([-1] + list(reversed(tail)))
    return out


# -- configurations ---------------------------------------------------------------------------------


class _Defining:
    """What the define_* methods do (record, or just answer); shared by spaces and points."""

    def __init__(self):
        self.space_map: Dict[str, KnobSpace] = {}
        self._entity_map: Dict[str, Any] = {}

    def _define(self, space: KnobSpace):
        old = self.space_map.get(space.name)
        if old is not None:
            if old.values() != space.values():
                raise SpaceError(f"knob {space.name!r} is defined twice with different candidates: "
                                 f"{old.values()} and {space.values()}")
            return
        self.space_map[space.name] = space
        self._on_define(space)

    def _on_define(self, space: KnobSpace) -> None:
        raise NotImplementedError

    def define_knob(self, name: str, candidate: Sequence[Any]) -> None:
        """A knob taking one of ``candidate`` (its order is the knob's order in the space)."""
        candidate = list(candidate)
        if not candidate:
            raise SpaceError(f"define_knob({name!r}): no candidates")
        self._define(OtherOptionSpace(name, [OtherOptionEntity(c) for c in candidate]))

    def define_split(self, name: str, axis, policy: str = "factors", num_outputs: int = 2,
                     max_factor: Optional[int] = None, filter=None, **kwargs) -> None:
        """A knob splitting ``axis`` (an IterVar of constant extent, or an int) into
        ``num_outputs`` loops; ``cfg[name].apply(s, op, axis)`` performs the split."""
        extent = axis if isinstance(axis, int) else _const_extent(axis, name)
        self._define(SplitSpace(name, extent, num_outputs, policy, max_factor, filter))

    def __getitem__(self, name: str):
        got = self._entity_map.get(name)
        if got is None:
            raise SpaceError(f"the configuration has no knob {name!r}; defined: "
                             f"{', '.join(self.space_map) or 'none'}")
        return got

    def __contains__(self, name: str) -> bool:
        return name in self._entity_map


def _const_extent(axis, name: str) -> int:
    dom = getattr(axis, "dom", None)
    ext = getattr(dom, "extent", None)
    try:
        return int(ext)
    except (TypeError, ValueError):
        raise SpaceError(f"define_split({name!r}): the axis needs a constant extent, got {ext}") from None


class ConfigSpace(_Defining):
    """The space a template defines; while it is being defined, each knob answers with its first
    candidate. ``len(space)`` points, ``space.get(i)`` the i-th."""

    def __init__(self):
        super().__init__()
        self.template_key = None

    def _on_define(self, space: KnobSpace) -> None:
        self._entity_map[space.name] = space.get(0)

    def __len__(self) -> int:
        n = 1
        for sp in self.space_map.values():
            n *= len(sp)
        return n

    def get(self, index: int) -> "ConfigEntity":
        if not 0 <= index < len(self):
            raise SpaceError(f"config index {index} is out of range: the space has {len(self)} points")
        entities, rest = {}, index
        for name, sp in self.space_map.items():
            entities[name] = sp.get(rest % len(sp))
            rest //= len(sp)
        return ConfigEntity(index, entities, self)

    def index_of(self, values: Dict[str, Any]) -> int:
        """The index of the point whose knobs take ``values`` (knob name -> value)."""
        index, stride = 0, 1
        for name, sp in self.space_map.items():
            if name not in values:
                raise SpaceError(f"no value given for knob {name!r}")
            vals = sp.values()
            if values[name] not in vals:
                raise SpaceError(f"knob {name!r} has no candidate {values[name]!r}; candidates: {vals}")
            index += vals.index(values[name]) * stride
            stride *= len(sp)
        return index

    def __iter__(self) -> Iterator["ConfigEntity"]:
        for i in range(len(self)):
            yield self.get(i)

    def __repr__(self) -> str:
        lines = [f"ConfigSpace (len={len(self)}, space_map="]
        for k, (name, sp) in enumerate(self.space_map.items()):
            lines.append(f"  {k:3d} {name}: {sp.describe()}")
        lines.append(")")
        return "\n".join(lines)

    __str__ = __repr__


class ConfigEntity(_Defining):
    """One point of a space. Defining a knob of its space is a no-op (the value is already chosen);
    a knob it does not know is an error naming it."""

    def __init__(self, index: int, entities: Dict[str, Any], space: Optional[ConfigSpace] = None):
        super().__init__()
        self.index = index
        self._entity_map = dict(entities)
        self.space = space
        if space is not None:
            self.space_map = dict(space.space_map)
        self.template_key = None
        self.code_hash = None

    def _on_define(self, space: KnobSpace) -> None:
        if space.name not in self._entity_map:
            raise SpaceError(f"the configuration (index {self.index}) has no value for knob {space.name!r}")

    def _define(self, space: KnobSpace):
        if space.name in self._entity_map:
            return
        super()._define(space)

    def to_values(self) -> Dict[str, Any]:
        return {k: v.val for k, v in self._entity_map.items()}

    def to_json_dict(self) -> dict:
        """autotvm's record layout: {"index", "code_hash", "entity": [[name, kind, value]...]}."""
        ent = []
        for name, e in self._entity_map.items():
            kind = "sp" if isinstance(e, SplitEntity) else "ot"
            ent.append([name, kind, e.size if isinstance(e, SplitEntity) else e.val])
        return {"index": self.index, "code_hash": self.code_hash, "entity": ent}

    @staticmethod
    def from_json_dict(d: dict) -> "ConfigEntity":
        ents = {}
        for name, kind, val in d["entity"]:
            ents[name] = SplitEntity(val) if kind == "sp" else OtherOptionEntity(val)
        return ConfigEntity(int(d["index"]), ents)

    def __repr__(self) -> str:
        pairs = ", ".join(f"({k!r}, {v!r})" for k, v in self._entity_map.items())
        return f"[{pairs}],{self.template_key or ''},{self.code_hash},{self.index}"

    __str__ = __repr__


class FallbackConfigEntity(_Defining):
    """The configuration outside any task: each knob its default (the first candidate, a split
    with every inner factor 1)."""

    def __init__(self):
        super().__init__()
        self.index = -1
        self.is_fallback = True

    def _on_define(self, space: KnobSpace) -> None:
        if isinstance(space, SplitSpace):
            self._entity_map[space.name] = SplitEntity([-1] + [1] * (space.num_outputs - 1))
        else:
            self._entity_map[space.name] = space.get(0)

    def __repr__(self) -> str:
        pairs = ", ".join(f"({k!r}, {v!r})" for k, v in self._entity_map.items())
        return f"[{pairs}],fallback"
