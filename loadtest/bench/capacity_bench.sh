#!/usr/bin/env bash
# loadtest/bench/capacity_bench.sh: how well sluice_capacity_max_requests_per_second predicts saturation (issue 15,
# "Capacity headroom"). For each of two models — `fixed` (a sim model written here: every batch 20 ms + 1 us per
# padded step, batch sizes 1-8, accelerator-like) and the example CPU model `text_embed` — it
#   1. measures a first saturation S0 (closed loop, high concurrency) on a fresh server,
#   2. on a fresh server, runs an open loop (Poisson) at 30 % of S0 and scrapes the predicted max rps and the
#      utilization at its end; the same again at 60 % (fresh servers, so no prediction has seen saturation),
#   3. measures saturation S again (closed loop, fresh server) and prints the prediction error (P - S) / S.
# Same lengths throughout (sluice-loadtest's default for both: uniform 1..512, seed 1). About 4-5 minutes.
# Usage: loadtest/bench/capacity_bench.sh [BUILD_DIR [MODEL_REPOSITORY]]   (defaults: build and BUILD_DIR/models)
# Knobs (environment): CAPACITY_SECONDS (measured seconds of each load run, 25), CAPACITY_SAT_SECONDS (15).
# A benchmark, not a test: nothing passes or fails on a number. Logs, scrapes and reports stay in the printed folder.
set -euo pipefail

BUILD=$(realpath "${1:-build}")
MODELS=$(realpath "${2:-$BUILD/models}")
LOAD_SECONDS=${CAPACITY_SECONDS:-25}
SAT_SECONDS=${CAPACITY_SAT_SECONDS:-15}
PY=/usr/bin/python3  # Debian's python3; only its standard library is used here
SERVER=$BUILD/server/sluice-server
LOADTEST=$BUILD/loadtest/sluice-loadtest
for bin in "$SERVER" "$LOADTEST"; do
  [[ -x $bin ]] || { echo "missing $bin: build it first (cmake --build $BUILD)" >&2; exit 2; }
done
[[ -f $MODELS/text_embed/config.yaml ]] || { echo "no text_embed in $MODELS: export the example models" >&2; exit 2; }

WORK=$(mktemp -d /tmp/sluice-capacity.XXXXXX)
. "$(dirname "$(realpath "$0")")/bench_lib.sh"  # step, start_server, stop_server, scrape

# The two repositories: `fixed` written here, text_embed linked from the exported models.
mkdir -p "$WORK/sim/fixed" "$WORK/cpu"
cat > "$WORK/sim/fixed/config.yaml" <<'EOF'
name: fixed
kind: generic
inputs:
  - {name: x, dtype: FP32, shape: [-1]}
outputs:
  - {name: y, dtype: FP32, shape: [-1]}
buckets: {lengths: [64, 128, 256, 512], batch_sizes: [1, 2, 4, 8]}
batching: {max_queue_delay_ms: 5, max_queue_size: 1024}
instances: [{count: 1, device: sim}]
sim: {base_ms: 20, per_sample_us: 1, output_steps_per_input_step: 1}
EOF
ln -s "$MODELS/text_embed" "$WORK/cpu/text_embed"

gauge() { sed -nE "s/^$1\{model=\"$2\"\} (.*)/\1/p" "$3"; }
rps() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"]["req_per_s"])' "$1"; }
loadtest() { "$LOADTEST" --no-progress --seed 1 -u "$GRPC" --metrics-url "http://$HTTP/metrics" "$@"; }

# bench REPOSITORY MODEL CONCURRENCY: prints one result line "MODEL S0 r30 P30 U30 busy30 r60 P60 U60 busy60 S".
bench() {
  local repo=$1 model=$2 c=$3 tag=$2
  step "$model: first saturation (closed loop -c $c, ${SAT_SECONDS} s)"
  start_repository_server "$SERVER" "$repo" "${tag}_s0"
  loadtest -m "$model" -c "$c" -d "$SAT_SECONDS" --warmup 3 --json "$WORK/${tag}_s0.json" > "$WORK/${tag}_s0.txt" 2>&1
  stop_server
  local s0; s0=$(rps "$WORK/${tag}_s0.json")
  local line="$model $s0"
  for pct in 30 60; do
    local rate; rate=$($PY -c "print(round($s0 * $pct / 100, 2))")
    step "$model: open loop at $pct % of $s0 = $rate req/s (${LOAD_SECONDS} s, fresh server)"
    start_repository_server "$SERVER" "$repo" "${tag}_$pct"
    loadtest -m "$model" -r "$rate" -d "$LOAD_SECONDS" --warmup 3 --json "$WORK/${tag}_$pct.json" \
      > "$WORK/${tag}_$pct.txt" 2>&1
    scrape "$WORK/${tag}_$pct.prom"
    stop_server
    local busy; busy=$(sed -nE "s/^sluice_instance_busy_ratio\{instance=\"0\",model=\"$model\"\} (.*)/\1/p" \
      "$WORK/${tag}_$pct.prom")
    line+=" $(rps "$WORK/${tag}_$pct.json") $(gauge sluice_capacity_max_requests_per_second "$model" \
      "$WORK/${tag}_$pct.prom") $(gauge sluice_capacity_utilization "$model" "$WORK/${tag}_$pct.prom") $busy"
  done
  step "$model: saturation (closed loop -c $c, ${SAT_SECONDS} s, fresh server)"
  start_repository_server "$SERVER" "$repo" "${tag}_sat"
  loadtest -m "$model" -c "$c" -d "$SAT_SECONDS" --warmup 3 --json "$WORK/${tag}_sat.json" \
    > "$WORK/${tag}_sat.txt" 2>&1
  scrape "$WORK/${tag}_sat.prom"
  stop_server
  echo "$line $(rps "$WORK/${tag}_sat.json") $(gauge sluice_capacity_max_requests_per_second "$model" \
    "$WORK/${tag}_sat.prom")" >> "$WORK/results.txt"
}

step "sluice capacity bench: $BUILD, models $MODELS, work folder $WORK"
bench "$WORK/sim" fixed 64
bench "$WORK/cpu" text_embed 16

step "results (req/s; P = sluice_capacity_max_requests_per_second at the end of the run, U = utilization)"
$PY - "$WORK/results.txt" <<'EOF'
import sys
print(f"{'model':<11} {'S0':>7} | {'load':>5} {'offered':>8} {'P':>8} {'U':>6} {'busy':>6} | {'S':>7} {'error':>7}"
      f" {'P@sat':>8}")
for line in open(sys.argv[1]):
    f = line.split()
    model, s0 = f[0], float(f[1])
    s, p_sat = float(f[10]), float(f[11])
    for i, pct in ((2, 30), (6, 60)):
        got, p, u, busy = (float(x) for x in f[i:i + 4])
        print(f"{model:<11} {s0:>7.1f} | {pct:>4}% {got:>8.1f} {p:>8.1f} {u:>6.3f} {busy:>6.3f} | {s:>7.1f}"
              f" {100 * (p - s) / s:>+6.1f}% {p_sat:>8.1f}")
print("error = (P - S) / S: the prediction made at that load vs the saturation measured afterwards.")
print("U is diluted by the idle seconds between the model's creation and the load (the window opens at creation).")
EOF
