# Install what kbench needs, idempotently; sourced by scripts/test.sh and scripts/demo.sh
# (also runnable on its own: `bash scripts/install.sh`).
#
#  1. System: an OpenCL runtime for the CPU (PoCL), the ICD loader and clinfo, via apt-get,
#     Debian's chromium (headless browser for the HTML report's end-to-end test) and Debian's
#     postgresql (the PostgreSQL store's tests start a server of their own: initdb, pg_ctl, postgres,
#     found on PATH or under /usr/lib/postgresql/<version>/bin). Skipped when `clinfo -l` already
#     lists a device, the ICD loader is present, chromium is installed and the PostgreSQL binaries
#     are found.
#     Optional packages (chromium) that apt cannot install (e.g. Ubuntu ships it only as a snap)
#     are left out with a warning; the tests that need them skip.
#  2. Python: a virtual environment in .venv with `pip install -e '.[test]'`.
#     Skipped when .venv holds a stamp matching the current pyproject.toml.
#
# Afterwards KBENCH_ROOT is the checkout, KBENCH_PY the venv's python, and PATH starts with
# .venv/bin (and /usr/local/cuda/bin where that exists, for nvcc).
# Environment: KBENCH_PYTHON picks the interpreter for the venv (default python3).

KBENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KBENCH_VENV="$KBENCH_ROOT/.venv"
KBENCH_PY="$KBENCH_VENV/bin/python"
KBENCH_APT_PACKAGES=(pocl-opencl-icd ocl-icd-libopencl1 ocl-icd-opencl-dev clinfo chromium)
KBENCH_APT_OPTIONAL=(chromium)
# installed only where no PostgreSQL binaries are found (a server built from source may be on PATH)
KBENCH_APT_POSTGRES=(postgresql)

_kbench_log() { printf '[install] %s\n' "$*" >&2; }

_kbench_icd_loader_present() {
  # Outputs are captured before grep: with pipefail, `cmd | grep -q` can fail when grep exits early.
  local out ldc
  if command -v dpkg-query >/dev/null 2>&1; then
    out=$(dpkg-query -W -f='${Status}' ocl-icd-libopencl1 2>/dev/null || true)
    [[ "$out" == *"ok installed"* ]] && return 0
  fi
  # Not a Debian system, or a loader installed some other way.
  ldc=$(command -v ldconfig || echo /sbin/ldconfig)
  [ -x "$ldc" ] || return 1
  out=$("$ldc" -p 2>/dev/null || true)
  [[ "$out" == *"libOpenCL.so.1"* ]]
}

_kbench_opencl_ready() {
  local out
  command -v clinfo >/dev/null 2>&1 || return 1
  out=$(clinfo -l 2>/dev/null) || return 1
  [[ "$out" == *"Device"* ]] || return 1
  _kbench_icd_loader_present
}

_kbench_chromium_present() {
  command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]
}

_kbench_postgres_present() {
  local d
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && return 0
  done
  return 1
}

_kbench_apt() {
  DEBIAN_FRONTEND=noninteractive apt-get "$@"
}

_kbench_install_system() {
  if _kbench_opencl_ready && _kbench_chromium_present && _kbench_postgres_present; then
    _kbench_log "OpenCL runtime present (clinfo lists a device), chromium and PostgreSQL installed:" \
      "skipping apt-get"
    return 0
  fi
  if ! _kbench_postgres_present; then
    KBENCH_APT_PACKAGES+=("${KBENCH_APT_POSTGRES[@]}")
    KBENCH_APT_OPTIONAL+=("${KBENCH_APT_POSTGRES[@]}")
  fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    if _kbench_opencl_ready; then  # only optional packages are missing
      _kbench_chromium_present || {
        _kbench_log "WARNING: chromium is not installed: the HTML report's browser test will skip."
        _kbench_log "  As root on Debian: apt-get install -y --no-install-recommends chromium"; }
      _kbench_postgres_present || {
        _kbench_log "WARNING: PostgreSQL (initdb, pg_ctl) is not installed: the PostgreSQL store's tests"
        _kbench_log "  will skip. As root on Debian: apt-get install -y --no-install-recommends postgresql"; }
      return 0
    fi
    _kbench_log "WARNING: no usable OpenCL device found, and this script can only install one as root"
    _kbench_log "  on Debian/Ubuntu. As root, run:"
    _kbench_log "    apt-get update && apt-get install -y --no-install-recommends ${KBENCH_APT_PACKAGES[*]}"
    _kbench_log "  Continuing: tests that need OpenCL will fail or skip without it."
    return 0
  fi
  _kbench_log "installing ${KBENCH_APT_PACKAGES[*]} with apt-get"
  _kbench_apt update -q || return 1
  if _kbench_apt install -y -q --no-install-recommends "${KBENCH_APT_PACKAGES[@]}"; then
    return 0
  fi
  local required=() p o skip
  for p in "${KBENCH_APT_PACKAGES[@]}"; do
    skip=0
    for o in "${KBENCH_APT_OPTIONAL[@]}"; do [ "$p" = "$o" ] && skip=1; done
    [ "$skip" -eq 1 ] || required+=("$p")
  done
  _kbench_log "WARNING: apt-get could not install all of ${KBENCH_APT_PACKAGES[*]};"
  _kbench_log "  retrying without the optional ${KBENCH_APT_OPTIONAL[*]} (tests that need it will skip)"
  _kbench_apt install -y -q --no-install-recommends "${required[@]}" || return 1
}

_kbench_pyproject_hash() {
  # The stamp also depends on the extras we install, so a change here re-runs pip.
  { cat "$KBENCH_ROOT/pyproject.toml"; echo "extras=test"; } | sha256sum | cut -d' ' -f1
}

_kbench_install_python() {
  local base="${KBENCH_PYTHON:-python3}" stamp="$KBENCH_VENV/.kbench-install-stamp" want
  want=$(_kbench_pyproject_hash)
  if [ -e "$KBENCH_VENV" ] && ! "$KBENCH_PY" -c 'import sys' >/dev/null 2>&1; then
    # Never delete a folder we cannot vouch for: say what is wrong and let the user decide.
    _kbench_log "ERROR: $KBENCH_VENV exists but $KBENCH_PY does not run (made by another user or"
    _kbench_log "  another Python?). Remove it (rm -rf .venv) and run this again."
    return 1
  fi
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    _kbench_log ".venv is up to date with pyproject.toml: skipping pip"
    return 0
  fi
  if ! [ -e "$KBENCH_VENV" ]; then
    if ! "$base" -c 'import ensurepip, venv' >/dev/null 2>&1; then
      if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        _kbench_log "$base lacks venv/ensurepip: installing python3-venv with apt-get"
        _kbench_apt update -q || return 1
        _kbench_apt install -y -q --no-install-recommends python3-venv || return 1
      else
        _kbench_log "ERROR: $base cannot create a virtual environment (install python3-venv)"
        return 1
      fi
    fi
    _kbench_log "creating .venv with $base ($("$base" --version 2>&1))"
    "$base" -m venv "$KBENCH_VENV" || return 1
  fi
  rm -f "$stamp" || return 1
  _kbench_log "pip install -e '.[test]'"
  "$KBENCH_PY" -m pip install --disable-pip-version-check --progress-bar off -q -e "$KBENCH_ROOT[test]" \
    || return 1
  echo "$want" > "$stamp" || return 1
}

# Every step checks its own status: when sourced as `kbench_install || ...`, set -e does not apply.
kbench_install() {
  if [ -d /usr/local/cuda/bin ]; then
    case ":$PATH:" in *":/usr/local/cuda/bin:"*) ;; *) PATH="/usr/local/cuda/bin:$PATH" ;; esac
  fi
  _kbench_install_system || return 1
  _kbench_install_python || return 1
  PATH="$KBENCH_VENV/bin:$PATH"
  export PATH KBENCH_ROOT KBENCH_PY
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # executed, not sourced
  set -euo pipefail
  kbench_install
else
  kbench_install || return 1
fi
