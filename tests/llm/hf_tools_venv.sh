# Sourced by hf_arch_test.sh and smollm2_test.sh: ensure_hf_tools_venv WORK_DIR makes WORK_DIR/venv (kept between
# runs; --system-site-packages, so Debian's torch 1.13, numpy and sentencepiece are used) with
# requirements-hf-tools.txt and sets VENV_BIN. PyPI unreachable on the first run: exit 77 (CTest SKIP); any other
# install failure fails. Needs log() and fail() from the caller.
ensure_hf_tools_venv() {
  local work here requirements want stamp venv index
  work=$(cd "$1" && pwd)
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  requirements=$here/requirements-hf-tools.txt
  venv=$work/venv
  stamp=$venv/.sluice-installed
  want=$(cat "$requirements" "$here/requirements-hf.txt" | sha256sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] ||
     ! "$venv/bin/python" -c 'import transformers, gguf, safetensors' 2>/dev/null; then
    index=${PIP_INDEX_URL:-https://pypi.org/simple}
    if ! /usr/bin/python3 - "$index" <<'PY' 2>"$work/probe.err"; then
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/transformers/", timeout=15).read(1)
PY
      echo "SKIPPED: package index $index unreachable ($(tail -1 "$work/probe.err"))"
      exit 77
    fi
    log "creating $venv from $requirements"
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv" ||
      fail "'/usr/bin/python3 -m venv' failed (Debian's python3 needs python3-venv: deploy/install-deps.sh)"
    (cd "$here" && timeout 600 "$venv/bin/pip" install --disable-pip-version-check -q --require-hashes -r "$requirements") ||
      fail "pip could not install $requirements"
    "$venv/bin/python" -c 'import torch, transformers, gguf, safetensors' ||
      fail "the venv's packages do not import with this torch"
    echo "$want" > "$stamp"
  fi
  VENV_BIN=$venv/bin
  log "venv: $("$VENV_BIN/python" -c 'import torch, transformers; print(f"transformers {transformers.__version__}, torch {torch.__version__}")')"
}
