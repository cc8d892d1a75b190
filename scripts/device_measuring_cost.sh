#!/usr/bin/env bash
# What measuring costs, before and after: `kbench run suites/measuring-cost.toml --executor local`
# (ten CUDA cases: row sums 16384^2 and exp 2^26, five variants each, min_time 0.2 s, max_time 1.5 s)
# with the harness as of BASE (git archive into before/) and with this tree, each with an empty build
# cache (a new KBENCH_CACHE_DIR: nvcc runs for every case and the device peaks are measured again),
# one after the other; prints both wall times, their ratio and each case's phases and % of peak;
# then `kbench calibrate` (A/A false alarms, injected 5 %) at the settings of docs/PERF.md on
# suites/calibration-cuda.toml with this tree. On the GPU machine, from the repository root:
#
#   source .whl/setup.sh && bash scripts/device_measuring_cost.sh
#
# BASE: the commit to compare with (default 8f6176d, the harness before builds ahead, float32
# inputs and the read peak); BEFORE_TREE: an unpacked tree of it instead of `git archive` (where the
# copy has no .git). SUITE and RUN_ARGS: another suite (of both trees) and `kbench run` options, for
# trying the script on a machine without a GPU (SUITE=suites/tutorials.toml RUN_ARGS="--targets c").
# TRIALS (default 4) trials of the calibration; CALIBRATE=0 skips it;
# CAL_SUITES (default "calibration-cuda"; add "tutorials" when the device time allows: a separate
# run of `kbench calibrate suites/tutorials.toml --targets cuda --trials 4 --slowdown 0.05`);
# CAL_TIMEOUT (default 420 s) bounds each calibration, to keep the whole under the device's 10 minutes.
# Everything goes under $OUT (default kbench-out/device): logs, the stores, a summary.
set -uo pipefail
dest=${OUT:-kbench-out/device}
mkdir -p "$dest"
here=$PWD
base=${BASE:-8f6176d}
suite=${SUITE:-suites/measuring-cost.toml}
work=$(mktemp -d)
before=${BEFORE_TREE:-$work/before}
if [ -z "${BEFORE_TREE:-}" ]; then
  mkdir -p "$before"
  if ! git archive "$base" | tar -x -C "$before"; then
    echo "cannot unpack $base with git archive; give an unpacked tree as BEFORE_TREE=DIR" >&2
    exit 4
  fi
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  | tee "$dest/gpu.txt"

# one run: label, tree; wall time (s) to $work/LABEL.wall
run_one() {
  local label=$1 tree=$2 cache
  cache=$(mktemp -d)
  echo "== $label: kbench run $suite --executor local ${RUN_ARGS:-} (tree $tree, empty cache $cache)"
  local t0 t1
  t0=$(date +%s.%N)
  (cd "$tree" && KBENCH_CACHE_DIR=$cache PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m harness.cli run "$suite" --executor local ${RUN_ARGS:-} --db "$dest/$label.db") \
    >"$dest/$label.log" 2>&1
  local rc=$?
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.2f}')" >"$work/$label.wall"
  grep -E "^(ok|wrong|crashed|build_error|timeout) |^run |^time:" "$dest/$label.log"
  echo "   exit $rc, wall $(cat "$work/$label.wall") s"
  rm -rf "$cache"
}

run_one before "$before"
run_one after "$here"

python3 - "$dest/before.db" "$dest/after.db" "$(cat "$work/before.wall")" "$(cat "$work/after.wall")" \
  <<'PY' | tee "$dest/summary.txt"
import sys

import pandas as pd

from harness.model import PHASE_NAMES as order
from harness.stats.peaks import peak_bw_kind
from harness.store import Store

before_db, after_db, wb, wa = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
print(f"\nwall time: before {wb:.1f} s, after {wa:.1f} s, ratio {wa / wb:.3f} (goal <= 0.4)")
for label, db in (("before", before_db), ("after", after_db)):
    with Store.open(db, readonly=True) as st:  # a store of an older schema is migrated in memory
        frame = st.results_frame()
    print(f"\n{label}: per-case phases (s) and % of peak")
    print(f"  {'case':70s} {'median':>9s} " + " ".join(f"{k[:9]:>9s}" for k in order) + "  % of peak")
    total = {k: 0.0 for k in order}
    for r in frame.itertuples(index=False):
        ph = {k: getattr(r, f"phase_{k}_s") for k in order if pd.notna(getattr(r, f"phase_{k}_s"))}
        for k in order:
            total[k] += ph.get(k, 0.0)
        pct, med = r.pct_peak_bw, r.median_s
        pct_text = "-" if pd.isna(pct) else f"{pct:.1f} % of {peak_bw_kind(r.peak_bw_kind)} peak"
        med_text = "-" if pd.isna(med) else f"{med * 1e3:.4f}ms"
        print(f"  {r.case_key[:70]:70s} {med_text:>9s} " + " ".join(
            f"{ph[k]:9.3f}" if k in ph else f"{'-':>9s}" for k in order) + f"  {pct_text}  [{r.outcome}]")
    print(f"  {'sum':70s} {'':>9s} " + " ".join(f"{total[k]:9.3f}" for k in order))
PY

if [ "${CALIBRATE:-1}" != "0" ]; then
  trials=${TRIALS:-4}
  for suite in ${CAL_SUITES:-calibration-cuda}; do
    echo "== kbench calibrate suites/$suite.toml --targets cuda --trials $trials --slowdown 0.05"
    mkdir -p "$work/cal-$suite"
    timeout "${CAL_TIMEOUT:-420}" python3 -m harness.cli calibrate "suites/$suite.toml" --targets cuda \
      --trials "$trials" --slowdown 0.05 \
      --db "$work/cal-$suite.db" --out "$work/cal-$suite" 2>&1 | grep -v "^trial" | tail -14 \
      | tee "$dest/calibrate-$suite.txt"
    cp "$work/cal-$suite/calibration.json" "$dest/calibration-$suite.json" 2>/dev/null
  done
fi
rm -rf "$work"
