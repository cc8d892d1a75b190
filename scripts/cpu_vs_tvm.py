"""kbench's C target against TVM's LLVM target on the same TensorIR modules (plain loops, as written):
matmul 1024^3, exp 2^24 and row sum 4096^2, float32.

One TVMScript text per workload is parsed by kbench (``kernels.script.tirx``) and, when
``--tvm-python`` names a Python with apache-tvm installed (never a dependency of kbench), by TVM
(``tvm.script.tirx``) in a subprocess that stays alive for the whole run. Both check their result
against numpy in float64, then the two sides are timed in turns: each round times kbench with
``time_evaluator(number, repeat=1)``, then TVM the same way; the medians of the rounds, their
spread (min-max) and the ratio kbench / TVM (below 1: kbench is faster) are printed per workload.

    python scripts/cpu_vs_tvm.py                                    # kbench only
    python scripts/cpu_vs_tvm.py --tvm-python /work/tvmvenv/bin/python --rounds 9
    python scripts/cpu_vs_tvm.py --tune 64 --only matmul_1024 ...   # tune_tir on both sides first

With ``--tune TRIALS`` each side first tunes the workload with its ``meta_schedule.tune_tir``
(kbench: ``kernels.meta_schedule``, its CPU design space; TVM: ``tvm.s_tir.meta_schedule`` in a
subprocess of its own, so that a crash there is reported, not fatal) and then builds, checks and times
the tuned schedule; a side whose tuning fails is timed untuned and says so.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORKLOADS: Dict[str, str] = {
    "matmul_1024": """
@T.prim_func
def main(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"),
         C: T.Buffer((1024, 1024), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i, j, k in T.grid(1024, 1024, 1024):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    "exp_2^24": """
@T.prim_func
def main(A: T.Buffer((16777216,), "float32"), B: T.Buffer((16777216,), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i in range(16777216):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.exp(A[vi])
""",
    "row_sum_4096": """
@T.prim_func
def main(A: T.Buffer((4096, 4096), "float32"), B: T.Buffer((4096,), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i, k in T.grid(4096, 4096):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""",
}

# Inputs and references, the same on both sides (seeded); sizes follow the workload names.


def make_inputs(name: str):
    rng = np.random.default_rng(0)
    if name.startswith("matmul"):
        a = rng.uniform(-1, 1, (1024, 1024)).astype("float32")
        b = rng.uniform(-1, 1, (1024, 1024)).astype("float32")
        return [a, b, np.zeros((1024, 1024), "float32")], a.astype(np.float64) @ b.astype(np.float64), 2
    if name.startswith("exp"):
        a = rng.uniform(-4, 4, 1 << 24).astype("float32")
        return [a, np.zeros(1 << 24, "float32")], np.exp(a.astype(np.float64)), 1
    a = rng.uniform(-1, 1, (4096, 4096)).astype("float32")
    return [a, np.zeros(4096, "float32")], a.astype(np.float64).sum(axis=1), 1


# The TVM side: a server reading "build NAME TEXT-AS-JSON" / "time NAME NUMBER" lines, answering JSON.
TVM_SERVER = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    import tvm
    from tvm.script import tirx as T
    from tvm.script.parser import parse

    def make_inputs(name):
        return MAKE_INPUTS(name)

    funcs = {}
    spec = json.loads(sys.argv[1])
    if spec.get("mcpu") == "native":  # this CPU, as LLVM names it
        spec["mcpu"] = tvm.target.codegen.llvm_get_system_cpu()
    target = tvm.target.Target(spec)
    print("@@", json.dumps({"ok": True, "target": str(target)}), flush=True)
    dev = tvm.cpu(0)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "build":
            func = parse(cmd["text"], extra_vars={"T": T}, check_well_formed=False)
            mod = tvm.IRModule({"main": func})
            if cmd.get("tuned"):  # a tuned schedule's module, saved by the tuning subprocess
                mod = tvm.ir.load_json(open(cmd["tuned"]).read())
            lib = tvm.compile(mod, target=target).jit()
            arrays, ref, out = make_inputs(cmd["name"])
            nd = [tvm.runtime.tensor(a, dev) for a in arrays]
            lib["main"](*nd)
            err = float(np.max(np.abs(nd[out].numpy() - ref) / (1 + np.abs(ref))))
            funcs[cmd["name"]] = (lib, nd)
            print("@@", json.dumps({"ok": True, "err": err}), flush=True)
        elif cmd["op"] == "time":
            lib, nd = funcs[cmd["name"]]
            f = lib.time_evaluator("main", dev, number=cmd["number"], repeat=1)
            print("@@", json.dumps({"ok": True, "mean": f(*nd).mean}), flush=True)
''')


class TVMSide:
    """apache-tvm in a subprocess of the given Python (kept alive so rounds interleave)."""

    def __init__(self, python: str, target: str) -> None:
        import inspect

        src = TVM_SERVER.replace("MAKE_INPUTS(name)", "_make_inputs(name)")
        inputs = inspect.getsource(make_inputs).replace("def make_inputs", "def _make_inputs")
        src = "import numpy as np\n" + inputs + src
        self.proc = subprocess.Popen([python, "-c", src, target], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.target = self.answer()["target"]

    def answer(self) -> dict:
        """The next answer line (``@@ {...}``); other output of TVM's is passed through."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("the TVM subprocess ended (see its error above)")
            if line.startswith("@@ "):
                return json.loads(line[3:])
            sys.stderr.write(line)

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


# TVM's tune_tir, in a subprocess of its own: writes the tuned module as JSON to argv[3]
TVM_TUNE = textwrap.dedent('''
    import json, sys, tempfile
    import tvm
    from tvm.script import tirx as T
    from tvm.script.parser import parse
    from tvm.s_tir import meta_schedule as ms

    text, trials, out, spec = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
    if spec.get("mcpu") == "native":
        spec["mcpu"] = tvm.target.codegen.llvm_get_system_cpu()
    spec.setdefault("num-cores", 2)
    target = tvm.target.Target(spec)
    mod = tvm.IRModule({"main": parse(text, extra_vars={"T": T}, check_well_formed=False)})
    with tempfile.TemporaryDirectory() as wd:
        db = ms.tune_tir(mod=mod, target=target, work_dir=wd, max_trials_global=trials,
                         num_trials_per_iter=min(trials, 32))
        sch = ms.tir_integration.compile_tir(db, mod, target)
    open(out, "w").write(tvm.ir.save_json(sch.mod))
''')


def tvm_tune(python: str, target: str, text: str, trials: int, out: str):
    """TVM's tuned module (a JSON file) or the reason there is none."""
    import time

    t0 = time.perf_counter()
    r = subprocess.run([python, "-c", TVM_TUNE, text, str(trials), out, target], capture_output=True, text=True)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        why = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        return None, f"TVM's tune_tir failed ({why}) after {took:.0f} s: {tail[0][:200]}"
    return out, f"TVM's tune_tir: {trials} trials in {took:.0f} s"


def kbench_tune(text: str, trials: int):
    """kbench's tune_tir: the tuned module and a line saying what it found."""
    import tempfile
    import time

    from kernels import meta_schedule as ms
    from kernels.script import from_source
    from kernels.script import tirx as T

    func = from_source(text, {"T": T})
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as wd:
        sch = ms.tune_tir(func, "c", ms.TuneConfig(max_trials_global=trials, num_trials_per_iter=min(trials, 16)),
                          wd, seed=0)
    took = time.perf_counter() - t0
    steps = len(getattr(sch, "trace", None).insts) if getattr(sch, "trace", None) is not None else "?"
    return sch.mod, f"kbench's tune_tir: {trials} trials in {took:.0f} s ({steps} schedule steps in the best)"


def kbench_side(name: str, text: str, tuned=None):
    import kernels as tvm
    from kernels.script import from_source
    from kernels.script import tirx as T

    func = tuned if tuned is not None else from_source(text, {"T": T})
    f = tvm.build(func, target="c")
    arrays, ref, out = make_inputs(name)
    dev = tvm.cpu(0)
    nd = [tvm.nd.array(a, dev) for a in arrays]
    f(*nd)
    err = float(np.max(np.abs(nd[out].numpy() - ref) / (1 + np.abs(ref))))
    return f, nd, dev, err


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tvm-python", help="a Python with apache-tvm installed (TVM's LLVM target as the peer)")
    ap.add_argument("--tvm-target", default='{"kind": "llvm", "mcpu": "native"}',
                    help="TVM's target as JSON (default: %(default)s; native: this CPU as LLVM names it)")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds per side (default: %(default)s)")
    ap.add_argument("--number", type=int, default=5, help="calls per round (default: %(default)s)")
    ap.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), help="workloads to run (default: all)")
    ap.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                    help="tune each workload with tune_tir for TRIALS trials on both sides first")
    args = ap.parse_args(argv)
    peer = TVMSide(args.tvm_python, args.tvm_target) if args.tvm_python else None
    print(f"CPU: {cpu_name()}; rounds {args.rounds} x number {args.number}, interleaved"
          + (f"; TVM target {peer.target}" if peer else ""))
    print(f"{'workload':<14} {'kbench ms (min-max)':>26} {'TVM ms (min-max)':>26} {'ratio':>7}")
    try:
        for name in args.only or WORKLOADS:
            text = WORKLOADS[name]
            tuned = tuned_tvm = None
            if args.tune:
                tuned, line = kbench_tune(text, args.tune)
                print(f"{name}: {line}", flush=True)
                if peer is not None:
                    import tempfile

                    out = str(Path(tempfile.mkdtemp()) / "tuned.json")
                    tuned_tvm, line = tvm_tune(args.tvm_python, args.tvm_target, text, args.tune, out)
                    print(f"{name}: {line}", flush=True)
            f, nd, dev, err = kbench_side(name, text, tuned)
            if err > 1e-4:
                raise SystemExit(f"{name}: kbench's result is off by {err:.3g}")
            if peer is not None:
                got = peer.ask(op="build", name=name, text=text, tuned=tuned_tvm)
                if got["err"] > 1e-4:
                    raise SystemExit(f"{name}: TVM's result is off by {got['err']:.3g}")
            timer = f.time_evaluator(f.entry_name, dev, number=args.number, repeat=1)
            ours: List[float] = []
            theirs: List[float] = []
            for _ in range(args.rounds):
                ours.append(timer(*nd).mean * 1e3)
                if peer is not None:
                    theirs.append(peer.ask(op="time", name=name, number=args.number)["mean"] * 1e3)
            mo = statistics.median(ours)
            col = f"{mo:9.3f} ({min(ours):.3f}-{max(ours):.3f})"
            if theirs:
                mt = statistics.median(theirs)
                tcol = f"{mt:9.3f} ({min(theirs):.3f}-{max(theirs):.3f})"
                print(f"{name:<14} {col:>26} {tcol:>26} {mo / mt:7.2f}", flush=True)
            else:
                print(f"{name:<14} {col:>26} {'-':>26} {'-':>7}", flush=True)
    finally:
        if peer is not None:
            peer.close()


if __name__ == "__main__":
    main()
