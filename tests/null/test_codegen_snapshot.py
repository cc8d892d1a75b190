"""scripts/codegen_snapshot.py: which cases a snapshot holds, and what --compare reports."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def _registry_kept():
    # the snapshot registers the notes' TensorIR workloads (a process of its own does not mind); the
    # other tests see the registry as it was
    from kernels.workloads import REGISTRY

    before = dict(REGISTRY)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)


@pytest.fixture(scope="module")
def snap():
    path = ROOT / "scripts" / "codegen_snapshot.py"
    spec = importlib.util.spec_from_file_location("codegen_snapshot", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("codegen_snapshot", module)
    spec.loader.exec_module(module)
    return module


def test_every_suite_case_template_and_notes_schedule_has_its_own_file(snap):
    cases = snap.all_cases()
    names = [snap._file_name(name) for name, _, _ in cases]
    assert len(set(names)) == len(names)
    kinds = {kind for _, kind, _ in cases}
    assert kinds == {"suite", "template", "notes"}
    suite = [item for _, kind, item in cases if kind == "suite"]
    assert {c.target for c in suite} == {"c", "opencl", "cuda"}
    assert {c.workload for c in suite} >= {"row_sum", "matmul_tensorcore", "vector_add"}


def test_compare_names_what_differs(snap, tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "out"
    ref.mkdir()
    out.mkdir()
    for folder in (ref, out):
        (folder / "same.txt").write_text("// same\nint x;\n")
    (ref / "changed.txt").write_text("a")
    (out / "changed.txt").write_text("b")
    (ref / "gone.txt").write_text("a")
    (out / "added.txt").write_text("a")
    assert snap.compare(out, ref) == ["missing: gone.txt", "new: added.txt", "differs: changed.txt"]
    (out / "changed.txt").write_text("a")
    (out / "added.txt").unlink()
    (out / "gone.txt").write_text("a")
    assert snap.compare(out, ref) == []


def test_a_case_is_its_generated_source(snap):
    name, kind, item = next(c for c in snap.all_cases() if c[1] == "suite" and c[2].target == "c")
    got_name, text = snap._generate((name, kind, item))
    assert got_name == name and "ERROR" not in text and "void" in text
