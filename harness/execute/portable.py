"""One case's built function as plain data, so that another source tree's build can run here.

``kbench ab`` (harness.cli.ab) times a case built from two source trees in one loop. The other tree's
compiler core runs in a process of its own (``python -m harness.execute.portable export``, with that
tree's ``kernels/`` and this checkout's ``harness/`` on ``PYTHONPATH``: :func:`export_base` starts it,
:func:`export_cases` is what it runs); what comes back is, per case, the
:class:`~kernels.runtime.spec.FuncSpec` that tree generated, *frozen* at the case's shapes: the
source text plus the launch description evaluated for the case's concrete shapes (grids, blocks and
workspace sizes become numbers instead of functions of the shape variables). No code of the other
tree is imported by the process that measures: :func:`thaw` turns the data back into a FuncSpec that
this checkout's runtime compiles (cc, pyopencl, nvcc) and launches. A thawed spec called with other
shapes than it was frozen for raises a clear error instead of launching wrong grids.

Format (JSON, ``"format": FORMAT``)::

    {"format", "name", "target", "source", "arch", "uses_openmp",
     "env": {shape variable: value},
     "args": [{"name", "dtype", "shape": [int | {"var": name} | {"derived": text, "value": int}]}],
     "workspaces": [{"name", "dtype", "size": int}],
     "kernels": [{"name", "params": [...], "grid": [x, y, z], "block": [x, y, z],
                  "dynamic_shared_bytes": int}]}

A case the other tree could not build is ``{"error": message}`` instead.
"""

from __future__ import annotations

import importlib
import json
import numbers
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from harness.errors import ConfigError
from harness.model import Case
from kernels.workloads import get as get_workload

from .build import lower_case

FORMAT = "kbench-portable-spec/1"


class PortableSpecError(ConfigError):
    """Malformed portable spec data, or a thawed spec called with shapes it was not frozen for."""


def bind_env(spec: Any, arrays: Sequence[Any]) -> dict[str, int]:
    """The shape variables of ``spec`` bound from the shapes of ``arrays`` (one per argument)."""
    if len(arrays) != len(spec.args):
        raise PortableSpecError(f"{spec.name}: {len(spec.args)} argument(s), got {len(arrays)} array(s)")
    env: dict[str, int] = {}
    for arg, array in zip(spec.args, arrays):
        shape = tuple(getattr(array, "shape", ()))
        if len(shape) != len(arg.shape):
            raise PortableSpecError(f"{spec.name}: argument {arg.name} has shape {shape}, expected "
                                    f"{len(arg.shape)} dimension(s)")
        for dim, n in zip(arg.shape, shape):
            if isinstance(dim, str):
                if env.setdefault(dim, int(n)) != int(n):
                    raise PortableSpecError(f"{spec.name}: shape variable {dim} is {env[dim]} and {n}")
    return env


def freeze(spec: Any, env: Mapping[str, int]) -> dict[str, Any]:
    """``spec`` (a FuncSpec, read by attribute names only) as JSON-ready data at shapes ``env``."""
    env = {str(k): int(v) for k, v in env.items()}
    missing = [v for v in spec.shape_vars if v not in env]
    if missing:
        raise PortableSpecError(f"{spec.name}: shape variable(s) {', '.join(missing)} not bound")

    def dim(d: Any) -> Any:
        if isinstance(d, bool):
            raise PortableSpecError(f"{spec.name}: a dimension is a bool")
        if isinstance(d, numbers.Integral):
            return int(d)
        if isinstance(d, str):
            return {"var": d}
        return {"derived": str(getattr(d, "text", d)), "value": int(d(env))}

    def triple(f: Any) -> list[int]:
        return [int(x) for x in f(env)]

    return {
        "format": FORMAT,
        "name": spec.name,
        "target": spec.target,
        "source": spec.source,
        "arch": getattr(spec, "arch", "") or "",
        "uses_openmp": bool(getattr(spec, "uses_openmp", False)),
        "env": env,
        "shape_vars": list(spec.shape_vars),
        "args": [{"name": a.name, "dtype": str(a.dtype), "shape": [dim(d) for d in a.shape]}
                 for a in spec.args],
        "workspaces": [{"name": w.name, "dtype": str(w.dtype), "size": int(w.size(env))}
                       for w in spec.workspaces],
        # values fixed at build time (a CUDA-source variant's scalars): absent from older trees' specs
        "constants": [{"name": c.name, "dtype": str(c.dtype), "value": c.value}
                      for c in getattr(spec, "constants", ())],
        # dynamic shared memory: absent from the specs of trees that predate it (then 0)
        "kernels": [{"name": k.name, "params": list(k.params), "grid": triple(k.grid),
                     "block": triple(k.block),
                     "dynamic_shared_bytes": int(getattr(k, "dynamic_shared_bytes", 0))}
                    for k in spec.kernels],
    }


class _Frozen:
    """A launch-description function frozen at one binding of the shape variables."""

    def __init__(self, what: str, env: Mapping[str, int], value: Any) -> None:
        self.what, self.env, self.value = what, dict(env), value

    def __call__(self, env: Mapping[str, int]) -> Any:
        wrong = {k: (v, env.get(k)) for k, v in self.env.items() if k in env and int(env[k]) != v}
        if wrong:
            got = ", ".join(f"{k}={g} (built for {v})" for k, (v, g) in sorted(wrong.items()))
            raise PortableSpecError(f"{self.what}: built by the other source tree for fixed shapes; "
                                    f"called with {got}")
        return self.value


def thaw(data: Mapping[str, Any]):
    """The :class:`~kernels.runtime.spec.FuncSpec` of frozen ``data`` (see the module docstring).

    Raises
    ------
    PortableSpecError
        ``data`` is an export error, has another format, or lacks a field.
    """
    # imported here: the export process (another tree's kernels/) only freezes, and need not have these
    from kernels.runtime.spec import BufferArg, ConstArg, DerivedDim, FuncSpec, KernelSpec, Workspace

    if "error" in data:
        raise PortableSpecError(str(data["error"]))
    if data.get("format") != FORMAT:
        raise PortableSpecError(f"portable spec format {data.get('format')!r}; this kbench reads {FORMAT!r}")
    try:
        name, env = str(data["name"]), {str(k): int(v) for k, v in data["env"].items()}

        def dim(d: Any) -> Any:
            if isinstance(d, int):
                return d
            if "var" in d:
                return str(d["var"])
            return DerivedDim(str(d["derived"]),
                              _Frozen(f"{name}: dimension {d['derived']}", env, int(d["value"])))

        args = tuple(BufferArg(str(a["name"]), str(a["dtype"]), tuple(dim(d) for d in a["shape"]))
                     for a in data["args"])
        workspaces = tuple(Workspace(str(w["name"]), str(w["dtype"]),
                                     _Frozen(f"{name}: workspace {w['name']}", env, int(w["size"])))
                           for w in data["workspaces"])
        kernels = tuple(KernelSpec(str(k["name"]), tuple(str(p) for p in k["params"]),
                                   _Frozen(f"{name}: grid of {k['name']}", env,
                                           tuple(int(x) for x in k["grid"])),
                                   _Frozen(f"{name}: block of {k['name']}", env,
                                           tuple(int(x) for x in k["block"])),
                                   int(k.get("dynamic_shared_bytes", 0)))
                        for k in data["kernels"])
        return FuncSpec(name=name, target=str(data["target"]), source=str(data["source"]), args=args,
                        shape_vars=tuple(str(v) for v in data["shape_vars"]), workspaces=workspaces,
                        kernels=kernels, arch=str(data.get("arch") or ""),
                        uses_openmp=bool(data.get("uses_openmp", False)),
                        constants=tuple(ConstArg(str(c["name"]), str(c["dtype"]), c["value"])
                                        for c in data.get("constants", ())))
    except (KeyError, TypeError, ValueError) as exc:
        raise PortableSpecError(f"malformed portable spec: {type(exc).__name__}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# the export process: another source tree's kernels/ builds the cases


#: how long the base tree's export may take (it lowers every case, and may call nvcc)
EXPORT_TIMEOUT_S = 1800.0


class BaseTreeError(ConfigError):
    """The base tree is not usable: no ``kernels/`` package, or its build process failed."""


def _head_root() -> Path:
    """This checkout: the folder holding the ``harness`` package in use."""
    return Path(__file__).resolve().parents[2]


def check_base_tree(base_tree: str | os.PathLike) -> Path:
    """``base_tree`` resolved, after checking it holds a ``kernels`` package.

    Raises
    ------
    BaseTreeError
        Naming ``--base-tree`` and what is missing.
    """
    root = Path(base_tree).expanduser()
    if not root.is_dir():
        raise BaseTreeError(f"--base-tree {base_tree}: no such directory")
    if not (root / "kernels" / "__init__.py").is_file():
        raise BaseTreeError(f"--base-tree {base_tree}: no kernels/ package there (expected "
                            f"{root / 'kernels' / '__init__.py'}); give the root of a kbench checkout")
    return root.resolve()


def export_base(base_tree: Path, items: Sequence[dict], imports: Sequence[str] = (),
                python: str = sys.executable, timeout_s: float = EXPORT_TIMEOUT_S) -> tuple[dict, str]:
    """Build ``items`` (``{"case": Case JSON, "arch": ...}``) with the base tree's compiler core in a
    process of its own; returns ({case key: frozen spec | {"error": ...}}, where kernels came from).

    Raises
    ------
    BaseTreeError
        The process failed, timed out, or imported ``kernels`` from somewhere else than the base tree.
    """
    with tempfile.TemporaryDirectory(prefix="kbench-ab-") as tmp:
        shim = Path(tmp) / "path"
        shim.mkdir()
        (shim / "kernels").symlink_to(base_tree / "kernels", target_is_directory=True)
        (shim / "harness").symlink_to(_head_root() / "harness", target_is_directory=True)
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        request.write_text(json.dumps({"items": list(items), "imports": list(imports)}))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), env.get("PYTHONPATH", "")) if p)
        env["CUDA_VISIBLE_DEVICES"] = ""  # lowering needs no GPU (the workers compile for theirs)
        try:
            proc = subprocess.run([python, "-m", "harness.execute.portable", "export", str(request),
                                   str(answer)],
                                  cwd=shim, env=env, capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise BaseTreeError(f"--base-tree {base_tree}: building the cases with its kernels/ took over "
                                f"{timeout_s:g} s") from None
        if proc.returncode != 0 or not answer.is_file():
            tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-12:])
            raise BaseTreeError(f"--base-tree {base_tree}: its kernels/ could not build the cases with this "
                                f"harness (exit {proc.returncode}):\n{tail}\n(ci/pr.sh --mode runs compares "
                                "two checkouts that differ beyond kernels/)")
        data = json.loads(answer.read_text())
        where = Path(str(data.get("kernels_path") or "")).resolve()  # through the link, while it exists
    if not where.is_relative_to(base_tree):
        raise BaseTreeError(f"--base-tree {base_tree}: the build process imported kernels from {where}, "
                            "not from the base tree (an installed kbench shadows it?)")
    return dict(data.get("specs") or {}), str(where.parent)


def export_cases(items: Sequence[Mapping[str, Any]], imports: Sequence[str] = ()) -> dict[str, Any]:
    """Build every case of ``items`` (``{"case": Case JSON, "arch": "sm_90" | None}``) with the
    ``kernels`` package this process imports and freeze it at the case's shapes (drawn as
    ``kbench run`` draws them): ``{case key: frozen spec | {"error": message}}``."""
    for mod in imports:
        importlib.import_module(mod)
    out: dict[str, Any] = {}
    for item in items:
        case = Case.from_json(item["case"]) if isinstance(item["case"], str) else Case(**item["case"])
        try:
            spec = lower_case(case, item.get("arch") or None)
            w = get_workload(case.workload)
            host = w.make_args(case.param_dict, case.dtype, np.random.default_rng(0))
            # packed sub-byte arguments (int4 words) bind the shape variables by their logical shape
            shaped = [SimpleNamespace(shape=w.logical_shape(i, a, case.dtype) or a.shape)
                      for i, a in enumerate(host)]
            out[case.key] = freeze(spec, bind_env(spec, shaped))
        except Exception as exc:  # the case's own failure: reported as its build error
            out[case.key] = {"error": f"{type(exc).__name__}: {exc}".strip()}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.execute.portable export IN.json OUT.json``: IN holds ``{"items": [...], "imports":
    [...]}`` (see :func:`export_cases`); OUT receives ``{"specs": {...}, "kernels": version}``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] != "export":
        print("usage: python -m harness.execute.portable export IN.json OUT.json", file=sys.stderr)
        return 4
    with open(args[1]) as f:
        request = json.load(f)
    import kernels  # the package itself, for where it was imported from (the other tree, it should be)

    specs = export_cases(request.get("items", []), request.get("imports", []))
    with open(args[2], "w") as f:
        json.dump({"specs": specs, "kernels": getattr(kernels, "__version__", None),
                   "kernels_path": str(getattr(kernels, "__file__", ""))}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
