#!/usr/bin/env bash
# loadtest/bench/accel_bench.sh: "keep the accelerator busy" (issue 17). How close does one sluice instance on an
# accelerator-like cost come to what its cost model allows, under a speech-like mix of lengths?
#
# Model (written here into a temp repository): `speech_sim`, kind speech, 16 kHz FP32 audio in, a 1-D output
# of ceil(0.01 x length) steps (small, like an ASR model's), device sim with
#   sim: {base_ms: 4, per_sample_us: 0.1}   ->   cost(B, L) = 4 ms + 0.1 us x B x L per batch
# (backend/sim_backend.cc SimLatency: B = compiled batch size, L = bucket length, dummy rows included),
# buckets lengths [16000, 32000, 64000, 128000, 256000] (1, 2, 4, 8, 16 s), max_queue_delay_ms 5, one instance.
# Three configurations, interleaved in every repeat, each on a fresh server:
#   batched: batch_sizes [1, 2, 4, 8], the fill rule off (max_fill_wait_ms: 0)      b1: batch_sizes [1]
#   filled:  batched with batching.max_fill_wait_ms --fill-wait (partial batches wait while whole ones run;
#            scheduler/dynamic_batcher.h); --fill-wait 0 leaves it out
# Load: sluice-loadtest, gRPC, closed loop (-c 64 by default), --warmup then --duration measured seconds, the
# lengths of a file (drawn uniformly from its lines, seed 1) that holds the mix (--mix, bucket:share):
#   default 16000:0.70,32000:0.15,64000:0.10,128000:0.03,256000:0.02
#   = 70 % short (0.5-1 s, the 16000 bucket), 25 % medium (15 % 1-2 s, 10 % 2-4 s), 5 % long (3 % 4-8 s,
#     2 % 8-16 s); lengths evenly spaced inside each bucket (above the next smaller bucket; the smallest from half
#     its length). The sim's cost depends only on the bucket, so only the shares matter for the ideal.
# Figures per run (server figures over a window inside the measured load: scrapes of /metrics at warm-up + 1 s
# and at warm-up + duration - 1 s after the server's first answer):
#   served req/s and p50/p99 (sluice-loadtest's measured window), rows per batch (real rows: delta
#   sluice_inferences_total / delta sluice_batch_executions_total; and the mean compiled batch size from
#   sluice_batch_size, dummy rows included), busy ratio (delta sluice_instance_busy_seconds_total / delta
#   sluice_uptime_seconds; the since-start sluice_instance_busy_ratio gauge is kept in the JSON), the ideal req/s
#   of the cost model for the mix at full batches of the largest compiled size B = max(batch_sizes):
#   1 / sum_b p_b cost(B, L_b) / B, and served / ideal; /proc/loadavg, the server's and the client's CPU
#   (utime + stime from /proc/PID/stat) and the rest of the machine's busy CPU (/proc/stat minus those two).
#   served/ideal is split as busy x fill x timing: fill = the ideal cost of the served rows / the cost model's
#   cost of the batches that ran (sluice_computed_samples_total: partial batches), timing = that / the measured
#   busy seconds (the sim's sleeps overrunning). The arithmetic and the tables: loadtest/bench/accel_report.py.
# Each point is repeated --repeats times; the table shows the median and the spread (min-max).
#
# Usage: loadtest/bench/accel_bench.sh [--server PATH] [--loadtest PATH] [--duration S] [--warmup S] [--repeats N]
#                                [--concurrency C] [--mix SPEC] [--seed N] [--fill-wait MS] [--out DIR]
#   defaults: $SERVER or build/server/sluice-server, $LOADTEST or build/loadtest/sluice-loadtest, 30 s, 5 s, 3,
#   64, the mix above, seed 1, --fill-wait 1000, a new /tmp/sluice-accel.XXXXXX. Takes about
#   repeats x 3 x (warm-up + duration + 8 s): about 7 minutes with the defaults.
# A benchmark, not a test: nothing passes or fails on a number. Logs, scrapes, accel_bench.json and table.txt
# stay in the output folder. Traffic goes to 127.0.0.1 only; every process started here is stopped on exit.
set -euo pipefail

HERE=$(dirname "$(realpath "$0")")
SERVER=${SERVER:-build/server/sluice-server}
LOADTEST=${LOADTEST:-build/loadtest/sluice-loadtest}
DURATION=30 WARMUP=5 REPEATS=3 CONCURRENCY=64 SEED=1 OUT= FILL_WAIT=1000
MIX=16000:0.70,32000:0.15,64000:0.10,128000:0.03,256000:0.02
usage() { sed -n '/^# Usage:/,/^#   repeats x 3/p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
while (($#)); do
  case $1 in
    --server) SERVER=$2 ;;
    --loadtest) LOADTEST=$2 ;;
    --duration) DURATION=$2 ;;
    --warmup) WARMUP=$2 ;;
    --repeats) REPEATS=$2 ;;
    --concurrency) CONCURRENCY=$2 ;;
    --mix) MIX=$2 ;;
    --seed) SEED=$2 ;;
    --fill-wait) FILL_WAIT=$2 ;;
    --out) OUT=$2 ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
  (($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
PY=/usr/bin/python3  # Debian's python3; only its standard library is used here
for bin in "$SERVER" "$LOADTEST"; do [[ -x $bin ]] || { echo "missing $bin (--server/--loadtest)" >&2; exit 2; }; done
SERVER=$(realpath "$SERVER") LOADTEST=$(realpath "$LOADTEST")
[[ $DURATION =~ ^[0-9]+([.][0-9]+)?$ ]] && $PY -c "import sys; sys.exit(float('$DURATION') <= 4)" ||
  { echo "--duration must be a number of seconds > 4" >&2; exit 2; }
[[ $WARMUP =~ ^[0-9]+([.][0-9]+)?$ && $REPEATS =~ ^[1-9][0-9]*$ && $CONCURRENCY =~ ^[1-9][0-9]*$ &&
   $SEED =~ ^[0-9]+$ && $FILL_WAIT =~ ^[0-9]+$ ]] ||
  { echo "bad --warmup, --repeats, --concurrency, --seed or --fill-wait (whole milliseconds)" >&2; exit 2; }
LENGTHS=(16000 32000 64000 128000 256000)
BASE_MS=4 PER_SAMPLE_US=0.1  # the cost model of the scenario
# The lengths file of the mix (and a check that the mix names the buckets and sums to 1).
LENGTHS_TEXT=$($PY - "$MIX" "${LENGTHS[*]}" <<'EOF'
import sys
mix, buckets = sys.argv[1], [int(x) for x in sys.argv[2].split()]
shares = {}
for item in mix.split(','):
    try:
        length, share = int(item.split(':')[0]), float(item.split(':')[1])
    except (ValueError, IndexError):
        sys.exit(f"--mix: '{item}' is not BUCKET_LENGTH:SHARE")
    if abs(share * 1000 - round(share * 1000)) > 1e-6:
        sys.exit(f"--mix: give shares in steps of 0.001 ('{item}')")
    if length not in buckets or length in shares:
        sys.exit(f"--mix: {length} is not a bucket length {buckets} or is given twice")
    shares[length] = share
if abs(sum(shares.values()) - 1) > 1e-9:
    sys.exit(f"--mix: shares sum to {sum(shares.values())}, not 1")
lines = []
for i, b in enumerate(buckets):
    n = round(shares.get(b, 0) * 1000)  # 1000 lines: shares in steps of 0.1 %
    lo = buckets[i - 1] + 1 if i else b // 2 + 1
    lines += [lo + (b - lo) * k // max(1, n - 1) for k in range(n)]
print(''.join(f'{x}\n' for x in lines), end='')
EOF
) || exit 2
if [[ -n $OUT ]]; then mkdir -p "$OUT"; WORK=$(realpath "$OUT"); else WORK=$(mktemp -d /tmp/sluice-accel.XXXXXX); fi
. "$HERE/bench_lib.sh"  # step, start_repository_server, stop_server, scrape; kills what it started on exit
trap 'exit 130' INT TERM  # a signal exits through bench_lib's EXIT trap

printf '%s\n' "$LENGTHS_TEXT" > "$WORK/lengths.txt"

# add_config NAME BATCH_SIZES [FILL_WAIT_MS]: a configuration to run, its one-model repository
# $WORK/NAME/speech_sim, and its entry in CONFIGS and in params.json's configs (CONFIGS_JSON).
CONFIGS=() CONFIGS_JSON=
add_config() {
  CONFIGS+=("$1")
  CONFIGS_JSON+="${CONFIGS_JSON:+, }\"$1\": [$2]"
  mkdir -p "$WORK/$1/speech_sim"
  cat > "$WORK/$1/speech_sim/config.yaml" <<EOF
name: speech_sim
kind: speech
inputs:
  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}
outputs:
  - {name: log_probs, dtype: FP32, shape: [-1]}
buckets: {lengths: [$(IFS=,; echo "${LENGTHS[*]}" | sed 's/,/, /g')], batch_sizes: [$2]}
batching: {max_queue_delay_ms: 5, max_queue_size: 1024, max_fill_wait_ms: ${3:-0}}
instances: [{count: 1, device: sim}]
sim: {base_ms: $BASE_MS, per_sample_us: $PER_SAMPLE_US, output_steps_per_input_step: 0.01}
EOF
}
add_config batched "1, 2, 4, 8"
add_config b1 "1"
((FILL_WAIT == 0)) || add_config filled "1, 2, 4, 8" "$FILL_WAIT"

# snapshot TAG SERVER_PID LOADTEST_PID: the server's /metrics, both processes' /proc/PID/stat, /proc/loadavg,
# the machine's CPU line of /proc/stat and the time, into $WORK/TAG.*.
snapshot() {
  echo "$EPOCHREALTIME" > "$WORK/$1.time"
  cat /proc/loadavg > "$WORK/$1.loadavg"
  head -1 /proc/stat > "$WORK/$1.procstat"
  cat "/proc/$2/stat" > "$WORK/$1.server_stat" 2>/dev/null || :
  cat "/proc/$3/stat" > "$WORK/$1.loadtest_stat" 2>/dev/null || :
  kill -0 "$3" 2>/dev/null && echo 1 > "$WORK/$1.loadtest_alive" || echo 0 > "$WORK/$1.loadtest_alive"
  scrape "$WORK/$1.prom" || echo "  scrape of /metrics failed ($1)" >&2
}
# wait_first_answer LOADTEST_PID: polls /metrics until the server has answered a request (the load has begun),
# at most 120 s; returns early when the load generator has exited.
wait_first_answer() {
  $PY - "http://$HTTP/metrics" "$1" <<'EOF'
import os, re, sys, time, urllib.request
for _ in range(2400):
    try:
        page = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
        if any(float(v) > 0 for v in re.findall(r'^sluice_inferences_total\{[^}]*\} (\S+)$', page, re.M)):
            break
        os.kill(int(sys.argv[2]), 0)
    except ProcessLookupError:
        break
    except OSError:
        pass
    time.sleep(0.05)
EOF
}
# sleep_until EPOCH: in the background, so that a signal ends the script (and its trap) at once.
sleep_until() { sleep "$($PY -c "print(max(0.0, $1 - $EPOCHREALTIME))")" & wait $!; }

# summary JSON: one line of a sluice-loadtest report, and the load average now.
summary() {
  $PY - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))['results']
lat = r['latency_ms']
print(f"{r['req_per_s']:.1f} req/s, p50 {lat['p50']:.0f} ms, p99 {lat['p99']:.0f} ms, {r['errors']} errors;"
      f" loadavg {open('/proc/loadavg').read().split()[0]}")
EOF
}

# run CONFIG REPEAT: one fresh server, one closed-loop load, snapshots A and B inside the measured load.
run() {
  local tag="$1_r$2"
  rm -f "$WORK/$tag".*
  start_repository_server "$SERVER" "$WORK/$1" "$tag"
  local server_pid=${PIDS[-1]}
  cat /proc/loadavg > "$WORK/$tag.before.loadavg"
  "$LOADTEST" --no-progress --seed "$SEED" -u "$GRPC" --metrics-url "http://$HTTP/metrics" -m speech_sim \
    --lengths "file:$WORK/lengths.txt" -c "$CONCURRENCY" -d "$DURATION" --warmup "$WARMUP" \
    --max-duration "$($PY -c "print($WARMUP + $DURATION + 120)")" --json "$WORK/$tag.json" \
    > "$WORK/$tag.txt" 2>&1 &
  PIDS+=($!)
  local lt_pid=$!
  wait_first_answer "$lt_pid"  # the load generator's warm-up starts about here (it needs 1-3 s to start)
  local t0=$EPOCHREALTIME
  sleep_until "$t0 + $WARMUP + 1"
  snapshot "$tag.A" "$server_pid" "$lt_pid"
  sleep_until "$t0 + $WARMUP + $DURATION - 1"
  snapshot "$tag.B" "$server_pid" "$lt_pid"
  local rc=0
  wait "$lt_pid" || rc=$?
  unset 'PIDS[-1]'
  echo "$rc" > "$WORK/$tag.rc"
  ((rc == 0)) || echo "  sluice-loadtest exited $rc; see $WORK/$tag.txt" >&2
  stop_server
  if [[ -f $WORK/$tag.json ]]; then step "$tag: $(summary "$WORK/$tag.json")"; fi
}

printf '{"server": "%s", "loadtest": "%s", "duration_s": %s, "warmup_s": %s, "repeats": %s, "concurrency": %s,
 "seed": %s, "mix": "%s", "bucket_lengths": [%s], "base_ms": %s, "per_sample_us": %s,
 "configs": {%s}, "fill_wait_ms": %s, "nproc": %s}\n' "$SERVER" "$LOADTEST" "$DURATION" "$WARMUP" \
  "$REPEATS" "$CONCURRENCY" "$SEED" "$MIX" "$(IFS=,; echo "${LENGTHS[*]}")" "$BASE_MS" "$PER_SAMPLE_US" \
  "$CONFIGS_JSON" "$FILL_WAIT" "$(nproc)" > "$WORK/params.json"
step "sluice accel bench: $SERVER, $LOADTEST; -c $CONCURRENCY, ${WARMUP} s + ${DURATION} s, $REPEATS repeats;" \
  "mix $MIX; folder $WORK"
for ((r = 1; r <= REPEATS; r++)); do
  for config in "${CONFIGS[@]}"; do run "$config" "$r"; done
done
$PY "$HERE/accel_report.py" "$WORK" | tee "$WORK/table.txt"
