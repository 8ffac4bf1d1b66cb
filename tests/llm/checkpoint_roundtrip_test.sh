#!/usr/bin/env bash
# Bring-your-own-checkpoint path of llama_export.py: re-exports MODEL_DIR/hf (the Hugging Face checkpoint written
# next to the graphs) with --checkpoint into WORK_DIR, a subset of the buckets, and checks that those graphs give
# exactly the same logits and cache as MODEL_DIR's own (check_generation_padding.py --same-as), then runs the
# padding checks on the re-export itself, whose greedy generations must equal MODEL_DIR's reference (same weights:
# the reference is copied, not regenerated). First, buckets beyond the checkpoint's context are refused by name
# (backend/compile/export_checks.py, shared with hf_export.py): exit 1, the bucket and the limit in the message,
# nothing written.
#   checkpoint_roundtrip_test.sh PYTHON COMPILE_DIR MODEL_DIR WORK_DIR
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 PYTHON COMPILE_DIR MODEL_DIR WORK_DIR" >&2
  exit 2
fi
PYTHON=$1 COMPILE=$2 MODEL=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
refused() {
  local needle=$1 rc=0
  shift
  "$PYTHON" "$COMPILE/llama_export.py" --out "$WORK/refused" --checkpoint "$MODEL/hf" --name refused "$@" \
    > /dev/null 2> "$WORK/refused.err" || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -qF "$needle" "$WORK/refused.err" || [ -e "$WORK/refused/refused" ]; then
    echo "checkpoint_roundtrip_test: FAIL: llama_export.py $* gave exit $rc (want 1), stderr:" >&2
    cat "$WORK/refused.err" >&2
    exit 1
  fi
  echo "refused as expected: $(tail -1 "$WORK/refused.err")"
}
refused "context length 2048 (the last --kv-lengths) exceeds max_position_embeddings 1024" --kv-lengths 256,2048
refused "largest prefill bucket 512 (--prefill-lengths) exceeds the context length 256" \
  --prefill-lengths 64,512 --kv-lengths 256
"$PYTHON" "$COMPILE/llama_export.py" --out "$WORK" --checkpoint "$MODEL/hf" --name llama_roundtrip \
  --prefill-lengths 64,128 --decode-batch-sizes 1,4 --kv-lengths 256,1024 --no-reference
cp "$MODEL/reference_generation.json" "$WORK/llama_roundtrip/"
"$PYTHON" "$COMPILE/check_generation_padding.py" "$MODEL" --same-as "$WORK/llama_roundtrip"
"$PYTHON" "$COMPILE/check_generation_padding.py" "$WORK/llama_roundtrip"
