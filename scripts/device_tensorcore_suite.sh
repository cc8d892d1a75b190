#!/usr/bin/env bash
# Run on a GPU machine (the `device` tool, one GPU) from the repository root, after
# `source .whl/setup.sh` (torch for the peers). Runs suites/tensorcore.toml through the harness,
# writes its HTML report, and prints each shape's variants side by side (TFLOP/s / TOP/s, the fastest
# kernel's speed next to torch) from the same table the report shows. Leaves the store, the report and
# the log under $OUT (or kbench-out/device-tensorcore). Then the GPU tests of the workload.
set -uo pipefail
out=${OUT:-kbench-out/device-tensorcore}
mkdir -p "$out"
kb() { python3 -m harness.cli "$@"; }
nvidia-smi -L
echo "== suites/tensorcore.toml"
kb run suites/tensorcore.toml --db "$out/tensorcore.db" 2>&1 | tee "$out/run.log" | tail -60
echo "== report"
kb report 1 --db "$out/tensorcore.db" --out "$out/report" 2>&1 | tail -3
python3 - "$out/tensorcore.db" <<'PY'
import sys

from harness.store import Store
from reports.data import variant_matrix

with Store.open(sys.argv[1], create=False) as st:
    frame = st.results_frame(1)
bad = frame[frame["outcome"] != "ok"]
print(f"{len(frame)} cases, {len(bad)} not ok")
for r in bad.itertuples():
    print(f"  {r.outcome}: {r.case_key}: {str(r.message)[:300]}")
m = variant_matrix(frame, "matmul_tensorcore")
for row in m.rows:
    print(f"\n{row.device} | {row.shape}")
    for col in m.columns:
        c = row.cells.get(col)
        if c is None:
            continue
        if c.median_s is None:
            print(f"  {col:48s} {c.outcome}")
            continue
        unit = "TOP/s" if row.dtype.startswith("int") else "TFLOP/s"
        print(f"  {col:48s} {c.median_s * 1e3:9.3f} ms  {(c.rate or 0) / 1e3:7.1f} {unit}"
              f"{'  <- fastest' if c.best else ''}")
    for peer, ratio in row.vs_peers.items():
        print(f"  fastest kernel: {ratio:.3f}x {peer}")
PY
echo "== GPU tests of the workload"
python3 -m pytest -q -m gpu tests/gpu/test_tensorcore_suite_gpu.py tests/gpu/test_tensorcore_gpu.py tests/gpu/test_tensorcore_warptile_gpu.py 2>&1 | tail -15
