#!/usr/bin/env bash
# Issue 23 against a real sluice-server: prompts too long in bytes are refused from their size (400 naming the
# limit, before any tokenizing), tokenizing runs off the HTTP event loop (/v2/health/live keeps answering while
# many long prompts are handled), every error body is valid JSON (invalid UTF-8 echoed back included), range errors
# report the value sent and name the field. Torch-free: a sim-device generation model with llama_tiny's tokenizer.
#   bounded_prompt_test.sh SERVER_BINARY MODELS_DIR PYTHON WORK_DIR
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 SERVER_BINARY MODELS_DIR PYTHON WORK_DIR" >&2; exit 2; }
SERVER=$1 MODELS=$(cd "$2" && pwd) PYTHON=$3 WORK=$4
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "bounded_prompt_test: FAIL: $*" >&2; [ -f "$WORK/server.log" ] && tail -20 "$WORK/server.log" >&2; exit 1; }
SERVER_PID=""
trap 'if [ -n "$SERVER_PID" ]; then kill -9 "$SERVER_PID" 2>/dev/null || true; fi' EXIT
# shellcheck source=../server_process.sh
source "$HERE/../server_process.sh"

rm -rf "$WORK" && mkdir -p "$WORK/models/tiny_sim"
cp "$MODELS/llama_tiny/tokenizer.model" "$WORK/models/tiny_sim/"
cat > "$WORK/models/tiny_sim/config.yaml" <<YAML
name: tiny_sim
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
  default_max_tokens: 4
instances: [{count: 1, device: sim}]
sim: {base_ms: 1, per_sample_us: 0}
YAML
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/models
log_level: info
YAML
start_sluice_server "$WORK/server.yaml" "$WORK/server.log" 60

timeout 300 "$PYTHON" "$HERE/bounded_prompt_check.py" "$HTTP" || fail "bounded_prompt_check.py"

drain_sluice_server 30
echo "bounded_prompt_test: PASS"
