#!/usr/bin/env bash
# Install what is missing (scripts/install.sh), then run the test suite; extra arguments go to pytest.
# The exit code is pytest's own (4, pytest's usage error, for a KBENCH_TEST_WORKERS that is not a number).
#
# The tests run in worker processes (pytest-xdist), one per core up to four (KBENCH_TEST_WORKERS
# overrides; 0 runs them in this process): most of the suite's time is spent waiting for the kbench
# commands and Ray clusters it starts, so two workers on a 2-core machine take about 0.6 of the time.
# A test file stays on one worker (--dist loadfile: its module-scoped Ray cluster is started once).
# A test whose worker process dies under it (a crash no assertion reports, e.g. a Ray driver that
# exits because its raylet died) is run once more and reported as a rerun; a test that fails is not.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/install.sh
cores=$(nproc 2>/dev/null || echo 2)
workers="${KBENCH_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}"
if ! [[ "$workers" =~ ^[0-9]+$ ]]; then
  echo "scripts/test.sh: KBENCH_TEST_WORKERS must be a whole number of test processes (0: none, the" \
       "tests run in this process), got '$workers'" >&2
  exit 4
fi
args=()
if [ "$workers" != "0" ]; then
  args=(-n "$workers" --dist loadfile --reruns 1 --only-rerun "crashed while running" -rR)
fi
exec "$KBENCH_PY" -m pytest -q "${args[@]}" "$@"
