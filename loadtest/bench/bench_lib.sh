# Shell helpers the benchmark scripts share (bench.sh, transport_bench.sh, accel_bench.sh, capacity_bench.sh, ...);
# source it after setting WORK (the run's folder) and PY (Debian's python3). Every process started here is killed
# on exit.
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
step() { printf '[%s] %s\n' "$(date +%T)" "$*"; }

# start_server NAME COMMAND...: runs it with its log in $WORK/NAME.log, waits for its READY line, and sets
# GRPC (and HTTP, for sluice-server) from that line.
start_server() {
  local name=$1; shift
  "$@" > "$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  local pid=$! line
  for _ in $(seq 1 1800); do
    if line=$(grep -m1 ' READY grpc=' "$WORK/$name.log"); then
      GRPC=$(sed -E 's/.*grpc=([^ ]+).*/\1/' <<< "$line")
      HTTP=$(sed -nE 's/.*http=([^ ]+).*/\1/p' <<< "$line")
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { echo "$name exited; see $WORK/$name.log" >&2; exit 3; }
    sleep 0.1
  done
  echo "$name not ready after 180 s; see $WORK/$name.log" >&2; exit 3
}

# start_repository_server SERVER_BINARY REPOSITORY NAME: a fresh sluice-server on REPOSITORY (loopback, ports
# chosen by the OS), its config in $WORK/NAME.yaml.
start_repository_server() {
  printf 'grpc: {address: 127.0.0.1:0}\nhttp: {address: 127.0.0.1:0}\nmodel_repository: %s\nlog_level: warn\n' \
    "$2" > "$WORK/$3.yaml"
  start_server "$3" "$1" --config "$WORK/$3.yaml"
}

# write_echo_repository DIR: the transport benchmarks' model, DIR/echo: 1024 FP32 in, the same out, on a zero-cost
# sim instance with no queue delay (bench.sh, transport_bench.sh; sluice-echo-server serves it too).
write_echo_repository() {
  mkdir -p "$1/echo"
  cat > "$1/echo/config.yaml" <<'EOF'
name: echo
kind: generic
inputs:
  - {name: input, dtype: FP32, shape: [-1]}
outputs:
  - {name: output, dtype: FP32, shape: [-1]}
buckets: {lengths: [1024], batch_sizes: [1, 2, 4, 8]}
batching: {max_queue_delay_ms: 0, max_queue_size: 1024}
instances: [{count: 1, device: sim}]
sim: {base_ms: 0, per_sample_us: 0, output_steps_per_input_step: 1}
EOF
}

# Stops the most recently started process.
stop_server() { kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true; unset 'PIDS[-1]'; }
scrape() { $PY -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
  "http://$HTTP/metrics" > "$1"; }
