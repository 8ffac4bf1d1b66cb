#!/usr/bin/env bash
# Cross-check of sluice-loadtest's generation mode with NVIDIA's aiperf (PyPI, pinned): both load the same
# sluice-server (a generation model on the `sim` device, 10 ms per engine step, tokenizer trained here by
# backend/compile/llm_tokenizer.py and also written as a Hugging Face tokenizer for aiperf) at a few concurrency
# levels with the same shape of work (fixed prompt and output lengths, ignore_eos), and their TTFT, ITL and output
# tokens/s are printed side by side (WORK_DIR/crosscheck.md). Asserted: aiperf completes every level with zero
# errors and exactly the requests asked for; the server's sluice_generation_requests_total grows by exactly what
# aiperf reports (and by what sluice-loadtest reports); sluice-loadtest sees no usage mismatch. The timing numbers
# are for the reader, never asserted. Registered with CTest (label llm_peers):
#   aiperf_crosscheck.sh SERVER_BINARY LOADTEST_BINARY SYSTEM_PYTHON SOURCE_DIR WORK_DIR [LEVELS] [REQUESTS]
# The venv is kept in WORK_DIR between runs; any install failure fails the test (no silent skip).
set -euo pipefail

if [ $# -lt 5 ]; then
  echo "usage: $0 SERVER_BINARY LOADTEST_BINARY SYSTEM_PYTHON SOURCE_DIR WORK_DIR [LEVELS] [REQUESTS]" >&2
  exit 2
fi
mkdir -p "$5"
SERVER=$(realpath "$1") LOADTEST=$(realpath "$2") SYSTEM_PYTHON=$3 SOURCE=$(cd "$4" && pwd) WORK=$(cd "$5" && pwd)
LEVELS=${6:-"1 4 8"} REQUESTS=${7:-64}
PROMPT_TOKENS=64 OUTPUT_TOKENS=32
REQUIREMENTS=("aiperf==0.13.0")  # brings transformers and sentencepiece (the HF tokenizer below)
MODEL=tiny_sim
START=$(date +%s)
SERVER_PID=""

log() { echo "[aiperf_crosscheck +$(( $(date +%s) - START ))s] $*"; }
fail() {
  echo "aiperf_crosscheck: FAILED: $*" >&2
  [ -f "$WORK/server.log" ] && { echo "---- server log (tail) ----" >&2; tail -n 20 "$WORK/server.log" >&2; }
  exit 1
}
cleanup() { if [ -n "$SERVER_PID" ]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
mkdir -p "$WORK"

# ---- 1. aiperf from PyPI (pinned) ---------------------------------------------------------------------------------
VENV=$WORK/venv
STAMP=$VENV/.sluice-installed
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "${REQUIREMENTS[*]}" ] || [ ! -x "$VENV/bin/aiperf" ]; then
  log "creating $VENV with ${REQUIREMENTS[*]}"
  rm -rf "$VENV"
  "$SYSTEM_PYTHON" -m venv "$VENV" || fail "'$SYSTEM_PYTHON -m venv' failed (Debian's python3 needs python3-venv)"
  timeout 1200 "$VENV/bin/pip" install --disable-pip-version-check -q "${REQUIREMENTS[@]}" ||
    fail "pip could not install ${REQUIREMENTS[*]} (PyPI unreachable?)"
  echo "${REQUIREMENTS[*]}" > "$STAMP"
fi
PY=$VENV/bin/python

# ---- 2. the model (sim device), its SentencePiece tokenizer, and the same tokenizer in Hugging Face form ----------
REPO=$WORK/models
rm -rf "$REPO"
mkdir -p "$REPO/$MODEL"
"$SYSTEM_PYTHON" "$SOURCE/backend/compile/llm_tokenizer.py" "$REPO/$MODEL" > "$WORK/tokenizer.log" 2>&1 ||
  fail "training the tokenizer: $(cat "$WORK/tokenizer.log")"
cat > "$REPO/$MODEL/config.yaml" <<YAML
name: $MODEL
kind: generation
generation:
  tokenizer: tokenizer.model
  vocab_size: 2000
  context_length: 512
  kv_cache: {slots: 8, layers: 1, kv_heads: 1, head_dim: 8}
  prefill_lengths: [128, 256]
  decode_batch_sizes: [1, 2, 4, 8]
  kv_lengths: [256, 512]
  bos_token_id: 1
  eos_token_id: 2
  max_num_seqs: 8
  prefill_token_budget: 512
  max_queue_size: 256
  default_max_tokens: 32
instances: [{count: 1, device: sim}]
sim: {base_ms: 10, per_sample_us: 0}
YAML
HF=$WORK/hf_tokenizer
rm -rf "$HF" "$HF.src"
mkdir -p "$HF.src"
cp "$REPO/$MODEL/tokenizer.model" "$HF.src/"
echo '{"tokenizer_class": "LlamaTokenizer", "add_bos_token": true, "add_eos_token": false, "legacy": true}' \
  > "$HF.src/tokenizer_config.json"
# Converted once from the SentencePiece model; it must encode as the server does (BOS + the same ids).
"$PY" - "$HF.src" "$HF" "$REPO/$MODEL/tokenizer.model" <<'PYEOF' || fail "writing the Hugging Face tokenizer"
import sys
import sentencepiece
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
text = "Once upon a time there was a river."
expected = [1] + sentencepiece.SentencePieceProcessor(model_file=sys.argv[3]).encode(text)
assert tok.encode(text) == expected, (tok.encode(text), expected)
tok.save_pretrained(sys.argv[2])
PYEOF

# ---- 3. the server ------------------------------------------------------------------------------------------------
cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $REPO
log_level: warn
YAML
"$SERVER" --config "$WORK/server.yaml" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
  grep -q '^sluice-server READY ' "$WORK/server.log" && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "sluice-server exited before READY"
  sleep 0.2
done
READY_LINE=$(grep '^sluice-server READY ' "$WORK/server.log") || fail "sluice-server not READY after 60 s"
HTTP=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
log "$READY_LINE"

# The server's generation requests so far (every outcome).
server_requests() {
  "$PY" - "http://$HTTP/metrics" <<'PYEOF'
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
print(int(sum(float(m.group(1)) for m in re.finditer(r'^sluice_generation_requests_total\{[^}]*\} (\S+)$', text, re.M))))
PYEOF
}

# ---- 4. the same load from both tools at each level ---------------------------------------------------------------
ROWS=$WORK/rows.jsonl
: > "$ROWS"
for C in $LEVELS; do
  ART=$WORK/aiperf_c$C
  rm -rf "$ART"
  before=$(server_requests)
  log "aiperf: concurrency $C, $REQUESTS requests"
  timeout 900 "$VENV/bin/aiperf" profile --model "$MODEL" --url "http://$HTTP" --endpoint-type completions \
      --streaming --use-server-token-count --tokenizer "$HF" --concurrency "$C" --request-count "$REQUESTS" --random-seed 1 \
      --synthetic-input-tokens-mean "$PROMPT_TOKENS" --synthetic-input-tokens-stddev 0 \
      --output-tokens-mean "$OUTPUT_TOKENS" --output-tokens-stddev 0 --extra-inputs ignore_eos:true \
      --artifact-dir "$ART" --ui-type none > "$WORK/aiperf_c$C.log" 2>&1 ||
    fail "aiperf at concurrency $C exited $? ($(tail -n 5 "$WORK/aiperf_c$C.log"))"
  after=$(server_requests)
  SUMMARY=$(find "$ART" -name 'profile_export_aiperf.json' | sed -n 1p)  # not head: SIGPIPE under pipefail
  [ -n "$SUMMARY" ] || fail "aiperf wrote no profile_export_aiperf.json under $ART"

  log "sluice-loadtest: concurrency $C, $REQUESTS requests"
  mid=$(server_requests)
  "$LOADTEST" --no-progress --api openai -m "$MODEL" -u "$HTTP" --model-repository "$REPO" \
      --prompt-tokens "fixed:$PROMPT_TOKENS" --output-tokens "fixed:$OUTPUT_TOKENS" -c "$C" -n "$REQUESTS" \
      --json "$WORK/sluice_c$C.json" > "$WORK/sluice_c$C.log" 2>&1 ||
    fail "sluice-loadtest at concurrency $C: $(tail -n 5 "$WORK/sluice_c$C.log")"
  end=$(server_requests)

  "$PY" - "$C" "$REQUESTS" "$SUMMARY" "$WORK/sluice_c$C.json" "$before" "$after" "$mid" "$end" >> "$ROWS" <<'PYEOF' ||
import json, sys
c, n, aiperf_path, sluice_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
before, after, mid, end = map(int, sys.argv[5:9])
a = json.load(open(aiperf_path))
s = json.load(open(sluice_path))
def metric(name, stat="avg"):
    m = a.get(name) or a.get("metrics", {}).get(name) or {}
    return m.get(stat)
errors = metric("error_request_count") or 0
requests = metric("request_count")
g = s["results"]["generation"]
problems = []
if errors:
    problems.append(f"aiperf reports {errors} errors")
if requests != n:
    problems.append(f"aiperf reports {requests} requests, not {n}")
if after - before != requests:
    problems.append(f"the server counted {after - before} generation requests during aiperf's run, aiperf {requests}")
if end - mid != s["results"]["requests"] or s["results"]["ok"] != n:
    problems.append(f"sluice-loadtest: {s['results']['ok']} ok of {s['results']['requests']}, server counted {end - mid}")
if g["usage_mismatches"]:
    problems.append(f"sluice-loadtest: {g['usage_mismatches']} usage mismatches")
row = {"c": c, "problems": problems,
       "aiperf": {"ttft_avg": metric("time_to_first_token"), "ttft_p50": metric("time_to_first_token", "p50"),
                  "ttft_p99": metric("time_to_first_token", "p99"), "itl_avg": metric("inter_token_latency"),
                  "itl_p50": metric("inter_token_latency", "p50"), "out_tps": metric("output_token_throughput"),
                  "rps": metric("request_throughput"), "osl": metric("output_sequence_length"),
                  "isl": metric("input_sequence_length")},
       "sluice": {"ttft_avg": g["ttft_ms"]["mean"], "ttft_p50": g["ttft_ms"]["p50"], "ttft_p99": g["ttft_ms"]["p99"],
                  "itl_avg": g["tpot_ms"]["mean"], "itl_p50": g["tpot_ms"]["p50"],
                  "gap_p50": g["itl_ms"]["p50"], "out_tps": g["output_tokens_per_s"],
                  "rps": s["results"]["req_per_s"], "osl": g["mean_output_tokens"], "isl": g["mean_prompt_tokens"]},
       "server_requests": {"aiperf": after - before, "sluice": end - mid}}
print(json.dumps(row))
sys.exit(1 if problems else 0)
PYEOF
    fail "concurrency $C: $(tail -n 1 "$ROWS")"
done

# ---- 5. side by side ----------------------------------------------------------------------------------------------
"$PY" - "$ROWS" "$PROMPT_TOKENS" "$OUTPUT_TOKENS" "$REQUESTS" > "$WORK/crosscheck.md" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"sluice-loadtest vs aiperf, {sys.argv[4]} requests per level, prompt {sys.argv[2]} tokens (aiperf: synthetic "
      f"text; sluice-loadtest: token ids), {sys.argv[3]} output tokens (ignore_eos), sim model at 10 ms per step\n")
print("| conc | TTFT avg ms (sluice / aiperf) | TTFT p50 | ITL avg ms (sluice TPOT / aiperf) | out tok/s (sluice / aiperf) | req/s | ISL | OSL |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
f = lambda x, d=1: "-" if x is None else f"{x:.{d}f}"
def pct(s, a):
    return "" if s is None or a in (None, 0) else f" ({100 * (s - a) / a:+.0f} %)"
for r in rows:
    s, a = r["sluice"], r["aiperf"]
    print(f"| {r['c']} | {f(s['ttft_avg'])} / {f(a['ttft_avg'])}{pct(s['ttft_avg'], a['ttft_avg'])} | "
          f"{f(s['ttft_p50'])} / {f(a['ttft_p50'])} | {f(s['itl_avg'], 2)} / {f(a['itl_avg'], 2)}{pct(s['itl_avg'], a['itl_avg'])} | "
          f"{f(s['out_tps'])} / {f(a['out_tps'])}{pct(s['out_tps'], a['out_tps'])} | {f(s['rps'], 2)} / {f(a['rps'], 2)} | "
          f"{f(s['isl'])} / {f(a['isl'])} | {f(s['osl'])} / {f(a['osl'])} |")
PYEOF
cat "$WORK/crosscheck.md"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""
log "aiperf_crosscheck: PASSED"
