#!/usr/bin/env bash
# backend/compile/hf_export.py against transformers (pinned, from PyPI, in a venv kept in WORK_DIR), one small
# randomly initialised checkpoint per supported architecture plus the refusals: hf_arch_check.py. Registered with
# CTest (tests/llm/CMakeLists.txt, label llm_peers). About 80 s once the venv exists on a quiet machine, 6 min at load average 8 (2 cores).
#   hf_arch_test.sh WORK_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 WORK_DIR" >&2; exit 2; }
WORK=$1 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
log() { echo "[hf_arch +$(( $(date +%s) - START ))s] $*"; }
fail() { echo "hf_arch_test: FAILED: $*" >&2; exit 1; }
mkdir -p "$WORK"
# shellcheck source=hf_tools_venv.sh
. "$HERE/hf_tools_venv.sh"
ensure_hf_tools_venv "$WORK"
timeout 900 "$VENV_BIN/python" "$HERE/hf_arch_check.py" "$WORK/cases" || fail "hf_arch_check.py"
log "hf_arch_test: PASSED"
