#!/usr/bin/env bash
# Run on a GPU machine (the `device` tool, one GPU, up to 16 CPU cores) from the repository root, after
# `source .whl/setup.sh`: the schedule fuzzer (kernels.testing.fuzz) on CUDA, every sample in a warm
# child process (one per core, so nvcc builds run in parallel; a faulting kernel costs its child, which
# is replaced), buffers between red zones, results against numpy in float64.
#   (a) every one of the 288 configurations of the auto-tensor-core tutorial's template at
#       test_gemm(N=32, L=512, M=512, "float16", "NN"): correct / wrong / fault counts;
#   (b) >= 2,000 configurations drawn from every space: the tensor-core templates (float16, int8, int4,
#       int1), SGEMM variants and define_split tilings, reductions, elementwise, tune_tir design spaces.
# Writes sweep_n32.json, fuzz_cuda.json and the logs to $OUT (or kbench-out/device-fuzz); prints a short
# table last. Exit status 1 when anything was wrong or faulted. Budget: about 7 minutes.
#   FUZZ_COUNT (default 2200), FUZZ_BUDGET (seconds for (b), default 330), FUZZ_JOBS (default: cores, <= 16)
set -uo pipefail
out=${OUT:-kbench-out/device-fuzz}
mkdir -p "$out"
cores=$(nproc)
jobs=${FUZZ_JOBS:-$(( cores > 16 ? 16 : cores ))}
count=${FUZZ_COUNT:-2200}
budget=${FUZZ_BUDGET:-330}
py=$(command -v python3 || command -v python)
fz() { "$py" -m kernels.testing.fuzz "$@"; }
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
echo "== (a) the tutorial's 288 configurations at N=32, L=512, M=512, float16 NN ($jobs jobs)"
fz --target cuda --sweep tc_tutorial --shape n=32,l=512,m=512,layout=NN --dtype float16 --jobs "$jobs" \
    --timeout 120 --json "$out/sweep_n32.json" ${FUZZ_EXTRA:-} > "$out/sweep_n32.log" 2>&1
rc_a=$?
tail -4 "$out/sweep_n32.log"
echo "== (b) the fuzzer on CUDA: $count configurations or $budget s ($jobs jobs)"
fz --target cuda --count "$count" --budget "$budget" --seed "${FUZZ_SEED:-1}" --jobs "$jobs" --timeout 120 \
    --json "$out/fuzz_cuda.json" ${FUZZ_EXTRA:-} > "$out/fuzz_cuda.log" 2>&1
rc_b=$?
grep -E '^\[(wrong|oob_write|oob_index|build_error|crashed|timeout)\]' "$out/fuzz_cuda.log" | head -40
"$py" - "$out/sweep_n32.json" "$out/fuzz_cuda.json" <<'PY'
import json
import sys
from collections import Counter

FAULTS = ("crashed", "oob_write", "oob_index", "timeout", "build_error")
sweep = json.load(open(sys.argv[1]))
c = Counter(r["outcome"] for r in sweep["results"])
print("\n== summary")
print(f"(a) tutorial sweep N=32 L=512 M=512 float16 NN: {len(sweep['results'])} configurations: "
      f"{c['ok']} correct, {c['wrong']} wrong, {sum(c[o] for o in FAULTS)} faults "
      f"({', '.join(f'{o} {c[o]}' for o in FAULTS if c[o]) or 'none'}), {c['refused']} refused"
      + (f", {c['built']} built only" if c["built"] else ""))
fz = json.load(open(sys.argv[2]))
rows = Counter()
for r in fz["results"]:
    key = r["space"] + ("/" + r["dtype"] if r["space"].startswith("tc_") else "")
    rows[(key, r["outcome"])] += 1
outcomes = [o for o in ("ok", "built", "refused", "wrong") + FAULTS + ("device_bug",)
            if any(k[1] == o for k in rows)]
keys = sorted({k[0] for k in rows})
print(f"(b) fuzz --target cuda: {len(fz['results'])} configurations in {fz['seconds']:.0f} s")
print(f"  {'space':28s}" + "".join(f"{o:>12s}" for o in outcomes))
for k in keys:
    print(f"  {k:28s}" + "".join(f"{rows[(k, o)]:12d}" for o in outcomes))
tot = Counter(r["outcome"] for r in fz["results"])
print(f"  {'all':28s}" + "".join(f"{tot[o]:12d}" for o in outcomes))
PY
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] && exit 0
exit 1
