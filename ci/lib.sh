# Helpers shared by ci/nightly.sh and ci/pr.sh (sourced, never run on its own).
#
# Run ids and baselines are read from the result store with Python's sqlite3 rather than parsed
# from kbench's console output, which is meant for people and may change. The schema is the one
# documented in harness/store/schema.py (runs.kind and the baselines table arrived with schema
# version 2; both are optional here, so an older store still works).

# The exit codes of kbench (harness.errors.ExitCode; docs/ARCHITECTURE.md, "Errors and exit codes").
KB_EXIT_OK=0 KB_EXIT_SLOWER=1 KB_EXIT_WRONG=2 KB_EXIT_INCONCLUSIVE=3 KB_EXIT_USAGE=4 KB_EXIT_INTERNAL=70

kb_log() { printf '[%s] %s\n' "${KB_SCRIPT:-ci}" "$*" >&2; }

# kb_die MESSAGE: a usage or configuration problem (exit code 4).
kb_die() { kb_log "error: $*"; exit "$KB_EXIT_USAGE"; }

kb_verdict_text() {
  case "$1" in
    0) echo "ok" ;;
    1) echo "speed regression (SLOWER)" ;;
    2) echo "correctness failure (wrong, crashed, timeout or build error)" ;;
    3) echo "inconclusive (AMBIGUOUS)" ;;
    4) echo "usage or configuration error" ;;
    70) echo "internal error of kbench (a bug; see its traceback)" ;;
    *) echo "unexpected exit code $1" ;;
  esac
}

# kb_pick_python ROOT: the interpreter that runs kbench: $KBENCH_PY, else ROOT/.venv/bin/python (what
# scripts/install.sh makes), else python3.
kb_pick_python() {
  if [ -n "${KBENCH_PY:-}" ]; then
    echo "$KBENCH_PY"
  elif [ -x "$1/.venv/bin/python" ]; then
    echo "$1/.venv/bin/python"
  else
    command -v python3 || echo python3
  fi
}

# kb_abspath PATH: PATH made absolute against the current directory (the file need not exist).
kb_abspath() {
  case "$1" in
    /*) echo "$1" ;;
    *) echo "$PWD/$1" ;;
  esac
}

# kb_max_run_id DB: the largest run id in DB, 0 for a missing or empty store.
kb_max_run_id() {
  "$KB_PY" - "$1" <<'PY'
import os, sqlite3, sys
db = sys.argv[1]
if not os.path.isfile(db):
    print(0)
    raise SystemExit
con = sqlite3.connect(db)
has = con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='runs'").fetchone()
print(con.execute("SELECT COALESCE(MAX(id), 0) FROM runs").fetchone()[0] if has else 0)
PY
}

# kb_new_run_id DB AFTER: the run a `kbench run` just made: the lowest id above AFTER that is an
# ordinary run (kind "run"), so the automatic re-measure runs of AMBIGUOUS cases (kind "remeasure",
# with a parent run) are never taken for it. Prints nothing when there is none.
kb_new_run_id() {
  "$KB_PY" - "$1" "$2" <<'PY'
import os, sqlite3, sys
db, after = sys.argv[1], int(sys.argv[2])
if not os.path.isfile(db):
    raise SystemExit
con = sqlite3.connect(db)
if not con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='runs'").fetchone():
    raise SystemExit
cols = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
where = "id > ?"
if "kind" in cols:
    where += " AND kind = 'run'"
if "parent_run" in cols:
    where += " AND parent_run IS NULL"
row = con.execute(f"SELECT MIN(id) FROM runs WHERE {where}", (after,)).fetchone()
if row and row[0] is not None:
    print(row[0])
PY
}

# kb_baseline_run DB NAME: the run the named baseline points at; nothing when it does not exist.
kb_baseline_run() {
  "$KB_PY" - "$1" "$2" <<'PY'
import os, sqlite3, sys
db, name = sys.argv[1], sys.argv[2]
if not os.path.isfile(db):
    raise SystemExit
con = sqlite3.connect(db)
if not con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='baselines'").fetchone():
    raise SystemExit
row = con.execute("SELECT run_id FROM baselines WHERE name = ?", (name,)).fetchone()
if row:
    print(row[0])
PY
}

# kb_find_output LOG DIR STAMP SUFFIX: the file kbench wrote whose name ends in SUFFIX (e.g.
# "-summary.md"): a path printed in LOG that exists, else the newest such file under DIR that is
# newer than the file STAMP. Prints nothing when there is none.
kb_find_output() {
  local log=$1 dir=$2 stamp=$3 suffix=$4 path
  if [ -f "$log" ]; then
    while IFS= read -r path; do
      [ -f "$path" ] && { echo "$path"; return 0; }
    done < <(grep -o "[^[:space:]'\"]*${suffix//./\\.}" "$log" | tac)
  fi
  find "$dir" -maxdepth 2 -type f -name "*${suffix}" -newer "$stamp" -printf '%T@ %p\n' 2>/dev/null \
    | sort -rn | head -n 1 | cut -d' ' -f2-
}

# kb_step_summary FILE: append FILE to the GitHub Actions job summary when running in Actions.
kb_step_summary() {
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$1" ]; then
    { cat "$1"; echo; } >> "$GITHUB_STEP_SUMMARY" || kb_log "could not write GITHUB_STEP_SUMMARY"
  fi
}

# kb_ab_runs DB AFTER: "BASE HEAD", the two runs of the first `kbench ab` comparison stored above run id
# AFTER (kind "ab": the base side's run has no parent, the head side's names it). Prints nothing when
# there is none.
kb_ab_runs() {
  "$KB_PY" - "$1" "$2" <<'PY'
import os, sqlite3, sys
db, after = sys.argv[1], int(sys.argv[2])
if not os.path.isfile(db):
    raise SystemExit
con = sqlite3.connect(db)
cols = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
if "kind" not in cols:
    raise SystemExit
row = con.execute("SELECT b.id, h.id FROM runs b JOIN runs h ON h.parent_run = b.id AND h.kind = 'ab'"
                  " WHERE b.id > ? AND b.kind = 'ab' AND b.parent_run IS NULL ORDER BY b.id LIMIT 1",
                  (after,)).fetchone()
if row:
    print(row[0], row[1])
PY
}
