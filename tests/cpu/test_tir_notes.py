"""The GPU-acceleration notes (TensorIR): their code runs unchanged but for the imports, prints what the
notes print (up to names and formatting), and every module it prints builds for OpenCL (PoCL) and
computes what numpy computes."""

from __future__ import annotations

import contextlib
import io
import random
import re
import runpy
from pathlib import Path

import numpy as np
import pytest
from kbtest import notes_check_source, opencl_available

import kernels as tvm
from kernels.script import from_source

ROOT = Path(__file__).resolve().parents[2]
NOTES = ROOT / "tests" / "tutorials" / "gpu_acceleration.py"
PRINTOUTS = ROOT / "tests" / "tutorials" / "gpu_acceleration_printouts.txt"

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_AXIS = re.compile(r"^(\w+)=T\.axis\.(spatial|reduce)\((\d+),(.*)\)$")
_WHERE = re.compile(r"^T\.where\((.*)\)$")


def _fingerprint(expr: str) -> tuple:
    """The values of an integer expression at fixed pseudo-random points of its variables (by name):
    equal for equal functions, whatever the parenthesisation or simplification."""
    names = sorted(set(_IDENT.findall(expr)))
    out = []
    for k in range(40):
        env = {n: random.Random(f"{n}/{k}").randrange(0, 600) for n in names}
        out.append(int(eval(expr, {"__builtins__": {}}, env)))  # noqa: S307 - test data
    return tuple(out)


def skeleton(text: str) -> list:
    """(depth, normalised statement) per line; comments dropped, binding expressions fingerprinted."""
    out = []
    for raw in text.splitlines():
        line = raw.split("#")[0].rstrip()
        if not line.strip() or line.lstrip().startswith(("@tvm.script", "class ")):
            continue
        depth = (len(line) - len(line.lstrip())) // 4
        s = re.sub(r"\s+", "", line)
        m = _AXIS.match(s)
        if m:
            s = f"{m[1]}=axis.{m[2]}({m[3]},{_fingerprint(m[4])})"
        m = _WHERE.match(s)
        if m:
            s = f"where{_fingerprint(m[1].replace('<', '-'))}"
        out.append((depth, s))
    return out


def notes_printouts() -> list:
    text = PRINTOUTS.read_text()
    body = text[text.index("@tvm.script.ir_module"):]
    # the notes print A with 1027 elements in two printouts; their module declares 1026
    return [p.replace("1027", "1026") for p in body.split("==========\n")]


def run_notes(workdir: Path, after_show: str = "", prelude: str = "") -> str:
    """Run the notes' script (in this process) and return what it printed. ``prelude`` goes right after
    the script's imports and ``after_show`` after every top-level `sch.mod.show()`; the notes' own
    lines stay unchanged."""
    code = NOTES.read_text()
    anchor = "from kernels.script import tir as T\n"
    code = code.replace(anchor, anchor + prelude, 1)
    if after_show:
        code = code.replace("\nsch.mod.show()\n", f"\nsch.mod.show()\n{after_show}\n")
    path = workdir / "gpu_acceleration.py"
    path.write_text(code)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        runpy.run_path(str(path), run_name="__notes__")
    return buf.getvalue()


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> list:
    out = run_notes(tmp_path_factory.mktemp("notes"))
    parts = ["@tvm.script.ir_module" + p for p in out.split("@tvm.script.ir_module")[1:]]
    return parts


def test_notes_print_six_modules(printed):
    assert len(printed) == 6


@pytest.mark.parametrize("k", range(6))
def test_printout_matches_the_notes(printed, k):
    ours, theirs = skeleton(printed[k]), skeleton(notes_printouts()[k])
    assert len(ours) == len(theirs), "\n".join(f"{a} | {b}" for a, b in zip(ours, theirs))
    for a, b in zip(ours, theirs):
        assert a == b


def test_skeleton_sees_a_different_binding():
    # the comparison above fails for a wrong binding or a wrong nesting, not only for a wrong name
    base = notes_printouts()[0]
    assert skeleton(base) != skeleton(base.replace("i_0 * 128 + i_1", "i_0 * 64 + i_1"))
    assert skeleton(base) != skeleton(base.replace("        for i_1", "            for i_1"))


@pytest.mark.parametrize("k", range(6))
def test_notes_printouts_parse(k):
    mod = from_source(notes_printouts()[k])
    assert list(mod.functions) == ["main"]
    # and print back to the same skeleton
    assert skeleton(mod.script()) == skeleton(notes_printouts()[k])


_CHECK = notes_check_source("opencl", rtol=1e-5)


@needs_opencl
def test_every_printed_module_runs_on_opencl(tmp_path):
    out = run_notes(tmp_path, after_show="_check(sch)", prelude=_CHECK)
    assert out.count("CHECKED 1") == 6


@needs_opencl
@pytest.mark.parametrize("k", [0, 3, 5])
def test_the_notes_printouts_themselves_build(k):
    # TVM's own printed modules (the notes' text) parse, lower and compute the right result
    mod = from_source(notes_printouts()[k])
    f = tvm.build(mod, target="opencl")
    dev = tvm.opencl(0)
    rng = np.random.default_rng(1)
    shapes = [tuple(int(s) for s in b.shape) for b in mod["main"].buffers]
    arrays = [rng.uniform(-1, 1, size=s).astype("float32") for s in shapes]
    nd = [tvm.nd.array(a, dev) for a in arrays]
    f(*nd)
    if k == 0:
        ref = arrays[0].astype(np.float64) + arrays[1]
    elif k == 3:
        a = arrays[0].astype(np.float64)
        ref = a[:-2] + a[1:-1] + a[2:]
    else:
        ref = arrays[0].astype(np.float64) @ arrays[1].astype(np.float64)
    np.testing.assert_allclose(nd[-1].numpy(), ref, rtol=1e-5, atol=1e-4)
