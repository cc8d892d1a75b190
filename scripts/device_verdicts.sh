#!/usr/bin/env bash
# Verdicts on the GPU machine (the `device` tool), after `source .whl/setup.sh`: kbench calibrate on
# the tutorial suite's CUDA cases (A/A false alarms and the detection of an injected slowdown), then
# two runs judged against each other with the HTML report and CI outputs. Stores under $OUT.
#   TRIALS (default 4) trials x 16 CUDA cases (10 kernels + 6 torch peers) >= 50 comparisons each.
set -uo pipefail
dest=${OUT:-kbench-out/device}
out=$(mktemp -d)  # everything here; a few files are copied to $dest at the end (the device returns 8)
mkdir -p "$dest"
kb() { python3 -m harness.cli "$@"; }
trials=${TRIALS:-4}
kb calibrate suites/tutorials.toml --targets cuda --trials "$trials" --slowdown 0.05 \
  --db "$out/calibrate.db" --out "$out" 2>&1 | grep -v "^trial" | tail -12
# a report a newcomer can open: run twice, the second judged against the first
kb run suites/tutorials.toml --targets cuda --db "$out/report.db" --out "$out" > /dev/null 2>&1
kb run suites/tutorials.toml --targets cuda --db "$out/report.db" --baseline 1 --out "$out" 2>&1 \
  | grep -E "verdicts vs|exit code|html" | tail -3
run2=$(ls "$out"/run*-report.html | sort -V | tail -1)
cp "$out/calibration.json" "$run2" "${run2%-report.html}-summary.md" "$dest/" 2>/dev/null
tar czf "$dest/verdicts-dbs.tgz" -C "$out" calibrate.db report.db
