"""Saving built modules and loading them back (``export_library`` / ``tvm.runtime.load_module``).

A saved module is its binary plus a JSON description of its :class:`~kernels.runtime.spec.FuncSpec`
(arguments, shape variables, workspaces, kernels with their launch extents as expressions of the
shape variables, packed calls):

* ``mod.export_library("f.so")`` writes the binary to ``f.so`` -- the shared library (C), the
  cubin (CUDA) or the OpenCL C source (OpenCL) -- and the description to ``f.tvm_meta.json``
  beside it (TVM's name for a device module's metadata file);
* ``mod.export_library("f.tar")`` writes one tar archive holding ``meta.json`` and the binary.

``load_module(path)`` reads either form and returns a module that runs like the one saved: a C
library is loaded as is (copied into the build cache, content-addressed), a cubin is loaded on the
first call, an OpenCL program is built for the device. Packed functions are looked up by name when
the loaded module is called, as they were for the original.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any, Dict, Tuple, Union

from kernels.errors import TVMError
from kernels.runtime.cache import write_atomic
from kernels.runtime.config import get_config
from kernels.runtime.spec import (
    BufferArg,
    DerivedDim,
    FuncSpec,
    HostExpr,
    KernelSpec,
    LaunchDims,
    PackedArg,
    PackedCall,
    Workspace,
    check_host_tree,
)

FORMAT = "kbench-module/1"
META_SUFFIX = ".tvm_meta.json"
#: the binary's name inside a tar, per target
BINARY_NAME = {"c": "lib.so", "cuda": "module.cubin", "opencl": "module.cl"}


class ModuleFormatError(TVMError, ValueError):
    """A file that is not a module saved by ``export_library``, or a damaged one."""


# -- writing -----------------------------------------------------------------------------------


def _host(value: Any, what: str) -> Any:
    if isinstance(value, bool):
        raise TVMError(f"{what}: a bool is not a host value")
    if isinstance(value, int):
        return value
    if isinstance(value, HostExpr):
        return {"text": value.text, "tree": value.tree, "dtype": value.dtype}
    raise TVMError(f"{what} is a Python function ({value!r}), not an expression of the shape variables; "
                   "only modules built by kernels.build can be exported")


def _dim(d: Any, what: str) -> Any:
    if isinstance(d, str):
        return d
    if isinstance(d, DerivedDim):
        return {"derived": d.text, "expr": _host(d.fn, what)}
    return _host(d, what)


def _dims(f: Any, what: str) -> list:
    if not isinstance(f, LaunchDims):
        raise TVMError(f"{what} is a Python function ({f!r}), not launch extents; only modules built by "
                       "kernels.build can be exported")
    return [_host(d, what) for d in f.dims]


def spec_to_json(spec: FuncSpec) -> Dict[str, Any]:
    """The JSON-ready description of ``spec``."""
    kernels = []
    for k in spec.kernels:
        if isinstance(k, PackedCall):
            kernels.append({"kind": "packed", "name": k.name, "args": [
                {"kind": a.kind, "buffer": a.buffer, "dtype": a.dtype,
                 "shape": [_dim(d, f"packed call {k.name} shape") for d in a.shape],
                 "strides": [_dim(d, f"packed call {k.name} strides") for d in a.strides],
                 "offset": _host(a.offset, f"packed call {k.name} offset"),
                 "value": _value_json(a, f"packed call {k.name} argument")}
                for a in k.args]})
        else:
            kernels.append({"kind": "kernel", "name": k.name, "params": list(k.params),
                            "grid": _dims(k.grid, f"grid of {k.name}"),
                            "block": _dims(k.block, f"block of {k.name}")})
    return {
        "format": FORMAT,
        "name": spec.name,
        "target": spec.target,
        "arch": spec.arch,
        "uses_openmp": spec.uses_openmp,
        "source": spec.source,
        "shape_vars": list(spec.shape_vars),
        "args": [{"name": a.name, "dtype": a.dtype, "shape": [_dim(d, f"argument {a.name} shape")
                                                              for d in a.shape]} for a in spec.args],
        "workspaces": [{"name": w.name, "dtype": w.dtype, "size": _host(w.size, f"size of {w.name}")}
                       for w in spec.workspaces],
        "kernels": kernels,
    }


def _value_json(a: PackedArg, what: str) -> Any:
    if a.value is None or a.kind == "str":
        return a.value
    if isinstance(a.value, float):
        return {"float": a.value}
    return _host(a.value, what)


def _binary(module: Any) -> bytes:
    target = module.spec.target
    if target == "c":
        return Path(module.library_path).read_bytes()
    if target == "cuda":
        return bytes(module.binary)
    if target == "opencl":
        return module.spec.source.encode()
    raise TVMError(f"export_library: cannot save a module of target {target!r}")


def meta_path(path: Union[str, Path]) -> Path:
    """Where the description of a module saved as ``path`` (not a tar) lives."""
    p = Path(path)
    return p.with_name(p.stem + META_SUFFIX) if p.suffix else p.with_name(p.name + META_SUFFIX)


def export_module(module: Any, path: Union[str, Path]) -> None:
    """Write ``module`` to ``path`` (see the module docstring)."""
    path = Path(path)
    meta = json.dumps(spec_to_json(module.spec), indent=1).encode()
    binary = _binary(module)
    if not path.parent.is_dir():
        raise TVMError(f"export_library: the folder {path.parent} does not exist")
    if path.suffix == ".tar":
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in (("meta.json", meta), (BINARY_NAME[module.spec.target], binary)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        write_atomic(path, buf.getvalue())
        return
    write_atomic(path, binary)
    write_atomic(meta_path(path), meta)


# -- reading -----------------------------------------------------------------------------------


def _read_host(v: Any, what: str) -> Union[int, HostExpr]:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, dict) and isinstance(v.get("text"), str):
        try:
            return HostExpr(v["text"], check_host_tree(v["tree"]), str(v.get("dtype", "int32")))
        except (KeyError, ValueError) as exc:
            raise ModuleFormatError(f"{what}: {exc}") from None
    raise ModuleFormatError(f"{what}: expected an int or an expression, got {v!r}")


def _read_dim(d: Any, what: str) -> Any:
    if isinstance(d, str):
        return d
    if isinstance(d, dict) and "derived" in d:
        return DerivedDim(str(d["derived"]), _read_host(d["expr"], what))
    return _read_host(d, what)


def _read_value(a: Dict[str, Any]) -> Any:
    v = a["value"]
    if v is None or a["kind"] == "str":
        return v
    if isinstance(v, dict) and "float" in v:
        return float(v["float"])
    return _read_host(v, "packed-call argument")


def _read_size(v: Any, what: str):
    h = _read_host(v, what)
    return h if isinstance(h, HostExpr) else HostExpr(str(h), ("int", h))


def spec_from_json(data: Dict[str, Any]) -> FuncSpec:
    """The :class:`FuncSpec` a description written by :func:`spec_to_json` describes."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ModuleFormatError(f"module description has format {got!r}; this kernels reads {FORMAT!r}")
    try:
        kernels = []
        for k in data["kernels"]:
            if k["kind"] == "packed":
                args = tuple(PackedArg(str(a["kind"]), str(a["buffer"]), str(a["dtype"]),
                                       tuple(_read_dim(d, "packed shape") for d in a["shape"]),
                                       tuple(_read_dim(d, "packed strides") for d in a["strides"]),
                                       _read_host(a["offset"], "packed offset"), _read_value(a))
                             for a in k["args"])
                kernels.append(PackedCall(str(k["name"]), args))
            elif k["kind"] == "kernel":
                kernels.append(KernelSpec(str(k["name"]), tuple(str(p) for p in k["params"]),
                                          LaunchDims(tuple(_read_host(d, "grid") for d in k["grid"])),
                                          LaunchDims(tuple(_read_host(d, "block") for d in k["block"]))))
            else:
                raise ModuleFormatError(f"unknown kernel kind {k['kind']!r}")
        return FuncSpec(
            name=str(data["name"]), target=str(data["target"]), source=str(data["source"]),
            args=tuple(BufferArg(str(a["name"]), str(a["dtype"]),
                                 tuple(_read_dim(d, f"argument {a['name']}") for d in a["shape"]))
                       for a in data["args"]),
            shape_vars=tuple(str(v) for v in data["shape_vars"]),
            workspaces=tuple(Workspace(str(w["name"]), str(w["dtype"]), _read_size(w["size"], w["name"]))
                             for w in data["workspaces"]),
            kernels=tuple(kernels), arch=str(data.get("arch") or ""),
            uses_openmp=bool(data.get("uses_openmp", False)))
    except ModuleFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModuleFormatError(f"malformed module description: {type(exc).__name__}: {exc}") from None


def _read_files(path: Path) -> Tuple[Dict[str, Any], bytes]:
    if not path.exists():
        raise ModuleFormatError(f"load_module: {path} does not exist")
    if path.suffix == ".tar":
        try:
            with tarfile.open(path, "r") as tar:
                names = tar.getnames()
                meta_f = tar.extractfile("meta.json") if "meta.json" in names else None
                if meta_f is None:
                    raise ModuleFormatError(f"load_module: {path} holds no meta.json; it was not written by "
                                            "export_library")
                data = json.loads(meta_f.read().decode())
                name = BINARY_NAME.get(data.get("target", ""), "")
                bin_f = tar.extractfile(name) if name in names else None
                if bin_f is None:
                    raise ModuleFormatError(f"load_module: {path} lacks the binary {name or '?'}")
                return data, bin_f.read()
        except (tarfile.TarError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModuleFormatError(f"load_module: {path} is not a module archive: {exc}") from None
    meta = meta_path(path)
    if not meta.exists():
        raise ModuleFormatError(f"load_module: no description {meta.name} beside {path}; kernels loads only "
                                "modules saved by export_library (the library plus its .tvm_meta.json, "
                                "or a .tar)")
    try:
        data = json.loads(meta.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModuleFormatError(f"load_module: {meta} is not valid JSON: {exc}") from None
    return data, path.read_bytes()


def load_module(path: Union[str, Path], fmt: str = ""):
    """Load a module saved by ``export_library`` (see the module docstring).

    Raises
    ------
    ModuleFormatError
        When ``path`` is missing, was not written by ``export_library`` or is damaged.
    """
    path = Path(path)
    data, binary = _read_files(path)
    spec = spec_from_json(data)
    if spec.target == "c":
        from kernels.runtime.c import CModule

        key = hashlib.sha256(binary).hexdigest()[:32]
        folder = get_config().cache_dir / "loaded" / key
        folder.mkdir(parents=True, exist_ok=True)
        lib = folder / "lib.so"
        if not lib.exists():
            write_atomic(lib, binary)
        return CModule(spec, library=lib)
    if spec.target == "cuda":
        from kernels.runtime.cuda import CUDAModule

        return CUDAModule(spec, binary=binary)
    if spec.target == "opencl":
        import dataclasses

        from kernels.runtime.opencl import OpenCLModule

        return OpenCLModule(dataclasses.replace(spec, source=binary.decode()))
    raise ModuleFormatError(f"load_module: {path} is a module of unknown target {spec.target!r}")
