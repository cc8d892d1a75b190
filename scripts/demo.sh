#!/usr/bin/env bash
# The README's demo: install what is missing, then run the tutorial suite end to end on the
# embedded default (a local Ray started by kbench) and print where the results are.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/install.sh
mkdir -p kbench-out
exec "$KBENCH_PY" -m harness.cli run suites/tutorials.toml --db kbench-out/demo.db "$@"
