#!/usr/bin/env bash
# `kbench tune` on a GPU machine (the device tool), from the repository root: a tuned float32 matmul
# (1024^3, 64 configurations of shared_blocked) tuned with xgb and random on this GPU's model, then
# `kbench run` measuring the stored best with the HTML report and its best-so-far curves.
# Leaves the store, the report and the logs under $OUT (or kbench-out/device-tune).
set -uo pipefail
out=${OUT:-kbench-out/device-tune}
mkdir -p "$out"
kb() { python3 -m harness.cli "$@"; }
nvidia-smi -L
cat > "$out/tune.toml" <<'TOML'
[suite]
name = "tune-gpu"
targets = ["cuda"]

[measure]
max_time_s = 2.0

[[workload]]
name = "matmul"
params = { n = [1024], m = [1024], k = [1024] }
variants = [
  "shared_blocked",
  { name = "shared_blocked", tuned = true, knobs = { local_y = [4, 8], local_x = [4, 8], block_y = [8, 16], tile_k = [4, 8, 16], vector = [1, 4] } },
]
TOML
echo "== kbench run before tuning (expect a warning naming the tuned case and kbench tune)"
kb run "$out/tune.toml" --executor local --db "$out/tune.db" 2>&1 | tail -12
echo "== kbench tune --tuner xgb --trials 32"
time kb tune "$out/tune.toml" --tuner xgb --trials 32 --executor local --db "$out/tune.db" 2>&1 | tail -15
echo "== kbench tune --tuner random --trials 16 (a second session, starting from the first's trials)"
kb tune "$out/tune.toml" --tuner random --trials 16 --executor local --db "$out/tune.db" 2>&1 | tail -8
echo "== kbench run with the stored best, report with the curves"
kb run "$out/tune.toml" --executor local --db "$out/tune.db" --out "$out/report" 2>&1 | tail -14
echo "== pytest -m gpu tests/gpu/test_kbench_tune_gpu.py"
python3 -m pytest -q -m gpu tests/gpu/test_kbench_tune_gpu.py 2>&1 | tail -5
