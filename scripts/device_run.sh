#!/usr/bin/env bash
# Run on the GPU machine (the `device` tool), from the repository root, after
#   source .whl/setup.sh
# It runs the GPU tests and the GPU benchmark and leaves logs under $OUT (or ./kbench-out/device).
set -uo pipefail
out=${OUT:-kbench-out/device}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
python3 -m pytest -q -m gpu tests -p no:cacheprovider --junitxml="$out/gpu-junit.xml" 2>&1 | tee "$out/gpu-tests.log"
rc=${PIPESTATUS[0]}
python3 -m pytest -q tests/bench/test_bench_rowsum_gpu.py --benchmark-only -s -p no:cacheprovider \
  --benchmark-json="$out/bench-gpu.json" 2>&1 | tee "$out/bench-gpu.log"
exit $rc
