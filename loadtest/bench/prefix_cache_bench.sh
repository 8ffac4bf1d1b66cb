#!/usr/bin/env bash
# Prefix caching's TTFT: prompts that all start with the same 512-token system prompt, on the sim (`llm_sim`,
# device sim, sim: {base_ms: 10, per_sample_us: 200}, chunks [32, 128], budget 144), with and without
# generation.prefix_cache_block_size: 64. sluice-loadtest --api openai, 4 closed-loop clients, prompts of the shared
# 512 ids + 64 drawn ids, 16 output tokens; each configuration on a fresh server, interleaved in every repeat.
#
# --model llama_tiny: the exported CPU llama_tiny (its own chunks [32, 128]) instead of the sim.
#
# Usage: loadtest/bench/prefix_cache_bench.sh [--model sim|llama_tiny] [--duration S] [--repeats N] [--out DIR]
#   defaults: sim, 15 s, 2, a new /tmp/sluice-prefix.XXXXXX
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SERVER=$ROOT/build/server/sluice-server LOADTEST=$ROOT/build/loadtest/sluice-loadtest
MODEL=sim DURATION=15 REPEATS=2 OUT=
while (($#)); do
  case $1 in
    --model) MODEL=$2 ;;
    --duration) DURATION=$2 ;;
    --repeats) REPEATS=$2 ;;
    --out) OUT=$2 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
  (($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
PY=/usr/bin/python3
[[ $MODEL == sim || $MODEL == llama_tiny ]] || { echo "--model must be sim or llama_tiny" >&2; exit 2; }
if [[ $MODEL == sim ]]; then NAME=llm_sim; else NAME=llama_tiny; fi
for bin in "$SERVER" "$LOADTEST"; do [[ -x $bin ]] || { echo "missing $bin: build first" >&2; exit 2; }; done
WORK=${OUT:-$(mktemp -d /tmp/sluice-prefix.XXXXXX)}
mkdir -p "$WORK"
source "$HERE/bench_lib.sh"

write_repository() {  # write_repository cold|prefix
  local dir="$WORK/repo-$1"
  rm -rf "$dir"
  if [[ $MODEL == llama_tiny ]]; then
    mkdir -p "$dir" && cp -a "$ROOT/build/models/llama_tiny" "$dir/"
    grep -q "^  prefill_chunk_lengths:" "$dir/llama_tiny/config.yaml" ||
      { echo "build/models/llama_tiny has no chunk graphs: re-export it" >&2; exit 2; }
    [[ $1 == prefix ]] && sed -i 's/^  max_queue_size: 256$/&\n  prefix_cache_block_size: 64/' "$dir/llama_tiny/config.yaml"
    return 0
  fi
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
  prefill_chunk_lengths: [32, 128]
  iteration_token_budget: 144
$([[ $1 == prefix ]] && echo "  prefix_cache_block_size: 64")
instances: [{count: 1, device: sim}]
sim: {base_ms: 10, per_sample_us: 200}
EOF
}

for repeat in $(seq 1 "$REPEATS"); do
  for CONFIG in cold prefix; do
    write_repository "$CONFIG"
    start_repository_server "$SERVER" "$WORK/repo-$CONFIG" "server-$CONFIG-$repeat"
    step "$CONFIG repeat $repeat"
    "$LOADTEST" --no-progress --api openai -m "$NAME" -u "$HTTP" --model-repository "$WORK/repo-$CONFIG" \
      --shared-prefix-tokens 512 --prompt-tokens fixed:64 --output-tokens fixed:16 -c 4 -d "$DURATION" \
      --warmup 2 --seed 1 --json "$WORK/$CONFIG-$repeat.json" > "$WORK/$CONFIG-$repeat.txt" 2>&1
    scrape "$WORK/$CONFIG-$repeat.metrics"
    cut -d' ' -f1-3 /proc/loadavg > "$WORK/$CONFIG-$repeat-loadavg.txt"
    stop_server
  done
done

$PY - "$WORK" "$REPEATS" <<'EOF'
import json, os, sys
work, repeats = sys.argv[1], int(sys.argv[2])
def ttft(path, q):
    with open(path) as f:
        return json.load(f)["results"]["generation"]["ttft_ms"][q]
def metric(path, name):
    with open(path) as f:
        return sum(float(l.split()[-1]) for l in f if l.startswith(name))
print(f"{'rep':>3}{'cold TTFT p50':>15}{'prefix TTFT p50':>17}{'ratio':>7}{'cold p99':>10}{'prefix p99':>12}"
      f"{'lookups':>9}{'hits':>6}{'evictions':>10}{'loadavg':>18}")
for r in range(1, repeats + 1):
    cold, hit = os.path.join(work, f"cold-{r}"), os.path.join(work, f"prefix-{r}")
    with open(hit + "-loadavg.txt") as f:
        load = f.read().strip()
    m = hit + ".metrics"
    print(f"{r:>3}{ttft(cold + '.json', 'p50'):>15.1f}{ttft(hit + '.json', 'p50'):>17.1f}"
          f"{ttft(hit + '.json', 'p50') / ttft(cold + '.json', 'p50'):>7.2f}{ttft(cold + '.json', 'p99'):>10.1f}"
          f"{ttft(hit + '.json', 'p99'):>12.1f}{metric(m, 'sluice_generation_prefix_cache_lookups_total'):>9.0f}"
          f"{metric(m, 'sluice_generation_prefix_cache_hits_total'):>6.0f}"
          f"{metric(m, 'sluice_generation_prefix_cache_evictions_total'):>10.0f}{load:>18}")
EOF
echo "outputs in $WORK"
