#!/usr/bin/env bash
# Ragged matrix products on one GPU (block partitioning, kernels.lower.block_partition): the matmul
# workloads of suites/memory-hierarchy.toml (float32 4096^3, 4000x3000x1000, 3000x2000x1500, their
# shared_blocked variants and torch.matmul with TF32 off) and the ragged float16 tensor-core shape of
# suites/tensorcore.toml (4000x3000, l = 4096, against torch.matmul fp16) in one `kbench run` on CUDA, then one line
# per case: median, TFLOP/s and the ratio to the torch peer of the same shape, measured in that run;
# and `ptxas -v` registers and spills of each variant's kernel at each shape.
#   source .whl/setup.sh && bash scripts/device_ragged.sh
# MIN_S / MAX_S: seconds of measuring a case (default 0.5 / 1.0). Logs and the store under $OUT.
set -uo pipefail
out=${OUT:-kbench-out/device-ragged}
mkdir -p "$out"
export RAY_USAGE_STATS_ENABLED=0 COLUMNS=250
suite="$out/ragged.toml"
python3 - "$suite" <<'PY'
import sys
text = open("suites/memory-hierarchy.toml").read()
head = text[:text.index("[[workload]]")].replace('name = "memory-hierarchy"', 'name = "ragged-matmul"', 1)
parts = ["[[workload]]" + p for p in text.split("[[workload]]")[1:]]
keep = [p for p in parts if 'name = "matmul"' in p.split("\n", 2)[1]]
# and the ragged float16 tensor-core shape of suites/tensorcore.toml
tc = open("suites/tensorcore.toml").read()
keep += ["[[workload]]" + p for p in tc.split("[[workload]]")[1:] if "n = [4000]" in p]
open(sys.argv[1], "w").write(head + "".join(keep))
PY
nvidia-smi -L 2>/dev/null
python3 -m harness.cli run "$suite" --targets cuda --min-time "${MIN_S:-0.5}" --max-time "${MAX_S:-1.0}" \
  --db "$out/ragged.db" > "$out/run.log" 2>&1
echo "kbench run rc=$?: $(grep -E '^run [0-9]+: .*ok' "$out/run.log" | tail -1)"
python3 - "$out/ragged.db" <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
rows = con.execute("select case_json, outcome, median_s, gflops from results order by id").fetchall()
peer = {}
for cj, outcome, med, gf in rows:
    c = json.loads(cj)
    if c.get("peer") and med:
        peer[json.dumps(c["params"])] = med
for cj, outcome, med, gf in rows:
    c = json.loads(cj)
    shape = "x".join(str(v) for _, v in c["params"])
    knobs = ", ".join(f"{k}={v}" for k, v in c["knobs"])
    ref = peer.get(json.dumps(c["params"]))
    ratio = f"{ref / med:.3f}x torch" if (ref and med and not c.get("peer")) else ""
    print(f"RESULT {shape:16s} {c['variant']:28s} {outcome:8s} "
          f"{(med or 0) * 1e6:10.1f} us {(gf or 0) / 1e3:6.1f} TFLOP/s {ratio:14s} {knobs}")
PY
echo "== ptxas (registers, spills) of each shared_blocked kernel"
python3 - <<'PY'
import os, re, subprocess, tempfile
import tomllib
import kernels as tvm
from kernels import workloads
w = workloads.get("matmul")
suite = tomllib.load(open("suites/memory-hierarchy.toml", "rb"))
for wl in suite["workload"]:
    if wl["name"] != "matmul":
        continue
    p = {k: v[0] for k, v in wl["params"].items()}
    for v in wl["variants"]:
        if not isinstance(v, dict) or v["name"] != "shared_blocked":
            continue
        knobs = {k: vals[0] for k, vals in v["knobs"].items()}
        s, args = w.build("shared_blocked", p, "float32", knobs)
        src = tvm.build(s, args, "cuda").imported_modules[0].get_source()
        with tempfile.TemporaryDirectory() as d:
            cu = os.path.join(d, "k.cu")
            open(cu, "w").write(src)
            r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", os.path.join(d, "k.cubin"), cu],
                               capture_output=True, text=True)
        regs = re.findall(r"Used (\d+) registers", r.stderr)
        spills = re.findall(r"(\d+) bytes spill stores", r.stderr)
        print(f"PTXAS {p['n']}x{p['m']}x{p['k']} {knobs}: registers {regs}, spill stores {spills}")
PY
