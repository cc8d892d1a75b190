"""Snapshot of the generated source of every suite case, to check that a refactor changes no byte.

    python scripts/codegen_snapshot.py OUT                 # write one file per case into OUT
    python scripts/codegen_snapshot.py OUT --compare REF   # write, then compare with an earlier snapshot

The cases are those of every suite in ``suites/*.toml`` (each workload variant, shape, dtype and
target the suite names; duplicates between suites once), lowered the way the harness lowers them
(``harness.execute.build.lower_case``: the variant's schedule through ``kernels.build_module
.build_spec``). CUDA is generated to source only, for :data:`ARCH` (no nvcc, no GPU). Added to them:

- the auto-tensor-core tutorial's template (``tests/tutorials/auto_tensorcore.py``) at a few
  configurations, dtypes and layouts, on CUDA and OpenCL;
- the GPU notes' TensorIR workloads (``kernels.workloads.tensorir.register_notes_workloads``), every
  variant on every target it supports.

A case that fails to build writes its error message instead of a source (an error is an output too).
``--compare`` exits 1 and names the cases that differ, are missing or are new; 0 when all are equal.
"""

from __future__ import annotations

import argparse
import filecmp
import glob
import multiprocessing
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the CUDA architecture every CUDA case is generated for (fixed: the default may follow the machine)
ARCH = "sm_90"

#: (dtype, layout, M, N, L, config) of the tutorial template; int4/int1 exist in layout TN only
TEMPLATE_CASES = (
    [("float16", lay, 512, 32, 512, {"bx": 2, "by": 16, "step_k": 1, "v": 8})
     for lay in ("NN", "NT", "TN", "TT")]
    + [("float16", "NN", 256, 256, 256, {"bx": 4, "by": 16, "step_k": 2, "v": 8}),
       ("int8", "NN", 256, 256, 256, {"bx": 2, "by": 8, "step_k": 1, "v": 4}),
       ("int8", "TN", 256, 256, 256, {"bx": 4, "by": 16, "step_k": 2, "v": 8}),
       ("int4", "TN", 256, 256, 256, {"bx": 2, "by": 16, "step_k": 1, "v": 8}),
       ("int1", "TN", 256, 256, 256, {"bx": 2, "by": 16, "step_k": 1, "v": 8})])

#: the sizes of the notes' TensorIR workloads
NOTES_SIZES = {"vector_add_tir": ({"n": 4096},), "window_sum_tir": ({"n": 4096},),
               "matmul_tir": ({"n": 256},)}


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,+-]+", "_", text).strip("_") + ".txt"


def suite_cases() -> list[tuple[str, object]]:
    """(file name, harness Case) for every distinct case of suites/*.toml."""
    from harness.suite import load_suite

    out, seen = [], set()
    for path in sorted(glob.glob(str(ROOT / "suites" / "*.toml"))):
        for case in load_suite(path).cases:
            ident = (case.workload, case.variant, case.params, case.knobs, case.dtype, case.target)
            if ident in seen:
                continue
            seen.add(ident)
            params = ",".join(f"{k}={v}" for k, v in case.params)
            knobs = ",".join(f"{k}={v}" for k, v in case.knobs)
            name = f"suite/{case.workload}/{case.target}/{case.variant}/{case.dtype}/{params}/{knobs}"
            out.append((name, case))
    return out


def _suite_source(case) -> str:
    from harness.execute.build import lower_case

    return lower_case(case, ARCH if case.target == "cuda" else None).source


def _template_source(item) -> str:
    import kernels

    dtype, layout, m, n, l, config, target = item
    path = ROOT / "tests" / "tutorials" / "auto_tensorcore.py"
    src = path.read_text()
    ns: dict = {}
    exec(compile(src[:src.index("# check whether the gpu has tensorcore")], str(path), "exec"), ns)
    ns.update(N=n, L=l, M=m)  # matmul_nn reads the module-level sizes, as in the tutorial
    task = ns["autotvm"].task.create("tutorial/auto_tensorcore/test_gemm", args=(n, l, m, dtype, layout),
                                     target=target)
    s, bufs = task.instantiate(task.config_space.index_of(config))
    tgt = f"cuda -arch={ARCH}" if target == "cuda" else target
    return kernels.build_module.build_spec(s, bufs, tgt).source


def _notes_source(item) -> str:
    import kernels
    from kernels.workloads import get
    from kernels.workloads.tensorir import register_notes_workloads

    register_notes_workloads()
    workload, variant, params, dtype, target = item
    w = get(workload)
    s, args = w.build(variant, params, dtype, {})
    tgt = f"cuda -arch={ARCH}" if target == "cuda" else target
    return kernels.build_module.build_spec(s, args, tgt, name=f"{workload}_{variant}").source


def all_cases() -> list[tuple[str, str, object]]:
    """(file name, kind, item) of every case of the snapshot."""
    from kernels.workloads import get
    from kernels.workloads.tensorir import NOTES_WORKLOADS, register_notes_workloads

    cases = [(name, "suite", case) for name, case in suite_cases()]
    for dtype, layout, m, n, l, config in TEMPLATE_CASES:
        for target in ("cuda", "opencl"):
            conf = ",".join(f"{k}={v}" for k, v in config.items())
            name = f"template/{target}/{dtype}/{layout}/m={m},n={n},l={l}/{conf}"
            cases.append((name, "template", (dtype, layout, m, n, l, config, target)))
    register_notes_workloads()
    for workload in NOTES_WORKLOADS:
        w = get(workload)
        for variant_name, variant in w.variants.items():
            for params in NOTES_SIZES[workload]:
                for dtype in w.dtypes:
                    for target in variant.targets:
                        shape = ",".join(f"{k}={v}" for k, v in params.items())
                        name = f"notes/{workload}/{target}/{variant_name}/{dtype}/{shape}"
                        cases.append((name, "notes", (workload, variant_name, params, dtype, target)))
    return cases


_KINDS = {"suite": _suite_source, "template": _template_source, "notes": _notes_source}


def _generate(job: tuple[str, str, object]) -> tuple[str, str]:
    name, kind, item = job
    try:
        return name, _KINDS[kind](item)
    except Exception as exc:  # noqa: BLE001 - an error is recorded as the case's output
        return name, f"ERROR {type(exc).__name__}: {exc}\n"


def snapshot(out: Path, jobs: int) -> int:
    """Write every case's source into ``out``; the number of cases."""
    cases = all_cases()
    out.mkdir(parents=True, exist_ok=True)
    names = set()
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            results = pool.imap_unordered(_generate, cases, chunksize=2)
            results = list(results)
    else:
        results = [_generate(c) for c in cases]
    for name, text in results:
        fname = _file_name(name)
        assert fname not in names, f"two cases share the file name {fname}"
        names.add(fname)
        (out / fname).write_text(f"// {name}\n{text}")
    return len(results)


def compare(out: Path, ref: Path) -> list[str]:
    """The differences between two snapshots, one line each."""
    mine = {p.name for p in out.glob("*.txt")}
    theirs = {p.name for p in ref.glob("*.txt")}
    lines = [f"missing: {n}" for n in sorted(theirs - mine)]
    lines += [f"new: {n}" for n in sorted(mine - theirs)]
    lines += [f"differs: {n}" for n in sorted(mine & theirs)
              if not filecmp.cmp(out / n, ref / n, shallow=False)]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write the snapshot into")
    parser.add_argument("--compare", type=Path, metavar="DIR", help="an earlier snapshot to compare with")
    parser.add_argument("--jobs", type=int, default=1, help="processes generating code (default 1)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    n = snapshot(args.out, args.jobs)
    errors = sum(1 for p in args.out.glob("*.txt") if "\nERROR " in p.read_text()[:2000])
    print(f"{n} cases ({errors} build errors) written to {args.out} in {time.perf_counter() - t0:.0f} s")
    if args.compare is None:
        return 0
    diff = compare(args.out, args.compare)
    for line in diff:
        print(line)
    print(f"{len(diff)} differences against {args.compare}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
