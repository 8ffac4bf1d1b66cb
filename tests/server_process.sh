# Sourced by the test scripts that run a real sluice-server process (bash; `set -euo pipefail` in the caller):
#   start_sluice_server CONFIG LOG TIMEOUT_S   starts it on CONFIG, waits for its READY line; sets SERVER_PID,
#                                              READY_LINE, GRPC and HTTP (the addresses it printed)
#   drain_sluice_server TIMEOUT_S              SIGTERM, then requires exit 0 within TIMEOUT_S; clears SERVER_PID
# The caller defines fail MESSAGE (prints and exits non-zero) and kills "$SERVER_PID" on EXIT (it may be empty).

start_sluice_server() {
  local config=$1 log=$2 timeout_s=$3
  "$SERVER" --config "$config" > "$log" 2>&1 &
  SERVER_PID=$!
  local tries=$(( timeout_s * 5 ))
  for _ in $(seq 1 "$tries"); do
    grep -q '^sluice-server READY ' "$log" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "sluice-server exited before READY"
    sleep 0.2
  done
  READY_LINE=$(grep '^sluice-server READY ' "$log") || fail "sluice-server not READY after $timeout_s s"
  GRPC=$(sed -n 's/.* grpc=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
  HTTP=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' <<< "$READY_LINE")
}

drain_sluice_server() {
  local timeout_s=$1
  kill -TERM "$SERVER_PID"
  for _ in $(seq 1 $(( timeout_s * 5 ))); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$SERVER_PID" 2>/dev/null && fail "sluice-server still running $timeout_s s after SIGTERM"
  local code=0
  wait "$SERVER_PID" || code=$?
  SERVER_PID=""
  [ "$code" -eq 0 ] || fail "sluice-server exited $code after SIGTERM"
}
