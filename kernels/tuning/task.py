"""Tuning tasks: a registered schedule template applied to fixed arguments for one target.

``@template(name)`` registers a function building ``(schedule, args)``; inside it ``get_config()``
returns the configuration of the current dispatch context (see :mod:`.space`). ``create(name, args,
target)`` makes a :class:`Task`: its ``config_space`` (every knob the template defines),
``workload`` (the key records are stored under), ``flop`` and ``instantiate(config)``.

Dispatch contexts form a stack (innermost wins): :class:`ApplyConfig` gives one fixed
configuration, the history context of the tuning logs gives the best recorded one, and the
fallback context (always at the bottom) gives defaults.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import TVMError
from .space import ConfigSpace, FallbackConfigEntity

logger = logging.getLogger("autotvm")

TEMPLATES: Dict[str, Callable] = {}


class TaskError(TVMError):
    """An unknown template, bad task arguments, a template that fails to build."""


# -- dispatch contexts ----------------------------------------------------------------------------


class DispatchContext:
    """Answers ``query(target, workload)`` with a configuration; use as a context manager."""

    _local = threading.local()

    def query(self, target, workload):
        raise NotImplementedError

    @classmethod
    def stack(cls) -> list:
        st = getattr(cls._local, "stack", None)
        if st is None:
            st = cls._local.stack = [FallbackContext()]
        return st

    @classmethod
    def current(cls) -> "DispatchContext":
        return cls.stack()[-1]

    def __enter__(self):
        DispatchContext.stack().append(self)
        return self

    def __exit__(self, *exc):
        DispatchContext.stack().remove(self)
        return False


class FallbackContext(DispatchContext):
    """Default configurations (one per workload, remembered so a template sees one object)."""

    def __init__(self):
        self.memory: Dict[Any, FallbackConfigEntity] = {}

    def query(self, target, workload):
        key = (str(target), workload)
        got = self.memory.get(key)
        if got is None:
            got = self.memory[key] = FallbackConfigEntity()
            logger.debug("no tuned configuration for %s on %s: using the fallback", workload, target)
        return got


class ApplyConfig(DispatchContext):
    """Every template instantiated inside gets ``config``."""

    def __init__(self, config):
        self.config = config
        self.workload = None

    def query(self, target, workload):
        self.workload = workload
        return self.config


_CURRENT_WORKLOAD = threading.local()


def get_config():
    """The configuration the running template should use (see the module docstring)."""
    from ..target import Target

    workload = getattr(_CURRENT_WORKLOAD, "value", None)
    return DispatchContext.current().query(Target.current(), workload)


# -- templates --------------------------------------------------------------------------------------


def _arg_key(x):
    """A hashable, JSON-friendly form of a template argument (tensors by shape and dtype)."""
    if isinstance(x, (list, tuple)):
        return tuple(_arg_key(v) for v in x)
    if hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "op"):
        return ("TENSOR", tuple(int(d) for d in x.shape), str(x.dtype))
    if isinstance(x, (int, float, str, bool)) or x is None:
        return x
    try:
        return int(x)
    except (TypeError, ValueError):
        raise TaskError(f"template argument {x!r} ({type(x).__name__}) cannot be part of a workload "
                        "key; pass ints, floats, strings or tensors") from None


def template(task_name: str, func: Optional[Callable] = None):
    """Register ``func(*args)`` (returning ``(schedule, args)``) as the template ``task_name``.

    Called directly, the function runs with the configuration of the current dispatch context."""

    def register(f):
        if task_name in TEMPLATES and TEMPLATES[task_name] is not f:
            logger.debug("template %s registered again", task_name)

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            if kwargs:
                raise TaskError(f"template {task_name}: pass its arguments by position")
            prev = getattr(_CURRENT_WORKLOAD, "value", None)
            _CURRENT_WORKLOAD.value = (task_name,) + tuple(_arg_key(a) for a in args)
            try:
                return f(*args)
            finally:
                _CURRENT_WORKLOAD.value = prev

        wrapper.template_name = task_name
        wrapper.fcompute = f
        TEMPLATES[task_name] = wrapper
        return wrapper

    return register(func) if func is not None else register


# -- tasks -----------------------------------------------------------------------------------------


class Task:
    """A template with fixed arguments for one target: the unit a tuner searches."""

    def __init__(self, name: str, args: Tuple, target=None, target_host=None):
        from ..target import Target

        if name not in TEMPLATES:
            known = ", ".join(sorted(TEMPLATES)) or "none"
            raise TaskError(f"no template named {name!r}; registered: {known}")
        self.name = name
        self.args = tuple(args)
        self.func = TEMPLATES[name]
        self.target = Target(target) if target is not None else Target("c")
        self.target_host = target_host
        self.workload = (name,) + tuple(_arg_key(a) for a in self.args)
        self.config_space = ConfigSpace()
        with self.target, ApplyConfig(self.config_space):
            try:
                sch, bufs = self.func(*self.args)
            except TVMError:
                raise
            except Exception as exc:
                raise TaskError(f"template {name} failed while defining its space: "
                                f"{type(exc).__name__}: {exc}") from exc
        self.flop = count_flop(sch) or 1.0

    def instantiate(self, config) -> Tuple[Any, List]:
        """``(schedule, args)`` of the template under ``config`` (a ConfigEntity or an index)."""
        if isinstance(config, int):
            config = self.config_space.get(config)
        with self.target, ApplyConfig(config):
            return self.func(*self.args)

    def __repr__(self) -> str:
        return (f"Task(func_name={self.name}, args={self.args}, kwargs={{}}, "
                f"workload={self.workload})")


def create(task_name: str, args: Tuple = (), target=None, target_host=None) -> Task:
    """The task of template ``task_name`` on ``args`` for ``target`` (autotvm.task.create)."""
    return Task(task_name, args, target, target_host)


# -- flop count -------------------------------------------------------------------------------------


def count_flop(sch) -> float:
    """Arithmetic operations the computation performs (a multiply-add counts 2), over the original
    compute graph from the schedule's outputs (caches and rfactor do not change it): for each
    computed tensor, its elements times the reduction's extent times the operations per step
    (casts, loads and comparisons are free, as in TVM's count). 0 when a size is symbolic."""
    from ..te.tensor import ComputeOp
    from ..tir.expr import Add, Div, FloorDiv, FloorMod, Max, Min, Mod, Mul, Reduce, Sub
    from ..tir.functor import collect

    arith = (Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Max, Min)

    def ops_in(e) -> int:
        return len(collect(e, lambda x: isinstance(x, arith)))

    total, seen, todo = 0.0, set(), list(sch.outputs)
    while todo:
        op = todo.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        todo.extend(t.op for t in op.input_tensors)
        if not isinstance(op, ComputeOp):
            continue
        try:
            n = 1
            for d in op.output(0).shape:
                n *= int(d)
            for iv in op.reduce_axis:
                n *= int(iv.dom.extent)
        except (TypeError, ValueError):
            return 0.0
        b = op.body[0]
        if isinstance(b, Reduce):  # a tuple reduction's outputs share one step
            per = sum(ops_in(x) for x in b.source) + sum(ops_in(r) for r in b.combiner.result)
        else:
            per = sum(ops_in(x) for x in op.body)
        total += n * per
    return float(total)
