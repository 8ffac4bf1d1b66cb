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
# shellcheck source=hf_test_steps.sh
. "$HERE/hf_test_steps.sh"
hf_test_begin hf_arch hf_arch_test hf_arch_server.log
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
serve_repository "$WORK/server.yaml" "$REPO" "$WORK/hf_arch_server.log" 120
log "$(ls "$REPO" | wc -l) models: $READY_LINE"
timeout 300 "$VENV_BIN/python" "$HERE/hf_arch_serving_check.py" --http "$HTTP" --grpc "$GRPC" --repository "$REPO" \
  --proto-python "$WORK/proto_py" || fail "hf_arch_serving_check.py"
drain_sluice_server 30
log "hf_arch_test: PASSED"
