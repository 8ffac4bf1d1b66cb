#!/usr/bin/env bash
# backend/compile/hf_export.py against transformers (pinned, from PyPI, in a venv kept in WORK_DIR), one small
# randomly initialised checkpoint per supported architecture plus the refusals: hf_arch_check.py. Then every export
# served at once by one real sluice-server (one model repository, one model per family): greedy tokens over OpenAI
# /v1/completions and Triton ModelStreamInfer == transformers' under continuous batching (hf_arch_serving_check.py).
# Registered with CTest (tests/llm/CMakeLists.txt, label llm_peers). Once the venv exists: 53 s at load average 1.3
# (113 s at 3), of which the served part (server start, 96 requests, drain) 5 s (14 s).
#   hf_arch_test.sh SERVER_BINARY WORK_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 SERVER_BINARY WORK_DIR" >&2; exit 2; }
SERVER=$(realpath "$1") WORK=$2 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
log() { echo "[hf_arch +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "hf_arch_test: FAILED: $*" >&2
  if [ -f "$WORK/hf_arch_server.log" ]; then
    echo "---- server log (tail) ----" >&2
    tail -n 30 "$WORK/hf_arch_server.log" >&2
  fi
  exit 1
}
SERVER_PID=""
trap 'if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi' EXIT
# shellcheck source=../server_process.sh
source "$HERE/../server_process.sh"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
rm -f "$WORK/hf_arch_server.log"
# shellcheck source=hf_tools_venv.sh
. "$HERE/hf_tools_venv.sh"
ensure_hf_tools_venv "$WORK"
timeout 900 "$VENV_BIN/python" "$HERE/hf_arch_check.py" "$WORK/cases" || fail "hf_arch_check.py"
log "exports checked against transformers"

# ---- served: every export above as one model of one repository, one sluice-server ------------------------------
REPO=$WORK/served
rm -rf "$REPO" "$WORK/proto_py" && mkdir -p "$REPO" "$WORK/proto_py"
for export in "$WORK"/cases/*/export/*; do
  [ -f "$export/reference_generation.json" ] && ln -s "$export" "$REPO/$(basename "$export")"
done
# The gRPC messages for the client: protoc (protobuf-compiler, deploy/install-deps.sh) at test time.
protoc -I "$HERE/../../proto" --python_out="$WORK/proto_py" grpc_service.proto model_config.proto ||
  fail "protoc --python_out"
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $REPO
log_level: info
YAML
start_sluice_server "$WORK/server.yaml" "$WORK/hf_arch_server.log" 120
log "$(ls "$REPO" | wc -l) models: $READY_LINE"
timeout 300 "$VENV_BIN/python" "$HERE/hf_arch_serving_check.py" --http "$HTTP" --grpc "$GRPC" --repository "$REPO" \
  --proto-python "$WORK/proto_py" || fail "hf_arch_serving_check.py"
drain_sluice_server 30
log "hf_arch_test: PASSED"
