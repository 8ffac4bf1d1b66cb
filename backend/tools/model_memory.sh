#!/usr/bin/env bash
# What each model costs a real sluice-server process (README "Memory"): for every model of MODELS_DIR, alone in a
# repository, one server is started (one cpu instance, the model's own config), and after READY this prints the
# model's files on disk, the server's resident memory (VmRSS, VmHWM) and, where the server exports it, its
# sluice_model_memory_bytes gauges.
#
#   backend/tools/model_memory.sh SLUICE_SERVER MODELS_DIR [MODEL ...]     (default: every model in MODELS_DIR)
set -euo pipefail
SERVER=$1
MODELS=$2
shift 2
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for d in "$MODELS"/*/config.yaml; do names+=("$(basename "$(dirname "$d")")"); done
fi
HERE=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../tests/server_process.sh
source "$HERE/tests/server_process.sh"
WORK=$(mktemp -d)
SERVER_PID=""
fail() { echo "model_memory.sh: $*" >&2; exit 1; }
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
status_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$SERVER_PID/status"; }

echo "| model | graphs | on disk (MiB) | weights / cache / graphs gauges (MiB) | server VmRSS (MiB) | VmHWM (MiB) |"
echo "|---|---|---|---|---|---|"
for name in "${names[@]}"; do
  repo="$WORK/repo-$name"
  mkdir -p "$repo"
  ln -s "$(cd "$MODELS/$name" && pwd)" "$repo/$name"
  cat > "$WORK/server.yaml" <<YAML
grpc: {address: 127.0.0.1:0}
http: {address: 127.0.0.1:0}
model_repository: $repo
log_level: info
YAML
  start_sluice_server "$WORK/server.yaml" "$WORK/$name.log" 300
  rss=$(status_kb VmRSS)
  hwm=$(status_kb VmHWM)
  gauges=$(curl -sf "http://$HTTP/metrics" | awk -v m="$name" '
    /^sluice_model_memory_bytes/ && index($0, "model=\"" m "\"") {
      k = $0; sub(/.*kind="/, "", k); sub(/".*/, "", k); v[k] = $NF }
    END { if (length(v)) printf "%.1f / %.1f / %.2f", v["weights"] / 1048576, v["cache"] / 1048576, v["graphs"] / 1048576; else printf "(none)" }')
  graphs=$(find -L "$MODELS/$name/graphs" -name '*.pt' | wc -l)
  disk=$(du -sbL "$MODELS/$name" | cut -f1)
  echo "| $name | $graphs | $(mib "$disk") | $gauges | $(( rss / 1024 )) | $(( hwm / 1024 )) |"
  drain_sluice_server 60
done
