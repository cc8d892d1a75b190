#!/usr/bin/env bash
# Scaling check on a machine of several GPUs: the tutorial suite's CUDA cases (SUITES="a.toml b.toml ...": the
# workloads of those suites in one, e.g. a nightly-size suite of 100+ CUDA cases) (CASE_S seconds of measuring each,
# default 2; several values allowed: CASE_S="2 6") on one GPU and on two, REPS times each (default 2),
# in the modes of MODES (default "embedded cluster"):
#   embedded  kbench starts its own Ray (CUDA_VISIBLE_DEVICES=0 for one GPU)
#   cluster   a Ray started once per GPU count (`ray start --head`, token authentication with a token
#             made here), kbench joining it with --address; stopped with `ray stop --force` after
# One line per run (mode, GPUs, wall seconds, kbench's dispatch seconds, cases ok, nvcc calls), then the
# 2-vs-1 ratios. Run after `source .whl/setup.sh`; logs, stores and results.tsv go under $OUT.
#   source .whl/setup.sh && bash scripts/device_scaling.sh
# GPU_COUNTS="4 2 1" runs those counts in that order, each on the first N GPUs (default "1 2"); WARMUP=0 skips the warm-up run (a
# second call on a warm machine whose build cache the first one filled); a summary needs both counts
# in one results.tsv, so with split calls compare the RESULT lines.
# About 6-7 minutes. `ray stop --force` (between and after the cluster runs, and on exit) stops every
# Ray of this user on the machine: run it on a machine of its own.
set -uo pipefail
SECONDS=0

out=${OUT:-kbench-out/device}
mkdir -p "$out"
results="$out/results.tsv"
printf 'mode\tgpus\trep\twall_s\tkbench_s\tdispatch_s\tok\tplanned\tnvcc\trc\tcase_s\n' > "$results"
suite=suites/tutorials.toml
if [ -n "${SUITES:-}" ]; then
  # a nightly-size suite: the workloads of several suites in one (the first one's [suite] and
  # [measure] tables, then every suite's [[workload]] tables)
  suite="$out/combined.toml"
  python3 - "$suite" $SUITES <<'PY'
import sys
out, files = sys.argv[1], sys.argv[2:]
parts = []
for k, f in enumerate(files):
    text = open(f).read()
    at = text.index("[[workload]]")
    parts.append(text if k == 0 else text[at:])
open(out, "w").write("\n".join(parts).replace('name = "tutorials"', 'name = "nightly-size"', 1))
PY
fi
port=${KBENCH_RAY_PORT:-6390}
export RAY_USAGE_STATS_ENABLED=0 COLUMNS=250   # no usage-stats calls; rich: no wrapped summary line
unset RAY_ADDRESS RAY_AUTH_MODE RAY_AUTH_TOKEN RAY_AUTH_TOKEN_PATH

ray_cli() {
  if command -v ray >/dev/null 2>&1; then ray "$@"
  else python3 -c 'import sys; from ray.scripts.scripts import main; sys.argv[0] = "ray"; main()' "$@"; fi
}

authdir=$(mktemp -d)   # mode 0700: the cluster mode's token lives here
cleanup() {
  ray_cli stop --force >/dev/null 2>&1
  rm -rf "$authdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }

# run MODE GPUS REP [kbench args...]: one `kbench run`, one result line
run() {
  local mode=$1 gpus=$2 rep=$3; shift 3
  local tag="$mode-${gpus}gpu-${case_s}s-$rep" t0 t1 rc
  rm -f "$out/$tag.db"
  t0=$(now)
  python3 -m harness.cli run "$suite" --targets cuda --min-time "$case_s" --max-time "$case_s" --db "$out/$tag.db" "$@" \
    > "$out/$tag.log" 2>&1
  rc=$?
  t1=$(now)
  local line wall kb disp ok planned nvcc
  line=$(grep -E '^run [0-9]+: .*nvcc calls' "$out/$tag.log" | tail -1)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  kb=$(sed -nE 's/.*; ([0-9.]+) s \(.*/\1/p' <<< "$line")
  disp=$(sed -nE 's/.*\(([0-9.]+) s dispatching\).*/\1/p' <<< "$line")
  ok=$(sed -nE 's/^run [0-9]+: (.*, )?ok ([0-9]+).*/\2/p' <<< "$line")
  nvcc=$(sed -nE 's/.*nvcc calls ([0-9]+).*/\1/p' <<< "$line")
  planned=$(sed -nE 's/^run [0-9]+: ([0-9]+) cases$/\1/p' "$out/$tag.log" | tail -1)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$gpus" "$rep" "$wall" "${kb:-?}" "${disp:-?}" \
    "${ok:-0}" "${planned:-?}" "${nvcc:-?}" "$rc" "$case_s" >> "$results"
  timeline "$out/$tag.db"
  grep -E '^time: ' "$out/$tag.log" | tail -1 | sed 's/^/  /'
  printf 'RESULT case_s=%s mode=%-8s gpus=%s rep=%s wall_s=%-6s kbench_s=%-6s dispatch_s=%-6s ok=%s/%s nvcc_calls=%s rc=%s\n' \
    "$case_s" "$mode" "$gpus" "$rep" "$wall" "${kb:-?}" "${disp:-?}" "${ok:-0}" "${planned:-?}" "${nvcc:-?}" "$rc"
  if [ -z "$line" ]; then echo "  (no summary line; last lines of $out/$tag.log:)"; tail -5 "$out/$tag.log" | sed 's/^/  /'; fi
}

# timeline DB: per worker, the first and last result (seconds after the run began) and its case count
timeline() {
  python3 - "$1" <<'PY' 2>/dev/null
import sqlite3, sys
from datetime import datetime
con = sqlite3.connect(sys.argv[1])
(start,) = con.execute("select started_at from runs order by id limit 1").fetchone()
t0 = datetime.fromisoformat(start)
per = {}
for worker, at in con.execute("select worker, created_at from results order by id"):
    per.setdefault(worker, []).append((datetime.fromisoformat(at) - t0).total_seconds())
print("  timeline: " + "; ".join(f"{w}: {len(v)} cases, first {v[0]:.1f} s, last {v[-1]:.1f} s"
                                   for w, v in sorted(per.items())))
PY
}

echo "== $(date -u +%FT%TZ) $(python3 -c 'import ray; print("ray", ray.__version__)' 2>&1)"
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"

# warm-up: fills the build cache and, on both GPUs, the peaks cache (short measuring)
if [ "${WARMUP:-1}" != 0 ]; then
echo "== warm-up (embedded Ray, every GPU)"
t0=$(now)
python3 -m harness.cli run "$suite" --targets cuda --min-time 0.1 --max-time 0.1 --db "$out/warmup.db" \
  > "$out/warmup.log" 2>&1
echo "warm-up rc=$? in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s: $(grep -E '^run [0-9]+: .*nvcc' "$out/warmup.log" | tail -1)"
fi
counts=${GPU_COUNTS:-1 2}

reps=${REPS:-2}
for case_s in ${CASE_S:-2}; do
if [[ " ${MODES:-embedded cluster} " == *" embedded "* ]]; then
echo "== embedded Ray, $case_s s per case"
for rep in $(seq "$reps"); do
  for gpus in $counts; do
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((gpus - 1))) run embedded "$gpus" "$rep"
  done
done
fi

if [[ " ${MODES:-embedded cluster} " == *" cluster "* ]]; then
echo "== existing Ray cluster (ray start --head, kbench --address 127.0.0.1:$port), $case_s s per case"
python3 -c 'import secrets; print(secrets.token_hex(32))' > "$authdir/auth_token"
chmod 600 "$authdir/auth_token"
for gpus in $counts; do
  vis=$(seq -s, 0 $((gpus - 1)))
  ray_cli stop --force >/dev/null 2>&1
  if ! CUDA_VISIBLE_DEVICES=$vis RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$authdir/auth_token" \
      ray_cli start --head --node-ip-address=127.0.0.1 --port="$port" --num-gpus="$gpus" \
      --disable-usage-stats --include-dashboard=false > "$out/ray-start-${gpus}gpu.log" 2>&1; then
    echo "ray start failed ($gpus GPU); see $out/ray-start-${gpus}gpu.log:"; tail -5 "$out/ray-start-${gpus}gpu.log"
    continue
  fi
  for rep in $(seq "$reps"); do
    CUDA_VISIBLE_DEVICES=$vis RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$authdir/auth_token" \
      run cluster "$gpus" "$rep" --address "127.0.0.1:$port"
  done
  ray_cli stop --force >/dev/null 2>&1
done
fi
done

echo "== summary (mean of the reps; ratio = 1 GPU / N GPUs; goals: 2 GPUs >= 1.85, 4 GPUs >= 3.5)"
awk -F'\t' 'NR > 1 && $5 != "?" {
    k = $11 FS $1 FS $2; cs[$11] = 1; g[$2] = 1; n[k]++; w[k] += $4; if ($6 != "?") { d[k] += $6; nd[k]++ } ok[k] += $7; pl[k] += $8
  }
  END {
    split("embedded cluster", modes, " ")
    for (c in cs) for (i = 1; i <= 2; i++) for (gb in g) {
      m = modes[i]; a = c FS m FS 1; b = c FS m FS gb
      if (gb == 1 || !(a in n) || !(b in n)) continue
      printf "%s s/case  ", c
      wa = w[a] / n[a]; wb = w[b] / n[b]
      da = nd[a] ? d[a] / nd[a] : 0; db = nd[b] ? d[b] / nd[b] : 0
      printf "%-8s  wall: 1 GPU %6.1f s, %s GPUs %6.1f s, ratio %.2f | dispatch: 1 GPU %6.1f s, %s GPUs %6.1f s, ratio %s | ok %d/%d\n",
        m, wa, gb, wb, wa / wb, da, gb, db, (db > 0 ? sprintf("%.2f", da / db) : "?"), ok[a] + ok[b], pl[a] + pl[b]
    }
  }' "$results"
echo "(runs without a kbench summary line are left out; every run: $results, logs: $out/*.log)"
echo "== done in ${SECONDS} s"
