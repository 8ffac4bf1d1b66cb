# Sourced by test scripts whose clients come from PyPI (bash; `set -euo pipefail` in the caller):
#   ensure_pinned_venv VENV REQUIREMENTS PYTHON IMPORTS   VENV made by PYTHON -m venv with REQUIREMENTS installed
#                                                          (--require-hashes: versions and sha256 pinned), kept
#                                                          between runs while REQUIREMENTS is unchanged and IMPORTS
#                                                          (a Python statement) succeeds; remade otherwise
# The caller defines log MESSAGE and fail MESSAGE (prints and exits non-zero). An install failure fails the test: no
# silent skip.

ensure_pinned_venv() {
  local venv=$1 requirements=$2 python=$3 imports=$4
  local stamp=$venv/.sluice-installed want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c "$imports" 2>/dev/null; then
    return 0
  fi
  log "creating $venv from $(basename "$requirements")"
  rm -rf "$venv"
  "$python" -m venv "$venv" || fail "'$python -m venv' failed (Debian's python3 needs python3-venv)"
  timeout 600 "$venv/bin/pip" install --disable-pip-version-check -q --require-hashes -r "$requirements" ||
    fail "pip could not install $(basename "$requirements") (PyPI unreachable?)"
  echo "$want" > "$stamp"
}
