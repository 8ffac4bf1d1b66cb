#!/usr/bin/env bash
# Qwen3 (and every other family of tests/llm/hf_arch_check.py) against a transformers that knows it: 4.57.1, pinned
# with its dependencies by sha256 in requirements-transformers.txt, which tests/torch2/run.sh installs into its torch
# 2.9.1 venv (Debian's torch 1.13 stops at transformers 4.44.2, which predates Qwen3). hf_arch_check.py builds each
# random-config checkpoint with transformers, exports it with backend/compile/hf_export.py run by the same venv's
# Python (so on torch 2.9.1), and requires transformers' greedy tokens, the teacher-forced logits and the padding
# checks to agree; every case must run (--require-all: none skipped for a missing config class), refusals included.
# Registered by tests/torch2/CMakeLists.txt when run.sh passes SLUICE_TORCH2_PYTHON. 67 s at load average 3, 197 s at 7.
#   qwen3_transformers_test.sh VENV_PYTHON WORK_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 VENV_PYTHON WORK_DIR" >&2; exit 2; }
PYTHON=$1 WORK=$2 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
rm -rf "$WORK" && mkdir -p "$WORK"
"$PYTHON" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")'
timeout 900 "$PYTHON" "$HERE/../llm/hf_arch_check.py" "$WORK" --require-all --no-qwen3 ||
  { echo "qwen3_transformers_test: FAILED" >&2; exit 1; }
echo "qwen3_transformers_test: PASSED in $(( $(date +%s) - START )) s"
