#!/usr/bin/env bash
# Checks sluice-advisor against measurement (README "Bucket advisor"): for two traffic mixes on the example speech
# model asr_ctc, the advised bucket lengths, powers of two and the current config (the same 5 lengths x batch sizes
# [1, 2, 4, 8] each) are exported as real TorchScript graphs, served by sluice-server, and loaded to saturation by
# sluice-loadtest (closed loop, -c 16) with exactly the mix's lengths. Prints predicted vs measured padding
# efficiency and requests/s per plan; runs are interleaved and repeated (REPEATS, default 2) so drift shows as spread.
#   loadtest/bench/advisor_compare.sh [BUILD_DIR]        (about 12 minutes on 2 cores; ADVISOR_SECONDS per run, default 20)
# Mixes (seeded, 2000 lengths each, at 16 kHz):
#   libri: LibriSpeech-like — 70 % uniform 10-16 s, 30 % lognormal (median 8 s, sigma 0.7) clipped to 1-16 s
#          (16 s: the current config's largest bucket, so that every plan serves every request);
#   short: short commands — uniform 0.5-3 s.
# A benchmark, not a test: nothing passes or fails on a number. Everything stays in the printed folder.
set -euo pipefail

BUILD=$(realpath "${1:-build}")
SECONDS_RUN=${ADVISOR_SECONDS:-20}
REPEATS=${REPEATS:-2}
PY=/usr/bin/python3
HERE=$(dirname "$(realpath "$0")")
ROOT=$(dirname "$(dirname "$HERE")")  # loadtest/bench/ -> the repository root
SERVER=$BUILD/server/sluice-server
LOADTEST=$BUILD/loadtest/sluice-loadtest
ADVISOR=$BUILD/loadtest/sluice-advisor
BENCH_BACKEND=$BUILD/backend/sluice-bench-backend
for bin in "$SERVER" "$LOADTEST" "$ADVISOR" "$BENCH_BACKEND"; do
  [[ -x $bin ]] || { echo "missing $bin: build it first (cmake --build $BUILD)" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/sluice-advisor-compare.XXXXXX)
. "$HERE/bench_lib.sh"

step "advisor vs measurement: $BUILD, work folder $WORK"
$PY - "$WORK" <<'PYEOF'
import random, sys
work = sys.argv[1]
r = random.Random(1)
libri = [int(16000 * (r.uniform(10, 16) if r.random() < 0.7 else min(16, max(1, r.lognormvariate(2.08, 0.7)))))
         for _ in range(2000)]
short = [int(16000 * r.uniform(0.5, 3.0)) for _ in range(2000)]
for name, lengths in (("libri", libri), ("short", short)):
    open(f"{work}/{name}.txt", "w").write("\n".join(map(str, lengths)) + "\n")
PYEOF

step "timings of the current graphs for the cost model (sluice-bench-backend --json)"
"$BENCH_BACKEND" --repository "$BUILD/models" --models asr_ctc --iterations 3 --json "$WORK/bench.json" \
  > "$WORK/bench.txt" 2> "$WORK/bench.log"

declare -A LENGTHS
for mix in libri short; do
  "$ADVISOR" --lengths-file "$WORK/$mix.txt" --max-buckets 5 --multiple-of 640 --max-length 256000 \
    --model-config "$BUILD/models/asr_ctc/config.yaml" --bench-json "$WORK/bench.json" --model asr_ctc \
    --json "$WORK/$mix.advice.json" > "$WORK/$mix.advice.txt"
  cat "$WORK/$mix.advice.txt"
  while read -r plan lengths; do
    LENGTHS[$mix/$plan]=$lengths
    step "exporting asr_ctc for $mix/$plan: [$lengths]"
    "$PY" "$ROOT/backend/compile/export_models.py" --out "$WORK/repo_${mix}_$plan" --models asr_ctc \
      --lengths "$lengths" --reference-cases 1 > "$WORK/export_${mix}_$plan.log" 2>&1
  done < <($PY - "$WORK/$mix.advice.json" <<'PYEOF'
import json, sys
for p in json.load(open(sys.argv[1]))["plans"]:
    key = {"advised": "advised", "current": "current"}.get(p["name"], "pow2" if p["name"].startswith("powers") else "")
    if key:
        print(key, ",".join(map(str, p["lengths"])))
PYEOF
)
done

for rep in $(seq 1 "$REPEATS"); do
  for mix in libri short; do
    for plan in advised pow2 current; do
      step "run $rep: $mix mix on the $plan buckets (-c 16, ${SECONDS_RUN} s)"
      start_repository_server "$SERVER" "$WORK/repo_${mix}_$plan" "server_${mix}_${plan}_$rep"
      "$LOADTEST" --no-progress --seed 1 -u "$GRPC" --metrics-url "http://$HTTP/metrics" -m asr_ctc \
        --model-repository "$WORK/repo_${mix}_$plan" --lengths "file:$WORK/$mix.txt" -c 16 -d "$SECONDS_RUN" \
        --warmup 3 --json "$WORK/run_${mix}_${plan}_$rep.json" > "$WORK/run_${mix}_${plan}_$rep.txt" 2>&1
      stop_server
    done
  done
done

$PY - "$WORK" "$REPEATS" <<'PYEOF'
import json, statistics, sys
work, repeats = sys.argv[1], int(sys.argv[2])
print("\nmix    plan     predicted: padding  req/s/inst  | measured: padding  req/s (runs)            audio-s/s")
for mix in ("libri", "short"):
    advice = {p["name"]: p for p in json.load(open(f"{work}/{mix}.advice.json"))["plans"]}
    measured = {}
    for plan in ("advised", "pow2", "current"):
        name = next(n for n in advice if (n == plan) or (plan == "pow2" and n.startswith("powers")))
        runs = [json.load(open(f"{work}/run_{mix}_{plan}_{r}.json")) for r in range(1, repeats + 1)]
        rps = [run["results"]["req_per_s"] for run in runs]
        audio = [run["results"].get("audio_s_per_s", 0) for run in runs]
        eff = runs[-1].get("server", {}).get("padding_efficiency", {}).get("asr_ctc", float("nan"))
        measured[plan] = statistics.mean(rps)
        p = advice[name]
        print(f"{mix:6} {plan:8} {p['padding_efficiency']:18.1%} {p['throughput_rps']:11.2f}  | "
              f"{eff:17.1%} {statistics.mean(rps):6.2f} ({', '.join(f'{x:.2f}' for x in rps)})"
              f"{'':>8}{statistics.mean(audio):8.1f}")
    print(f"       measured advised / pow2 = {measured['advised'] / measured['pow2']:.2f}x, "
          f"advised / current = {measured['advised'] / measured['current']:.2f}x")
PYEOF
step "done: $WORK"
