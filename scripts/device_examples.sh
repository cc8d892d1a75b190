#!/usr/bin/env bash
# Run on a GPU machine from the repository root, after `source .whl/setup.sh` (torch, triton, cupy):
# the GPU tests of CUDA-source and callable variants, then suites/examples.toml tuned, run and reported
# (the TE, CUDA-source, Triton and CuPy variants of mixed_add side by side with torch.add).
# Leaves the store, the report and the logs under $OUT (or kbench-out/examples).
set -uo pipefail
out=${OUT:-kbench-out/examples}
mkdir -p "$out"
kb() { python3 -m harness.cli "$@"; }
nvidia-smi -L
echo "== GPU tests of the variant kinds"
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_user_variants_gpu.py 2>&1 | tail -15
echo "== kbench tune: the Triton kernel's BLOCK"
kb tune suites/examples.toml --executor local --db "$out/examples.db" 2>&1 | tail -15
echo "== kbench run: every variant kind, default (Ray) executor"
kb run suites/examples.toml --db "$out/examples.db" --out "$out/report" 2>&1 | tail -40
python3 - "$out" <<'PY'
import re, sys
html = open(f"{sys.argv[1]}/report/run1-report.html").read()
start = html.index("mixed_add: variants side by side")
table = html[start:html.index("</table>", start)]
heads = re.findall(r"<th[^>]*>(.*?)</th>", table, flags=re.S)  # a column's kind sits in a tag below its name
print("side-by-side columns:", [" ".join(re.sub(r"<[^>]+>", " ", h).split()) for h in heads])
PY
