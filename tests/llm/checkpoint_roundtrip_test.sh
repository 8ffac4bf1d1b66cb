#!/usr/bin/env bash
# Bring-your-own-checkpoint path of llama_export.py: re-exports MODEL_DIR/hf (the Hugging Face checkpoint written
# next to the graphs) with --checkpoint into WORK_DIR, a subset of the buckets, and checks that those graphs give
# exactly the same logits and cache as MODEL_DIR's own (check_generation_padding.py --same-as), then runs the
# padding checks on the re-export itself, whose greedy generations must equal MODEL_DIR's reference (same weights:
# the reference is copied, not regenerated).
#   checkpoint_roundtrip_test.sh PYTHON COMPILE_DIR MODEL_DIR WORK_DIR
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 PYTHON COMPILE_DIR MODEL_DIR WORK_DIR" >&2
  exit 2
fi
PYTHON=$1 COMPILE=$2 MODEL=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
"$PYTHON" "$COMPILE/llama_export.py" --out "$WORK" --checkpoint "$MODEL/hf" --name llama_roundtrip \
  --prefill-lengths 64,128 --decode-batch-sizes 1,4 --kv-lengths 256,1024 --no-reference
cp "$MODEL/reference_generation.json" "$WORK/llama_roundtrip/"
"$PYTHON" "$COMPILE/check_generation_padding.py" "$MODEL" --same-as "$WORK/llama_roundtrip"
"$PYTHON" "$COMPILE/check_generation_padding.py" "$WORK/llama_roundtrip"
