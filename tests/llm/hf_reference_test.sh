#!/usr/bin/env bash
# Hugging Face transformers, unmodified, from PyPI, against sluice's exported llama_tiny: the proof that the
# example generation model is a real Llama (weights, tokenizer, rotary convention, GQA) and that its reference
# generations are what independent code produces. Registered with CTest (tests/llm/CMakeLists.txt, label
# llm_peers):
#   hf_reference_test.sh MODEL_DIR WORK_DIR
# 1. A venv in WORK_DIR (kept between runs; --system-site-packages, so Debian's torch 1.13, numpy and
#    sentencepiece are used) with the pinned transformers of requirements-hf.txt. PyPI unreachable on the first
#    run: exit 77 (CTest SKIP). Any other install failure fails the test.
# 2. hf_reference_check.py: LlamaTokenizer ids and greedy LlamaForCausalLM.generate() against
#    MODEL_DIR/reference_generation.json, token for token.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 MODEL_DIR WORK_DIR" >&2
  exit 2
fi
MODEL=$(cd "$1" && pwd) WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
VENV_PYTHON=${SLUICE_VENV_PYTHON:-/usr/bin/python3}  # must be the python whose site-packages hold torch
REQUIREMENTS=$HERE/requirements-hf.txt
START=$(date +%s)

log() { echo "[hf_reference +$(( $(date +%s) - START ))s] $*"; }
fail() { echo "hf_reference_test: FAILED: $*" >&2; exit 1; }

[ -f "$MODEL/hf/config.json" ] || fail "$MODEL/hf/config.json missing (export with backend/compile/llama_export.py)"
[ -f "$MODEL/reference_generation.json" ] || fail "$MODEL/reference_generation.json missing"
mkdir -p "$WORK"

# ---- 1. transformers from PyPI ----------------------------------------------------------------------------------
VENV=$WORK/venv
STAMP=$VENV/.sluice-installed
WANT=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ] ||
   ! "$VENV/bin/python" -c 'from transformers import LlamaForCausalLM, LlamaTokenizer' 2>/dev/null; then
  # Skip only when the index cannot be reached at all; once it answers, any failure is a real failure.
  INDEX=${PIP_INDEX_URL:-https://pypi.org/simple}
  if ! "$VENV_PYTHON" - "$INDEX" <<'PY' 2>"$WORK/probe.err"; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/transformers/", timeout=15).read(1)
PY
    echo "hf_reference_test: SKIPPED: package index $INDEX unreachable ($(tail -1 "$WORK/probe.err"))"
    exit 77
  fi
  log "creating $VENV with $(grep -o '^transformers==[^ ]*' "$REQUIREMENTS")"
  rm -rf "$VENV"
  "$VENV_PYTHON" -m venv --system-site-packages "$VENV" ||
    fail "'$VENV_PYTHON -m venv' failed (Debian's python3 needs python3-venv: deploy/install-deps.sh)"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check -q --require-hashes -r "$REQUIREMENTS" ||
    fail "pip could not install $REQUIREMENTS"
  "$VENV/bin/python" -c 'import torch; from transformers import LlamaForCausalLM, LlamaTokenizer' ||
    fail "transformers installed but does not import with this torch"
  echo "$WANT" > "$STAMP"
fi
VERSIONS='import torch, transformers; print(f"transformers {transformers.__version__}, torch {torch.__version__}")'
log "venv: $("$VENV/bin/python" -c "$VERSIONS")"

# ---- 2. tokenizer + greedy generation vs the reference ----------------------------------------------------------
timeout 300 "$VENV/bin/python" "$HERE/hf_reference_check.py" "$MODEL" || fail "hf_reference_check.py"
log "hf_reference_test: PASSED"
