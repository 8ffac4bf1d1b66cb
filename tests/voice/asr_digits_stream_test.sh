#!/usr/bin/env bash
# The trained cache-aware streaming recognizer asr_digits_stream served by the real sluice-server: every held-out
# clip streamed (Riva StreamingRecognize: the stream engine) and recognised offline (Recognize) with the unmodified
# nvidia-riva-client; the offline WER bounded (per group of the held-out set), the streamed WER within MAX_GAP of it, streamed texts equal to the
# offline ones, compute per audio second <= 1.3 (asr_digits_stream_check.py). Registered with CTest
# (tests/voice/CMakeLists.txt):
#   asr_digits_stream_test.sh SERVER MODELS_DIR HELDOUT_DIR SYSTEM_PYTHON WORK_DIR MAX_WER MAX_SHIFTED_WER MAX_GAP
# The venv (requirements-openai-audio.txt: versions and sha256 pinned; pip's cache makes it quick after the
# openai_transcriptions_test's) is kept in WORK_DIR; an install failure fails the test. Loopback, OS-chosen ports;
# SIGTERM must drain the server and exit 0.
set -euo pipefail

if [ $# -ne 8 ]; then
  echo "usage: $0 SERVER MODELS_DIR HELDOUT_DIR SYSTEM_PYTHON WORK_DIR MAX_WER MAX_SHIFTED_WER MAX_GAP" >&2
  exit 2
fi
mkdir -p "$5"
SERVER=$(realpath "$1") MODELS=$(cd "$2" && pwd) HELDOUT=$(cd "$3" && pwd) SYSTEM_PYTHON=$4 WORK=$(cd "$5" && pwd)
MAX_WER=$6 MAX_SHIFTED_WER=$7 MAX_GAP=$8
HERE=$(cd "$(dirname "$0")" && pwd)
REQUIREMENTS=$HERE/requirements-openai-audio.txt
START=$(date +%s)
SERVER_PID=""
log() { echo "[asr_digits_stream +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "asr_digits_stream_test: FAILED: $*" >&2
  [ -f "$WORK/server.log" ] && { echo "---- server log (tail) ----" >&2; tail -n 30 "$WORK/server.log" >&2; }
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
# shellcheck source=../server_process.sh
source "$HERE/../server_process.sh"
# shellcheck source=../pinned_venv.sh
source "$HERE/../pinned_venv.sh"

VENV=$WORK/venv
ensure_pinned_venv "$VENV" "$REQUIREMENTS" "$SYSTEM_PYTHON" 'import riva.client'

rm -rf "$WORK/repo"
mkdir -p "$WORK/repo"
ln -s "$MODELS/asr_digits_stream" "$WORK/repo/asr_digits_stream"
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/repo
log_level: info
YAML
start_sluice_server "$WORK/server.yaml" "$WORK/server.log" 180
log "$READY_LINE"

timeout 400 "$VENV/bin/python" "$HERE/asr_digits_stream_check.py" --grpc "$GRPC" --http "$HTTP" \
  --heldout "$HELDOUT" --max-wer "$MAX_WER" --max-shifted-wer "$MAX_SHIFTED_WER" --max-wer-gap "$MAX_GAP" ||
  fail "asr_digits_stream_check.py"

drain_sluice_server 90
log "asr_digits_stream_test: PASSED"
