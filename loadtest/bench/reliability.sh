#!/usr/bin/env bash
# loadtest/bench/reliability.sh: issue 14's reliability figures for one example model through sluice-server, measured over
# loopback on this machine (numbers, not a test; --check turns the correctness findings into the exit code):
#   1. overload: the saturated rate S (closed loop, or --saturated-rate), then --overload-factor x S (10) for
#      --overload-seconds (60) over gRPC and then over HTTP: offered / served / refused, refusal latency p50/p99 (a
#      probe client at --probe-rate beside the load: sluice-loadtest times successes only), admitted p99, server
#      RSS (VmRSS before, sampled peak, VmHWM), and sluice_requests_total{outcome} against what the clients saw
#   2. soak: 70 % of S for --soak-seconds (600) in back-to-back one-minute runs: p99 per minute, RSS every 10 s and
#      its least-squares slope per hour, fds and threads at start and end, counters against the clients
#   3. drain under load: closed loops over gRPC and HTTP, SIGTERM at full load: exit code, the server's "drained"
#      line against the clients' successes, what the refused calls got
#   4. client faults (loadtest/tools/reliability_clients.py): HTTP clients that close after sending, send half a
#      body, pipeline and never read, trickle their head (slowloris); gRPC calls cancelled, with 1-20 ms deadlines,
#      from processes that exit mid-call, and on HTTP/2 connections with a zero window that never read; before and
#      after: fds, threads, RSS, queue depth / in flight back to 0, and the same load run's latency
# Every phase has a fresh server (ports chosen by the OS, loopback only); everything started is killed on exit.
# Usage: loadtest/bench/reliability.sh [options]   (about 20 minutes with the defaults; --quick: about 3)
#   --build DIR              build folder (build)          --models DIR        model repository (BUILD/models)
#   --model NAME             text_embed (or asr_ctc, ...)  --lengths SPEC      uniform:16-128 (text) / speech
#   --saturated-rate R       skip the saturation run        --overload-factor F 10
#   --overload-seconds N     60                             --soak-seconds N    600
#   --fault-count N          300 per fault                  --probe-rate R      20 (requests/s per probe)
#   --phases LIST            overload,soak,faults,drain     --out DIR           JSON + report (the work folder)
#   --quick                  10 s phases, 60 faults each    --check             exit 1 on a correctness finding
#   --one-server             every phase on one server      --smoke             CTest's benchmark-smoke run (< 1 min):
#                            (the drain ends it)                                 --one-server --check, rate 500 req/s,
#                                                                                4 s overloads, 30 faults, no soak
# Needs Debian's python3 with python3-yaml and python3-grpcio (deploy/install-deps.sh); exit 77 without them.
set -euo pipefail

HERE=$(dirname "$(realpath "$0")")
BUILD=build MODELS="" MODEL=text_embed LENGTHS="" SAT_RATE="" FACTOR=10 OVERLOAD_SECONDS=60 SOAK_SECONDS=600
FAULT_COUNT=300 PROBE_RATE=20 PHASES=overload,soak,faults,drain OUT="" QUICK=0 CHECK=0 ONE_SERVER=0
SLOW_WATCH=13 HOLD=5 HEADER_TIMEOUT_MS="" NORMAL_WARMUP=2
SAT_SECONDS=15 SAT_CONCURRENCY=16 SOAK_PIECE=60 SOAK_SAMPLE=10 DRAIN_HOLD=10 NORMAL_SECONDS=20 SLOW_CONNS=200
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --lengths) LENGTHS=$2; shift 2 ;;
    --saturated-rate) SAT_RATE=$2; shift 2 ;;
    --overload-factor) FACTOR=$2; shift 2 ;;
    --overload-seconds) OVERLOAD_SECONDS=$2; shift 2 ;;
    --soak-seconds) SOAK_SECONDS=$2; shift 2 ;;
    --fault-count) FAULT_COUNT=$2; shift 2 ;;
    --probe-rate) PROBE_RATE=$2; shift 2 ;;
    --phases) PHASES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=1; SAT_SECONDS=5; OVERLOAD_SECONDS=10; SOAK_SECONDS=20; SOAK_PIECE=10; SOAK_SAMPLE=2
             DRAIN_HOLD=3; NORMAL_SECONDS=8; FAULT_COUNT=60; SLOW_CONNS=50; shift ;;
    --smoke) QUICK=1; ONE_SERVER=1; CHECK=1; SAT_RATE=${SAT_RATE:-50}; OVERLOAD_SECONDS=4; DRAIN_HOLD=2
             NORMAL_SECONDS=3; NORMAL_WARMUP=1; FAULT_COUNT=30; SLOW_CONNS=20; HEADER_TIMEOUT_MS=3000; SLOW_WATCH=5
             HOLD=2; PHASES=overload,faults,drain; shift ;;
    --one-server) ONE_SERVER=1; shift ;;
    --check) CHECK=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done

BUILD=$(realpath "$BUILD")
MODELS=$(realpath "${MODELS:-$BUILD/models}")
PY=/usr/bin/python3  # Debian's python3 (install-deps): python3-yaml, python3-grpcio
CLIENTS=$(dirname "$HERE")/tools/reliability_clients.py
SERVER=$BUILD/server/sluice-server
LOADTEST=$BUILD/loadtest/sluice-loadtest
for bin in "$SERVER" "$LOADTEST"; do
  [[ -x $bin ]] || { echo "missing $bin: build it first (cmake --build $BUILD)" >&2; exit 2; }
done
[[ -f $MODELS/$MODEL/config.yaml ]] || { echo "no $MODEL in $MODELS: export the example models" >&2; exit 2; }
$PY -c 'import grpc, yaml' 2>/dev/null ||
  { echo "$PY lacks grpc or yaml: install python3-grpcio python3-yaml (deploy/install-deps.sh)" >&2; exit 77; }
if [[ -z $LENGTHS ]]; then  # the loadtest's spec, and the same range as A-B for the Python clients
  if grep -q '^kind: speech' "$MODELS/$MODEL/config.yaml"; then LENGTHS=speech; else LENGTHS=uniform:16-128; fi
fi
case $LENGTHS in
  uniform:*) PY_LENGTHS=${LENGTHS#uniform:} ;;
  fixed:*) PY_LENGTHS=${LENGTHS#fixed:}-${LENGTHS#fixed:} ;;
  *) PY_LENGTHS=48000-160000 ;;  # speech: 3-10 s for the probe and fault clients
esac

WORK=$(mktemp -d /tmp/sluice-reliability.XXXXXX)
OUT=$(mkdir -p "${OUT:-$WORK}" && realpath "${OUT:-$WORK}")
# Private copies: a rebuild of BUILD during the run (the linker rewrites the file) must not change or break them.
mkdir -p "$WORK/bin"
cp "$SERVER" "$LOADTEST" "$WORK/bin/"
SERVER=$WORK/bin/sluice-server LOADTEST=$WORK/bin/sluice-loadtest
. "$HERE/bench_lib.sh"  # step, start_server, stop_server; kills what it started on exit (PIDS)
trap 'cleanup; rm -rf "$WORK/bin"' EXIT  # bench_lib's cleanup, and the binaries' copies
trap 'exit 130' INT TERM
mkdir -p "$WORK/models"
ln -s "$MODELS/$MODEL" "$WORK/models/$MODEL"
# --smoke shortens the HTTP head timeout (10 s by default) so that the slowloris clients are cut off sooner.
printf 'grpc: {address: 127.0.0.1:0}\nhttp: {address: 127.0.0.1:0%s}\nmodel_repository: %s\nlog_level: info\n' \
  "${HEADER_TIMEOUT_MS:+, header_timeout_ms: $HEADER_TIMEOUT_MS}" "$WORK/models" > "$WORK/server.yaml"

# Background jobs run their binary directly (no function), so that $! is the process that cleanup kills.
clients() { "$PY" "$CLIENTS" "$@"; }
LT=("$LOADTEST" --no-progress -m "$MODEL" --lengths "$LENGTHS" --model-repository "$WORK/models")
targets() {
  GRPC_LT=("${LT[@]}" -u "$GRPC" --metrics-url "http://$HTTP/metrics")
  HTTP_LT=("${LT[@]}" --protocol http -u "$HTTP")
}
grpc_load() { "${GRPC_LT[@]}" "$@"; }
http_load() { "${HTTP_LT[@]}" "$@"; }
on() { [[ ,$PHASES, == *,$1,* ]]; }
loadavg() { echo "$1 $(cat /proc/loadavg)" >> "$WORK/loadavg.txt"; }
rps() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"]["req_per_s"])' "$1"; }
metrics() { clients metrics --url "http://$HTTP/metrics" --model "$MODEL" > "$WORK/$1.metrics.json"; }
procstat() { clients procstat --pid "$SERVER_PID" > "$WORK/$1.proc.json"; }
wait_idle() { clients wait-idle --url "http://$HTTP/metrics" --model "$MODEL" --timeout 60 > "$WORK/$1.idle.json"; }
sampler() {  # sampler NAME INTERVAL: samples the server's /proc in the background until stopped or it exits
  "$PY" "$CLIENTS" sample --pid "$SERVER_PID" --interval "$2" --out "$WORK/$1.samples.jsonl" &
  PIDS+=($!)
  SAMPLER_PID=$!
}
stop_pid() {  # stop_pid PID: ends one process started here and forgets it
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  local p keep=()
  for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}
# A fresh server per phase, or with --one-server the one already running (the drain phase ends it).
SERVER_PID=""
fresh_server() {
  [[ $ONE_SERVER == 1 && -n $SERVER_PID ]] && return
  start_server "$1" "$SERVER" --config "$WORK/server.yaml"; SERVER_PID=${PIDS[-1]}; SERVER_LOG=$WORK/$1.log; targets
}
end_server() { [[ $ONE_SERVER == 1 ]] && return; stop_pid "$SERVER_PID"; SERVER_PID=""; }
# Every fd of the server gone back to the baseline within 10 s (connections closed by clients are reaped async).
settle_fds() {
  for _ in $(seq 1 50); do [[ $(ls "/proc/$SERVER_PID/fd" | wc -l) -le $1 ]] && return 0; sleep 0.2; done
}

step "sluice reliability: $MODEL ($LENGTHS) from $MODELS; phases $PHASES; work folder $WORK, report in $OUT"
loadavg start
cat > "$WORK/meta.json" <<EOF
{"model": "$MODEL", "lengths": "$LENGTHS", "client_lengths": "$PY_LENGTHS", "quick": $QUICK,
 "overload_factor": $FACTOR, "overload_seconds": $OVERLOAD_SECONDS, "soak_seconds": $SOAK_SECONDS,
 "soak_piece_seconds": $SOAK_PIECE, "soak_sample_seconds": $SOAK_SAMPLE, "drain_hold_seconds": $DRAIN_HOLD,
 "normal_seconds": $NORMAL_SECONDS, "fault_count": $FAULT_COUNT, "probe_rate": $PROBE_RATE, "phases": "$PHASES",
 "header_timeout_ms": "${HEADER_TIMEOUT_MS:-10000 (default)}", "nproc": $(nproc),
 "saturation_concurrency": $SAT_CONCURRENCY, "one_server": $ONE_SERVER,
 "server_binary": "$BUILD/server/sluice-server, modified $(stat -c %y "$BUILD/server/sluice-server")"}
EOF

# ---- the saturated rate -----------------------------------------------------------------------------------------
saturation() {
  if [[ -n $SAT_RATE ]]; then echo "{\"given\": $SAT_RATE}" > "$WORK/saturation.json"; return; fi
  step "saturation: closed loop -c $SAT_CONCURRENCY over gRPC, ${SAT_SECONDS} s"
  loadavg saturation
  grpc_load --seed 1 -c "$SAT_CONCURRENCY" -d "$SAT_SECONDS" --warmup 3 --json "$WORK/saturation_run.json" \
    > "$WORK/saturation_run.txt" 2>&1
  SAT_RATE=$(rps "$WORK/saturation_run.json")
  echo "{\"measured\": $SAT_RATE}" > "$WORK/saturation.json"
}

# ---- 1. overload ------------------------------------------------------------------------------------------------
overload_run() {  # overload_run PROTOCOL RATE
  local p=$1 rate=$2 load
  step "overload over $p: ${rate} req/s (${FACTOR}x $SAT_RATE) for $OVERLOAD_SECONDS s, probe $PROBE_RATE req/s"
  wait_idle "overload_${p}_before"; metrics "overload_${p}_before"; procstat "overload_${p}_before"
  loadavg "overload_${p}"
  sampler "overload_$p" 1
  local address=$GRPC; [[ $p == http ]] && address=$HTTP
  "$PY" "$CLIENTS" probe --protocol "$p" --address "$address" --repository "$WORK/models" --model "$MODEL" \
    --lengths "$PY_LENGTHS" --seed 7 --rate "$PROBE_RATE" --duration "$OVERLOAD_SECONDS" \
    --out "$WORK/overload_${p}_probe.json" &
  local probe=$!; PIDS+=($probe)
  if [[ $p == grpc ]]; then load=grpc_load; else load=http_load; fi
  $load --seed 11 -r "$rate" -d "$OVERLOAD_SECONDS" --json "$WORK/overload_$p.json" > "$WORK/overload_$p.txt" 2>&1
  wait "$probe"; stop_pid "$probe"
  wait_idle "overload_${p}_after"; metrics "overload_${p}_after"; procstat "overload_${p}_after"
  stop_pid "$SAMPLER_PID"
  loadavg "overload_${p}_end"
}
if on overload; then
  fresh_server overload_server
  saturation
  RATE=$($PY -c "print(round($FACTOR * $SAT_RATE, 1))")
  overload_run grpc "$RATE"
  end_server
  fresh_server overload_http_server  # its own process, so that VmHWM and the RSS samples are this run's alone
  overload_run http "$RATE"
  end_server
fi
if [[ ! -f $WORK/saturation.json ]]; then  # no overload phase: soak and faults still need S
  if [[ -n $SAT_RATE ]]; then saturation
  elif on soak || on faults; then fresh_server saturation_server; saturation; end_server; fi
fi

# ---- 2. soak ----------------------------------------------------------------------------------------------------
if on soak; then
  SOAK_RATE=$($PY -c "print(round(0.7 * $SAT_RATE, 2))")
  PIECES=$(( (SOAK_SECONDS + SOAK_PIECE - 1) / SOAK_PIECE ))
  fresh_server soak_server
  step "soak: ${SOAK_RATE} req/s (70 % of $SAT_RATE) over gRPC, $PIECES x $SOAK_PIECE s; RSS every $SOAK_SAMPLE s"
  metrics soak_before; procstat soak_start
  loadavg soak
  sampler soak "$SOAK_SAMPLE"
  for i in $(seq 1 "$PIECES"); do
    grpc_load --seed "$((100 + i))" -r "$SOAK_RATE" -d "$SOAK_PIECE" --json "$WORK/soak_$i.json" \
      > "$WORK/soak_$i.txt" 2>&1
    loadavg "soak_$i"
  done
  wait_idle soak_after; metrics soak_after; procstat soak_end
  stop_pid "$SAMPLER_PID"
  end_server
fi

# ---- 4. client faults (before 3: with --one-server the drain ends the server) ----------------------------------
if on faults; then
  fresh_server faults_server
  FAULT_RATE=$($PY -c "print(round(0.7 * $SAT_RATE, 2))")
  step "faults: a normal run (${FAULT_RATE} req/s over gRPC, $NORMAL_SECONDS s) before and after the faulty clients"
  loadavg faults
  if [[ $ONE_SERVER == 0 ]] || ! on overload; then  # HTTP used once before the baseline, as gRPC is just below
    http_load --seed 30 -c 4 -d 3 --json "$WORK/faults_http_warm.json" > "$WORK/faults_http_warm.txt" 2>&1
  fi
  normal_run() {  # normal_run NAME: the same open loop before and after the faults
    grpc_load --seed 31 -r "$FAULT_RATE" -d "$NORMAL_SECONDS" --warmup "$NORMAL_WARMUP" --json "$WORK/$1.json" \
      > "$WORK/$1.txt" 2>&1
  }
  normal_run faults_normal_before
  wait_idle faults_before; sleep 1; procstat faults_before; metrics faults_before
  step "faults: $FAULT_COUNT per fault (slowloris: $SLOW_CONNS connections, watched while the others run)"
  clients faults --grpc "$GRPC" --http "$HTTP" --repository "$WORK/models" --model "$MODEL" --lengths "$PY_LENGTHS" \
    --seed 40 --count "$FAULT_COUNT" --slowloris "$SLOW_CONNS" --slowloris-s "$SLOW_WATCH" --hold-s "$HOLD" \
    --out "$WORK/faults.json" | tee "$WORK/faults.txt"
  wait_idle faults_after
  settle_fds "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["fds"])' "$WORK/faults_before.proc.json")"
  procstat faults_after; metrics faults_after
  loadavg faults_normal_after
  normal_run faults_normal_after
  wait_idle faults_end; procstat faults_end
  end_server
  loadavg faults_end
fi

# ---- 3. drain under load ----------------------------------------------------------------------------------------
# Closed loops of -n requests: once the server has gone their errors come at once, so they end soon after it. n is
# well above what the server can answer before the SIGTERM (3 x the saturated rate x (hold + 10 s)), at least 20000.
if on drain; then
  fresh_server drain_server
  DRAIN_N=$($PY -c "import math; print(max(20000, math.ceil(3 * ${SAT_RATE:-0} * ($DRAIN_HOLD + 10))))")
  step "drain: closed loops -c 16 over gRPC and over HTTP; SIGTERM after $DRAIN_HOLD s at full load"
  metrics drain_before; loadavg drain
  "${GRPC_LT[@]}" --seed 21 -c 16 -n "$DRAIN_N" --max-duration 300 --json "$WORK/drain_grpc.json" \
    > "$WORK/drain_grpc.txt" 2>&1 &
  G_PID=$!; PIDS+=($G_PID)
  "${HTTP_LT[@]}" --seed 22 -c 16 -n "$DRAIN_N" --max-duration 300 --json "$WORK/drain_http.json" \
    > "$WORK/drain_http.txt" 2>&1 &
  H_PID=$!; PIDS+=($H_PID)
  PROBES=()
  for p in grpc http; do  # they tell a refusal (UNAVAILABLE / 503) from a connection the exited server refused
    address=$GRPC; [[ $p == http ]] && address=$HTTP
    "$PY" "$CLIENTS" probe --protocol "$p" --address "$address" --repository "$WORK/models" --model "$MODEL" \
      --lengths "$PY_LENGTHS" --seed 23 --rate "$PROBE_RATE" --duration 300 --events --stop-after-connection-errors 20 \
      --out "$WORK/drain_${p}_probe.json" &
    PROBES+=($!); PIDS+=($!)
  done
  clients wait-idle --url "http://$HTTP/metrics" --model "$MODEL" --min-in-flight 24 --timeout 120 \
    > "$WORK/drain_loaded.idle.json"  # both loops running (16 each)
  sleep "$DRAIN_HOLD"
  metrics drain_at_sigterm
  T0=$(date +%s.%N)  # epoch seconds, against the probes' send times and the server log's
  kill -TERM "$SERVER_PID"
  for _ in $(seq 1 250); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done  # grace 30 s + margin
  CODE=0
  if kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID"; fi
  wait "$SERVER_PID" || CODE=$?
  T1=$(date +%s.%N)
  stop_pid "$SERVER_PID"; SERVER_PID=""
  for pid in "$G_PID" "$H_PID" "${PROBES[@]}"; do wait "$pid" || true; stop_pid "$pid"; done
  echo "{\"exit_code\": \"$CODE\", \"sigterm_epoch\": $T0, \"exit_epoch\": $T1, \"log\": \"$SERVER_LOG\"}" \
    > "$WORK/drain_exit.json"
  loadavg drain_end
fi

step "report"
loadavg end
set +e
$PY "$HERE/reliability_report.py" "$WORK" "$OUT" "$CHECK"
code=$?
set -e
exit $code
