#!/usr/bin/env bash
# Independent clients, unmodified, from PyPI against the real sluice-server: the proof that existing Triton/KServe
# users can point their tools at sluice. Registered with CTest (tests/server/CMakeLists.txt):
#   triton_peers_test.sh SERVER_BINARY MODELS_DIR TORCH_PYTHON WORK_DIR
# 1. A venv in WORK_DIR (kept between runs) with tritonclient[all] and grpcio-reflection, and Triton's
#    perf_analyzer binary from the perf-analyzer wheel. Any install failure fails the test (no silent skip).
# 2. TORCH_PYTHON (Debian's python3 + torch) dumps reference cases of both example models to .npz.
# 3. sluice-server on 127.0.0.1 with ports chosen by the OS, on MODELS_DIR.
# 4. triton_peers_check.py: gRPC reflection, tritonclient gRPC + HTTP metadata/config/stats and inference on both
#    models against the reference (within 1e-4).
# 5. perf_analyzer concurrency sweeps 1..4 over gRPC and HTTP on both models: must finish without errors.
# 6. SIGTERM: the server drains and exits 0.
# Loopback only; bounded (each step has a timeout; about a minute once the venv exists).
set -euo pipefail

if [ $# -ne 4 ]; then
  echo "usage: $0 SERVER_BINARY MODELS_DIR TORCH_PYTHON WORK_DIR" >&2
  exit 2
fi
SERVER=$1 MODELS=$(cd "$2" && pwd) TORCH_PYTHON=$3 WORK=$4
HERE=$(cd "$(dirname "$0")" && pwd)
VENV_PYTHON=${SLUICE_VENV_PYTHON:-python3}  # any python3 with venv; Debian's needs python3-venv
REQUIREMENTS=("tritonclient[all]" "grpcio-reflection")
PERF_ANALYZER_REQUIREMENT="perf-analyzer>=2.58"
START=$(date +%s)
SERVER_PID=""

log() { echo "[triton_peers +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "triton_peers_test: FAILED: $*" >&2
  if [ -n "$SERVER_PID" ] && [ -f "$WORK/server.log" ]; then
    echo "---- server log (tail) ----" >&2
    tail -n 30 "$WORK/server.log" >&2
  fi
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT

mkdir -p "$WORK"

# ---- 1. clients from PyPI ---------------------------------------------------------------------------------------
VENV=$WORK/venv
STAMP=$VENV/.sluice-installed
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "${REQUIREMENTS[*]}" ] ||
   ! "$VENV/bin/python" -c 'import tritonclient.grpc, tritonclient.http, grpc_reflection' 2>/dev/null; then
  log "creating $VENV with ${REQUIREMENTS[*]}"
  rm -rf "$VENV"
  "$VENV_PYTHON" -m venv "$VENV" ||
    fail "'$VENV_PYTHON -m venv' failed (Debian's python3 needs python3-venv: deploy/install-deps.sh)"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check -q "${REQUIREMENTS[@]}" ||
    fail "pip could not install ${REQUIREMENTS[*]} (PyPI unreachable?)"
  echo "${REQUIREMENTS[*]}" > "$STAMP"
fi
log "venv: $("$VENV/bin/pip" list 2>/dev/null | grep -i -E '^(tritonclient|grpcio|grpcio-reflection) ' | tr -s ' ' | paste -sd, -)"

# perf-analyzer's wheels carry a prebuilt binary tagged manylinux_2_38 (glibc 2.38, GCC 13's libstdc++). On an
# older glibc (Debian 12 has 2.36) a plain `pip install perf-analyzer` picks the binary-less 0.1.0 placeholder,
# so the real wheel is asked for by platform and unpacked into its own folder.
PA_DIR=$WORK/perf_analyzer
PA_BIN=$PA_DIR/perf_analyzer/bin/perf_analyzer
if [ ! -f "$PA_BIN" ]; then
  log "installing $PERF_ANALYZER_REQUIREMENT (manylinux_2_38_$(uname -m) wheel)"
  rm -rf "$PA_DIR"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check -q --no-deps --only-binary=:all: \
    --platform "manylinux_2_38_$(uname -m)" --target "$PA_DIR" "$PERF_ANALYZER_REQUIREMENT" ||
    fail "pip could not install $PERF_ANALYZER_REQUIREMENT (PyPI unreachable?)"
fi
chmod +x "$PA_BIN"

# The binary needs glibc >= 2.38 and libstdc++ with GLIBCXX_3.4.32. Where the system's are older, run it with
# Debian 13 (trixie)'s libc6/libstdc++6/libgcc-s1, fetched by apt-get into WORK_DIR (private lists, nothing
# installed system-wide) and loaded through their own dynamic loader.
PERF_ANALYZER=("$PA_BIN")
if ! "$PA_BIN" --version >/dev/null 2>"$WORK/pa_version.err"; then
  grep -q -E "GLIBC(XX)?_[0-9.]+' not found" "$WORK/pa_version.err" ||
    fail "perf_analyzer --version: $(cat "$WORK/pa_version.err")"
  RT=$WORK/trixie-runtime
  if [ ! -f "$RT/.complete" ]; then
    log "system glibc $(ldd --version | head -1 | awk '{print $NF}') is too old for perf_analyzer;" \
        "fetching Debian trixie's libc6, libstdc++6, libgcc-s1 into $RT"
    rm -rf "$RT"
    mkdir -p "$RT/lists/partial" "$RT/cache/archives/partial" "$RT/debs" "$RT/root"
    # The mirror this machine's apt already uses for its own release.
    CODENAME=$(. /etc/os-release && echo "$VERSION_CODENAME")
    MIRROR=$(apt-cache policy libc6 | awk -v s="$CODENAME/main" '$3 == s && $2 ~ /^https?:/ {print $2; exit}')
    [ -n "$MIRROR" ] || fail "cannot find this machine's Debian mirror in 'apt-cache policy libc6'"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie main" > "$RT/sources.list"
    APT_OPTS=(-o "Dir::Etc::SourceList=$RT/sources.list" -o Dir::Etc::SourceParts=/nonexistent
              -o "Dir::State::Lists=$RT/lists" -o "Dir::Cache=$RT/cache" -o Dir::State::status=/dev/null
              -o APT::Sandbox::User=root -o "APT::Architecture=$(dpkg --print-architecture)")
    timeout 300 apt-get "${APT_OPTS[@]}" -qq update || fail "apt-get update (trixie lists) failed"
    (cd "$RT/debs" && timeout 300 apt-get "${APT_OPTS[@]}" -qq download libc6 libstdc++6 libgcc-s1) ||
      fail "apt-get download libc6 libstdc++6 libgcc-s1 (trixie) failed"
    for deb in "$RT"/debs/*.deb; do dpkg-deb -x "$deb" "$RT/root"; done
    rm -rf "$RT/lists" "$RT/cache"
    touch "$RT/.complete"
  fi
  LIBDIR=$(dirname "$(ls "$RT"/root/usr/lib/*-linux-gnu/ld-linux*.so.* | sed -n 1p)")  # not head: SIGPIPE, pipefail
  PERF_ANALYZER=("$(ls "$LIBDIR"/ld-linux*.so.* | sed -n 1p)" --library-path "$LIBDIR" "$PA_BIN")
fi
"${PERF_ANALYZER[@]}" --version > "$WORK/pa_version.txt" 2>&1 || fail "perf_analyzer --version: $(cat "$WORK/pa_version.txt")"
log "perf_analyzer runs: $(basename "$PA_DIR"/perf_analyzer-*.dist-info .dist-info), $(head -1 "$WORK/pa_version.txt")${PERF_ANALYZER[1]:+ (with the trixie glibc)}"

# ---- 2. reference cases -----------------------------------------------------------------------------------------
mkdir -p "$WORK/references"
# Start the server first: it loads and warms every bucket (the slow part) while the references are dumped.
# The two KServe example models only (the example LLM and the digits recognizer are served by their own tests).
rm -rf "$WORK/models" && mkdir -p "$WORK/models"
ln -s "$MODELS/asr_ctc" "$MODELS/text_embed" "$WORK/models/"
cat > "$WORK/server.yaml" <<EOF
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $WORK/models
log_level: info
drain_grace_seconds: 60
EOF
"$SERVER" --config "$WORK/server.yaml" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
for model in asr_ctc text_embed; do
  timeout 120 "$TORCH_PYTHON" "$HERE/dump_reference.py" "$MODELS/$model" "$WORK/references/$model.npz" \
    --max-length 64000 || fail "dump_reference.py $model"
done

# ---- 3. the server ----------------------------------------------------------------------------------------------
for _ in $(seq 1 900); do
  grep -q '^sluice-server READY ' "$WORK/server.log" && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "sluice-server exited before READY"
  sleep 0.2
done
READY_LINE=$(grep '^sluice-server READY ' "$WORK/server.log") || fail "sluice-server not READY after 180 s"
GRPC=$(sed -n 's/.* grpc=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
HTTP=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
log "$READY_LINE"

# ---- 4. tritonclient + reflection -------------------------------------------------------------------------------
timeout 180 "$VENV/bin/python" "$HERE/triton_peers_check.py" --grpc "$GRPC" --http "$HTTP" \
  --references "$WORK/references" || fail "triton_peers_check.py"

# ---- 5. perf_analyzer -------------------------------------------------------------------------------------------
# asr_ctc gets real audio (a 16000-sample reference case: perf_analyzer's random FP32 bytes include NaN, which
# sluice rightly refuses); text_embed gets zero ids (perf_analyzer's random INT64 values lie outside the model's
# declared token range [0, vocab-1], which sluice rightly refuses too).
"$VENV/bin/python" - "$WORK/references/asr_ctc.npz" "$WORK/asr_ctc_data.json" <<'EOF' || fail "writing asr_ctc_data.json"
import json, sys
import numpy as np
data = np.load(sys.argv[1])
audio = next(data[k] for k in data.files if k.startswith("input") and data[k].shape[0] == 16000)
json.dump({"data": [{"audio": {"content": audio.astype(float).tolist(), "shape": [16000]}}]}, open(sys.argv[2], "w"))
EOF
# Concurrency 1..4 in 1-s windows. -s 1000 accepts any three consecutive windows whose throughput and latency
# are within 11x of each other as stable: the test is about compatibility, not precise numbers. A stall of the
# whole machine (other builds) can still break that for --max-trials 5 windows; perf_analyzer then says "Failed to
# obtain stable measurement", and the run is repeated (3 tries). Any other error fails at once.
perf() {  # PROTOCOL ADDRESS MODEL INPUT-ARGS...
  local protocol=$1 address=$2 model=$3
  shift 3
  local out="$WORK/perf_${protocol}_${model}.log" try
  for try in 1 2 3; do
    log "perf_analyzer -i $protocol -m $model --concurrency-range 1:4:1 -p 1000 -s 1000 --max-trials 5 $* (try $try)"
    local rc=0
    timeout 150 "${PERF_ANALYZER[@]}" -m "$model" -u "$address" -i "$protocol" --concurrency-range 1:4:1 \
      --measurement-interval 1000 --stability-percentage 1000 --max-trials 5 "$@" > "$out" 2>&1 || rc=$?
    if grep -q 'Failed to obtain stable measurement' "$out" && [ "$try" -lt 3 ]; then
      grep 'Failed to obtain stable measurement' "$out" | sed -n '1s/^/  unstable (busy machine?), again: /p'
      continue
    fi
    if [ "$rc" -ne 0 ] || grep -i -q -E 'error|failed' "$out" || [ "$(grep -c -E '^Concurrency: ' "$out")" -ne 4 ]; then
      cat "$out" >&2
      fail "perf_analyzer -i $protocol -m $model: exit $rc or errors reported"
    fi
    break
  done
  grep -E '^Concurrency: ' "$out" | sed "s/^/  perf_analyzer $protocol $model: /"
  grep -E 'Avg request latency' "$out" | tail -1 | sed "s/^ */  perf_analyzer $protocol $model, concurrency 4, server side: /"
}
for protocol in grpc http; do
  address=$GRPC
  [ "$protocol" = http ] && address=$HTTP
  perf "$protocol" "$address" text_embed --shape input_ids:32 --input-data zero
  perf "$protocol" "$address" asr_ctc --input-data "$WORK/asr_ctc_data.json"
done

# ---- 6. drain ---------------------------------------------------------------------------------------------------
kill -TERM "$SERVER_PID"
for _ in $(seq 1 450); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
kill -0 "$SERVER_PID" 2>/dev/null && fail "sluice-server still running 90 s after SIGTERM"
code=0
wait "$SERVER_PID" || code=$?
SERVER_PID=""
[ "$code" -eq 0 ] || fail "sluice-server exited $code after SIGTERM"
grep -E 'drained (asr_ctc|text_embed)' "$WORK/server.log" | sed 's/^.*\] /  /'
log "triton_peers_test: PASSED"
