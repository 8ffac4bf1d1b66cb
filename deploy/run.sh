#!/usr/bin/env bash
# Installs dependencies, builds, exports the example models and runs the main job on them.
# The main job is sluice-server on the example models (KServe v2 gRPC on :8001, HTTP on :8000).
# Usage: deploy/run.sh [extra sluice-server flags, e.g. --http-port 9000 --grpc-port 9001]
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)"
cat <<'CURL'
sluice-server is starting (loads and warms every bucket, then prints READY). Once ready, try:
  curl -s localhost:8000/v2/health/ready -o /dev/null -w '%{http_code}\n'
  curl -s -X POST localhost:8000/v2/models/text_embed/infer -H 'Content-Type: application/json' \
    -d '{"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,5],"data":[101,7592,2088,999,102]}]}'
CURL
exec build/server/sluice-server --config deploy/config/example.yaml "$@"
