#!/usr/bin/env bash
# On a GPU machine (the device tool), from the repository root: tune the warp-tile tensor-core
# template at float16 NN 8192^3 (suites/tensorcore-tune.toml) with kbench tune, then kbench run the
# stored best next to the hand-picked configuration and torch.matmul fp16 in one run.
# Leaves the store, the report and the logs under $OUT (or kbench-out/device-tc-tune).
set -uo pipefail
out=${OUT:-kbench-out/device-tc-tune}
trials=${TRIALS:-48}
mkdir -p "$out"
kb() { python3 -m harness.cli "$@"; }
nvidia-smi -L
echo "== kbench tune --tuner xgb --trials $trials"
time kb tune suites/tensorcore-tune.toml --tuner xgb --trials "$trials" --executor local --db "$out/tune.db" 2>&1 | tail -20
echo "== kbench run with the stored best"
kb run suites/tensorcore-tune.toml --executor local --db "$out/tune.db" --out "$out/report" 2>&1 | tail -20
