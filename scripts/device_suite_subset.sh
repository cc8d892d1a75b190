#!/usr/bin/env bash
# One `kbench run` of the workload blocks of a suite file that contain a given text (MATCH; empty: all), on one GPU (the
# `device` tool), then one line per case: median, throughput and the ratio to the first variant of the
# same shape and type measured in that run (its peer where the block has one).
#   source .whl/setup.sh && MATCH='dtypes = ["int4"]' bash scripts/device_suite_subset.sh suites/tensorcore.toml
# MIN_S / MAX_S: seconds of measuring a case (default 0.5 / 1.0); EXECUTOR (default local); TARGETS
# (default cuda); TUNE_TRIALS: first `kbench tune` the subset's tuned variants with xgb for that many trials
# (same executor and store), so the run times the stored best. The store
# and the logs go to $OUT (or kbench-out/device-subset).
set -uo pipefail
src=${1:?usage: MATCH=TEXT bash scripts/device_suite_subset.sh SUITE.toml}
out=${OUT:-kbench-out/device-subset}
mkdir -p "$out"
export RAY_USAGE_STATS_ENABLED=0 COLUMNS=250
suite="$out/subset.toml"
python3 - "$src" "$suite" "${MATCH-}" <<'PY'
import sys
text = open(sys.argv[1]).read()
head, parts = text[:text.index("[[workload]]")], text.split("[[workload]]")[1:]
keep = ["[[workload]]" + p for p in parts if sys.argv[3] in p]
if not keep:
    sys.exit(f"no workload block of {sys.argv[1]} contains {sys.argv[3]!r}")
open(sys.argv[2], "w").write(head + "".join(keep))
print(f"{len(keep)} workload block(s) of {sys.argv[1]}")
PY
[ -s "$suite" ] || exit 2
nvidia-smi -L 2>/dev/null
if [ -n "${TUNE_TRIALS:-}" ]; then
  start=$SECONDS
  python3 -m harness.cli tune "$suite" --tuner xgb --trials "$TUNE_TRIALS" --targets "${TARGETS:-cuda}" \
    --executor "${EXECUTOR:-local}" --db "$out/subset.db" > "$out/tune.log" 2>&1
  echo "kbench tune rc=$? in $((SECONDS - start)) s"; tail -15 "$out/tune.log"
fi
python3 -m harness.cli run "$suite" --targets "${TARGETS:-cuda}" --executor "${EXECUTOR:-local}" --min-time "${MIN_S:-0.5}" \
  --max-time "${MAX_S:-1.0}" --db "$out/subset.db" > "$out/run.log" 2>&1
echo "kbench run rc=$?: $(grep -E '^run [0-9]+: ' "$out/run.log" | tail -1)"
python3 - "$out/subset.db" <<'PY'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "select case_json, outcome, median_s, gflops from results order by id").fetchall()
first = {}
for cj, outcome, med, gf in rows:
    c = json.loads(cj)
    key = (json.dumps(c["params"]), c.get("dtype"))
    if med and (c.get("peer") or key not in first):
        first[key] = (med, c.get("peer") or c["variant"])
for cj, outcome, med, gf in rows:
    c = json.loads(cj)
    ref, name = first.get((json.dumps(c["params"]), c.get("dtype")), (None, ""))
    shape = "x".join(str(v) for _, v in c["params"])
    ratio = f"{ref / med:.2f}x {name}" if ref and med else ""
    knobs = ", ".join(f"{k}={v}" for k, v in c["knobs"])
    print(f"RESULT {shape:18s} {c.get('dtype', ''):8s} {c['variant']:12s} {outcome:8s} "
          f"{(med or 0) * 1e6:10.1f} us {(gf or 0) / 1e3:8.1f} T/s {ratio:22s} {knobs}")
PY
