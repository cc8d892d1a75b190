"""Pass contexts (``tvm.transform.PassContext``): build options in effect for a ``with`` block.

::

    with tvm.transform.PassContext(opt_level=3, config={"tir.UnrollLoop": {"auto_max_step": 16}},
                                   disabled_pass=["tir.LoopPartition"]):
        mod = tvm.build(s, [A, B], "cuda")

The context validates what it is given as TVM does: ``opt_level`` is an int in 0..4, every config
key must be one TVM v0.8 registers for the TE/TIR flow (an unknown key, or a key of Relay, is an
error naming it and the known keys), and the value must have the key's type (dict-valued keys
check their fields). The active context is :meth:`PassContext.current`; the compiler reads it
through :func:`current_config`. ``docs/TVM_COMPAT.md`` lists which keys change the generated
code; the others are accepted and recorded (TVM uses them for passes this compiler does not have
or does differently).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .errors import TVMError, out_of_scope

#: the fields of the dict-valued options and their types
_UNROLL_FIELDS = {"auto_max_step": int, "auto_max_depth": int, "auto_max_extent": int,
                  "explicit_unroll": bool, "unroll_local_access": bool}
_PARTITION_FIELDS = {"partition_const_loop": bool, "no_unroll_loop_with_extent_one": bool}
_DOUBLE_BUFFER_FIELDS = {"split_loop": int}
_HOIST_FIELDS = {"support_block_scope_hosting": bool}
_SIMPLIFY_FIELDS = {"transitively_prove_inequalities": bool}

#: config key -> bool | int | str | dict of field types
CONFIG_KEYS: Dict[str, Any] = {
    "tir.noalias": bool,
    "tir.detect_global_barrier": bool,
    "tir.instrument_bound_checkers": bool,
    "tir.disable_assert": bool,
    "tir.disable_vectorize": bool,
    "tir.disable_storage_rewrite": bool,
    "tir.is_entry_func": bool,
    "tir.debug_keep_trivial_loop": bool,
    "tir.UnrollLoop": _UNROLL_FIELDS,
    "tir.LoopPartition": _PARTITION_FIELDS,
    "tir.InjectDoubleBuffer": _DOUBLE_BUFFER_FIELDS,
    "tir.HoistIfThenElse": _HOIST_FIELDS,
    "tir.Simplify": _SIMPLIFY_FIELDS,
}

#: keys TVM has that this compiler cannot honour: an error rather than a silently ignored option
_REFUSED = {
    "tir.add_lower_pass": "custom lowering passes (tir.add_lower_pass) cannot be inserted into kernels' "
                          "pass list; write the transformation as a schedule or an intrinsic lowering "
                          "rule (kernels.ir.register_intrin_lowering)",
}

_STACK: List["PassContext"] = []


def _check_value(key: str, spec: Any, value: Any) -> Any:
    if isinstance(spec, dict):
        if not isinstance(value, Mapping):
            raise TVMError(f"PassContext config {key!r} takes a dict with fields "
                           f"{', '.join(sorted(spec))}, got {value!r}")
        out = {}
        for field, v in value.items():
            if field not in spec:
                raise TVMError(f"PassContext config {key!r} has no field {field!r}; its fields are "
                               f"{', '.join(sorted(spec))}")
            out[field] = _check_value(f"{key}.{field}", spec[field], v)
        return out
    if spec is bool:
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        raise TVMError(f"PassContext config {key!r} takes a bool, got {value!r}")
    if spec is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TVMError(f"PassContext config {key!r} takes an int, got {value!r}")
    return value


class PassContext:
    """The options in effect for the builds inside a ``with`` block.

    Parameters
    ----------
    opt_level : int
        0..4 (TVM's default is 2); recorded for the passes that consult it.
    required_pass : sequence of str, optional
        Pass names that must run.
    disabled_pass : sequence of str, optional
        Pass names that must not run (TVM's names, e.g. ``"tir.LoopPartition"``).
    instruments : sequence, optional
        TVM pass instruments; not supported (an error when non-empty).
    config : dict, optional
        Options by key (see :data:`CONFIG_KEYS`).

    Raises
    ------
    TVMError
        For a bad ``opt_level``, an unknown config key, a value of the wrong type, or a Relay key.
    """

    def __init__(self, opt_level: int = 2, required_pass: Optional[Sequence[str]] = None,
                 disabled_pass: Optional[Sequence[str]] = None, instruments: Optional[Sequence] = None,
                 config: Optional[Mapping[str, Any]] = None) -> None:
        if isinstance(opt_level, bool) or not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
            raise TVMError(f"PassContext: opt_level must be an int from 0 to 4, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = self._names(required_pass, "required_pass")
        self.disabled_pass = self._names(disabled_pass, "disabled_pass")
        if instruments:
            raise TVMError(out_of_scope("PassContext(instruments=...) (pass instrumentation)"))
        self.instruments: List[Any] = []
        self.config: Dict[str, Any] = {}
        for key, value in dict(config or {}).items():
            if not isinstance(key, str):
                raise TVMError(f"PassContext config keys are strings such as 'tir.UnrollLoop', got {key!r}")
            if key in _REFUSED:
                raise TVMError(f"PassContext config {key!r}: {_REFUSED[key]}")
            if key.startswith("relay.") or key.startswith("relay_"):
                raise TVMError(f"PassContext config {key!r}: "
                               + out_of_scope("tvm.relay (TVM's graph-level IR)"))
            if key not in CONFIG_KEYS:
                raise TVMError(f"PassContext: unknown config key {key!r}; known keys are "
                               f"{', '.join(sorted(CONFIG_KEYS))}")
            self.config[key] = _check_value(key, CONFIG_KEYS[key], value)

    @staticmethod
    def _names(names: Optional[Iterable[str]], what: str) -> List[str]:
        if names is None:
            return []
        if isinstance(names, str):
            names = [names]
        out = []
        for n in names:
            if not isinstance(n, str):
                raise TVMError(f"PassContext: {what} takes pass names (str), got {n!r}")
            out.append(n)
        return out

    def __enter__(self) -> "PassContext":
        _STACK.append(self)
        return self

    def __exit__(self, *exc: object) -> bool:
        _STACK.pop()
        return False

    @staticmethod
    def current() -> "PassContext":
        """The innermost active context, or a default one (opt_level 2, no config)."""
        return _STACK[-1] if _STACK else _DEFAULT

    @staticmethod
    def list_configs() -> Dict[str, str]:
        """Every accepted config key with the type of its value."""
        return {k: ("dict" if isinstance(v, dict) else v.__name__) for k, v in CONFIG_KEYS.items()}

    def pass_disabled(self, name: str) -> bool:
        """Whether ``name`` (TVM's pass name) is disabled in this context."""
        return name in self.disabled_pass

    def __repr__(self) -> str:
        return (f"PassContext(opt_level={self.opt_level}, config={self.config}, "
                f"disabled_pass={self.disabled_pass})")


_DEFAULT = PassContext()


def current_config(key: str, default: Any = None) -> Any:
    """The value of config ``key`` in the active :class:`PassContext` (``default`` when unset)."""
    if key not in CONFIG_KEYS:
        raise TVMError(f"unknown PassContext config key {key!r}")
    return PassContext.current().config.get(key, default)
