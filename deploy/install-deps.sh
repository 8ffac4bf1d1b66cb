#!/usr/bin/env bash
# Installs every Debian package sluice builds, runs or tests with, in one apt-get call (one Docker layer).
# Idempotent: skips apt entirely when every package is already installed. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config clang libclang-rt-14-dev  # clang: -Wthread-safety build; rt: its sanitizers
  # RPC and wire formats
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  # model execution: libtorch (C++), python3-torch (graph export), a threaded BLAS for libtorch
  libtorch-dev python3-torch python3-yaml python3-numpy libopenblas0-pthread
  # server plumbing
  prometheus-cpp-dev libtbb-dev libyaml-cpp-dev libspdlog-dev libcli11-dev rapidjson-dev libcpp-httplib-dev
  # the HTTP front end: Boost.Beast on Asio (header-only), OpenSSL for HTTPS
  libboost-dev libssl-dev
  # tests
  libgtest-dev libgmock-dev
  # promtool (checks the /metrics output in tests)
  prometheus
  # front-end tests: TLS certificates generated with the openssl CLI; a venv for PyPI's tritonclient/perf_analyzer
  openssl python3-venv
  # sluice-loadtest: recordings from a folder (WAV, FLAC, ...) through libsndfile
  libsndfile1-dev
  # the voice API: audio containers through libsndfile, any rate resampled to the model's with libsamplerate
  libsamplerate0-dev
  # asr_digits (the example recognizer trained on synthetic speech): the build synthesizes its held-out test audio
  espeak-ng sox libsox-fmt-base
  # generation models: the tokenizer (SentencePiece, C++) and its Python side (llama_tiny's tokenizer is trained at
  # export time; the Python checks decode with it)
  libsentencepiece-dev python3-sentencepiece
  # loadtest/bench/reliability.sh: gRPC clients that cancel, disconnect or stall mid-request (loadtest/tools/)
  python3-grpcio
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"
