#!/usr/bin/env bash
# Whisper served by sluice-server, loaded by sluice-loadtest at 1, 4 and 16 files in flight (closed loop), through
# Riva Recognize (--api riva-offline) and OpenAI's /v1/audio/transcriptions (--api openai-audio): RTFx, latency,
# audio-seconds per dollar (--preset, deploy/pricing.yaml) and WER against the test set's references. The model
# and test set are what the whisper_test CTest leaves in build/tests/voice/whisper (the converted Whisper base
# export, models/whisper_base, and the espeak-ng test set, testset/: 12 clips of 6-14 s with .txt references).
#
# Usage: loadtest/bench/whisper_bench.sh [--levels 1,4,16] [--files-per-level F] [--apis riva-offline,openai-audio]
#            [--preset c7i.xlarge] [--whisper-dir DIR] [--out DIR]
#   defaults: 1,4,16; F = max(12, 2 x level) files per level (drawn from the 12 clips, seeded); both APIs;
#   c7i.xlarge; build/tests/voice/whisper; a new /tmp/sluice-whisper.XXXXXX
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${SLUICE_BUILD:-$ROOT/build}
SERVER=$BUILD/server/sluice-server LOADTEST=$BUILD/loadtest/sluice-loadtest
LEVELS=1,4,16 FILES= APIS=riva-offline,openai-audio PRESET=c7i.xlarge WHISPER=$BUILD/tests/voice/whisper OUT=
while (($#)); do
  case $1 in
    --levels) LEVELS=$2 ;;
    --files-per-level) FILES=$2 ;;
    --apis) APIS=$2 ;;
    --preset) PRESET=$2 ;;
    --whisper-dir) WHISPER=$2 ;;
    --out) OUT=$2 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
  (($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
PY=/usr/bin/python3
for bin in "$SERVER" "$LOADTEST"; do [[ -x $bin ]] || { echo "missing $bin: build first" >&2; exit 2; }; done
for need in models/whisper_base/config.yaml testset/manifest.tsv; do
  [[ -e $WHISPER/$need ]] || { echo "missing $WHISPER/$need: run 'ctest -R whisper_test' first" >&2; exit 2; }
done
WORK=${OUT:-$(mktemp -d /tmp/sluice-whisper.XXXXXX)}
mkdir -p "$WORK"
source "$HERE/bench_lib.sh"

# The clips and their references only (the folder's manifest.tsv is not audio).
mkdir -p "$WORK/audio"
cp "$WHISPER"/testset/*.wav "$WHISPER"/testset/*.txt "$WORK/audio/"
start_repository_server "$SERVER" "$WHISPER/models" server
step "sluice-server ready: grpc $GRPC http $HTTP"
IFS=, read -ra API_LIST <<< "$APIS"
IFS=, read -ra LEVEL_LIST <<< "$LEVELS"
for api in "${API_LIST[@]}"; do
  if [[ $api == openai-audio ]]; then address=$HTTP; else address=$GRPC; fi
  for level in "${LEVEL_LIST[@]}"; do
    files=${FILES:-$(( level * 2 > 12 ? level * 2 : 12 ))}
    step "$api: $files files, $level in flight"
    "$LOADTEST" --no-progress --api "$api" -u "$address" -m whisper_base --audio-dir "$WORK/audio" \
      --model-repository "$WHISPER/models" -c "$level" -n "$files" --seed 1 --timeout-ms 600000 \
      --pricing "$ROOT/deploy/pricing.yaml" --preset "$PRESET" --metrics-url none \
      --json "$WORK/$api-c$level.json" > "$WORK/$api-c$level.txt" 2>&1 ||
      { cat "$WORK/$api-c$level.txt" >&2; echo "sluice-loadtest failed ($api, $level in flight)" >&2; exit 1; }
    cut -d' ' -f1-3 /proc/loadavg > "$WORK/$api-c$level-loadavg.txt"
  done
done
scrape "$WORK/server.metrics"

$PY - "$WORK" "$APIS" "$LEVELS" <<'PY'
import json, os, sys
work, apis, levels = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
print(f"{'api':<14}{'in flight':>10}{'files ok':>10}{'RTFx':>7}{'p50 ms':>9}{'p99 ms':>9}{'audio s/$':>11}"
      f"{'WER':>8}{'loadavg':>17}")
for api in apis:
    for level in levels:
        base = os.path.join(work, f"{api}-c{level}")
        with open(base + ".json") as f:
            doc = json.load(f)
        r = doc["results"]
        with open(base + "-loadavg.txt") as f:
            load = f.read().strip()
        s, lat = r["speech"], r["latency_ms"]
        cost = doc.get("cost", {}).get("audio_seconds_per_dollar", float("nan"))
        wer = s.get("wer", {}).get("wer", float("nan"))
        print(f"{api:<14}{level:>10}{r['ok']:>5}/{r['requests']:<4}{s['rtfx']:>7.2f}{lat['p50']:>9.0f}"
              f"{lat['p99']:>9.0f}{cost:>11.0f}{wer:>8.4f}{load:>17}")
PY
echo "outputs in $WORK"
