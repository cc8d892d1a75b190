#!/usr/bin/env bash
# The team site on real GPU data (the `device` tool, after `source .whl/setup.sh`): RUNS (default 3)
# runs of the tutorial suite's CUDA cases into one store, a named baseline on the first, then
# `kbench publish`. Leaves under $OUT: site-<MODEL>.db (the store) and site-<MODEL>.tgz (the site).
# Run it once on an H100 and once on an H200, then here: scripts/site_check.sh site-H100.db site-H200.db
set -uo pipefail
dest=${OUT:-kbench-out/device}
mkdir -p "$dest"
work=$(mktemp -d)
kb() { python3 -m harness.cli "$@"; }
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed -E 's/^NVIDIA //; s/[ -].*//')
db="$work/site-${model:-gpu}.db"
for i in $(seq "${RUNS:-3}"); do
  kb run suites/tutorials.toml --targets cuda --db "$db" 2>&1 | grep -E "^run [0-9]+:|exit code" | tail -2
done
kb baseline set nightly 1 --db "$db"
kb publish --db "$db" --out "$work/site" 2>&1 | tail -2
cp "$db" "$dest/"
tar czf "$dest/site-${model:-gpu}.tgz" -C "$work" site
