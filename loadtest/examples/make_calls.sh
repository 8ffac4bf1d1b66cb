#!/bin/bash
# Regenerates loadtest/examples/calls/: short espeak-ng recordings (22.05 kHz mono WAV, espeak-ng's own rate: the
# server and sluice-loadtest resample them to the model's 16 kHz) of sentences in asr_digits' vocabulary, each with
# its reference transcript beside it (<name>.txt), for `sluice-loadtest --api riva-offline --audio-dir` (WER).
# Usage: loadtest/examples/make_calls.sh [OUT_DIR]   (default: the folder beside this script)
set -euo pipefail
out=${1:-"$(cd "$(dirname "$0")" && pwd)/calls"}
mkdir -p "$out"
i=0
while IFS= read -r sentence; do
  i=$((i + 1))
  name=$(printf 'call%02d' "$i")
  espeak-ng -v en-us -s 150 -w "$out/$name.wav" "$sentence"
  printf '%s\n' "$sentence" > "$out/$name.txt"
done <<'SENTENCES'
call five five five one two three four
dial nine one one
stop
play next
SENTENCES
echo "wrote $i recordings to $out"
