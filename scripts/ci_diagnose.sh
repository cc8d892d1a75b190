#!/usr/bin/env bash
# What CI prints after a failed test run, so that a run that ended without pytest's own summary (a
# process of the test session killed from outside, or Ray ending its driver) can be explained from
# the CI log alone: the kernel's word on killed processes, and the fatal lines of the newest Ray
# sessions (the raylet's and GCS's crashes, a driver that exited because its raylet died).
# Usage: bash scripts/ci_diagnose.sh [RAY_TMP]   (RAY_TMP: where Ray's sessions are; /tmp/ray)
set -uo pipefail
ray_tmp="${1:-/tmp/ray}"

if [ -n "${KBENCH_TEST_TRAIL:-}" ] && [ -s "$KBENCH_TEST_TRAIL" ]; then
  echo "== diagnose: the last test each test process started (running when that process ended, if it ended abruptly)"
  awk '{last[$2] = $0} END {for (w in last) print last[w]}' "$KBENCH_TEST_TRAIL" | sort
fi

echo "== diagnose: the kernel's last words on killed processes (dmesg; needs privileges)"
dmesg 2>/dev/null | grep -iE "killed process|out of memory|oom" | tail -n 10 || true

echo "== diagnose: free memory and disk"
free -m 2>/dev/null | head -n 2 || true
df -h . /tmp 2>/dev/null || true

echo "== diagnose: the newest Ray sessions under $ray_tmp"
sessions=$(ls -dt "$ray_tmp"/session_2* 2>/dev/null | head -n 4)
for s in $sessions; do
  echo "-- $s"
  # fatal (C) lines of Ray's C++ processes, their crashes, and a driver's reason to exit
  grep -hE "^\[[^]]* C [0-9]+ [0-9]+\]|Check failed|\*\*\* SIG|Raylet IPC connection failed|local Raylet is dead|Killing the driver|QuickExit" \
    "$s"/logs/raylet*.out "$s"/logs/raylet*.err "$s"/logs/gcs_server*.out "$s"/logs/gcs_server*.err \
    "$s"/logs/python-core-driver-*.log 2>/dev/null | cut -c1-400 | tail -n 20
  for d in "$s"/logs/python-core-driver-*.log; do
    [ -f "$d" ] || continue
    echo "   last lines of $(basename "$d"):"
    tail -n 5 "$d" | cut -c1-400 | sed 's/^/   /'
  done
done
exit 0
