#!/usr/bin/env bash
# Whisper served by the real sluice-server (issue 27): the export, test set and transformers reference that
# whisper_test.sh leaves in WORK_DIR (the CTest fixture whisper_export), served on loopback, checked through NVIDIA's
# Riva client (nvidia-riva-client from PyPI, unmodified, in its own venv in WORK_DIR) by whisper_server_check.py:
# every clip at once, transcripts == transformers' greedy Whisper, WER <= MAX_WER, encoder batches and decode steps
# of more than one, language detection, long audio, refusals. SIGTERM then drains the server.
#   whisper_server_test.sh SERVER_BINARY WORK_DIR MAX_WER
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 SERVER_BINARY WORK_DIR MAX_WER" >&2; exit 2; }
SERVER=$1 WORK=$(cd "$2" && pwd) MAX_WER=$3 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
REQUIREMENT="nvidia-riva-client==2.28.0"  # as riva_peers_test.sh
MODEL=whisper_base MAX_AUDIO_SECONDS=60    # whisper_test.sh exports with --max-audio-seconds 60
SERVER_PID=""
log() { echo "[whisper_server +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "whisper_server_test: FAILED: $*" >&2
  [ -f "$WORK/server.log" ] && { echo "---- server log (tail) ----" >&2; tail -n 30 "$WORK/server.log" >&2; }
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
# Missing only when whisper_test skipped (PyPI unreachable when its venv is first made) or was not run: skip too.
for need in "models/$MODEL/config.yaml" reference.json testset/manifest.tsv; do
  [ -e "$WORK/$need" ] || { echo "whisper_server_test: SKIPPED: $WORK/$need missing (whisper_test.sh makes it)"; exit 77; }
done

VENV=$WORK/riva_venv
if [ ! -f "$VENV/.sluice-installed" ] || [ "$(cat "$VENV/.sluice-installed")" != "$REQUIREMENT" ] ||
   ! "$VENV/bin/python" -c 'import riva.client' 2>/dev/null; then
  log "creating $VENV with $REQUIREMENT"
  rm -rf "$VENV"
  python3 -m venv "$VENV" || fail "'python3 -m venv' failed (Debian's python3 needs python3-venv)"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check -q "$REQUIREMENT" ||
    fail "pip could not install $REQUIREMENT (PyPI unreachable?)"
  echo "$REQUIREMENT" > "$VENV/.sluice-installed"
fi

cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/models
log_level: info
YAML
"$SERVER" --config "$WORK/server.yaml" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 1500); do
  grep -q '^sluice-server READY ' "$WORK/server.log" && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "sluice-server exited before READY"
  sleep 0.2
done
READY_LINE=$(grep '^sluice-server READY ' "$WORK/server.log") || fail "sluice-server not READY after 300 s"
GRPC=$(sed -n 's/.* grpc=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
HTTP=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
log "$READY_LINE"

timeout 800 "$VENV/bin/python" "$HERE/whisper_server_check.py" --grpc "$GRPC" --http "$HTTP" --model "$MODEL" \
  --testset "$WORK/testset" --reference "$WORK/reference.json" --max-wer "$MAX_WER" \
  --max-audio-seconds "$MAX_AUDIO_SECONDS" || fail "whisper_server_check.py"

kill -TERM "$SERVER_PID"
code=0
timeout 90 tail --pid="$SERVER_PID" -f /dev/null || fail "sluice-server still running 90 s after SIGTERM"
wait "$SERVER_PID" || code=$?
SERVER_PID=""
[ "$code" -eq 0 ] || fail "sluice-server exited $code after SIGTERM"
log "whisper_server_test: PASSED"
