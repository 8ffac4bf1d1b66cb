#!/usr/bin/env bash
# sluice-server serving the example LLM (llama_tiny, CPU TorchScript graphs) reproduces its batch-1 eager greedy
# references under continuous batching (llama_serving_check.py), then drains on SIGTERM and exits 0.
#   llama_serving_test.sh SERVER_BINARY MODELS_DIR PYTHON WORK_DIR
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 SERVER_BINARY MODELS_DIR PYTHON WORK_DIR" >&2; exit 2; }
SERVER=$1 MODELS=$(cd "$2" && pwd) PYTHON=$3 WORK=$4
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "llama_serving_test: FAIL: $*" >&2; [ -f "$WORK/server.log" ] && tail -20 "$WORK/server.log" >&2; exit 1; }
SERVER_PID=""
trap 'if [ -n "$SERVER_PID" ]; then kill -9 "$SERVER_PID" 2>/dev/null || true; fi' EXIT
# shellcheck source=../server_process.sh
source "$HERE/../server_process.sh"

rm -rf "$WORK" && mkdir -p "$WORK/models"
ln -s "$MODELS/llama_tiny" "$WORK/models/"
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/models
log_level: info
YAML
start_sluice_server "$WORK/server.yaml" "$WORK/server.log" 120

timeout 600 "$PYTHON" "$HERE/llama_serving_check.py" "$HTTP" "$MODELS/llama_tiny" || fail "llama_serving_check.py"

drain_sluice_server 30
echo "llama_serving_test: PASS"
