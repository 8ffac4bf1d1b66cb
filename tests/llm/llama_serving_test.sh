#!/usr/bin/env bash
# sluice-server serving the example LLM (llama_tiny, CPU TorchScript graphs) reproduces its batch-1 eager greedy
# references under continuous batching (llama_serving_check.py), then drains on SIGTERM and exits 0.
#   llama_serving_test.sh SERVER_BINARY MODELS_DIR PYTHON WORK_DIR
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 SERVER_BINARY MODELS_DIR PYTHON WORK_DIR" >&2; exit 2; }
SERVER=$1 MODELS=$(cd "$2" && pwd) PYTHON=$3 WORK=$4
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "llama_serving_test: FAIL: $*" >&2; [ -f "$WORK/server.log" ] && tail -20 "$WORK/server.log" >&2; exit 1; }

rm -rf "$WORK" && mkdir -p "$WORK/models"
ln -s "$MODELS/llama_tiny" "$WORK/models/"
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/models
log_level: info
YAML
"$SERVER" --config "$WORK/server.yaml" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill -9 $SERVER_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  grep -q '^sluice-server READY ' "$WORK/server.log" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "sluice-server exited before READY"
  sleep 0.2
done
READY=$(grep '^sluice-server READY ' "$WORK/server.log") || fail "not READY after 120 s"
HTTP=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' <<< "$READY")

timeout 600 "$PYTHON" "$HERE/llama_serving_check.py" "$HTTP" "$MODELS/llama_tiny" || fail "llama_serving_check.py"

kill -TERM "$SERVER_PID"
for _ in $(seq 1 150); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$SERVER_PID" 2>/dev/null; then fail "no exit within 30 s of SIGTERM"; fi
wait "$SERVER_PID" || fail "exit code $? after SIGTERM"
trap - EXIT
echo "llama_serving_test: PASS"
