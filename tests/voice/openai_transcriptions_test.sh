#!/usr/bin/env bash
# OpenAI's POST /v1/audio/transcriptions through the unmodified `openai` client from PyPI, against the real
# sluice-server serving the trained asr_digits model: every held-out clip in every response_format, each text equal
# to the same clip through Riva Recognize (nvidia-riva-client, unmodified), the WER over the held-out set bounded,
# and bad requests (no file, bad boundary, unknown model, unknown field, word timestamps without verbose_json,
# stream) each a 4xx OpenAI error while the server keeps serving, 16 at once, a client that disconnects cancelled
# (openai_transcriptions_check.py; a sim speech model of 1.5 s per window makes the disconnect land mid-recognition);
# then SIGTERM while a transcription runs: it is answered 200 and the server exits 0.
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
# shellcheck source=../pinned_venv.sh
source "$HERE/../pinned_venv.sh"

# ---- 1. the clients from PyPI (pinned with hashes) ---------------------------------------------------------------
VENV=$WORK/venv
ensure_pinned_venv "$VENV" "$REQUIREMENTS" "$SYSTEM_PYTHON" 'import openai, riva.client'

# ---- 2. the server: asr_digits, and a slow sim speech model (1.5 s per window) for disconnects and the drain ------
rm -rf "$WORK/repo"
mkdir -p "$WORK/repo/slow_speech"
ln -s "$MODELS/asr_digits" "$WORK/repo/asr_digits"
cat > "$WORK/repo/slow_speech/config.yaml" <<'YAML'
name: slow_speech
kind: speech
inputs:
  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}
outputs:
  - {name: log_probs, dtype: FP32, shape: [-1, 4]}
buckets: {lengths: [16000, 32000, 64000], batch_sizes: [1]}
batching: {max_queue_delay_ms: 1, max_queue_size: 16}
instances: [{count: 1, device: sim}]
sim: {base_ms: 1500, per_sample_us: 0, output_steps_per_input_step: 0.0015625}
speech:
  vocabulary: ["<blank>", "a", "b", " "]
  frame_samples: 640
  max_audio_seconds: 120
YAML
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
  --heldout "$HELDOUT/heldout" --max-wer "$MAX_WER" --slow-model slow_speech || fail "openai_transcriptions_check.py"

# ---- 4. SIGTERM while a transcription runs: it is answered (200), then the server exits 0 -----------------------
# sed, not head: head exits after one line, and sort's next write then dies of SIGPIPE, which pipefail turns into
# a silent exit of this script (measured: 35 of 200 runs).
CLIP=$(find "$HELDOUT/heldout" -name '*.wav' | sort | sed -n 1p)
timeout 60 curl -s -o "$WORK/drain.json" -w '%{http_code}' "http://$HTTP/v1/audio/transcriptions" \
  -F "file=@$CLIP" -F model=slow_speech > "$WORK/drain.code" &
CURL_PID=$!
sleep 0.5
drain_sluice_server 90
wait "$CURL_PID" || fail "curl during the drain: $(cat "$WORK/drain.code" 2>/dev/null)"
[ "$(cat "$WORK/drain.code")" = 200 ] && grep -q '"text"' "$WORK/drain.json" ||
  fail "the transcription in flight at SIGTERM got HTTP $(cat "$WORK/drain.code"): $(cat "$WORK/drain.json")"
log "drain: the transcription in flight at SIGTERM answered 200, then exit 0"
log "openai_transcriptions_test: PASSED"
