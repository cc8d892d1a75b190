"""Run test files written for TVM against kbench's compiler core with only the import lines changed.

Each file is copied into a temporary folder with its ``tvm`` imports rewritten to ``kernels`` (nothing
else is touched), then pytest runs the copies and a table of passed / failed / errors per file is
printed (and written as JSON with ``--json``).

    python scripts/tvm_tests.py /path/to/tvm-checkout unittest/test_tir_schedule_rfactor.py ...
    python scripts/tvm_tests.py /path/to/tvm-checkout --group tir-schedule --json counts.json

The rewriting, line by line, outside string literals is not attempted (import lines only):

    import tvm                     -> import kernels as tvm
    import tvm.testing             -> import kernels.testing; import kernels as tvm
    import tvm.x as y              -> import kernels.x as y
    from tvm import te             -> from kernels import te
    from tvm.script import tir as T -> from kernels.script import tir as T

The checkout is read as it is: point it at a copy of the tag to compare with (``git archive v0.8.0
tests/python | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

GROUPS = {
    "tir-schedule": [
        "unittest/test_tir_schedule_block_scope.py",
        "unittest/test_tir_schedule_cache_read_write.py",
        "unittest/test_tir_schedule_compute_at.py",
        "unittest/test_tir_schedule_compute_inline.py",
        "unittest/test_tir_schedule_error.py",
        "unittest/test_tir_schedule_for_kind.py",
        "unittest/test_tir_schedule_instruction.py",
        "unittest/test_tir_schedule_reduction.py",
        "unittest/test_tir_schedule_reorder.py",
        "unittest/test_tir_schedule_rfactor.py",
        "unittest/test_tir_schedule_sampling.py",
        "unittest/test_tir_schedule_split_fuse.py",
        "unittest/test_tir_schedule_state.py",
        "unittest/test_tir_schedule_state_cached_flags.py",
        "unittest/test_tir_schedule_storage_align.py",
        "unittest/test_tir_schedule_trace.py",
        "unittest/test_tir_schedule_utilities.py",
        "unittest/test_tvmscript_roundtrip.py",
    ],
    "codegen-cuda": ["unittest/test_target_codegen_cuda.py"],
    "te": [
        "unittest/test_te_schedule.py",
        "unittest/test_te_schedule_bound_inference.py",
        "unittest/test_te_schedule_ops.py",
        "unittest/test_te_build_lower.py",
        "integration/test_ewise.py",
        "integration/test_reduce.py",
    ],
}

_IMPORT = re.compile(r"^(?P<indent>\s*)import\s+tvm(?P<sub>(\.\w+)*)(\s+as\s+(?P<alias>\w+))?\s*(#.*)?$")
_FROM = re.compile(r"^(?P<indent>\s*)from\s+tvm(?P<sub>(\.\w+)*)\s+import\s+(?P<rest>.*)$")


def rewrite_line(line: str) -> str:
    """The line with a ``tvm`` import rewritten to ``kernels`` (any other line unchanged)."""
    m = _IMPORT.match(line)
    if m:
        indent, sub, alias = m.group("indent"), m.group("sub") or "", m.group("alias")
        if alias:
            return f"{indent}import kernels{sub} as {alias}"
        if not sub:
            return f"{indent}import kernels as tvm"
        return f"{indent}import kernels{sub}; import kernels as tvm"
    m = _FROM.match(line)
    if m:
        return f"{m.group('indent')}from kernels{m.group('sub') or ''} import {m.group('rest')}"
    return line


def rewrite_source(text: str) -> str:
    """Every import line of ``text`` rewritten by :func:`rewrite_line`."""
    return "\n".join(rewrite_line(line) for line in text.split("\n"))


def _tests_root(checkout: Path) -> Path:
    for cand in (checkout / "tests" / "python", checkout):
        if (cand / "unittest").is_dir() or (cand / "integration").is_dir():
            return cand
    raise SystemExit(f"tvm_tests: {checkout} holds no tests/python/unittest folder")


def run(checkout: Path, files: list[str], timeout: float, extra: list[str]) -> dict[str, dict[str, int]]:
    root = _tests_root(checkout)
    work = Path(tempfile.mkdtemp(prefix="kbench-tvmtests-"))
    try:
        copies = []
        for rel in files:
            src = root / rel
            if not src.is_file():
                raise SystemExit(f"tvm_tests: no file {src}")
            dst = work / rel.replace("/", "__")
            dst.write_text(rewrite_source(src.read_text()))
            copies.append((rel, dst))
        report = work / "junit.xml"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parent.parent)] + [p for p in [env.get("PYTHONPATH")] if p])
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(work),
               f"--junitxml={report}", "-o", "junit_family=xunit1", "--continue-on-collection-errors", *extra, *[str(d) for _, d in copies]]
        try:
            subprocess.run(cmd, cwd=work, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"tvm_tests: pytest ran past {timeout:.0f} s", file=sys.stderr)
        counts = {rel: {"passed": 0, "failed": 0, "errors": 0, "skipped": 0} for rel in files}
        by_copy = {d.stem: rel for rel, d in copies}
        if report.exists():
            for case in ET.parse(report).getroot().iter("testcase"):
                file_attr = case.get("file") or case.get("classname", "").split(".")[0]
                stem = Path(file_attr).stem if file_attr else ""
                rel = by_copy.get(stem)
                if rel is None:  # a collection error names the file in `name`, not in `file`
                    rel = by_copy.get(Path(case.get("name", "")).stem)
                if rel is None:
                    continue
                kinds = {child.tag for child in case}
                if "error" in kinds:
                    counts[rel]["errors"] += 1
                elif "failure" in kinds:
                    counts[rel]["failed"] += 1
                elif "skipped" in kinds:
                    counts[rel]["skipped"] += 1
                else:
                    counts[rel]["passed"] += 1
        return counts
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", type=Path, help="a TVM source tree (or its tests/python folder)")
    ap.add_argument("files", nargs="*", help="test files relative to tests/python")
    ap.add_argument("--group", action="append", choices=sorted(GROUPS), default=[])
    ap.add_argument("--json", type=Path, help="write the counts here as JSON")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole pytest run")
    ap.add_argument("--pytest-arg", action="append", default=[], help="passed on to pytest")
    args = ap.parse_args(argv)
    files = list(args.files) + [f for g in args.group for f in GROUPS[g]]
    if not files:
        ap.error("name test files or a --group")
    counts = run(args.checkout, files, args.timeout, args.pytest_arg)
    width = max(len(f) for f in files)
    total = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    print(f"{'file':<{width}}  passed  failed  errors  skipped")
    for rel in files:
        c = counts[rel]
        for k in total:
            total[k] += c[k]
        print(f"{rel:<{width}}  {c['passed']:6d}  {c['failed']:6d}  {c['errors']:6d}  {c['skipped']:7d}")
    print(f"{'total':<{width}}  {total['passed']:6d}  {total['failed']:6d}  {total['errors']:6d}  "
          f"{total['skipped']:7d}")
    if args.json:
        args.json.write_text(json.dumps({"files": counts, "total": total}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
