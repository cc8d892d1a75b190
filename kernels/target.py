"""Compilation targets (``tvm.target.Target``): "cuda", "opencl", "c" (alias "llvm").

A :class:`Target` has a :class:`TargetKind` (``Target("cuda").kind.name == "cuda"``), TVM's
``keys`` (``["cuda", "gpu"]``, ``["cpu"]``...), typed ``attrs`` with the kind's defaults
(``max_num_threads``, ``thread_warp_size``...) and an optional ``host``. ``str(target)`` is the
canonical form, ``"cuda -keys=cuda,gpu -max_num_threads=1024 -thread_warp_size=32"``. A target
is a context manager: inside ``with Target("cuda"):`` :meth:`Target.current` returns it.
"""

from __future__ import annotations

import shlex
from typing import Any, Dict, List, Optional

from .errors import TVMError

_KINDS = {"cuda": "cuda", "nvptx": "cuda", "opencl": "opencl", "c": "c", "llvm": "c"}
_STACK: List["Target"] = []

#: per kind name: default keys, typed options with their defaults (None: no default)
_KIND_INFO: Dict[str, Dict[str, Any]] = {
    "cuda": {"keys": ["cuda", "gpu"],
             "options": {"arch": (str, None), "max_num_threads": (int, 1024), "thread_warp_size": (int, 32),
                         "max_shared_memory_per_block": (int, None), "max_threads_per_block": (int, None),
                         "registers_per_block": (int, None), "mcpu": (str, None)}},
    "nvptx": {"keys": ["cuda", "gpu"],
              "options": {"mcpu": (str, None), "mtriple": (str, "nvptx64-nvidia-cuda"),
                          "max_num_threads": (int, 1024), "thread_warp_size": (int, 32)}},
    "opencl": {"keys": ["opencl", "gpu"],
               "options": {"max_num_threads": (int, 256), "thread_warp_size": (int, 1)}},
    "llvm": {"keys": ["cpu"],
             "options": {"mcpu": (str, None), "mattr": (list, None), "mtriple": (str, None),
                         "mfloat-abi": (str, None), "mabi": (str, None), "system-lib": (bool, None),
                         "runtime": (str, None), "link-params": (bool, False), "opt-level": (int, None),
                         "num-cores": (int, None), "fast-math": (bool, None)}},
    "c": {"keys": ["cpu"],
          "options": {"mcpu": (str, None), "march": (str, None), "system-lib": (bool, None),
                      "runtime": (str, None), "link-params": (bool, False), "executor": (str, None),
                      "unpacked-api": (bool, None)}},
}
#: options every kind takes
_COMMON_OPTIONS = {"keys": (list, None), "device": (str, None), "model": (str, None), "libs": (list, None),
                   "tag": (str, None), "from_device": (int, None)}


class TargetKind(str):
    """The kind of a target. ``kind.name`` is TVM's name (``"llvm"``, ``"cuda"``...).

    As a string it is the backend that builds it (``"c"`` for ``llvm`` and ``c``, ``"cuda"`` for
    ``cuda`` and ``nvptx``, ``"opencl"``), so ``target.kind == "c"`` tests the backend.
    """

    name: str

    def __new__(cls, name: str) -> "TargetKind":
        self = super().__new__(cls, _KINDS[name])
        self.name = name
        return self

    @property
    def default_keys(self) -> List[str]:
        """list of str: the keys a target of this kind has unless ``-keys`` is given."""
        return list(_KIND_INFO[self.name]["keys"])

    @property
    def options(self) -> List[str]:
        """list of str: the ``-option=value`` names this kind accepts."""
        return sorted(set(_KIND_INFO[self.name]["options"]) | set(_COMMON_OPTIONS))

    __repr__ = str.__repr__  # messages show the backend as before: 'c', 'cuda', 'opencl'


def _parse_value(kind: str, key: str, text: str, where: str) -> Any:
    options = {**_COMMON_OPTIONS, **_KIND_INFO[kind]["options"]}
    if key not in options:
        raise TVMError(f"target {where!r}: kind {kind!r} has no option -{key}; its options are "
                       f"{', '.join('-' + o for o in sorted(options))}")
    typ = options[key][0]
    if typ is int:
        try:
            return int(text)
        except ValueError:
            raise TVMError(f"target {where!r}: option -{key} takes an integer, got {text!r}") from None
    if typ is bool:
        low = text.lower()
        if low in ("1", "true"):
            return True
        if low in ("0", "false"):
            return False
        raise TVMError(f"target {where!r}: option -{key} takes true or false, got {text!r}")
    if typ is list:
        return [x for x in text.split(",") if x]
    return text


class Target:
    """A target description such as ``Target("cuda -arch=sm_80")``; usable as a context manager.

    Parameters
    ----------
    target : str, dict or Target
        ``"<kind> -option=value ..."`` (kinds ``cuda``, ``nvptx``, ``opencl``, ``llvm``, ``c``), a
        dict ``{"kind": ..., option: value, ...}`` or another target (copied).
    host : str, dict or Target, optional
        The host target of a GPU target.

    Attributes
    ----------
    kind : TargetKind
        ``kind.name`` is the kind as spelled (``"llvm"``); the string value is the backend.
    keys : list of str
        TVM's keys (``["cuda", "gpu"]``, ``["opencl", "gpu"]``, ``["cpu"]``).
    attrs : dict
        Every option with its (typed) value, the kind's defaults included.
    host : Target or None
    """

    def __init__(self, target, host=None):
        if isinstance(target, Target):
            self.kind, self.attrs, self.keys = target.kind, dict(target.attrs), list(target.keys)
            self.host = target.host if host is None else Target(host)
            return
        self.host: Optional[Target] = None
        if isinstance(target, dict):
            self._from_dict(target)
        else:
            self._from_text(target)
        if host is not None:
            self.host = Target(host)

    def _from_text(self, target) -> None:
        if not isinstance(target, str) or not target.strip():
            raise TVMError(f"target must be a string such as 'cuda', 'opencl' or 'c', got {target!r}")
        parts = shlex.split(target)
        self._init_kind(parts[0], target)
        values: Dict[str, Any] = {}
        for p in parts[1:]:
            if not p.startswith("-"):
                raise TVMError(f"target {target!r}: option {p!r} must look like -key=value")
            k, _, v = p.lstrip("-").partition("=")
            values[k] = _parse_value(self.kind.name, k, v or "true", target)
        self._set_attrs(values)

    def _from_dict(self, config: dict) -> None:
        config = dict(config)
        kind = config.pop("kind", None)
        if not isinstance(kind, str):
            raise TVMError(f"target dict {config!r} needs a 'kind' entry such as 'cuda'")
        self._init_kind(kind, str(kind))
        host = config.pop("host", None)
        values = {}
        for k, v in config.items():
            text = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
            values[k] = _parse_value(self.kind.name, k, text, kind)
        self._set_attrs(values)
        if host is not None:
            self.host = Target(host)

    def _init_kind(self, kind: str, where: str) -> None:
        if kind not in _KINDS:
            raise TVMError(f"unknown target {kind!r}; expected one of cuda, opencl, c, llvm (nvptx builds "
                           "as cuda); other TVM targets (rocm, metal, vulkan, hexagon...) are outside the "
                           "scope of kernels, see docs/TVM_COMPAT.md")
        self.kind = TargetKind(kind)

    def _set_attrs(self, values: Dict[str, Any]) -> None:
        keys = values.pop("keys", None)
        device = values.get("device")
        default = self.kind.default_keys
        if device and device not in default:
            default = [device] + default
        self.keys = list(keys) + [k for k in default if k not in keys] if keys else default
        attrs = {k: d for k, (_t, d) in _KIND_INFO[self.kind.name]["options"].items() if d is not None}
        attrs.update(values)
        self.attrs: Dict[str, Any] = attrs

    # -- TVM's accessors ----------------------------------------------------------------------
    @property
    def arch(self) -> Optional[str]:
        """str or None: the CUDA architecture (``-arch``), e.g. ``"sm_80"``."""
        return self.attrs.get("arch")

    @property
    def model(self) -> str:
        return str(self.attrs.get("model", "unknown"))

    @property
    def mcpu(self) -> str:
        return str(self.attrs.get("mcpu", ""))

    @property
    def libs(self) -> List[str]:
        return list(self.attrs.get("libs", []))

    @property
    def max_num_threads(self) -> Optional[int]:
        return self.attrs.get("max_num_threads")

    @property
    def thread_warp_size(self) -> Optional[int]:
        return self.attrs.get("thread_warp_size")

    @property
    def text(self) -> str:
        """str: the canonical string (what ``str(target)`` gives)."""
        return str(self)

    def export(self) -> Dict[str, Any]:
        """The target as a dict (``Target(target.export())`` rebuilds it)."""
        out: Dict[str, Any] = {"kind": self.kind.name, "keys": list(self.keys)}
        out.update({k: (list(v) if isinstance(v, list) else v) for k, v in self.attrs.items()})
        if self.host is not None:
            out["host"] = self.host.export()
        return out

    @staticmethod
    def list_kinds() -> List[str]:
        """The kind names this compiler accepts."""
        return sorted(_KINDS)

    def __enter__(self):
        _STACK.append(self)
        return self

    def __exit__(self, *exc):
        _STACK.pop()
        return False

    @staticmethod
    def current(allow_none: bool = True) -> Optional["Target"]:
        """The innermost target of the enclosing ``with Target(...)`` blocks.

        Raises
        ------
        TVMError
            When no target is set and ``allow_none`` is false.
        """
        if _STACK:
            return _STACK[-1]
        if not allow_none:
            raise TVMError("no target is set: pass target= or use `with tvm.target.Target(...)`")
        return None

    def __str__(self) -> str:
        parts = [self.kind.name, "-keys=" + ",".join(self.keys)]
        for k in sorted(self.attrs):
            v = self.attrs[k]
            if isinstance(v, list):
                v = ",".join(map(str, v))
            elif isinstance(v, bool):
                v = int(v)
            parts.append(f"-{k}={v}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return str(self)

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except TVMError:
                return False
        return isinstance(other, Target) and str(self) == str(other) and self.host == other.host

    def __hash__(self) -> int:
        return hash(str(self))


def cuda(model: str = "unknown", arch: Optional[str] = None, options=None) -> Target:
    return Target("cuda" + (f" -arch={arch}" if arch else ""))


def opencl(model: str = "unknown", options=None) -> Target:
    return Target("opencl")


def create(target: str) -> Target:
    return Target(target)


# ---------------------------------------------------------------------------------------------
# CUDA architectures of GPU models

#: the CUDA architecture code is built for when neither the target nor a device names one
DEFAULT_CUDA_ARCH = "sm_90"

#: the first line of a CUDA source whose device code must be optimised by ptxas at -O1 (nvcc's -O3
#: still compiles the C++): kernels.codegen puts it where a kernel prefetches into a multi-buffered
#: stage (3 or more copies) through a vector copy with a scalar fallback, which ptxas (CUDA 13.0) at
#: -O2 and above miscompiled on an H200 (a float32 warp tile at 351 x 509 x 512, layout TT, three
#: copies: a block row of wrong outputs; right at -O0, -O1 and -G); kernels.contrib.nvcc reads it
CUDA_PTXAS_O1 = "// kbench: ptxas -O1 (multi-buffered prefetch with a scalar fallback)"

#: the CUDA architecture of GPU models as clusters name them (Ray's accelerator types, node labels)
GPU_ARCHS: Dict[str, str] = {
    "B200": "sm_100", "B100": "sm_100", "GB200": "sm_100",
    "H100": "sm_90", "H200": "sm_90", "H800": "sm_90", "H20": "sm_90", "GH200": "sm_90",
    "L4": "sm_89", "L40": "sm_89", "L40S": "sm_89", "RTX-4090": "sm_89",
    "A10": "sm_86", "A10G": "sm_86", "A40": "sm_86", "A6000": "sm_86", "RTX-3090": "sm_86",
    "A100": "sm_80", "A800": "sm_80", "A30": "sm_80",
    "T4": "sm_75",
}


def arch_of_model(model: str) -> Optional[str]:
    """The CUDA architecture of a GPU model as a cluster spells it ("H100", "a100-80gb" -> "sm_80"),
    from :data:`GPU_ARCHS`; None for a model it does not know."""
    key = model.upper()
    return GPU_ARCHS.get(key) or GPU_ARCHS.get(key.split("-")[0])
