#!/usr/bin/env bash
# Install what is missing (scripts/install.sh), then run the test suite; extra arguments go to pytest.
# The exit code is pytest's own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/install.sh
exec "$KBENCH_PY" -m pytest -q "$@"
