#!/usr/bin/env bash
# Scaling check on a 2-GPU machine: the tutorial suite's CUDA cases (2 s of measuring each) on one
# GPU, then on two. Run after `source .whl/setup.sh`; stores under $OUT.
set -uo pipefail
out=${OUT:-kbench-out/device}
mkdir -p "$out"
kb() { python3 -m harness.cli "$@"; }
kb run suites/tutorials.toml --targets cuda --db "$out/warm.db" 2>&1 | tail -1   # warms build cache and peaks
for rep in 1 2; do
  CUDA_VISIBLE_DEVICES=0 kb run suites/tutorials.toml --targets cuda --min-time 2 --max-time 2 \
    --db "$out/one$rep.db" 2>&1 | tail -2 | head -1
  kb run suites/tutorials.toml --targets cuda --min-time 2 --max-time 2 --db "$out/two$rep.db" 2>&1 | tail -2 | head -1
done
