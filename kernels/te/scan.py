"""``te.scan``: a recurrence over the first (time) dimension of its states.

``scan(init, update, state)`` computes ``state[0:k] = init`` (``k = init.shape[0]``) and, for
``t = k, k+1, ...``, ``state[t] = update[t]``, where ``update`` may read ``state`` at earlier times.
Lowered, it is one loop over ``t`` (the op's ``scan_axis``) holding the update's loop nest; init,
update and the state placeholder all live in the scan's output buffer, so no copy is made. The
stages between the state placeholder and the update (the scan body) are computed inside the time
loop; schedule them (and the update's non-time axes) as usual.
"""

from __future__ import annotations

from typing import List, Sequence, Union

from ..errors import TVMError
from ..tir.expr import Var, const
from ..tir.simplify import simplify, structural_equal
from .tensor import ComputeOp, IterVar, PlaceholderOp, Range, Tensor


class ScanOp(ComputeOp):
    """The scan operation; its outputs are the states after every time step.

    Attributes
    ----------
    scan_axis : IterVar
        The time axis, over ``[init.shape[0], state.shape[0])``.
    init, update, state_placeholder : list of Tensor
        One per state.
    spatial_axis_ : list of IterVar
        The non-time dimensions of the states (all states' dimensions, in order).
    """

    def __init__(self, name: str, tag: str, attrs, scan_axis: IterVar, init: List[Tensor],
                 update: List[Tensor], state: List[Tensor], inputs: List[Tensor]):
        self.scan_axis = scan_axis
        self.init = list(init)
        self.update = list(update)
        self.state_placeholder = list(state)
        self.inputs = list(inputs)
        spatial, loads = [], []
        for k, u in enumerate(update):
            axes = [IterVar(Range(const(0), d), Var(f"{name}.{k}.i{j + 1}"), IterVar.DataPar)
                    for j, d in enumerate(u.shape[1:])]
            spatial.extend(axes)
            loads.append(u(scan_axis.var, *[iv.var for iv in axes]))
        self.spatial_axis_ = spatial
        super().__init__(name, tag, (scan_axis,) + tuple(spatial), (), tuple(loads), attrs)
        self._outputs = [Tensor(self, k, tuple(s.shape), u.dtype)
                         for k, (s, u) in enumerate(zip(state, update))]

    @property
    def input_tensors(self) -> List[Tensor]:
        out, seen = [], set()
        for t in self.init + self.update + self.inputs:
            if (id(t.op), t.value_index) not in seen:
                seen.add((id(t.op), t.value_index))
                out.append(t)
        return out

    def body_ops(self) -> list:
        """The operations on a path from a state placeholder to an update (computed each step)."""
        states = {id(s.op) for s in self.state_placeholder}
        memo: dict = {}

        def reaches(op) -> bool:
            got = memo.get(id(op))
            if got is None:
                memo[id(op)] = False  # cycles cannot occur in a dataflow graph; this ends recursion
                got = id(op) in states or any(reaches(t.op) for t in op.input_tensors)
                memo[id(op)] = got
            return got

        out, seen = [], set()

        def collect(op):
            if id(op) in seen or id(op) in states or not reaches(op):
                return
            seen.add(id(op))
            for t in op.input_tensors:
                collect(t.op)
            out.append(op)

        for u in self.update:
            collect(u.op)
        return out


def _as_list(x, what: str) -> List[Tensor]:
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    for t in items:
        if not isinstance(t, Tensor):
            raise TVMError(f"scan: {what} must be tensors, got {t!r}")
    return items


def scan(init, update, state_placeholder, inputs=None, name: str = "scan", tag: str = "",
         attrs=None) -> Union[Tensor, List[Tensor]]:
    """A recurrence over the first dimension (see the module docstring).

    Parameters
    ----------
    init, update, state_placeholder : Tensor or list of Tensor
        One of each per state; ``init`` gives the first ``init.shape[0]`` time steps, ``update``
        step ``t`` from earlier steps read through ``state_placeholder``.
    inputs : list of Tensor, optional
        The other tensors the scan reads (accepted for TVM compatibility; found from the update).

    Returns
    -------
    Tensor or list of Tensor
        The states over every time step (one tensor per state).
    """
    init = _as_list(init, "init")
    update = _as_list(update, "update")
    state = _as_list(state_placeholder, "state_placeholder")
    inputs = _as_list(inputs, "inputs") if inputs is not None else []
    if not (len(init) == len(update) == len(state)):
        raise TVMError(f"scan {name}: init, update and state_placeholder need one tensor per state; got "
                       f"{len(init)}, {len(update)} and {len(state)}")
    for k, (i, u, s) in enumerate(zip(init, update, state)):
        if not isinstance(s.op, PlaceholderOp):
            raise TVMError(f"scan {name}: state_placeholder[{k}] must be a te.placeholder, got {s.op.name}")
        if not isinstance(u.op, ComputeOp):
            raise TVMError(f"scan {name}: update[{k}] must be a computed tensor")
        if not (len(i.shape) == len(u.shape) == len(s.shape)) or len(s.shape) < 1:
            raise TVMError(f"scan {name}: init, update and state {k} must have the same number of "
                           "dimensions (at least the time dimension)")
        if u.dtype != s.dtype or i.dtype != s.dtype:
            raise TVMError(f"scan {name}: state {k} has dtype {s.dtype} but init/update give "
                           f"{i.dtype}/{u.dtype}")
    t0 = init[0].shape[0]
    for k, i in enumerate(init[1:], 1):
        if not structural(i.shape[0], t0):
            raise TVMError(f"scan {name}: every init must cover the same number of time steps")
    extent = simplify(update[0].shape[0] - t0)
    axis = IterVar(Range(t0, extent), Var(f"{name}.idx"), IterVar.Ordered)
    op = ScanOp(name, tag, attrs, axis, init, update, state, inputs)
    outs = [op.output(k) for k in range(op.num_outputs)]
    return outs[0] if len(outs) == 1 else outs


def structural(a, b) -> bool:
    return structural_equal(simplify(a), simplify(b))


def is_scan_state(op, schedule) -> bool:
    """Whether placeholder ``op`` is the state of a scan in ``schedule`` (it is not an argument)."""
    return any(isinstance(st.op, ScanOp) and any(s.op is op for s in st.op.state_placeholder)
               for st in schedule.stages)


def storage_aliases(scan_op: ScanOp) -> dict:
    """(op id, output index) of init, update and state -> (scan id, output index): one buffer."""
    out = {}
    for k, (i, u, s) in enumerate(zip(scan_op.init, scan_op.update, scan_op.state_placeholder)):
        for t in (i, u, s):
            out[(id(t.op), t.value_index)] = (id(scan_op), k)
    return out


__all__: Sequence[str] = ["ScanOp", "scan"]
