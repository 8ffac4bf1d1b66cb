#!/usr/bin/env bash
# The trained asr_digits model served by the real sluice-server, transcribing its held-out set over the Riva
# Recognize API: `sluice-loadtest --api riva-offline --audio-folder` reports WER against the reference transcripts,
# and this test fails when it is above MAX_WER. Registered with CTest (tests/voice/CMakeLists.txt):
#   asr_digits_server_test.sh SERVER LOADTEST MODELS_DIR HELDOUT_DIR WORK_DIR MAX_WER
# The repository holds only asr_digits (a symlink to MODELS_DIR/asr_digits); loopback, OS-chosen ports; every
# step has a timeout; SIGTERM must drain the server and exit 0.
set -euo pipefail

if [ $# -ne 6 ]; then
  echo "usage: $0 SERVER LOADTEST MODELS_DIR HELDOUT_DIR WORK_DIR MAX_WER" >&2
  exit 2
fi
SERVER=$1 LOADTEST=$2 MODELS=$(cd "$3" && pwd) HELDOUT=$(cd "$4" && pwd) WORK=$5 MAX_WER=$6
START=$(date +%s)
SERVER_PID=""
log() { echo "[asr_digits_server +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "asr_digits_server_test: FAILED: $*" >&2
  [ -f "$WORK/server.log" ] && { echo "---- server log (tail) ----" >&2; tail -n 30 "$WORK/server.log" >&2; }
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
# shellcheck source=../server_process.sh
source "$(dirname "$0")/../server_process.sh"

rm -rf "$WORK"
mkdir -p "$WORK/repo"
ln -s "$MODELS/asr_digits" "$WORK/repo/asr_digits"
CLIPS=$(find "$HELDOUT/heldout" -name '*.wav' | wc -l)
[ "$CLIPS" -gt 0 ] || fail "no WAV files in $HELDOUT/heldout"

cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/repo
log_level: info
YAML
start_sluice_server "$WORK/server.yaml" "$WORK/server.log" 180
log "$READY_LINE"

# Clips are drawn at random (seeded) with replacement: 2x the clip count visits nearly every clip.
REQUESTS=$(( 2 * CLIPS ))
timeout 300 "$LOADTEST" --api riva-offline -u "$GRPC" -m asr_digits --audio-folder "$HELDOUT/heldout" \
  --model-repository "$WORK/repo" -c 4 -n "$REQUESTS" --seed 1 --metrics-url none --no-progress \
  --json "$WORK/report.json" > "$WORK/loadtest.log" 2>&1 || { cat "$WORK/loadtest.log" >&2; fail "sluice-loadtest"; }
grep -E 'WER|requests|Recognize' "$WORK/loadtest.log" | head -n 10 || true

python3 - "$WORK/report.json" "$REQUESTS" "$MAX_WER" <<'PY' || fail "WER check (see above)"
import json, sys
doc = json.load(open(sys.argv[1]))
requests, max_wer = int(sys.argv[2]), float(sys.argv[3])
results = doc["results"]
wer = results["speech"]["wer"]
print(f"riva-offline over the held-out set: {results['ok']}/{results['requests']} ok, {wer['scored']} scored, "
      f"WER {wer['wer']:.4f} ({wer['errors']} errors / {wer['reference_words']} words: {wer['substitutions']} sub, "
      f"{wer['insertions']} ins, {wer['deletions']} del); bound {max_wer}")
assert results["requests"] == requests and results["ok"] == requests, "not every Recognize call succeeded"
assert wer["scored"] == requests, "not every answer was scored against a reference"
assert wer["reference_words"] > 0
assert wer["wer"] <= max_wer, f"WER {wer['wer']} above the bound {max_wer}"
PY

drain_sluice_server 90
log "asr_digits_server_test: PASSED"
