"""Operator attribute registry (``kernels.ir`` / ``tvm.ir``): intrinsic lowering rules and the like.

Attributes are keyed by (operator name, attribute key) and carry a priority level. Registering an
attribute again at a higher level overrides the earlier one (which stays as a fall-back for
lowering rules); registering at an equal level is an error.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from .errors import TVMError
from . import container  # noqa: F401 (tvm.ir.container)
from .tir.expr import Op
from .tir.function import IRModule  # noqa: F401 (tvm.ir.IRModule)

_ATTRS: Dict[Tuple[str, str], List[Tuple[int, object]]] = {}


def register_op_attr(op_name: str, attr_key: str, value=None, level: int = 10):
    """Register ``value`` as attribute ``attr_key`` of operator ``op_name``.

    Usable as a decorator when ``value`` is omitted. Raises TVMError when an attribute with the
    same key is already registered at the same level.
    """

    def _register(v):
        if not isinstance(op_name, str) or not op_name:
            raise TVMError(f"register_op_attr: operator name must be a non-empty string, got {op_name!r}")
        Op.get(op_name)
        entries = _ATTRS.setdefault((op_name, attr_key), [])
        for lvl, _ in entries:
            if lvl == level:
                raise TVMError(f"attribute {attr_key} of {op_name} is already registered at level {level}; "
                               "register at a higher level to override it")
        entries.append((level, v))
        entries.sort(key=lambda e: -e[0])
        return v

    if value is None:
        return _register
    return _register(value)


def get_op_attrs(op_name: str, attr_key: str) -> List[object]:
    """Every registered value of an attribute, highest level first."""
    return [v for _, v in _ATTRS.get((op_name, attr_key), [])]


def get_op_attr(op_name: str, attr_key: str) -> Optional[object]:
    got = get_op_attrs(op_name, attr_key)
    return got[0] if got else None


def unregister_op_attr(op_name: str, attr_key: str, level: Optional[int] = None) -> None:
    """Remove an attribute (all levels, or one); meant for tests that register rules."""
    entries = _ATTRS.get((op_name, attr_key))
    if not entries:
        return
    if level is None:
        del _ATTRS[(op_name, attr_key)]
    else:
        entries[:] = [e for e in entries if e[0] != level]


def register_intrin_lowering(op_name: str, target: str = "default", *, f: Optional[Callable] = None,
                             level: int = 10):
    """Register ``f(call) -> expr`` lowering intrinsic ``op_name`` on ``target``.

    Rules are tried from the highest level down, target-specific before ``default``; a rule that
    returns the call unchanged passes it on to the next one.
    """

    def _register(fn):
        if not callable(fn):
            raise TVMError(f"register_intrin_lowering({op_name!r}): f must be callable, got {fn!r}")
        register_op_attr(op_name, f"{target}.FLowerIntrinsic", fn, level)
        return fn

    if f is None:
        return _register
    return _register(f)


class Snapshot:
    """Context manager restoring the registry on exit (for tests that register rules)."""

    def __enter__(self):
        self._saved = {k: list(v) for k, v in _ATTRS.items()}
        return self

    def __exit__(self, *exc):
        _ATTRS.clear()
        _ATTRS.update(self._saved)
        return False


def save_json(node) -> str:
    """Serialize a schedule, tensor or expression (``tvm.ir.save_json``).

    The JSON wraps a pickle of the object: it loads back with :func:`load_json` in the same kbench
    version (TVM's JSON graph format is not reproduced).
    """
    import base64
    import json
    import pickle

    try:
        payload = pickle.dumps(node)
    except Exception as exc:  # lambdas captured in user-defined reducers and the like
        raise TVMError(f"save_json: {type(node).__name__} cannot be serialized: {exc}") from None
    return json.dumps({"format": "kbench-pickle", "version": 1,
                       "data": base64.b64encode(payload).decode("ascii")})


def load_json(json_str: str):
    """Load what :func:`save_json` wrote."""
    import base64
    import json
    import pickle

    try:
        doc = json.loads(json_str)
        if not isinstance(doc, dict) or doc.get("format") != "kbench-pickle":
            raise ValueError("not a kbench save_json document")
        return pickle.loads(base64.b64decode(doc["data"]))
    except (ValueError, KeyError, TypeError, pickle.UnpicklingError) as exc:
        raise TVMError(f"load_json: {exc}") from None

# structural equality of IR (TVM's tvm.ir.structural_equal / assert_structural_equal)
from .tir.structural import assert_structural_equal, structural_equal  # noqa: E402, F401
