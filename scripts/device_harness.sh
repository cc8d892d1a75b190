#!/usr/bin/env bash
# Run on a GPU machine (the `device` tool; 2 GPUs for the scaling check) from the repository root,
# after `source .whl/setup.sh`. Leaves the stores and logs under $OUT (or kbench-out/device).
set -uo pipefail
out=${OUT:-kbench-out/device}
mkdir -p "$out"
kb() { python3 -m harness.cli "$@"; }
nvidia-smi -L
echo "== tutorial suite on CUDA, cold build cache"
kb run suites/tutorials.toml --targets cuda --db "$out/tutorials.db" 2>&1 | tail -25
echo "== the same, build cache warm (expect nvcc calls 0)"
kb run suites/tutorials.toml --targets cuda --db "$out/tutorials.db" 2>&1 | tail -2
echo "== scaling: 2 s of measuring per case, one GPU then two"
CUDA_VISIBLE_DEVICES=0 kb run suites/tutorials.toml --targets cuda --min-time 2 --max-time 2 \
  --db "$out/one.db" 2>&1 | tail -2
kb run suites/tutorials.toml --targets cuda --min-time 2 --max-time 2 --db "$out/two.db" 2>&1 | tail -2
python3 - "$out" <<'PY'
import sqlite3, sys
for name in ("one", "two"):
    con = sqlite3.connect(f"{sys.argv[1]}/{name}.db")
    rows = con.execute("select worker, count(*) from results group by worker").fetchall()
    print(name, "GPU workers:", rows)
PY
