#!/usr/bin/env bash
# loadtest/bench/bench.sh: the load-test issue's benchmark numbers, measured in one run on this machine over loopback
# (about 4-5 minutes; every run is bounded by time). It prints:
#   1. serving efficiency: saturated asr_ctc throughput through sluice-server (closed loop, speech profile) ÷ the
#      raw backend's best on the same length mix (each bucket at its fastest batch size, sluice-bench-backend)
#   2. batching capture: dynamic batching vs batch size 1 on an accelerator-like sim cost (sluice-bench-scheduler)
#   3. padding efficiency of the lognormal speech profile with the example buckets vs pad-to-max
#      (sluice-loadtest --dry-run: the exact lengths the runs send), and sluice_padding_efficiency from /metrics
#   4. transport ratio: sluice-server on a zero-cost sim model ÷ sluice-echo-server (a bare gRPC echo), the same
#      client and requests, at concurrency 1 and 8; and the p50 difference (and sluice over HTTP, for reference)
#   5. p99 latency at 70 % of the saturated rate (open loop, Poisson) vs max_queue_delay + 2 × batch compute
# Usage: loadtest/bench/bench.sh [BUILD_DIR [MODEL_REPOSITORY]]   (defaults: build and BUILD_DIR/models)
# Knobs (environment): BENCH_SECONDS (measured seconds of the saturated and 70 % runs, 20),
# BENCH_CONCURRENCY (closed-loop calls in flight for saturation, 16), BENCH_TRANSPORT_SECONDS (5).
# A benchmark, not a test: nothing passes or fails on a timing. Logs and reports stay in the printed folder.
set -euo pipefail

BUILD=$(realpath "${1:-build}")
MODELS=$(realpath "${2:-$BUILD/models}")
SECONDS_RUN=${BENCH_SECONDS:-20}
CONCURRENCY=${BENCH_CONCURRENCY:-16}
SECONDS_TRANSPORT=${BENCH_TRANSPORT_SECONDS:-5}
PY=/usr/bin/python3  # Debian's python3 (install-deps); only its standard library is used here
HERE=$(dirname "$(realpath "$0")")

SERVER=$BUILD/server/sluice-server
ECHO=$BUILD/loadtest/sluice-echo-server
LOADTEST=$BUILD/loadtest/sluice-loadtest
BENCH_BACKEND=$BUILD/backend/sluice-bench-backend
BENCH_SCHEDULER=$BUILD/scheduler/sluice-bench-scheduler
for bin in "$SERVER" "$ECHO" "$LOADTEST" "$BENCH_BACKEND" "$BENCH_SCHEDULER"; do
  [[ -x $bin ]] || { echo "missing $bin: build it first (cmake --build $BUILD)" >&2; exit 2; }
done
[[ -f $MODELS/asr_ctc/config.yaml ]] || { echo "no asr_ctc in $MODELS: export the example models" >&2; exit 2; }

WORK=$(mktemp -d /tmp/sluice-bench.XXXXXX)
. "$HERE/bench_lib.sh"  # step, start_server, stop_server, scrape; kills what it started on exit
loadtest() { "$LOADTEST" --no-progress --seed 1 "$@"; }

step "sluice bench: $BUILD, models $MODELS, work folder $WORK"

step "1/5 raw backend limit: sluice-bench-backend, asr_ctc, every bucket at every batch size"
"$BENCH_BACKEND" --repository "$MODELS" --models asr_ctc --iterations 5 > "$WORK/backend.txt" 2> "$WORK/backend.log"

step "2/5 scheduler overhead and batching capture: sluice-bench-scheduler"
"$BENCH_SCHEDULER" --seconds 3 > "$WORK/scheduler.txt" 2> "$WORK/scheduler.log"

step "3/5 asr_ctc through sluice-server: padding plan, saturation (closed loop, -c $CONCURRENCY), 70 % (open loop)"
mkdir -p "$WORK/asr/models"
ln -s "$MODELS/asr_ctc" "$WORK/asr/models/asr_ctc"
start_repository_server "$SERVER" "$WORK/asr/models" asr_server
TARGET=(-u "$GRPC" --metrics-url "http://$HTTP/metrics" -m asr_ctc --model-repository "$MODELS")
loadtest "${TARGET[@]}" --dry-run -n 2000 --json "$WORK/plan.json" > "$WORK/plan.txt"
loadtest "${TARGET[@]}" -c "$CONCURRENCY" -d "$SECONDS_RUN" --warmup 5 --json "$WORK/saturated.json" \
  > "$WORK/saturated.txt" 2>&1
RATE=$($PY -c 'import json,sys; print(round(0.7 * json.load(open(sys.argv[1]))["results"]["req_per_s"], 2))' \
  "$WORK/saturated.json")
scrape "$WORK/before_70.prom"
loadtest "${TARGET[@]}" -r "$RATE" -d "$SECONDS_RUN" --warmup 3 --json "$WORK/rate70.json" > "$WORK/rate70.txt" 2>&1
scrape "$WORK/after_70.prom"
stop_server

step "4/5 transport: sluice-server (sim, zero cost) vs sluice-echo-server, same client and requests"
write_echo_repository "$WORK/transport"
start_server echo_server "$ECHO" --model "$WORK/transport/echo"
ECHO_GRPC=$GRPC
start_repository_server "$SERVER" "$WORK/transport" sim_server
SIM_GRPC=$GRPC SIM_HTTP=$HTTP
for c in 1 8; do  # alternating, so that a slow moment of the machine hits both
  loadtest -u "$ECHO_GRPC" --metrics-url none -m echo --lengths fixed:1024 -c $c -d "$SECONDS_TRANSPORT" --warmup 1 \
    --json "$WORK/echo_c$c.json" > "$WORK/echo_c$c.txt" 2>&1
  loadtest -u "$SIM_GRPC" --metrics-url "http://$SIM_HTTP/metrics" -m echo --lengths fixed:1024 -c $c \
    -d "$SECONDS_TRANSPORT" --warmup 1 --json "$WORK/sluice_c$c.json" > "$WORK/sluice_c$c.txt" 2>&1
  loadtest --protocol http -u "$SIM_HTTP" --model-repository "$WORK/transport" -m echo --lengths fixed:1024 -c $c \
    -d "$SECONDS_TRANSPORT" --warmup 1 --json "$WORK/http_c$c.json" > "$WORK/http_c$c.txt" 2>&1
done

step "5/5 results"
$PY "$HERE/bench_report.py" "$WORK" "$MODELS/asr_ctc/config.yaml" "$CONCURRENCY"
