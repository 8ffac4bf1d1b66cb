#!/usr/bin/env bash
# The generation front ends through unmodified clients from PyPI against the real sluice-server: the `openai`
# Python client on /v1/completions, /v1/chat/completions and /v1/models (SSE streaming, usage, errors, client
# disconnect), and tritonclient[grpc] on ModelStreamInfer. Torch-free and fast: the model is a generation model on
# the `sim` device with a SentencePiece tokenizer trained here (backend/compile/llm_tokenizer.py, < 1 s), whose
# greedy tokens openai_peers_reference.py computes independently. Registered with CTest (tests/llm/CMakeLists.txt):
#   openai_peers_test.sh SERVER_BINARY SYSTEM_PYTHON SOURCE_DIR WORK_DIR
# SYSTEM_PYTHON: Debian's python3 (sentencepiece for the tokenizer and the reference; python3-venv for the venv).
# The venv (pinned clients) is kept in WORK_DIR between runs; any install failure fails the test (no silent skip).
set -euo pipefail

if [ $# -ne 4 ]; then
  echo "usage: $0 SERVER_BINARY SYSTEM_PYTHON SOURCE_DIR WORK_DIR" >&2
  exit 2
fi
mkdir -p "$4"
SERVER=$(realpath "$1") SYSTEM_PYTHON=$2 SOURCE=$(cd "$3" && pwd) WORK=$(cd "$4" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REQUIREMENTS=("openai==3.51.0" "tritonclient[grpc]==2.73.0")
MODEL=tiny_sim
TOKEN=s3cret-llm
START=$(date +%s)
SERVER_PID=""

log() { echo "[openai_peers +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "openai_peers_test: FAILED: $*" >&2
  if [ -f "$WORK/server.log" ]; then
    echo "---- server log (tail) ----" >&2
    tail -n 30 "$WORK/server.log" >&2
  fi
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
# shellcheck source=../server_process.sh
source "$(dirname "$0")/../server_process.sh"

# ---- 1. clients from PyPI (pinned) ------------------------------------------------------------------------------
VENV=$WORK/venv
STAMP=$VENV/.sluice-installed
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "${REQUIREMENTS[*]}" ] ||
   ! "$VENV/bin/python" -c 'import openai, tritonclient.grpc' 2>/dev/null; then
  log "creating $VENV with ${REQUIREMENTS[*]}"
  rm -rf "$VENV"
  "$SYSTEM_PYTHON" -m venv "$VENV" || fail "'$SYSTEM_PYTHON -m venv' failed (Debian's python3 needs python3-venv)"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check -q "${REQUIREMENTS[@]}" ||
    fail "pip could not install ${REQUIREMENTS[*]} (PyPI unreachable?)"
  echo "${REQUIREMENTS[*]}" > "$STAMP"
fi

# ---- 2. the model: sim device, tokenizer trained here; the reference answers --------------------------------------
REPO=$WORK/models
rm -rf "$REPO"
mkdir -p "$REPO/$MODEL"
"$SYSTEM_PYTHON" "$SOURCE/backend/compile/llm_tokenizer.py" "$REPO/$MODEL" > "$WORK/tokenizer.log" 2>&1 ||
  fail "training the tokenizer: $(cat "$WORK/tokenizer.log")"
# base_ms 10: a 200-token generation takes >= 2 s, so the disconnect check can see it end early.
cat > "$REPO/$MODEL/config.yaml" <<EOF
name: $MODEL
kind: generation
generation:
  tokenizer: tokenizer.model
  vocab_size: 2000
  context_length: 256
  kv_cache: {slots: 4, layers: 1, kv_heads: 1, head_dim: 8}
  prefill_lengths: [16, 64, 128]
  decode_batch_sizes: [1, 2, 4]
  kv_lengths: [128, 256]
  bos_token_id: 1
  eos_token_id: 2
  max_num_seqs: 4
  prefill_token_budget: 128
  max_queue_size: 16
  default_max_tokens: 12
instances: [{count: 1, device: sim}]
sim: {base_ms: 10, per_sample_us: 0}
EOF
cat > "$WORK/cases.json" <<'EOF'
{"plain": {"prompt": "Once upon a time", "max_tokens": 16},
 "ids": {"prompt": [1, 200, 300, 400], "max_tokens": 8},
 "chat": {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something."}],
          "max_tokens": 12}}
EOF
# The default chat template (backend/base/generation_config.h).
TEMPLATE='{"system": "System: ", "user": "User: ", "assistant": "Assistant: ", "separator": "\n"}'
"$SYSTEM_PYTHON" "$HERE/openai_peers_reference.py" "$REPO/$MODEL/tokenizer.model" 2000 1 2 "$TEMPLATE" \
  "$WORK/cases.json" "$WORK/reference.json" || fail "openai_peers_reference.py"

# ---- 3. the server ------------------------------------------------------------------------------------------------
cat > "$WORK/server.yaml" <<EOF
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $REPO
log_level: info
drain_grace_seconds: 30
auth: {bearer_token: $TOKEN}
EOF
start_sluice_server "$WORK/server.yaml" "$WORK/server.log" 60
log "$READY_LINE"

# ---- 4. the clients -----------------------------------------------------------------------------------------------
timeout 300 "$VENV/bin/python" "$HERE/openai_peers_check.py" --http "$HTTP" --grpc "$GRPC" --model "$MODEL" \
  --reference "$WORK/reference.json" --token "$TOKEN" || fail "openai_peers_check.py"

# ---- 5. drain -----------------------------------------------------------------------------------------------------
drain_sluice_server 60
log "openai_peers_test: PASSED"
