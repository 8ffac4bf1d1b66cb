#!/usr/bin/env bash
# loadtest/bench/chunked_prefill_bench.sh: what a long prompt does to running streams, with and without chunked
# prefill (issue 30). 15 streams decode (closed loop, -c 15, short prompts, long outputs, ignore_eos); a second
# sluice-loadtest sends one long prompt (max_tokens 1) every --interval seconds (near-regular: Gamma arrivals of
# burstiness 100). The figure: the streams' p99 (and max) inter-token latency, alone and with the long prompts,
# on the same server, one right after the other; and the long prompts' TTFT.
#
# Models (written into a temp repository):
#   sim:        `llm_sim`, device sim, sim: {base_ms: 10, per_sample_us: 200} (backend/sim_generation_backend.h:
#               prefill/chunk 10 ms + 0.2 ms x the compiled length; decode 10 ms + 0.2 ms x batch x KV / 64),
#               context 2048, prompt buckets up to 1024, 16 slots; the long prompt has 1024 tokens.
#   llama_tiny: a copy of the exported build/models/llama_tiny (CPU, one intra-op thread); the long prompt has 1000
#               tokens (prompt + max_tokens must fit its 1024 context).
# Configurations, each on a fresh server, interleaved in every repeat:
#   whole:    no prefill_chunk_lengths (each prompt prefilled whole, before the iteration's decode step)
#   c128:     prefill_chunk_lengths [32, 128], iteration_token_budget 144 (16 + 128: one 128-token chunk a step)
#   c32:      prefill_chunk_lengths [32, 128], iteration_token_budget 48 (16 + 32: one 32-token chunk a step)
#
# Usage: loadtest/bench/chunked_prefill_bench.sh [--model sim|llama_tiny] [--duration S] [--warmup S]
#                                [--interval S] [--repeats N] [--server PATH] [--loadtest PATH] [--out DIR]
#   defaults: sim, 20 s, 3 s, 2 s, 2, build/server/sluice-server, build/loadtest/sluice-loadtest, a new
#   /tmp/sluice-chunked.XXXXXX. Takes about repeats x 3 x (2 x (warm-up + duration) + 5 s).
# A benchmark, not a test: nothing passes or fails on a number. Logs and JSON reports stay in the output folder.
# Traffic goes to 127.0.0.1 only; every process started here is stopped on exit.
set -euo pipefail

HERE=$(dirname "$(realpath "$0")")
ROOT=$(realpath "$HERE/../..")
SERVER=build/server/sluice-server LOADTEST=build/loadtest/sluice-loadtest
MODEL=sim DURATION=20 WARMUP=3 INTERVAL=2 REPEATS=2 OUT=
usage() { sed -n '/^# Usage:/,/^#   \/tmp/p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
while (($#)); do
  case $1 in
    --model) MODEL=$2 ;;
    --duration) DURATION=$2 ;;
    --warmup) WARMUP=$2 ;;
    --interval) INTERVAL=$2 ;;
    --repeats) REPEATS=$2 ;;
    --server) SERVER=$2 ;;
    --loadtest) LOADTEST=$2 ;;
    --out) OUT=$2 ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
  (($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
PY=/usr/bin/python3
for bin in "$SERVER" "$LOADTEST"; do [[ -x $bin ]] || { echo "missing $bin (--server/--loadtest)" >&2; exit 2; }; done
SERVER=$(realpath "$SERVER") LOADTEST=$(realpath "$LOADTEST")
[[ $MODEL == sim || $MODEL == llama_tiny ]] || { echo "--model must be sim or llama_tiny" >&2; exit 2; }
WORK=${OUT:-$(mktemp -d /tmp/sluice-chunked.XXXXXX)}
mkdir -p "$WORK"
source "$HERE/bench_lib.sh"

# The repository of one configuration: $WORK/repo-<config>/<model>/.
write_repository() {
  local config=$1 dir="$WORK/repo-$1"
  rm -rf "$dir"
  if [[ $MODEL == sim ]]; then
    mkdir -p "$dir/llm_sim"
    cp "$ROOT/build/models/llama_tiny/tokenizer.model" "$dir/llm_sim/"
    cat > "$dir/llm_sim/config.yaml" <<EOF
name: llm_sim
kind: generation
generation:
  tokenizer: tokenizer.model
  vocab_size: 2000
  context_length: 2048
  kv_cache: {slots: 16, layers: 1, kv_heads: 1, head_dim: 8}
  prefill_lengths: [64, 128, 256, 512, 1024]
  decode_batch_sizes: [1, 2, 4, 8, 16]
  kv_lengths: [256, 512, 1024, 2048]
  bos_token_id: 1
  eos_token_id: 2
  max_num_seqs: 16
  max_queue_size: 256
instances: [{count: 1, device: sim}]
sim: {base_ms: 10, per_sample_us: 200}
EOF
  else
    mkdir -p "$dir" && cp -a "$ROOT/build/models/llama_tiny" "$dir/"
    sed -i '/^  prefill_chunk_lengths:/d; /^  iteration_token_budget:/d; /^  decode_first:/d' \
      "$dir/llama_tiny/config.yaml"
  fi
  local yaml="$dir/$NAME/config.yaml"
  case $config in
    whole) ;;
    c128) sed -i 's/^  max_queue_size: 256$/&\n  prefill_chunk_lengths: [32, 128]\n  iteration_token_budget: 144/' "$yaml" ;;
    c32) sed -i 's/^  max_queue_size: 256$/&\n  prefill_chunk_lengths: [32, 128]\n  iteration_token_budget: 48/' "$yaml" ;;
  esac
  grep -q "max_queue_size: 256" "$yaml" || { echo "unexpected $yaml" >&2; exit 3; }
}

if [[ $MODEL == sim ]]; then NAME=llm_sim LONG=1024; else NAME=llama_tiny LONG=1000; fi
[[ $MODEL == sim ]] || [[ -f $ROOT/build/models/llama_tiny/graphs/prefill_chunk_c128_k256.pt ]] ||
  { echo "build/models/llama_tiny has no chunk graphs: re-export it (backend/compile/llama_export.py)" >&2; exit 2; }

streams() {  # streams OUT.json: 15 closed-loop streams, 64-token prompts, 96-160 output tokens (so they end apart)
  "$LOADTEST" --no-progress --api openai -m "$NAME" -u "$HTTP" --model-repository "$WORK/repo-$CONFIG" \
    --prompt-tokens fixed:64 --output-tokens uniform:96-160 -c 15 -d "$DURATION" --warmup "$WARMUP" --seed 1 \
    --json "$1" > "${1%.json}.txt" 2>&1
}
long_prompts() {  # long_prompts OUT.json: one long prompt every INTERVAL s, max_tokens 1
  "$LOADTEST" --no-progress --api openai -m "$NAME" -u "$HTTP" --model-repository "$WORK/repo-$CONFIG" \
    --prompt-tokens "fixed:$LONG" --output-tokens fixed:1 -r "$($PY -c "print(1 / $INTERVAL)")" --burstiness 100 \
    -d "$DURATION" --warmup "$WARMUP" --seed 2 --json "$1" > "${1%.json}.txt" 2>&1
}

for repeat in $(seq 1 "$REPEATS"); do
  for CONFIG in whole c128 c32; do
    write_repository "$CONFIG"
    start_repository_server "$SERVER" "$WORK/repo-$CONFIG" "server-$CONFIG-$repeat"
    step "$MODEL $CONFIG repeat $repeat: streams alone"
    streams "$WORK/$CONFIG-$repeat-alone.json"
    step "$MODEL $CONFIG repeat $repeat: streams + a $LONG-token prompt every $INTERVAL s"
    long_prompts "$WORK/$CONFIG-$repeat-long.json" &
    LONG_PID=$!
    streams "$WORK/$CONFIG-$repeat-mixed.json"
    wait "$LONG_PID"
    cut -d' ' -f1-3 /proc/loadavg > "$WORK/$CONFIG-$repeat-loadavg.txt"
    stop_server
  done
done

$PY - "$WORK" "$REPEATS" "$MODEL" <<'EOF'
import json, os, statistics, sys
work, repeats, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def get(path, *keys):
    with open(path) as f:
        v = json.load(f)["results"]["generation"]
    for k in keys:
        v = v[k]
    return v
rows = []
print(f"{model}: streams' ITL (ms) alone and with the long prompts; long prompts' TTFT (ms); per repeat, then median")
print(f"{'config':<7}{'rep':>4}{'ITL p99 alone':>15}{'ITL p99 mixed':>15}{'ratio':>7}{'ITL max mixed':>15}"
      f"{'long TTFT p50':>15}{'long reqs':>10}{'loadavg':>18}")
for config in ("whole", "c128", "c32"):
    ratios = []
    for r in range(1, repeats + 1):
        base = os.path.join(work, f"{config}-{r}")
        alone, mixed = get(base + "-alone.json", "itl_ms", "p99"), get(base + "-mixed.json", "itl_ms", "p99")
        ratios.append(mixed / alone)
        with open(base + "-loadavg.txt") as f:
            load = f.read().strip()
        print(f"{config:<7}{r:>4}{alone:>15.1f}{mixed:>15.1f}{mixed / alone:>7.2f}"
              f"{get(base + '-mixed.json', 'itl_ms', 'max'):>15.1f}{get(base + '-long.json', 'ttft_ms', 'p50'):>15.1f}"
              f"{get(base + '-long.json', 'requests'):>10}{load:>18}")
    print(f"{config:<7}{'med':>4}{'':>30}{statistics.median(ratios):>7.2f}  (ratios {min(ratios):.2f}-{max(ratios):.2f})")
EOF
echo "outputs in $WORK"
