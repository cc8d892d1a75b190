"""Run fuzzer samples from a JSON file (a list of samples as `kernels.testing.fuzz` writes them in its
results) on another target, each isolated in a child process, and print one line per sample.

The default file, scripts/data/opencl_device_bugs.json, holds the samples the fuzzer called
``device_bug`` on PoCL (wrong or out of bounds when PoCL optimises, correct with -cl-opt-disable):
run as CUDA on a GPU, a correct result there says the kernel is right and PoCL's optimiser is at fault.

    source .whl/setup.sh && python3 scripts/device_replay_samples.py [FILE] [--target cuda] [--jobs 8]
"""

import argparse
import json
import sys
from pathlib import Path

from kernels.testing import fuzz


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", nargs="?", default=str(Path(__file__).with_name("data") / "opencl_device_bugs.json"))
    p.add_argument("--target", default="cuda")
    p.add_argument("--jobs", type=int, default=8)
    args = p.parse_args()
    samples = [dict(s, target=args.target, id=k) for k, s in enumerate(json.load(open(args.file)))]
    rep = fuzz.run_fuzz(args.target, samples=samples, jobs=args.jobs, timeout=120)
    for r in sorted(rep.results, key=lambda r: r["id"]):
        print(f"REPLAY {r['id']} {r['outcome']:10s} {r['space']} {r['dtype']} {r['params']} {r['knobs']} "
              f"{r.get('detail', '')[:200]}")
    return 1 if rep.failures else 0


if __name__ == "__main__":  # the fuzzer's children are spawned: they import this file
    sys.exit(main())
