#!/usr/bin/env bash
# NVIDIA's Riva client, unmodified from PyPI, against the real sluice-server's voice API. Registered with CTest
# (tests/voice/CMakeLists.txt):
#   riva_peers_test.sh SERVER_BINARY MODELS_DIR TORCH_PYTHON WORK_DIR
# 1. A venv in WORK_DIR (kept between runs) with nvidia-riva-client (pinned). An install failure fails the test.
# 2. TORCH_PYTHON writes the audio cases and their reference transcript (make_riva_cases.py).
# 3. sluice-server on 127.0.0.1 (ports chosen by the OS) on MODELS_DIR; riva_peers_check.py; SIGTERM drains.
# Loopback only; bounded (every step has a timeout).
set -euo pipefail

if [ $# -ne 4 ]; then
  echo "usage: $0 SERVER_BINARY MODELS_DIR TORCH_PYTHON WORK_DIR" >&2
  exit 2
fi
SERVER=$1 MODELS=$(cd "$2" && pwd) TORCH_PYTHON=$3 WORK=$4
HERE=$(cd "$(dirname "$0")" && pwd)
REQUIREMENT="nvidia-riva-client==2.28.0"
START=$(date +%s)
SERVER_PID=""
log() { echo "[riva_peers +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "riva_peers_test: FAILED: $*" >&2
  [ -f "$WORK/server.log" ] && { echo "---- server log (tail) ----" >&2; tail -n 30 "$WORK/server.log" >&2; }
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
mkdir -p "$WORK"

VENV=$WORK/venv
if [ ! -f "$VENV/.sluice-installed" ] || [ "$(cat "$VENV/.sluice-installed")" != "$REQUIREMENT" ] ||
   ! "$VENV/bin/python" -c 'import riva.client' 2>/dev/null; then
  log "creating $VENV with $REQUIREMENT"
  rm -rf "$VENV"
  python3 -m venv "$VENV" || fail "'python3 -m venv' failed (Debian's python3 needs python3-venv)"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check -q "$REQUIREMENT" ||
    fail "pip could not install $REQUIREMENT (PyPI unreachable?)"
  echo "$REQUIREMENT" > "$VENV/.sluice-installed"
fi

# asr_ctc alone: the speech model the cases are made for (other examples would only slow the start).
rm -rf "$WORK/models" && mkdir -p "$WORK/models"
ln -s "$MODELS/asr_ctc" "$WORK/models/"
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/models
log_level: info
YAML
"$SERVER" --config "$WORK/server.yaml" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
timeout 120 "$TORCH_PYTHON" "$HERE/make_riva_cases.py" "$MODELS/asr_ctc" "$WORK/cases" || fail "make_riva_cases.py"
for _ in $(seq 1 900); do
  grep -q '^sluice-server READY ' "$WORK/server.log" && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "sluice-server exited before READY"
  sleep 0.2
done
READY_LINE=$(grep '^sluice-server READY ' "$WORK/server.log") || fail "sluice-server not READY after 180 s"
GRPC=$(sed -n 's/.* grpc=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
HTTP=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
log "$READY_LINE"

timeout 300 "$VENV/bin/python" "$HERE/riva_peers_check.py" --grpc "$GRPC" --http "$HTTP" --cases "$WORK/cases" ||
  fail "riva_peers_check.py"

kill -TERM "$SERVER_PID"
code=0
timeout 90 tail --pid="$SERVER_PID" -f /dev/null || fail "sluice-server still running 90 s after SIGTERM"
wait "$SERVER_PID" || code=$?
SERVER_PID=""
[ "$code" -eq 0 ] || fail "sluice-server exited $code after SIGTERM"
log "riva_peers_test: PASSED"
