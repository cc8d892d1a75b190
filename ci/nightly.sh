#!/usr/bin/env bash
# Nightly regression run: run a suite, compare it with a named baseline, write the report and the CI
# outputs, optionally promote a clean run to be the new baseline, and exit with the verdict.
#
# usage: ci/nightly.sh [options] [-- extra `kbench run` arguments]
#
#   --suite FILE        suite to run                     ($KBENCH_SUITE, default suites/tutorials.toml)
#   --db FILE           result store; keep it between nights  ($KBENCH_DB, default kbench.db)
#   --address ADDR      join this Ray cluster            ($RAY_ADDRESS; default: kbench's embedded Ray)
#   --executor KIND     ray or local                     ($KBENCH_EXECUTOR, default ray)
#   --baseline NAME     named baseline to compare with   ($KBENCH_BASELINE, default nightly)
#   --out DIR           reports and CI outputs           ($KBENCH_OUT, default kbench-out)
#   --promote[=MODE]    when a clean run (exit 0) becomes baseline NAME  ($KBENCH_PROMOTE):
#                         new    only while NAME does not exist yet (the default: the first clean
#                                night creates the baseline, later nights leave it alone)
#                         clean  after every clean night (a rolling baseline; `--promote` alone)
#                         never  never (`--no-promote`)
#   --min-time S, --max-time S, --targets LIST   passed on to `kbench run`
#   --fail-on SPEC      passed on to `kbench run` (e.g. "median:3%,ambiguous")
#
# Until baseline NAME exists the run is compared with `--baseline auto` (recent runs of the same
# cases on the same device, if the store has any).
#
# Writes under DIR: kbench's run<ID>-report.html, -summary.md, -junit.xml, -benchmarks.json and
# -results.csv/.parquet, plus nightly.log (the whole console output), nightly-summary.md (a copy of
# the summary under a fixed name) and nightly-run-id (the run id). When $GITHUB_STEP_SUMMARY is set
# the summary is appended to it.
#
# Exit code: kbench's verdict (0 ok, 1 SLOWER, 2 wrong/crashed/timeout/build error, 3 inconclusive,
# 4 usage or configuration error); 4 also when the promotion fails.
set -uo pipefail

KB_SCRIPT=nightly
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=ci/lib.sh
source "$ROOT/ci/lib.sh"

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

suite=${KBENCH_SUITE:-suites/tutorials.toml}
db=${KBENCH_DB:-kbench.db}
address=${RAY_ADDRESS:-}
executor=${KBENCH_EXECUTOR:-ray}
baseline=${KBENCH_BASELINE:-nightly}
out=${KBENCH_OUT:-kbench-out}
promote=${KBENCH_PROMOTE:-new}
run_args=()

need() { [ $# -ge 2 ] && [ -n "$2" ] || kb_die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --suite) need "$@"; suite=$2; shift 2 ;;
    --suite=*) suite=${1#*=}; shift ;;
    --db) need "$@"; db=$2; shift 2 ;;
    --db=*) db=${1#*=}; shift ;;
    --address) need "$@"; address=$2; shift 2 ;;
    --address=*) address=${1#*=}; shift ;;
    --executor) need "$@"; executor=$2; shift 2 ;;
    --executor=*) executor=${1#*=}; shift ;;
    --baseline) need "$@"; baseline=$2; shift 2 ;;
    --baseline=*) baseline=${1#*=}; shift ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --promote) promote=clean; shift ;;
    --promote=*) promote=${1#*=}; shift ;;
    --no-promote) promote=never; shift ;;
    --min-time|--max-time|--targets|--fail-on) need "$@"; run_args+=("$1" "$2"); shift 2 ;;
    --min-time=*|--max-time=*|--targets=*|--fail-on=*) run_args+=("$1"); shift ;;
    --) shift; run_args+=("$@"); break ;;
    *) kb_die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$promote" in
  new|clean|never) ;;
  *) kb_die "--promote: '$promote' is not one of new, clean, never" ;;
esac
case "$executor" in ray|local) ;; *) kb_die "--executor: '$executor' is not one of ray, local" ;; esac
[ -n "$baseline" ] || kb_die "--baseline: the baseline name is empty"
if [ -n "$address" ] && [ "$executor" != ray ]; then
  kb_die "--address (or RAY_ADDRESS) needs --executor ray"
fi

# Paths are taken relative to where the script was started; kbench then runs from the checkout so
# that the commit it records is this checkout's.
suite=$(kb_abspath "$suite")
db=$(kb_abspath "$db")
out=$(kb_abspath "$out")
[ -f "$suite" ] || kb_die "no suite file $suite"
mkdir -p "$out" "$(dirname "$db")" || kb_die "cannot create $out or the folder of $db"

KB_PY=$(kb_pick_python "$ROOT")
kb() { (cd "$ROOT" && PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$KB_PY" -m harness.cli "$@"); }

base_run=$(kb_baseline_run "$db" "$baseline")
if [ -n "$base_run" ]; then
  compare_with=$baseline
  kb_log "baseline '$baseline' is run $base_run"
else
  compare_with=auto
  kb_log "baseline '$baseline' does not exist yet in $db: comparing with --baseline auto"
fi

where="embedded Ray"
[ "$executor" = local ] && where="this process (--executor local)"
[ -n "$address" ] && where="Ray cluster $address"
kb_log "running $suite on $where; store $db; outputs in $out"

cmd=(run "$suite" --db "$db" --executor "$executor" --baseline "$compare_with" --out "$out")
[ -n "$address" ] && cmd+=(--address "$address")
cmd+=("${run_args[@]}")

before=$(kb_max_run_id "$db") || kb_die "cannot read the result store $db"
stamp="$out/.nightly-stamp"
: > "$stamp"
log="$out/nightly.log"
kb "${cmd[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

run_id=$(kb_new_run_id "$db" "$before")
if [ -z "$run_id" ]; then
  kb_log "kbench run exited with $rc ($(kb_verdict_text "$rc")) and stored no run"
  rm -f "$stamp"
  exit "$rc"
fi
echo "$run_id" > "$out/nightly-run-id"

summary="$out/run${run_id}-summary.md"
[ -f "$summary" ] || summary=$(kb_find_output "$log" "$out" "$stamp" "-summary.md")
rm -f "$stamp"
if [ -n "$summary" ] && [ -f "$summary" ]; then
  if [ "$summary" != "$out/nightly-summary.md" ]; then
    cp "$summary" "$out/nightly-summary.md"
  fi
  kb_step_summary "$out/nightly-summary.md"
else
  kb_log "warning: kbench wrote no Markdown summary for run $run_id"
fi

promoted=no
if [ "$rc" -eq "$KB_EXIT_OK" ]; then
  if [ "$promote" = clean ] || { [ "$promote" = new ] && [ -z "$base_run" ]; }; then
    if kb baseline set "$baseline" "$run_id" --db "$db"; then
      promoted=yes
    else
      kb_log "error: could not set baseline '$baseline' to run $run_id"
      rc=$KB_EXIT_USAGE
    fi
  fi
fi

report="$out/run${run_id}-report.html"
[ -f "$report" ] || report="(none)"
kb_log "run $run_id: exit $rc, $(kb_verdict_text "$rc")"
kb_log "compared with: $compare_with${base_run:+ (run $base_run)}"
if [ "$promoted" = yes ]; then
  kb_log "baseline '$baseline' now points at run $run_id"
else
  kb_log "baseline '$baseline' unchanged (promote mode '$promote')"
fi
kb_log "report: $report"
exit "$rc"
