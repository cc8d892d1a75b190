"""Compilation targets (``tvm.target.Target``): "cuda", "opencl", "c" (alias "llvm")."""

from __future__ import annotations

import shlex
from typing import Dict, List, Optional

from .errors import TVMError

_KINDS = {"cuda": "cuda", "nvptx": "cuda", "opencl": "opencl", "c": "c", "llvm": "c"}
_STACK: List["Target"] = []


class Target:
    """A target description such as ``Target("cuda -arch=sm_80")``; usable as a context manager."""

    def __init__(self, target, host=None):
        if isinstance(target, Target):
            self.kind, self.attrs, self.text = target.kind, dict(target.attrs), target.text
            return
        if not isinstance(target, str) or not target.strip():
            raise TVMError(f"target must be a string such as 'cuda', 'opencl' or 'c', got {target!r}")
        parts = shlex.split(target)
        kind = parts[0]
        if kind not in _KINDS:
            raise TVMError(f"unknown target {kind!r}; expected one of cuda, opencl, c, llvm")
        self.kind = _KINDS[kind]
        self.text = target
        self.attrs: Dict[str, str] = {}
        for p in parts[1:]:
            if not p.startswith("-"):
                raise TVMError(f"target {target!r}: option {p!r} must look like -key=value")
            k, _, v = p.lstrip("-").partition("=")
            self.attrs[k] = v or "1"
        self.host = host

    @property
    def arch(self) -> Optional[str]:
        return self.attrs.get("arch")

    def __enter__(self):
        _STACK.append(self)
        return self

    def __exit__(self, *exc):
        _STACK.pop()
        return False

    @staticmethod
    def current(allow_none: bool = True) -> Optional["Target"]:
        if _STACK:
            return _STACK[-1]
        if not allow_none:
            raise TVMError("no target is set: pass target= or use `with tvm.target.Target(...)`")
        return None

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


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
