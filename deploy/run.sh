#!/usr/bin/env bash
# Installs dependencies, builds, exports the example models and runs the main job on them.
# Until the front ends land (gRPC/HTTP server), the main job loads and warms the example model repository,
# prints every bucket's load/warm time, and times each bucket graph (the raw backend limit).
# Usage: deploy/run.sh [extra sluice-bench-backend flags, e.g. --load-only or --models asr_ctc]
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)"
exec build/backend/sluice-bench-backend --config deploy/config/example.yaml "$@"
