#!/usr/bin/env bash
# The README's demo: install what is missing, then run the tutorial suite end to end on the
# embedded default (a local Ray started by kbench), judge it against the previous demo run on this
# machine (the first run has none: every case is NEW), and write the HTML report and CI outputs to
# kbench-out/. It prints where the results and the report are.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/install.sh
mkdir -p kbench-out
exec "$KBENCH_PY" -m harness.cli run suites/tutorials.toml --db kbench-out/demo.db --baseline auto \
  --out kbench-out "$@"
