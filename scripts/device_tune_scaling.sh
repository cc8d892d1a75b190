#!/usr/bin/env bash
# Tuning throughput at one and two GPUs of one machine (issue: one work pool): `kbench tune` of the
# warp-tile tensor-core space (suites/tensorcore-tune.toml at float16 NN N^3, N=${N:-4096}) with the
# xgb tuner, TRIALS trials (default 96), `--executor ray` (embedded Ray: CPU workers build, one runner
# per GPU times), once with CUDA_VISIBLE_DEVICES=0 and once with every GPU (GPU_COUNTS="1 2" default).
# Each run has a build cache of its own (KBENCH_CACHE_DIR under $TMPDIR). One RESULT line per run: wall seconds, trials, trials a minute; logs and stores under $OUT.
# LIMIT_S (default none) stops each run after that many seconds: the rate is then the trials stored
# in that time (start-up included, as in a full run).
#   source .whl/setup.sh && bash scripts/device_tune_scaling.sh
set -uo pipefail
out=${OUT:-kbench-out/device-tune-scaling}
trials=${TRIALS:-96}
n=${N:-4096}
mkdir -p "$out"
export RAY_USAGE_STATS_ENABLED=0 COLUMNS=250
unset RAY_ADDRESS RAY_AUTH_MODE RAY_AUTH_TOKEN RAY_AUTH_TOKEN_PATH
suite="$out/tune-$n.toml"
sed -e "s/8192/$n/g" -e 's/name = "tensorcore-tune"/name = "tensorcore-tune-'"$n"'"/' suites/tensorcore-tune.toml > "$suite"
nvidia-smi -L 2>/dev/null
for gpus in ${GPU_COUNTS:-1 2}; do
  if [ "$gpus" = 1 ]; then vis=0; else vis=$(seq -s, 0 $((gpus - 1))); fi
  db="$out/tune-${gpus}gpu.db"
  rm -f "$db"
  t0=$(date +%s.%N)
  cache="${TMPDIR:-/tmp}/kbench-tune-cache-${gpus}gpu"   # a build cache of its own: no run reuses nvcc output
  rm -rf "$cache"
  KBENCH_CACHE_DIR=$cache CUDA_VISIBLE_DEVICES=$vis ${LIMIT_S:+timeout -s INT $LIMIT_S} python3 -m harness.cli tune "$suite" --tuner xgb --trials "$trials" --executor ray \
    --db "$db" > "$out/tune-${gpus}gpu.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  done_trials=$(python3 - "$db" <<'PY' 2>/dev/null
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
t = next((t for t in ("tuning_trials", "trials") if t in tables), None)
print(con.execute(f"select count(*) from {t}").fetchone()[0] if t else "?")
PY
)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  rate=$(awk -v w="$wall" -v t="${done_trials:-0}" 'BEGIN { if (w > 0 && t ~ /^[0-9]+$/) printf "%.1f", 60 * t / w; else print "?" }')
  python3 - "$db" "$t0" <<'PY' 2>/dev/null
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
t0 = float(sys.argv[2])
rows = con.execute("select trial, timestamp, error_no from tuning_trials order by trial").fetchall()
marks = [r for r in rows if (r[0] + 1) % 24 == 0 or r is rows[-1]]
print("  timeline: " + ", ".join(f"trial {t + 1} at {ts - t0:.1f} s" for t, ts, _ in marks)
      + f"; errors {sum(1 for r in rows if r[2])}")
PY
  tail -4 "$out/tune-${gpus}gpu.log" | sed 's/^/  /'
  echo "RESULT tune gpus=$gpus n=$n trials=${done_trials:-?}/$trials wall_s=$wall trials_per_min=$rate rc=$rc"
done
