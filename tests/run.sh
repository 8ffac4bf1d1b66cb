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
# (Both sanitizer projects reuse the main build's compiled Rust tokenizer crate: SLUICE_CARGO_TARGET_DIR.)
CXX=clang++ cmake -S tests/sanitizers -B build-clang -G Ninja -DSLUICE_CARGO_TARGET_DIR="$PWD/build/hf_tokenizers_cargo"
cmake --build build-clang -j "$(nproc)"
ctest --test-dir build-clang --output-on-failure -j 2 --timeout 600

# ASan + UBSan (tests/asan/CMakeLists.txt, a sibling clang project): every torch-free library instrumented, and the
# front-end unit tests, the HTTP server tests, the loadtest unit tests and the scheduler tests run under it (any
# report fails the test). The libtorch backend tests are not in it (Debian's libtorch is uninstrumented; see there).
asan_start=$(date +%s)
CXX=clang++ cmake -S tests/asan -B build-asan -G Ninja -DSLUICE_CARGO_TARGET_DIR="$PWD/build/hf_tokenizers_cargo"
cmake --build build-asan -j "$(nproc)"
ctest --test-dir build-asan --output-on-failure -j 2 --timeout 600
echo "tests/run.sh: ASan/UBSan build + tests $(( $(date +%s) - asan_start )) s"

# libFuzzer (tests/fuzz/CMakeLists.txt): one target per parser of outside input, each run for 30 s on a copy of its
# committed seed corpus (regression inputs included) with ASan + UBSan; any crash, leak or report fails the run.
# Two targets at a time: about 2.5 minutes for the ten. Long runs: tests/fuzz/run_long.sh [SECONDS].
fuzz_start=$(date +%s)
CXX=clang++ cmake -S tests/fuzz -B build-fuzz -G Ninja
cmake --build build-fuzz -j "$(nproc)"
tests/fuzz/run_ci.sh build-fuzz 30 2
echo "tests/run.sh: fuzz build + runs $(( $(date +%s) - fuzz_start )) s"

# libtorch 2.x (tests/torch2, README "libtorch 2.x"): backend/ and its backend tests built against the libtorch inside
# PyPI's torch 2.9.1 wheel, on graphs exported by Debian's torch 1.13.1. --transformers: the venv gets the wheel's
# dependencies too (4.1 GB download into build-torch2/venv instead of 0.9 GB: about 2 minutes here) and transformers
# 4.57.1, for qwen3_transformers_test (Qwen3 against a transformers that knows it, 67-197 s at load average 3-7).
# About 11 minutes cold on 2 cores, a few with the venv, the models and ccache warm.
torch2_start=$(date +%s)
tests/torch2/run.sh "$PWD/build-torch2" --export debian --transformers
echo "tests/run.sh: libtorch 2.x build + tests $(( $(date +%s) - torch2_start )) s"

echo "tests/run.sh: total $(( $(date +%s) - start )) s"
