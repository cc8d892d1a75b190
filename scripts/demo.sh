#!/usr/bin/env bash
# Install what is missing (scripts/install.sh), then run the demo; extra arguments go to the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/install.sh
exec "$KBENCH_PY" examples/demo.py "$@"
