"""Saving built modules and loading them back (``export_library``, ``save``, ``load_module``).

A saved module is its binary plus a JSON description of its :class:`~kernels.runtime.spec.FuncSpec`
(arguments, shape variables, workspaces, kernels with their launch extents as expressions of the
shape variables and their dynamic shared memory, packed calls, the source). The description sits
beside the file as ``<stem>.tvm_meta.json`` (TVM's name for a device module's metadata), or inside a tar:

* ``mod.export_library("f.so")`` writes the shared library (C), the cubin (CUDA) or the OpenCL C
  source (OpenCL) to ``f.so``; ``mod.export_library("f.tar")`` writes one archive holding
  ``meta.json`` and the binary;
* TVM's two-step flow also works: ``mod.save("f.o")`` writes an object file (the compiled C code;
  for GPU modules an empty host stub, the host side being Python) and
  ``tvm.contrib.cc.create_shared("f.so", ["f.o"])`` links it; ``mod.imported_modules[0].save(
  "f.cl" | "f.cubin" | "f.ptx")`` writes the device code. Each writes the same description, so
  ``load_module("f.so")`` and ``load_module("f.ptx")`` both find it, and
  ``host.import_module(device)`` joins them.

``load_module(path)`` returns a module that runs like the one saved: a C library is loaded as is
(copied into the build cache, content-addressed), a cubin or PTX is loaded on the first call, an
OpenCL program is built for the device. Packed functions are looked up by name when the loaded
module is called, as they were for the original.

``module_to_bytes(mod)`` / ``module_from_bytes(data)`` do the same in memory (the ``.tar`` layout):
how a module built on one machine (a tuning build worker) travels to another that runs it.
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
from kernels.runtime.module import SERIALIZE as _MODULE_SERIALIZE
from kernels.runtime.config import get_config
from kernels.runtime.spec import (
    BufferArg,
    ConstArg,
    DerivedDim,
    FuncSpec,
    HostExpr,
    KernelSpec,
    LaunchDims,
    PackedArg,
    PackedCall,
    ScalarArg,
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
                            "block": _dims(k.block, f"block of {k.name}"),
                            "dynamic_shared_bytes": k.dynamic_shared_bytes, "concurrent": k.concurrent})
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
        "scalars": [{"name": sc.name, "dtype": sc.dtype, "index": sc.index} for sc in spec.scalars],
        "constants": [{"name": c.name, "dtype": c.dtype, "value": c.value} for c in spec.constants],
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


def _meta(spec: FuncSpec, binary: str) -> bytes:
    data = spec_to_json(spec)
    data["binary"] = binary
    return json.dumps(data, indent=1).encode()


#: what the file beside the description holds, per target, for export_library
_EXPORTED = {"c": "shared-library", "cuda": "cubin", "opencl": "opencl-source"}


def export_module(module: Any, path: Union[str, Path]) -> None:
    """Write ``module`` to ``path`` (see the module docstring)."""
    path = Path(path)
    spec = module.spec
    meta = _meta(spec, _EXPORTED.get(spec.target, ""))
    binary = _binary(module)
    if not path.parent.is_dir():
        raise TVMError(f"export_library: the folder {path.parent} does not exist")
    if path.suffix == ".tar":
        write_atomic(path, _tar_bytes(spec, meta, binary))
        return
    write_atomic(path, binary)
    write_atomic(meta_path(path), meta)


def _tar_bytes(spec: FuncSpec, meta: bytes, binary: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("meta.json", meta), (BINARY_NAME[spec.target], binary)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def module_to_bytes(module: Any) -> bytes:
    """``module`` as bytes (the ``.tar`` archive ``export_library`` writes: the description plus the
    shared library, cubin or OpenCL source), for sending it to another process or machine, where
    :func:`module_from_bytes` loads it back.

    Raises
    ------
    TVMError
        For a module whose launch description is Python code rather than expressions (one not built
        by ``kernels.build``), or of a target that cannot be saved.
    """
    spec = module.spec
    return _tar_bytes(spec, _meta(spec, _EXPORTED.get(spec.target, "")), _binary(module))


def save_object(module: Any, path: Union[str, Path]) -> None:
    """``module.save("f.o")``: an object file for ``tvm.contrib.cc.create_shared`` (the compiled C
    code; for GPU modules an empty host stub) plus the description beside it."""
    from kernels.runtime.c import compile_object

    path = Path(path)
    if not path.parent.is_dir():
        raise TVMError(f"save: the folder {path.parent} does not exist")
    spec = module.spec
    if spec.target == "c":
        source, openmp = spec.source, spec.uses_openmp
    else:
        tag = hashlib.sha256(spec.source.encode()).hexdigest()[:16]
        source = (f"/* host stub of {spec.name}: its host side runs in Python */\n"
                  f"int kbench_host_stub_{tag}(void) {{ return 0; }}\n")
        openmp = False
    write_atomic(path, compile_object(source, openmp=openmp).read_bytes())
    write_atomic(meta_path(path), _meta(spec, "host-object"))


def save_device(module: Any, path: Union[str, Path], fmt: str = "") -> None:
    """``mod.imported_modules[0].save(path)``: the device code (``.cubin``, ``.ptx``, ``.cl``, else
    the source) plus the description beside it."""
    from kernels.contrib.nvcc import compile_cuda

    path = Path(path)
    kind = fmt or path.suffix.lstrip(".")
    spec = module.spec
    if kind == "cubin" and module.binary is not None:
        data = bytes(module.binary)
    elif kind == "ptx" and spec.target == "cuda":
        arch = getattr(module, "arch", "") or spec.arch or None
        data = bytes(compile_cuda(spec.source, target="ptx", arch=arch))
    else:
        data = spec.source.encode()
    write_atomic(path, data)
    write_atomic(meta_path(path), _meta(spec, "host-object"))


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


def _read_shared_bytes(k: Dict[str, Any]) -> int:
    """A kernel's dynamic shared memory in bytes (0 in descriptions written before it was recorded)."""
    n = k.get("dynamic_shared_bytes", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ModuleFormatError(f"kernel {k.get('name')!r}: dynamic_shared_bytes must be a non-negative "
                                f"integer, got {n!r}")
    return n


def _read_concurrent(k: Dict[str, Any]) -> bool:
    """Whether a kernel may run beside the previous one (False in descriptions written before it was
    recorded: the launches then run one after the other, as they did)."""
    c = k.get("concurrent", False)
    if not isinstance(c, bool):
        raise ModuleFormatError(f"kernel {k.get('name')!r}: concurrent must be true or false, got {c!r}")
    return c


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
                                          LaunchDims(tuple(_read_host(d, "block") for d in k["block"])),
                                          _read_shared_bytes(k), _read_concurrent(k)))
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
            uses_openmp=bool(data.get("uses_openmp", False)),
            scalars=tuple(ScalarArg(str(sc["name"]), str(sc["dtype"]), int(sc["index"]))
                          for sc in data.get("scalars", [])),
            constants=tuple(ConstArg(str(c["name"]), str(c["dtype"]),
                                     float(c["value"]) if str(c["dtype"]).startswith("float")
                                     else int(c["value"]))
                            for c in data.get("constants", [])))
    except ModuleFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModuleFormatError(f"malformed module description: {type(exc).__name__}: {exc}") from None


def _read_tar(what: str, **source: Any) -> Tuple[Dict[str, Any], bytes]:
    """The description and binary of a module archive (``name=`` a path or ``fileobj=`` bytes)."""
    try:
        with tarfile.open(mode="r", **source) as tar:
            names = tar.getnames()
            meta_f = tar.extractfile("meta.json") if "meta.json" in names else None
            if meta_f is None:
                raise ModuleFormatError(f"load_module: {what} holds no meta.json; it was not written by "
                                        "export_library")
            data = json.loads(meta_f.read().decode())
            name = BINARY_NAME.get(data.get("target", ""), "") if isinstance(data, dict) else ""
            bin_f = tar.extractfile(name) if name in names else None
            if bin_f is None:
                raise ModuleFormatError(f"load_module: {what} lacks the binary {name or '?'}")
            return data, bin_f.read()
    except (tarfile.TarError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModuleFormatError(f"load_module: {what} is not a module archive: {exc}") from None


def _read_files(path: Path) -> Tuple[Dict[str, Any], bytes]:
    if not path.exists():
        raise ModuleFormatError(f"load_module: {path} does not exist")
    if path.suffix == ".tar":
        return _read_tar(str(path), name=path)
    meta = meta_path(path)
    if not meta.exists():
        raise ModuleFormatError(f"load_module: no description {meta.name} beside {path}; kernels loads only "
                                "modules saved by export_library (the library plus its .tvm_meta.json, "
                                "or a .tar) or by save")
    try:
        data = json.loads(meta.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModuleFormatError(f"load_module: {meta} is not valid JSON: {exc}") from None
    return data, path.read_bytes()


def _c_library(binary: bytes) -> Path:
    """``binary`` (a shared library) in the build cache, content-addressed."""
    key = hashlib.sha256(binary).hexdigest()[:32]
    folder = get_config().cache_dir / "loaded" / key
    folder.mkdir(parents=True, exist_ok=True)
    lib = folder / "lib.so"
    if not lib.exists():
        write_atomic(lib, binary)
    return lib


def load_module(path: Union[str, Path], fmt: str = ""):
    """Load a module saved by ``export_library`` or ``save`` (see the module docstring).

    Raises
    ------
    ModuleFormatError
        When ``path`` is missing, was not written by kernels or is damaged.
    """
    path = Path(path)
    data, blob = _read_files(path)
    spec = spec_from_json(data)
    kind = fmt or path.suffix.lstrip(".")
    stored = "" if kind == "tar" else str(data.get("binary", ""))
    if kind in ("cubin", "ptx", "cl") or stored == "host-object" and spec.target != "c":
        device_code = blob if kind in ("cubin", "ptx", "cl") else None
        return _device_module(spec, kind, device_code, path)
    return _module(spec, blob, str(path))


def _module(spec: FuncSpec, blob: bytes, what: str):
    """The module of ``spec`` with its binary ``blob`` (a shared library, a cubin, OpenCL source)."""
    import dataclasses

    if spec.target == "c":
        from kernels.runtime.c import CModule

        return CModule(spec, library=_c_library(blob))
    if spec.target == "cuda":
        from kernels.runtime.cuda import CUDAModule

        return CUDAModule(spec, binary=blob)
    if spec.target == "opencl":
        from kernels.runtime.opencl import OpenCLModule

        return OpenCLModule(dataclasses.replace(spec, source=blob.decode()))
    raise ModuleFormatError(f"load_module: {what} is a module of unknown target {spec.target!r}")


def module_from_bytes(data: bytes):
    """Load a module from the bytes :func:`module_to_bytes` gave (possibly in another process or on
    another machine): a C library goes into this machine's build cache, a cubin is loaded on the first
    call, an OpenCL program is built for the device.

    Raises
    ------
    ModuleFormatError
        When ``data`` is not such an archive or is damaged.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ModuleFormatError(f"module_from_bytes: expected bytes, got {type(data).__name__}")
    meta, blob = _read_tar("the module bytes", fileobj=io.BytesIO(bytes(data)))
    return _module(spec_from_json(meta), blob, "the module bytes")


def _device_module(spec: FuncSpec, kind: str, code, path: Path):
    """The module of a GPU spec from its device code file (or, for a host stub, its source)."""
    import dataclasses

    if spec.target == "c":
        raise ModuleFormatError(f"load_module: {path} is device code, but the module it belongs to is a C "
                                "module; load the shared library instead")
    if spec.target == "opencl":
        from kernels.runtime.opencl import OpenCLModule

        if code is not None and kind != "cl":
            raise ModuleFormatError(f"load_module: {path}: an OpenCL module's device code is its .cl source")
        return OpenCLModule(spec if code is None else dataclasses.replace(spec, source=code.decode()))
    from kernels.runtime.cuda import CUDAModule

    if code is None:
        return CUDAModule(spec)  # the host stub: the device code is compiled from the source (cached)
    if kind == "cl":
        raise ModuleFormatError(f"load_module: {path}: a CUDA module's device code is a .cubin or .ptx")
    if kind == "ptx" and not code.endswith(b"\0"):
        code = code + b"\0"  # the driver reads PTX as a NUL-terminated string
    return CUDAModule(spec, binary=code)


# Module.save, save_device and export_library write through these (the module does not import this file)
_MODULE_SERIALIZE.update(save_device=save_device, save_object=save_object, export_module=export_module)
