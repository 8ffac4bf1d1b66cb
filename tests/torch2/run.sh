#!/usr/bin/env bash
# Builds sluice's libtorch backend and tests/backend's backend tests against the libtorch 2.x inside PyPI's `torch`
# wheel (tests/torch2/CMakeLists.txt), exports the example models, runs the tests, prints each phase's wall time.
#
#   tests/torch2/run.sh WORK_DIR [--export wheel|debian] [--transformers]
#
# Everything goes under WORK_DIR: venv/ (torch $TORCH_VERSION from PyPI), models-<mode>/ (the exported graphs),
# build/. A second run with the same WORK_DIR reuses what is there (the venv if it holds the pinned versions, the
# models if their export finished, the build). Every other dependency is Debian's (deploy/install-deps.sh).
#
# --export wheel (default): the graphs are exported by the wheel's own Python torch, the combination a deployment
#   uses. The wheel's `import torch` needs the nvidia-* CUDA wheels it depends on (no CPU-only torch for Linux x86-64
#   on PyPI), so the venv gets all of them: ~4.1 GB downloaded, ~6.8 GB installed.
# --export debian: the graphs are exported by Debian's torch 1.13.1 (/usr/bin/python3, as in the main build) and
#   loaded by libtorch 2.x (TorchScript reads files written by older versions). The venv gets only the wheel and
#   the two CUDA libraries libtorch_cpu.so itself NEEDs (libcudart.so.12, libcupti.so.12): ~0.9 GB downloaded.
# --transformers (implied by --export wheel): the venv also gets the wheel's dependencies (its Python must import
#   torch) and transformers 4.57.1 (requirements-transformers.txt, hash-checked), and the build registers
#   qwen3_transformers_test (Qwen3 and the other Hugging Face families against it). Measured here: the full venv
#   2 min (download + install, 6.8 GB), transformers 13 s more, the test 67 s at load average 3 (197 s at 7).
# Measured here from an empty WORK_DIR, cold build, 2 shared cores: wheel 23 min, debian 11 min (README: libtorch 2.x).
set -euo pipefail

# torch 2.9.1: the torch that AWS's torch-neuronx 2.9.0 (deploy/docker/Dockerfile.neuron) pairs with, and a new-ABI
# (_GLIBCXX_USE_CXX11_ABI=1) build like every PyPI torch from 2.7.0 on. The two nvidia pins are torch 2.9.1's own.
TORCH_VERSION=2.9.1
CUDA_RUNTIME=nvidia-cuda-runtime-cu12==12.8.90
CUDA_CUPTI=nvidia-cuda-cupti-cu12==12.8.90
EXPORT_PACKAGES=(numpy==2.4.6 pyyaml==6.0.4 sentencepiece==0.2.3)  # what backend/compile/*.py imports besides torch

usage() { echo "usage: $0 WORK_DIR [--export wheel|debian] [--transformers]" >&2; exit 2; }
[ $# -ge 1 ] || usage
mode=wheel
transformers=0
work_arg=$1
shift
while [ $# -gt 0 ]; do
  case "$1" in
    --export) [ $# -ge 2 ] || usage; mode=$2; shift 2 ;;
    --transformers) transformers=1; shift ;;
    *) usage ;;
  esac
done
case "$mode" in wheel|debian) ;; *) usage ;; esac
if [ "$mode" = wheel ]; then transformers=1; fi

start=$(date +%s)
phase_start=$start
phase() { local now; now=$(date +%s); echo "torch2: $1 $(( now - phase_start )) s"; phase_start=$now; }

root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$work_arg"
work="$(cd "$work_arg" && pwd)"
cd "$root"
deploy/install-deps.sh

# --- the venv: torch from PyPI -------------------------------------------------------------------------------------
venv="$work/venv"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/pip" install --no-cache-dir --disable-pip-version-check --progress-bar off)
installed() { "$venv/bin/pip" show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }
if [ "$transformers" = 1 ]; then
  # The full wheel with its dependencies, so the wheel's Python can import torch (to export; for transformers).
  if [ "$(installed torch)" != "$TORCH_VERSION" ] || [ -z "$(installed nvidia-cudnn-cu12)" ]; then
    "${pip[@]}" "torch==$TORCH_VERSION" "${EXPORT_PACKAGES[@]}"
  fi
else
  # Only what the C++ backend loads: the wheel alone (no Python dependencies) and libtorch_cpu.so's two CUDA NEEDs.
  if [ "$(installed torch)" != "$TORCH_VERSION" ] || [ -z "$(installed nvidia-cuda-cupti-cu12)" ]; then
    "${pip[@]}" --no-deps "torch==$TORCH_VERSION" "$CUDA_RUNTIME" "$CUDA_CUPTI"
  fi
fi
torch2_python=""
if [ "$transformers" = 1 ]; then
  requirements=tests/torch2/requirements-transformers.txt
  if [ "$(installed transformers)" != "$(sed -n 's/^transformers==\([^ ]*\) .*/\1/p' "$requirements")" ]; then
    "${pip[@]}" --require-hashes -r "$requirements"
  fi
  torch2_python=$venv/bin/python
fi
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
torch_dir="$site/torch"
echo "torch2: venv $(du -sh "$venv" | cut -f1) ($torch_dir)"
phase "venv (download + install)"

# --- the example models ---------------------------------------------------------------------------------------------
models="$work/models-$mode"
if [ ! -f "$models/.exported" ]; then
  rm -rf "$models"
  if [ "$mode" = wheel ]; then
    python="$venv/bin/python"
    "$python" -c 'import torch; print("torch2: exporting with torch", torch.__version__, "cxx11 abi",
                  torch.compiled_with_cxx11_abi()); assert torch.compiled_with_cxx11_abi()'
  else
    python=/usr/bin/python3
  fi
  # Every example model: the backend tests use asr_ctc, text_embed and llama_tiny, and list all four.
  "$python" backend/compile/export_models.py --out "$models"
  touch "$models/.exported"
fi
phase "export ($mode)"

# --- build and test -------------------------------------------------------------------------------------------------
# ccache: reuse across clones of the tree (the wheel's paths under WORK_DIR still make another WORK_DIR miss).
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
cmake -S tests/torch2 -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSLUICE_TORCH_DIR="$torch_dir" -DSLUICE_TEST_MODELS="$models" -DSLUICE_TORCH2_PYTHON="$torch2_python"
cmake --build "$work/build" -j "$(nproc)"
phase "configure + build"
ldd "$work/build/torch2_backend_tests" | grep -E 'libtorch|libc10|libcudart|libcupti|not found' | sed 's/^\s*/torch2: ldd: /'
if ldd "$work/build/torch2_backend_tests" | grep -q -E 'x86_64-linux-gnu/lib(torch|c10)'; then
  echo "torch2: the test binary loads Debian's libtorch, not the wheel's" >&2
  exit 1
fi
ctest --test-dir "$work/build" --output-on-failure -j 2 --timeout 600
phase "tests"
echo "torch2: total $(( $(date +%s) - start )) s (torch $TORCH_VERSION, graphs exported by $mode torch)"
