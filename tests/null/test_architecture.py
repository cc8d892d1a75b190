"""The import rules of docs/ARCHITECTURE.md, checked on the source with ``ast`` (nothing is imported):

- every module of harness/ and reports/ sits on one floor of :data:`FLOORS`, and imports only from
  its own floor or lower ones (no arrow up); kernels/ imports neither harness/ nor reports/;
- no cycle between the units of :data:`FLOORS` (a unit is a package or module named there);
- no module of harness/ or reports/ is over :data:`MAX_LINES` lines unless its docstring has a
  paragraph starting "Size:" that says why;
- an import of the project's own modules inside a function has a comment saying why: on its line,
  or on the line above the block of import lines it belongs to.

The compiler core, kernels/, has floors of its own (:data:`KERNELS_FLOORS`): every module sits on one,
no import points to a higher floor and there is no cycle between its units, with the exceptions named
in :data:`KERNELS_EXCEPTIONS`; nor is there a cycle between its modules, within a unit or across. There
an imported name is first resolved to the module that defines it (``from .. import build`` is an import
of the package ``kernels``, the TVM-compatible surface). No function of kernels/ is over
:data:`KERNELS_MAX_FUNCTION_LINES` lines and no module over :data:`KERNELS_MAX_MODULE_LINES`.

Imports under ``if TYPE_CHECKING:`` count like any other: a type is a dependency too.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kernels", "harness", "reports")

#: the floors, lowest first; each is a tuple of units (a unit is a module or package name; a
#: module belongs to the unit that is its longest prefix). ``harness`` alone is the package's
#: ``__init__``. The coarse floors of the issue, cli -> reports -> harness -> kernels, are these
#: with harness's own floors (1-7) taken together.
FLOORS = (
    ("kernels",),
    ("harness", "harness.errors", "harness.model", "harness.config"),  # values, settings, errors
    ("harness.stats",),  # statistics: pure functions of numbers and frames
    ("harness.measure",),  # timing methodology
    ("harness.env",),  # fingerprints (GPU facts through harness.measure.nvml)
    ("harness.suite", "harness.plan", "harness.store"),  # suites, plans, the result store
    ("harness.execute",),  # executors and workers
    ("harness.judge", "harness.run", "harness.tune"),  # verdicts; a suite from file to store; tuning
    ("reports",),  # reports of stored runs
    ("harness.cli",),  # the kbench command line
)
#: the most lines a module has without a "Size:" paragraph in its docstring saying why
MAX_LINES = 600

_LEVEL = {unit: level for level, units in enumerate(FLOORS) for unit in units}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources(*packages: str) -> dict[str, Path]:
    return {_module_name(p): p for pkg in packages for p in sorted((ROOT / pkg).rglob("*.py"))}


def unit_of(module: str) -> str | None:
    """The unit of FLOORS that ``module`` belongs to (its longest prefix), or None."""
    if module == "harness":
        return "harness"
    best = None
    for unit in _LEVEL:
        if unit != "harness" and (module == unit or module.startswith(unit + ".")):
            if best is None or len(unit) > len(best):
                best = unit
    return best


class _Imports(ast.NodeVisitor):
    """The project modules a module imports: (imported module, line, inside a function)."""

    def __init__(self, module: str, is_package: bool):
        self.module, self.is_package = module, is_package
        self.found: list[tuple[str, int, bool]] = []
        self._depth = 0

    def _resolve(self, node: ast.ImportFrom) -> list[str]:
        if node.level:
            base = self.module.split(".")
            base = base if self.is_package else base[:-1]
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # "from pkg import sub" may name a submodule; the unit is decided by the longest prefix
        return [f"{prefix}.{alias.name}" for alias in node.names] if prefix else []

    def _add(self, names: list[str], line: int) -> None:
        for name in names:
            if name.split(".")[0] in PACKAGES:
                self.found.append((name, line, self._depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        self._add([alias.name for alias in node.names], node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._add(self._resolve(node), node.lineno)

    def _function(self, node) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function


def _imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    visitor = _Imports(module, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(), filename=str(path)))
    return visitor.found


@pytest.fixture(scope="module")
def harness_side() -> dict[str, Path]:
    return _sources("harness", "reports")


def test_every_module_sits_on_a_floor(harness_side):
    assert not [m for m in harness_side if unit_of(m) is None], "add new modules to FLOORS"


def test_no_import_points_up(harness_side):
    up = []
    for module, path in harness_side.items():
        mine = _LEVEL[unit_of(module)]
        for name, line, _ in _imports(module, path):
            unit = unit_of(name)
            if unit is not None and _LEVEL[unit] > mine:
                up.append(f"{path.relative_to(ROOT)}:{line}: {module} (floor {mine}) imports {name} "
                          f"(floor {_LEVEL[unit]})")
    assert not up, "\n".join(up)


def test_kernels_imports_neither_harness_nor_reports():
    bad = [f"{path.relative_to(ROOT)}:{line}: {name}"
           for module, path in _sources("kernels").items()
           for name, line, _ in _imports(module, path) if name.split(".")[0] in ("harness", "reports")]
    assert not bad, "\n".join(bad)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_cycle_between_units(harness_side):
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in harness_side.items():
        mine = unit_of(module)
        for name, _, _ in _imports(module, path):
            unit = unit_of(name)
            if unit is not None and unit != mine:
                edges[mine].add(unit)
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert unit_of("harness.execute.worker") == "harness.execute" and unit_of("harness") == "harness"
    assert unit_of("harness.stats.frames") == "harness.stats" and unit_of("numpy") is None


def test_long_modules_say_why(harness_side):
    long = []
    for module, path in harness_side.items():
        n = len(path.read_text().splitlines())
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if n > MAX_LINES and not any(par.strip().startswith("Size:") for par in doc.split("\n\n")):
            long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, "\n".join(long)


def test_function_local_imports_of_our_modules_say_why(harness_side):
    silent = []
    for module, path in harness_side.items():
        lines = path.read_text().splitlines()
        for name, line, local in _imports(module, path):
            if not local:
                continue
            here = lines[line - 1]
            above = line - 2  # walk up over the block of imports (and blank lines) this one is part of
            while above >= 0 and (not lines[above].strip()
                                  or lines[above].strip().startswith(("from ", "import "))):
                above -= 1
            if "#" not in here and not (above >= 0 and lines[above].strip().startswith("#")):
                silent.append(f"{path.relative_to(ROOT)}:{line}: {here.strip()}")
    assert not silent, "\n".join(silent)


# -- kernels/ ------------------------------------------------------------------------------------------

#: the floors of kernels/, lowest first (docs/ARCHITECTURE.md, "Floors of the compiler core"). A unit
#: is a module or package; a module belongs to the unit that is its longest prefix, and ``kernels``
#: alone is the package's ``__init__`` (the TVM-compatible surface, on top).
KERNELS_FLOORS = (
    # errors, targets, settings, the content cache, the FuncSpec contract between codegen and runtime
    ("kernels.errors", "kernels.error", "kernels.target", "kernels.container", "kernels.transform",
     "kernels.scope", "kernels.runtime.config", "kernels.runtime.cache", "kernels.runtime.spec"),
    ("kernels.tir", "kernels.ir"),  # the IR: expressions, statements, blocks, simplifier, printer
    ("kernels.te", "kernels.script"),  # front ends: tensor expressions, TVMScript
    ("kernels.tir.schedule",),  # TensorIR scheduling (prints through kernels.script)
    ("kernels.lower",),  # schedule -> loop IR: the passes
    ("kernels.codegen",),  # loop IR -> source + FuncSpec
    ("kernels.contrib.nvcc",),  # the CUDA compiler (no device)
    ("kernels.runtime",),  # modules, devices, arrays
    ("kernels.contrib",),  # cc (export_library), packing, the Ray cluster, utils
    ("kernels.build_module", "kernels.driver", "kernels.testing"),  # lower + codegen + runtime
    ("kernels.tuning",),  # the tuning engine
    ("kernels.autotvm", "kernels.meta_schedule"),  # front ends of the tuning engine
    ("kernels.workloads",),  # the tutorial workloads and their schedule variants
    ("kernels", "kernels.aliases", "kernels.tirx", "kernels.s_tir"),  # the TVM-compatible surface
    ("kernels.testing.fuzz",),  # the schedule fuzzer: draws from every space above (templates, workloads)
)

#: imports of kernels/ that break its rules today, each with why it stays: (importer, imported unit)
KERNELS_EXCEPTIONS: frozenset = frozenset()

_KLEVEL = {unit: level for level, units in enumerate(KERNELS_FLOORS) for unit in units}


def kernels_unit_of(module: str) -> str | None:
    """The unit of KERNELS_FLOORS that ``module`` belongs to, or None."""
    if module == "kernels":
        return "kernels"
    best = None
    for unit in _KLEVEL:
        if unit != "kernels" and (module == unit or module.startswith(unit + ".")):
            if best is None or len(unit) > len(best):
                best = unit
    return best


@pytest.fixture(scope="module")
def kernels_side() -> dict[str, Path]:
    return _sources("kernels")


def _defining_module(name: str, modules) -> str:
    """The longest prefix of an imported name that is a module (``kernels.tir.Var`` -> ``kernels.tir``)."""
    parts = name.split(".")
    while len(parts) > 1 and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts)


def _kernels_edges(kernels_side):
    """(importer module, its unit, imported unit, path, line) of every import between kernels units."""
    out = []
    for module, path in kernels_side.items():
        mine = kernels_unit_of(module)
        for name, line, _ in _imports(module, path):
            if name.split(".")[0] != "kernels":
                continue
            unit = kernels_unit_of(_defining_module(name, kernels_side))
            if unit is not None and unit != mine and (module, unit) not in KERNELS_EXCEPTIONS:
                out.append((module, mine, unit, path, line))
    return out


def test_every_kernels_module_sits_on_a_floor(kernels_side):
    assert not [m for m in kernels_side if kernels_unit_of(m) is None], "add new modules to KERNELS_FLOORS"


def test_no_kernels_import_points_up(kernels_side):
    up = [f"{path.relative_to(ROOT)}:{line}: {module} (floor {_KLEVEL[mine]}) imports {unit} "
          f"(floor {_KLEVEL[unit]})"
          for module, mine, unit, path, line in _kernels_edges(kernels_side) if _KLEVEL[unit] > _KLEVEL[mine]]
    assert not up, "\n".join(up)


def test_no_cycle_between_kernels_units(kernels_side):
    edges: dict[str, set[str]] = defaultdict(set)
    for _, mine, unit, _, _ in _kernels_edges(kernels_side):
        edges[mine].add(unit)
    assert _cycles(edges) == []


def test_kernels_exceptions_are_still_needed(kernels_side):
    # an exception that no import needs any more is removed from the list
    used = set()
    for module, path in kernels_side.items():
        for name, _, _ in _imports(module, path):
            if name.split(".")[0] == "kernels":
                used.add((module, kernels_unit_of(_defining_module(name, kernels_side))))
    assert sorted(KERNELS_EXCEPTIONS - used) == []


def test_kernels_units_resolve_as_documented(kernels_side):
    assert kernels_unit_of("kernels.tir.schedule.state") == "kernels.tir.schedule"
    assert kernels_unit_of("kernels.tir.expr") == "kernels.tir" and kernels_unit_of("kernels") == "kernels"
    assert kernels_unit_of("kernels.contrib.nvcc") == "kernels.contrib.nvcc"
    assert kernels_unit_of("kernels.contrib.cc") == "kernels.contrib"
    assert _defining_module("kernels.build", kernels_side) == "kernels"
    assert _defining_module("kernels.tir.expr.Var", kernels_side) == "kernels.tir.expr"


def _module_edges(sources: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the kernels modules it imports (module- and function-level, TYPE_CHECKING alike)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in sources.items():
        for name, _, _ in _imports(module, path):
            if name.split(".")[0] == "kernels":
                target = _defining_module(name, sources)
                if target != module:
                    edges[module].add(target)
    return edges


def test_no_cycle_between_kernels_modules(kernels_side):
    # also between the modules of one unit: a node does not import its printer, a package's __init__
    # is not imported by the modules it loads (docs/ARCHITECTURE.md, "Floors of the compiler core")
    found = sorted(_cycles(_module_edges(kernels_side)))
    assert found == [], "\n".join(" <-> ".join(c) for c in found)


def test_module_cycles_are_found_through_function_level_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    files = {
        "kernels.pkg": ("pkg/__init__.py", "from .a import f\n"),
        "kernels.pkg.a": ("pkg/a.py", "from .b import g\n\ndef f():\n    return g()\n"),
        "kernels.pkg.b": ("pkg/b.py", "def g():\n    from . import a  # late\n    return a\n"),
        "kernels.pkg.c": ("pkg/c.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from .d import D\n"),
        "kernels.pkg.d": ("pkg/d.py", "from .c import C\n"),
        "kernels.pkg.e": ("pkg/e.py", "from . import a\n"),
    }
    sources = {}
    for module, (rel, text) in files.items():
        (tmp_path / rel).write_text(text)
        sources[module] = tmp_path / rel
    edges = _module_edges(sources)
    assert edges["kernels.pkg.a"] == {"kernels.pkg.b"} and edges["kernels.pkg.e"] == {"kernels.pkg.a"}
    assert sorted(_cycles(edges)) == [["kernels.pkg.a", "kernels.pkg.b"], ["kernels.pkg.c", "kernels.pkg.d"]]



#: the most lines a function (or method) of kernels/ may have, docstring included, and a module
KERNELS_MAX_FUNCTION_LINES = 150
KERNELS_MAX_MODULE_LINES = 900


def test_kernels_functions_and_modules_are_short(kernels_side):
    long = []
    for path in kernels_side.values():
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        n = len(text.splitlines())
        if n > KERNELS_MAX_MODULE_LINES:
            long.append(f"{rel}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > KERNELS_MAX_FUNCTION_LINES:
                    long.append(f"{rel}:{node.lineno}: {node.name} is {lines} lines")
    assert not long, "\n".join(long)

# -- IR attribute keys and storage scopes (kernels/tir/attr.py) ----------------------------------------

ATTR_MODULE = ROOT / "kernels" / "tir" / "attr.py"
#: words of kernels/tir/attr.py that are also words of the user's API (thread tags, a pragma's name),
#: written out where a schedule or a thread tag means them
_API_WORDS = {"VTHREAD", "PRAGMA_TENSOR_CORE"}
_SCOPES = {"GLOBAL", "SHARED", "SHARED_DYN", "LOCAL", "WARP"}
#: (file, string) written out on purpose: C's keywords, a Stage's attribute of the same name
_SPELLED_ON_PURPOSE = {("kernels/codegen/c_family.py", "global"), ("kernels/codegen/c_family.py", "local"),
                       ("kernels/lower/double_buffer.py", "buffer_stages")}


def _attr_constants() -> dict[str, str]:
    tree = ast.parse(ATTR_MODULE.read_text())
    return {node.targets[0].id: node.value.value for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)}


def _plain_strings(path: Path) -> list[tuple[int, str]]:
    """(line, value) of the plain string literals of a module (no docstrings, f-strings or comments)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        s = tok.string
        if tok.type == tokenize.STRING and s[:1] in "\"'" and not s.startswith(('"""', "'''")):
            out.append((tok.start[0], s[1:-1]))
    return out


def _spelled_out(words: set[str], paths) -> list[str]:
    found = []
    for path in paths:
        rel = str(path.relative_to(ROOT))
        for line, value in _plain_strings(path):
            if value in words and (rel, value) not in _SPELLED_ON_PURPOSE:
                found.append(f"{rel}:{line}: {value!r}")
    return found


def test_ir_attribute_keys_are_spelled_once():
    # every AttrStmt key and WMMA scope is written as a string in kernels/tir/attr.py only
    consts = _attr_constants()
    assert consts["THREAD_EXTENT"] == "thread_extent" and consts["WMMA_MATRIX_A"] == "wmma.matrix_a"
    keys = {v for k, v in consts.items() if k not in _API_WORDS | _SCOPES}
    paths = [p for p in sorted((ROOT / "kernels").rglob("*.py")) if p != ATTR_MODULE]
    found = _spelled_out(keys, paths)
    assert not found, "use kernels.tir.attr:\n" + "\n".join(found)


def test_passes_and_code_generators_name_storage_scopes():
    consts = _attr_constants()
    scopes = {consts[k] for k in _SCOPES}
    paths = [p for folder in ("lower", "codegen") for p in sorted((ROOT / "kernels" / folder).rglob("*.py"))]
    found = _spelled_out(scopes, paths)
    assert not found, "use kernels.tir.attr:\n" + "\n".join(found)


def test_spelled_out_finds_a_key(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""thread_extent in a docstring"""\nx = "thread_extent"  # "local"\ny = f"{x} local"\n')
    assert [v for _, v in _plain_strings(f)] == ["thread_extent"]
