"""The fuzzer's command line, ``python -m kernels.testing.fuzz`` (see :mod:`kernels.testing.fuzz`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, Optional, Sequence

from .run import run_fuzz
from .sample import FAILURES, TARGETS
from .spaces import SPACES, sweep_samples

#: the first line of the package's docstring: the command's description
DESCRIPTION = ("A differential schedule fuzzer: every space the project can draw a schedule from, at random "
               "shapes,")


def _parse_shape(text: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"--shape: expected name=value pairs, got {part!r}")
        k, v = part.split("=", 1)
        out[k.strip()] = int(v) if v.strip().isdigit() else v.strip()
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m kernels.testing.fuzz", description=DESCRIPTION)
    ap.add_argument("--target", choices=TARGETS, default="opencl")
    ap.add_argument("--budget", type=float, default=None, help="seconds to draw samples for")
    ap.add_argument("--count", type=int, default=None, help="samples to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--space", action="append", choices=SPACES, help="a space to draw from (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="child processes at once")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a sample may take")
    ap.add_argument("--build-only", action="store_true", help="lower, check and compile; do not run")
    ap.add_argument("--lower-only", action="store_true",
                    help="lower and check the accesses; neither compile nor run")
    ap.add_argument("--sweep", choices=("tc_tutorial", "tc_plain"),
                    help="every configuration of that template at --shape/--dtype instead of drawing")
    ap.add_argument("--shape", type=_parse_shape, default="n=32,l=512,m=512,layout=NN")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--layout", default=None, help="with --sweep: the layout (else --shape's)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    samples = None
    if a.sweep:
        shape = dict(a.shape)
        if a.layout:
            shape["layout"] = a.layout
        shape.setdefault("layout", "NN")
        samples = sweep_samples(a.sweep, a.target, shape, a.dtype)
    elif a.budget is None and a.count is None:
        ap.error("give --budget SECONDS or --count N (or --sweep)")

    def progress(r):
        if not a.quiet and r["outcome"] in FAILURES + ("timeout", "device_bug"):
            print(f"[{r['outcome']}] {r['space']} {r['workload']}/{r.get('variant') or r['kind']} "
                  f"{r['dtype']} {r['params']} {r.get('knobs') or r.get('index')}: "
                  f"{str(r.get('detail', '')).splitlines()[-1][:300] if r.get('detail') else ''}",
                  flush=True)

    try:
        rep = run_fuzz(a.target, a.seed, a.budget, a.count, a.space or SPACES, a.jobs, a.timeout,
                       "lower" if a.lower_only else a.build_only, samples, progress)
    except (ValueError, RuntimeError) as exc:  # bad arguments, or a child that cannot start
        print(f"fuzz: {exc}", file=sys.stderr)
        return 2
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rep.to_json(), fh, indent=1, default=str)
    print(rep.table())
    print(f"{len(rep.results)} samples in {rep.seconds:.0f} s on {a.target}; "
          f"{len(rep.failures)} failures")
    return 1 if rep.failures else 0
