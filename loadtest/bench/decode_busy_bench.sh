#!/usr/bin/env bash
# How busy the continuous batcher keeps its device at 16 running sequences (issue 30: decode tokens/s >= 0.95 of
# the cost model's ideal): a sim generation model (`llm_sim`, device sim: every step sleeps its cost-model time,
# the host work around it is real) under 16 closed-loop `sluice-loadtest --api openai` clients with long outputs,
# /metrics scraped twice inside the steady part of the run. Device busy = the steps' summed cost-model time
# (sluice_generation_step_seconds_sum, every step kind) / wall time between the scrapes; the rest is host time
# (admission, sampling, delivery, the engine loop). Decode tokens/s is compared with the ideal of the decode steps
# actually run: rows per decode step / the mean decode step time.
#
# --picks-tokens true: the sim device picks the decode rows' tokens itself during its modeled step (sim:
# {picks_tokens: true}, as a GPU backend that samples in its graph); false (the default): the engine samples on the
# host between steps.
#
# Usage: loadtest/bench/decode_busy_bench.sh [--base-ms 10] [--clients 16] [--duration 30] [--repeats 2]
#          [--picks-tokens false] [--out DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${SLUICE_BUILD:-$ROOT/build}
SERVER=$BUILD/server/sluice-server LOADTEST=$BUILD/loadtest/sluice-loadtest
BASE_MS=10 CLIENTS=16 DURATION=30 REPEATS=2 PICKS=false OUT=
while (($#)); do
  case $1 in
    --base-ms) BASE_MS=$2 ;;
    --clients) CLIENTS=$2 ;;
    --duration) DURATION=$2 ;;
    --repeats) REPEATS=$2 ;;
    --picks-tokens) PICKS=$2 ;;
    --out) OUT=$2 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
  (($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
PY=/usr/bin/python3
for bin in "$SERVER" "$LOADTEST"; do [[ -x $bin ]] || { echo "missing $bin: build first" >&2; exit 2; }; done
[[ -f $BUILD/models/llama_tiny/tokenizer.model ]] || { echo "missing $BUILD/models/llama_tiny: build first" >&2; exit 2; }
[[ $PICKS == true || $PICKS == false ]] || { echo "--picks-tokens must be true or false" >&2; exit 2; }
((DURATION >= 20)) || { echo "--duration must be at least 20 (two scrapes inside the steady part)" >&2; exit 2; }
WORK=${OUT:-$(mktemp -d /tmp/sluice-decode-busy.XXXXXX)}
mkdir -p "$WORK/repo/llm_sim"
source "$HERE/bench_lib.sh"
cp "$BUILD/models/llama_tiny/tokenizer.model" "$WORK/repo/llm_sim/"
cat > "$WORK/repo/llm_sim/config.yaml" <<YAML
name: llm_sim
kind: generation
generation:
  tokenizer: tokenizer.model
  vocab_size: 2000
  context_length: 2048
  kv_cache: {slots: 16, layers: 1, kv_heads: 1, head_dim: 8}
  prefill_lengths: [64, 128]
  decode_batch_sizes: [1, 2, 4, 8, 16]
  kv_lengths: [512, 1024, 2048]
  bos_token_id: 1
  eos_token_id: 2
  max_num_seqs: 16
  max_queue_size: 256
instances: [{count: 1, device: sim}]
sim: {base_ms: $BASE_MS, per_sample_us: 0, picks_tokens: $PICKS}
YAML

for repeat in $(seq 1 "$REPEATS"); do
  start_repository_server "$SERVER" "$WORK/repo" "server-$repeat"
  step "repeat $repeat: $CLIENTS clients, ${DURATION} s"
  "$LOADTEST" --no-progress --api openai -m llm_sim -u "$HTTP" --model-repository "$WORK/repo" \
    --prompt-tokens fixed:32 --output-tokens fixed:400 -c "$CLIENTS" -d "$DURATION" --seed 1 \
    --json "$WORK/run-$repeat.json" > "$WORK/run-$repeat.txt" 2>&1 &
  LOAD=$!
  sleep 8
  scrape "$WORK/a-$repeat.metrics"; date +%s.%N > "$WORK/a-$repeat.time"
  sleep $((DURATION - 12))
  scrape "$WORK/b-$repeat.metrics"; date +%s.%N > "$WORK/b-$repeat.time"
  wait "$LOAD" || { cat "$WORK/run-$repeat.txt" >&2; echo "sluice-loadtest failed" >&2; exit 1; }
  cut -d' ' -f1-3 /proc/loadavg > "$WORK/loadavg-$repeat.txt"
  stop_server
done

$PY - "$WORK" "$REPEATS" <<'PY'
import os, re, sys
work, repeats = sys.argv[1], int(sys.argv[2])
def series(path, name, **labels):
    total = 0.0
    for line in open(path):
        m = re.match(re.escape(name) + r"(\{[^}]*\})? (\S+)$", line.strip())
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total
print(f"{'rep':>3}{'busy':>7}{'decode steps/s':>16}{'rows/step':>11}{'decode tok/s':>14}{'ideal tok/s':>13}"
      f"{'ratio':>7}{'prefills':>10}{'loadavg':>18}")
for r in range(1, repeats + 1):
    a, b = os.path.join(work, f"a-{r}.metrics"), os.path.join(work, f"b-{r}.metrics")
    wall = float(open(os.path.join(work, f"b-{r}.time")).read()) - float(open(os.path.join(work, f"a-{r}.time")).read())
    d = lambda name, **l: series(b, name, **l) - series(a, name, **l)  # noqa: E731
    busy = d("sluice_generation_step_seconds_sum") / wall
    steps = d("sluice_generation_step_seconds_count", step="decode")
    decode_s = d("sluice_generation_step_seconds_sum", step="decode")
    rows = d("sluice_generation_decode_rows_total")
    tok_s = rows / wall
    ideal = rows / decode_s if decode_s > 0 else float("nan")  # tokens/s were every second a decode step
    load = open(os.path.join(work, f"loadavg-{r}.txt")).read().strip()
    print(f"{r:>3}{busy:>7.3f}{steps / wall:>16.1f}{rows / max(steps, 1):>11.2f}{tok_s:>14.0f}{ideal:>13.0f}"
          f"{tok_s / ideal:>7.3f}{d('sluice_generation_step_seconds_count', step='prefill'):>10.0f}{load:>18}")
PY
echo "outputs in $WORK"
