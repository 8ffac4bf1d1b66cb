#!/usr/bin/env bash
# OpenAI's POST /v1/audio/transcriptions through the unmodified `openai` client from PyPI, against the real
# sluice-server serving the trained asr_digits model: every held-out clip in every response_format, each text equal
# to the same clip through Riva Recognize (nvidia-riva-client, unmodified), the WER over the held-out set bounded,
# and bad requests (no file, bad boundary, unknown model, unknown field, word timestamps without verbose_json,
# stream) each a 4xx OpenAI error while the server keeps serving (openai_transcriptions_check.py).
# Registered with CTest (tests/voice/CMakeLists.txt):
#   openai_transcriptions_test.sh SERVER MODELS_DIR HELDOUT_DIR SYSTEM_PYTHON WORK_DIR MAX_WER
# The venv (requirements-openai-audio.txt: versions and sha256 pinned) is kept in WORK_DIR between runs; an install
# failure fails the test (no silent skip). Loopback, OS-chosen ports; SIGTERM must drain the server and exit 0.
set -euo pipefail

if [ $# -ne 6 ]; then
  echo "usage: $0 SERVER MODELS_DIR HELDOUT_DIR SYSTEM_PYTHON WORK_DIR MAX_WER" >&2
  exit 2
fi
mkdir -p "$5"
SERVER=$(realpath "$1") MODELS=$(cd "$2" && pwd) HELDOUT=$(cd "$3" && pwd) SYSTEM_PYTHON=$4 WORK=$(cd "$5" && pwd)
MAX_WER=$6
HERE=$(cd "$(dirname "$0")" && pwd)
REQUIREMENTS=$HERE/requirements-openai-audio.txt
START=$(date +%s)
SERVER_PID=""
log() { echo "[openai_transcriptions +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "openai_transcriptions_test: FAILED: $*" >&2
  [ -f "$WORK/server.log" ] && { echo "---- server log (tail) ----" >&2; tail -n 30 "$WORK/server.log" >&2; }
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
# shellcheck source=../server_process.sh
source "$HERE/../server_process.sh"

# ---- 1. the clients from PyPI (pinned with hashes) ---------------------------------------------------------------
VENV=$WORK/venv
STAMP=$VENV/.sluice-installed
WANT=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ] ||
   ! "$VENV/bin/python" -c 'import openai, riva.client' 2>/dev/null; then
  log "creating $VENV from $(basename "$REQUIREMENTS")"
  rm -rf "$VENV"
  "$SYSTEM_PYTHON" -m venv "$VENV" || fail "'$SYSTEM_PYTHON -m venv' failed (Debian's python3 needs python3-venv)"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check -q --require-hashes -r "$REQUIREMENTS" ||
    fail "pip could not install $(basename "$REQUIREMENTS") (PyPI unreachable?)"
  echo "$WANT" > "$STAMP"
fi

# ---- 2. the server: asr_digits only -----------------------------------------------------------------------------
rm -rf "$WORK/repo"
mkdir -p "$WORK/repo"
ln -s "$MODELS/asr_digits" "$WORK/repo/asr_digits"
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/repo
log_level: info
YAML
start_sluice_server "$WORK/server.yaml" "$WORK/server.log" 180
log "$READY_LINE"

# ---- 3. the checks ---------------------------------------------------------------------------------------------
timeout 300 "$VENV/bin/python" "$HERE/openai_transcriptions_check.py" --http "$HTTP" --grpc "$GRPC" \
  --heldout "$HELDOUT/heldout" --max-wer "$MAX_WER" || fail "openai_transcriptions_check.py"

drain_sluice_server 90
log "openai_transcriptions_test: PASSED"
