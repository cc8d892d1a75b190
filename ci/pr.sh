#!/usr/bin/env bash
# Pull-request A/B: time the base ref and this checkout on the same machine, interleaved, and judge
# the difference.
#
# usage: ci/pr.sh [options] [-- extra `kbench ab` / `kbench run` arguments, e.g. --targets cuda]
#
#   --base REF          what to compare against ($KBENCH_BASE_REF; default origin/$GITHUB_BASE_REF
#                       in a pull_request workflow, else origin/main, else main)
#   --mode MODE         samples (default) or runs                     ($KBENCH_PR_MODE)
#                         samples: `kbench ab`: every case built by both trees' compiler cores and
#                           the two builds timed in one loop, a sample of each in turn, then judged
#                           (drift of the machine falls on both sides alike; the strongest verdicts;
#                           both sides use this checkout's runtime and harness)
#                         runs: whole `kbench run`s of each checkout in rounds, compared with
#                           `kbench compare` (each side with its own runtime and harness too)
#   --rounds R          --mode runs: rounds per side                  ($KBENCH_ROUNDS, default 3)
#   --suite FILE        suite, relative to the repository root   ($KBENCH_SUITE, default suites/tutorials.toml)
#   --db FILE           result store for the A/B runs  ($KBENCH_PR_DB, default OUT/pr.db; keep it
#                       apart from the nightly store so PR runs never become "recent history")
#   --out DIR           reports and CI outputs                ($KBENCH_PR_OUT, default kbench-out/pr)
#   --executor KIND     ray (kbench's embedded local Ray) or local    ($KBENCH_EXECUTOR, default ray)
#   --max-time S        measuring cap per case (and round, --mode runs) ($KBENCH_PR_MAX_TIME; default
#                       --mode samples: the suite's; --mode runs: the suite's max_time_s divided by R,
#                       but at least its min_time_s: about one normal run's measuring time per side)
#   --min-time S        least measuring time per case and round          ($KBENCH_PR_MIN_TIME)
#   --fail-on SPEC      passed on to `kbench ab` / `kbench compare` (e.g. "median:3%,ambiguous")
#   --comment FILE      where the PR comment goes   ($KBENCH_PR_COMMENT, default OUT/pr-comment.md)
#
# How: the base ref is checked out with `git worktree add` into a temporary folder (removed again on
# exit). --mode samples runs `kbench ab SUITE --base-tree WORKTREE` (see `kbench ab --help` and
# harness/cli/ab.py). --mode runs: round i runs the two sides in ABBA order (base then head in odd rounds, head
# then base in even ones) so a slow drift of the machine (clocks, temperature) hits both sides alike. Each side
# runs `python -m harness.cli run` from its own tree with PYTHONPATH set to that tree, so each side's
# compiler core (kernels/) builds its own kernels; the embedded Ray's workers inherit PYTHONPATH.
# Both sides write to one store; their run ids are then compared with
#   kbench compare BASE_IDS HEAD_IDS --db DB --out OUT      (comma-joined ids, samples pooled)
# Each side uses its own copy of the suite file when the base tree has one (a suite changed by the
# PR then only compares the cases both sides have).
#
# If the base tree's result store schema differs from this checkout's (one kbench could not open the
# other's store), the base side runs this checkout's harness/ and reports/ with the base tree's
# kernels/ (a folder of symlinks), and the comment says so.
#
# Only kbench's embedded Ray or --executor local: joining a cluster (--address) would run the code
# installed on the cluster's nodes for both sides, not the two trees.
#
# Writes under OUT: kbench compare's report, summary, JUnit, benchmark JSON and results files;
# pr-comment.md (the comment: a marker line for updating it in place, a header naming the two
# commits and the runs, then kbench's Markdown summary), pr-report.html (a copy of the HTML report),
# pr.log (the console output of every step). With $GITHUB_STEP_SUMMARY set, the comment is appended.
#
# Exit code: that of `kbench ab` / `kbench compare` (0 ok, 1 SLOWER, 2 correctness, 3 inconclusive),
# or 4 for a usage or configuration error (bad ref, a run that could not start).
set -uo pipefail

KB_SCRIPT=pr
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=ci/lib.sh
source "$ROOT/ci/lib.sh"

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

base_ref=${KBENCH_BASE_REF:-}
mode=${KBENCH_PR_MODE:-samples}
rounds=${KBENCH_ROUNDS:-3}
suite_rel=${KBENCH_SUITE:-suites/tutorials.toml}
out=${KBENCH_PR_OUT:-kbench-out/pr}
db=${KBENCH_PR_DB:-}
executor=${KBENCH_EXECUTOR:-ray}
max_time=${KBENCH_PR_MAX_TIME:-}
min_time=${KBENCH_PR_MIN_TIME:-}
comment=${KBENCH_PR_COMMENT:-}
fail_on=
run_args=()

need() { [ $# -ge 2 ] && [ -n "$2" ] || kb_die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --base) need "$@"; base_ref=$2; shift 2 ;;
    --base=*) base_ref=${1#*=}; shift ;;
    --mode) need "$@"; mode=$2; shift 2 ;;
    --mode=*) mode=${1#*=}; shift ;;
    --rounds) need "$@"; rounds=$2; shift 2 ;;
    --rounds=*) rounds=${1#*=}; shift ;;
    --suite) need "$@"; suite_rel=$2; shift 2 ;;
    --suite=*) suite_rel=${1#*=}; shift ;;
    --db) need "$@"; db=$2; shift 2 ;;
    --db=*) db=${1#*=}; shift ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --executor) need "$@"; executor=$2; shift 2 ;;
    --executor=*) executor=${1#*=}; shift ;;
    --max-time) need "$@"; max_time=$2; shift 2 ;;
    --max-time=*) max_time=${1#*=}; shift ;;
    --min-time) need "$@"; min_time=$2; shift 2 ;;
    --min-time=*) min_time=${1#*=}; shift ;;
    --fail-on) need "$@"; fail_on=$2; shift 2 ;;
    --fail-on=*) fail_on=${1#*=}; shift ;;
    --comment) need "$@"; comment=$2; shift 2 ;;
    --comment=*) comment=${1#*=}; shift ;;
    --address|--address=*)
      kb_die "pr.sh runs both sides on this machine; --address is not supported (see --help)" ;;
    --) shift; run_args+=("$@"); break ;;
    *) kb_die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$rounds" in ''|*[!0-9]*|0) kb_die "--rounds: '$rounds' is not a positive integer" ;; esac
case "$executor" in ray|local) ;; *) kb_die "--executor: '$executor' is not one of ray, local" ;; esac
case "$mode" in samples|runs) ;; *) kb_die "--mode: '$mode' is not one of samples, runs" ;; esac

out=$(kb_abspath "$out")
db=$(kb_abspath "${db:-$out/pr.db}")
comment=$(kb_abspath "${comment:-$out/pr-comment.md}")
mkdir -p "$out" "$(dirname "$db")" "$(dirname "$comment")" || kb_die "cannot create $out"
log="$out/pr.log"
: > "$log"

KB_PY=$(kb_pick_python "$ROOT")
git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || kb_die "$ROOT is not a git checkout"

# -- the base ref ---------------------------------------------------------------------------------
if [ -z "$base_ref" ]; then
  for candidate in ${GITHUB_BASE_REF:+"origin/$GITHUB_BASE_REF"} origin/main main; do
    if git -C "$ROOT" rev-parse --verify -q "$candidate^{commit}" >/dev/null; then
      base_ref=$candidate
      break
    fi
  done
  [ -n "$base_ref" ] || kb_die "no base ref given and none of origin/\$GITHUB_BASE_REF, origin/main," \
    "main exists (a shallow clone? check out with fetch-depth 0)"
fi
base_sha=$(git -C "$ROOT" rev-parse --verify -q "$base_ref^{commit}") \
  || kb_die "base ref '$base_ref' is not a commit here (a shallow clone? check out with fetch-depth 0)"
head_sha=$(git -C "$ROOT" rev-parse --verify -q HEAD) || kb_die "this checkout has no HEAD commit"
head_desc=${head_sha:0:12}
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
  head_desc="$head_desc + uncommitted changes"
fi

git -C "$ROOT" worktree prune >/dev/null 2>&1 || true  # worktrees of a run that was killed
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kbench-pr.XXXXXX") || kb_die "mktemp failed"
base_tree="$tmp/base"
cleanup() {
  if [ -d "$base_tree" ]; then
    git -C "$ROOT" worktree remove --force "$base_tree" >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
  git -C "$ROOT" worktree prune >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

git -C "$ROOT" worktree add --detach -q "$base_tree" "$base_sha" >>"$log" 2>&1 \
  || kb_die "git worktree add of $base_ref ($base_sha) failed (see $log)"
kb_log "base: $base_ref = ${base_sha:0:12} (worktree $base_tree); head: $head_desc ($ROOT)"

# -- how each side runs ---------------------------------------------------------------------------
# side_run TREE PYPATH ARGS...: `python -m harness.cli ARGS` from TREE with PYTHONPATH=PYPATH.
side_run() {
  local tree=$1 pypath=$2
  shift 2
  (cd "$tree" && PYTHONPATH="$pypath${PYTHONPATH:+:$PYTHONPATH}" "$KB_PY" -m harness.cli "$@")
}

suite_head="$ROOT/$suite_rel"
case "$suite_rel" in /*) suite_head=$suite_rel ;; esac
[ -f "$suite_head" ] || kb_die "no suite file $suite_head"

stamp="$tmp/compare-stamp"
: > "$stamp"
cmp_log="$tmp/compare.log"
base_note=""
if [ "$mode" = samples ]; then
  # -- one kbench ab: both trees' builds of every case timed in one loop ---------------------------
  before=$(kb_max_run_id "$db") || kb_die "cannot read the result store $db"
  cmd=(ab "$suite_head" --base-tree "$base_tree" --db "$db" --out "$out" --executor "$executor")
  [ -n "$max_time" ] && cmd+=(--max-time "$max_time")
  [ -n "$min_time" ] && cmd+=(--min-time "$min_time")
  [ -n "$fail_on" ] && cmd+=(--fail-on "$fail_on")
  kb_log "kbench ab against the base worktree (a sample of each side in turn)"
  echo "== kbench ${cmd[*]} ${run_args[*]}" >>"$log"
  start=$SECONDS
  side_run "$ROOT" "$ROOT" "${cmd[@]}" "${run_args[@]}" 2>&1 | tee "$cmp_log"
  rc=${PIPESTATUS[0]}
  cat "$cmp_log" >>"$log"
  read -r base_list head_list < <(kb_ab_runs "$db" "$before")
  how="Each case built by both trees' compiler cores and the two builds timed in one loop, a sample of
each in turn (\`kbench ab\`, $((SECONDS - start)) s); base run ${base_list:-none}, head run ${head_list:-none}"
else
# -- --mode runs: whole runs of each checkout in ABBA rounds, then kbench compare ------------------
schema_of() {  # schema_of PYPATH: the number of store migrations of that harness ("" if it fails)
  (cd "$1" && PYTHONPATH="$1" "$KB_PY" -c 'from harness.store import MIGRATIONS; print(len(MIGRATIONS))' \
    2>>"$log") || true
}
head_path=$ROOT
base_path=$base_tree
base_note=""
head_schema=$(schema_of "$ROOT")
base_schema=$(schema_of "$base_tree")
[ -n "$head_schema" ] || kb_die "this checkout's harness does not import (see $log)"
if [ "$base_schema" != "$head_schema" ]; then
  shim="$tmp/base-shim"
  mkdir -p "$shim"
  ln -s "$base_tree/kernels" "$shim/kernels"
  ln -s "$ROOT/harness" "$shim/harness"
  ln -s "$ROOT/reports" "$shim/reports"
  base_path=$shim
  base_note="The base side ran this branch's harness with the base's compiler core (kernels/): the two \
result-store schemas differ (base ${base_schema:-unreadable}, head $head_schema)."
  kb_log "note: $base_note"
fi

suite_base="$base_tree/$suite_rel"
case "$suite_rel" in /*) suite_base=$suite_rel ;; esac
if [ ! -f "$suite_base" ]; then
  kb_log "the base tree has no $suite_rel: both sides use this checkout's"
  suite_base=$suite_head
fi

# The per-round cap: the suite's max_time_s / R, not below the least measuring time (--min-time, else
# the suite's min_time_s).
if [ -z "$max_time" ]; then
  max_time=$(cd "$ROOT" && PYTHONPATH="$ROOT" "$KB_PY" - "$suite_head" "$rounds" "$min_time" 2>>"$log" <<'PY'
import sys
from harness.suite import load_suite
m = load_suite(sys.argv[1]).measure
least = float(sys.argv[3]) if sys.argv[3] else m.min_time_s
print(f"{max(m.max_time_s / int(sys.argv[2]), least):.6g}")
PY
  ) || kb_die "cannot read $suite_head (see $log)"
fi
time_args=(--max-time "$max_time")
[ -n "$min_time" ] && time_args+=(--min-time "$min_time")

base_ids=()
head_ids=()
# one_run SIDE: one `kbench run` of that side; appends its run id.
one_run() {
  local side=$1 tree pypath suite before rc id
  if [ "$side" = base ]; then tree=$base_tree pypath=$base_path suite=$suite_base
  else tree=$ROOT pypath=$head_path suite=$suite_head; fi
  before=$(kb_max_run_id "$db") || kb_die "cannot read the result store $db"
  kb_log "round $round: $side"
  echo "== round $round: $side ($tree)" >>"$log"
  side_run "$tree" "$pypath" run "$suite" --db "$db" --executor "$executor" "${time_args[@]}" \
    "${run_args[@]}" >>"$log" 2>&1
  rc=$?
  id=$(kb_new_run_id "$db" "$before")
  if [ -z "$id" ]; then
    tail -n 20 "$log" >&2
    kb_die "the $side run of round $round stored no run (exit $rc; see $log)"
  fi
  [ "$rc" -eq "$KB_EXIT_USAGE" ] && kb_die "the $side run of round $round exited with 4 (see $log)"
  # 1, 2 and 3 are the run's own verdict against whatever baseline kbench found; the A/B verdict
  # comes from `kbench compare` below.
  kb_log "round $round: $side is run $id (exit $rc)"
  if [ "$side" = base ]; then base_ids+=("$id"); else head_ids+=("$id"); fi
}

start=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  if ((round % 2)); then one_run base; one_run head; else one_run head; one_run base; fi
done
kb_log "$((2 * rounds)) runs in $((SECONDS - start)) s"

join() { local IFS=,; echo "$*"; }
base_list=$(join "${base_ids[@]}")
head_list=$(join "${head_ids[@]}")

cmp=(compare "$base_list" "$head_list" --db "$db" --out "$out")
[ -n "$fail_on" ] && cmp+=(--fail-on "$fail_on")
echo "== kbench ${cmp[*]}" >>"$log"
side_run "$ROOT" "$head_path" "${cmp[@]}" 2>&1 | tee "$cmp_log"
rc=${PIPESTATUS[0]}
cat "$cmp_log" >>"$log"
how="$rounds interleaved rounds per side (ABBA order), up to ${max_time} s of measuring per case
and round; base runs $base_list, head runs $head_list"
fi

summary=$(kb_find_output "$cmp_log" "$out" "$stamp" "-summary.md")
report=$(kb_find_output "$cmp_log" "$out" "$stamp" "-report.html")
[ -n "$report" ] && [ "$report" != "$out/pr-report.html" ] && cp "$report" "$out/pr-report.html"

{
  echo "<!-- kbench-pr-comment -->"
  echo "### kbench A/B: \`$head_desc\` vs \`$base_ref\` (\`${base_sha:0:12}\`)"
  echo
  echo "$how; verdict: exit $rc, $(kb_verdict_text "$rc")."
  [ -n "$base_note" ] && { echo; echo "$base_note"; }
  echo
  if [ -n "$summary" ] && [ -f "$summary" ]; then
    cat "$summary"
  else
    echo "kbench wrote no Markdown summary (exit $rc); its output:"
    echo
    echo '```'
    tail -n 40 "$cmp_log"
    echo '```'
  fi
} > "$comment"
kb_step_summary "$comment"

kb_log "verdict: exit $rc, $(kb_verdict_text "$rc")"
kb_log "comment: $comment"
[ -n "$report" ] && kb_log "report: $out/pr-report.html"
exit "$rc"
