#!/usr/bin/env bash
# The test command (README, .ci/run): installs every dependency, builds into build/, exports the example
# models (per-bucket TorchScript graphs), then runs every test through CTest. Works on a fresh Debian 12 as root.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

deploy/install-deps.sh
# ccache: let clones in other directories (CI) reuse this machine's cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j 2 --timeout 900

# The torch-free code again, built by clang (tests/sanitizers/CMakeLists.txt): every torch-free library
# (backend/base, the backend seam and sim device, scheduler, every server/ file but main, sluice-loadtest's library)
# compiled with -Wthread-safety -Werror=thread-safety (checks every ABSL_GUARDED_BY), the loadtest unit tests run
# from it, and the scheduler's tests (the multi-threaded stress test included) under ThreadSanitizer.
CXX=clang++ cmake -S tests/sanitizers -B build-clang -G Ninja
cmake --build build-clang -j "$(nproc)"
ctest --test-dir build-clang --output-on-failure -j 2 --timeout 600

echo "tests/run.sh: total $(( $(date +%s) - start )) s"
