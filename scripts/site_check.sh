#!/usr/bin/env bash
# Publish a store (or several machine stores gathered with `kbench import` where this kbench has it)
# and look at the site in headless Chromium: screenshots of the index and of every workload page
# under OUT/screens, a failure on any console error, and the GPU generations each matrix shows.
#   scripts/site_check.sh STORE.db [STORE2.db ...]      (OUT: default kbench-out/site-check)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=${KBENCH_PY:-.venv/bin/python}
out=${OUT:-kbench-out/site-check}
mkdir -p "$out/screens"
db="$1"
if [ "$#" -gt 1 ]; then
  db="$out/all.db"
  rm -f "$db"
  "$py" -m harness.cli import "$@" --db "$db"
fi
"$py" -m harness.cli publish --db "$db" --out "$out/site"
browser=$(command -v chromium || command -v chromium-browser) || { echo "no chromium" >&2; exit 1; }
status=0
for page in "$out/site/index.html" "$out"/site/workloads/*.html; do
  name=$(basename "$page" .html)
  log=$("$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr --v=0 \
        --user-data-dir="$(mktemp -d)" --window-size=1280,1600 --screenshot="$out/screens/$name.png" \
        "file://$(realpath "$page")" 2>&1 | grep -Ei "CONSOLE|Uncaught|Content Security Policy|Refused to" || true)
  if [ -n "$log" ]; then echo "console errors on $name: $log"; status=1; fi
  if [ "$name" != index ]; then
    gens=$(grep -o '<th class="gen">[^<]*' "$page" | sed 's/.*>//' | sort -u | tr '\n' ' ')
    differs=$(grep -c 'class="differs"' "$page" || true)
    echo "$name: generations $gens; best variant differs in $differs shape(s)"
  fi
done
echo "screenshots: $out/screens"
exit $status
