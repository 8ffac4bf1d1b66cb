#!/usr/bin/env bash
# loadtest/bench/transport_bench.sh: what sluice's request path costs over a bare transport (issue 31 item 3).
# The same client (sluice-loadtest, closed loop) and requests (1024 FP32 = 4 KiB in, 4 KiB out) against:
#   echo      sluice-echo-server: a bare KServe v2 gRPC echo (callback API, inputs copied to outputs at once)
#   sluice    sluice-server on a zero-cost sim model (buckets [1024] x batch 1/2/4/8, max_queue_delay_ms 0, one
#             instance): decode, validate, queue, batch, the instance, answer, encode; over gRPC and over HTTP
#   baseline  (with --baseline PATH) another sluice-server binary on the same model, e.g. an earlier commit's
# at each --concurrency, --repeats times, servers interleaved in every repeat (a slow moment of the machine hits
# all of them), each point --duration seconds after 1 s of warm-up. Reported per server and concurrency: req/s
# median (min-max), the ratio of medians to the echo, p50 ms, and the machine's load average during the run.
# Usage: loadtest/bench/transport_bench.sh [--server PATH] [--loadtest PATH] [--echo PATH] [--baseline PATH]
#          [--concurrency LIST] [--repeats N] [--duration S] [--out DIR]
#   defaults: build/server/sluice-server, build/loadtest/sluice-loadtest, build/loadtest/sluice-echo-server, no
#   baseline, 1,8, 3 repeats, 5 s, a new /tmp/sluice-transport.XXXXXX. About 2-4 minutes.
# A benchmark, not a test: nothing passes or fails on a number. Traffic goes to 127.0.0.1 only; every process started
# here is stopped on exit.
set -euo pipefail

HERE=$(dirname "$(realpath "$0")")
SERVER=build/server/sluice-server LOADTEST=build/loadtest/sluice-loadtest ECHO=build/loadtest/sluice-echo-server
BASELINE= CONCURRENCY=1,8 REPEATS=3 DURATION=5 OUT=
usage() { sed -n '/^# Usage:/,/^#   baseline, 1,8/p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
while (($#)); do
  case $1 in
    --server) SERVER=$2 ;;
    --loadtest) LOADTEST=$2 ;;
    --echo) ECHO=$2 ;;
    --baseline) BASELINE=$2 ;;
    --concurrency) CONCURRENCY=$2 ;;
    --repeats) REPEATS=$2 ;;
    --duration) DURATION=$2 ;;
    --out) OUT=$2 ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
  (($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
PY=/usr/bin/python3  # Debian's python3; only its standard library is used here
for bin in "$SERVER" "$LOADTEST" "$ECHO" ${BASELINE:+"$BASELINE"}; do
  [[ -x $bin ]] || { echo "missing $bin (--server, --loadtest, --echo, --baseline)" >&2; exit 2; }
done
[[ $CONCURRENCY =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ && $REPEATS =~ ^[1-9][0-9]*$ && $DURATION =~ ^[1-9][0-9]*$ ]] ||
  { echo "bad --concurrency (a list like 1,8), --repeats or --duration (whole seconds)" >&2; exit 2; }
if [[ -n $OUT ]]; then mkdir -p "$OUT"; WORK=$(realpath "$OUT"); else WORK=$(mktemp -d /tmp/sluice-transport.XXXXXX); fi
. "$HERE/bench_lib.sh"  # step, start_server, stop_server; kills what it started on exit

write_echo_repository "$WORK/repo"

step "transport bench: $SERVER${BASELINE:+ (baseline $BASELINE)} vs $ECHO; -c $CONCURRENCY, $REPEATS repeats," \
  "${DURATION} s each; folder $WORK"
start_server echo "$ECHO" --model "$WORK/repo/echo"
ECHO_GRPC=$GRPC
start_repository_server "$SERVER" "$WORK/repo" sluice
SLUICE_GRPC=$GRPC SLUICE_HTTP=$HTTP
if [[ -n $BASELINE ]]; then
  start_repository_server "$BASELINE" "$WORK/repo" baseline
  BASE_GRPC=$GRPC BASE_HTTP=$HTTP
fi

# point NAME C R ARGS...: one closed-loop run; its report in $WORK/NAME_cC_rR.json, the load average after it in .la
point() {
  local tag="$1_c$2_r$3"; shift 3
  "$LOADTEST" --no-progress --seed 1 -m echo --lengths fixed:1024 -d "$DURATION" --warmup 1 --json "$WORK/$tag.json" \
    "$@" > "$WORK/$tag.txt" 2>&1 || echo "  $tag: sluice-loadtest failed; see $WORK/$tag.txt" >&2
  cut -d' ' -f1 /proc/loadavg > "$WORK/$tag.la"
}
for ((r = 1; r <= REPEATS; r++)); do
  for c in ${CONCURRENCY//,/ }; do
    point echo "$c" "$r" -u "$ECHO_GRPC" --metrics-url none -c "$c"
    point sluice_grpc "$c" "$r" -u "$SLUICE_GRPC" --metrics-url none -c "$c"
    point sluice_http "$c" "$r" --protocol http -u "$SLUICE_HTTP" --model-repository "$WORK/repo" -c "$c"
    if [[ -n $BASELINE ]]; then
      point baseline_grpc "$c" "$r" -u "$BASE_GRPC" --metrics-url none -c "$c"
      point baseline_http "$c" "$r" --protocol http -u "$BASE_HTTP" --model-repository "$WORK/repo" -c "$c"
    fi
  done
  step "repeat $r of $REPEATS done"
done

$PY - "$WORK" "$CONCURRENCY" "$REPEATS" "${BASELINE:+1}" <<'EOF' | tee "$WORK/table.txt"
import json, statistics, sys
work, conc, repeats, baseline = sys.argv[1], [int(c) for c in sys.argv[2].split(',')], int(sys.argv[3]), sys.argv[4]
names = ['echo', 'sluice_grpc', 'sluice_http'] + (['baseline_grpc', 'baseline_http'] if baseline else [])


def figures(name, c):
    rps, p50, la = [], [], []
    for r in range(1, repeats + 1):
        try:
            res = json.load(open(f'{work}/{name}_c{c}_r{r}.json'))['results']
        except (OSError, KeyError, ValueError):
            continue
        if res['errors'] == 0:
            rps.append(res['req_per_s'])
            p50.append(res['latency_ms']['p50'])
        la.append(float(open(f'{work}/{name}_c{c}_r{r}.la').read()))
    return rps, p50, la


def spread(xs, fmt):
    if not xs:
        return 'n/a'
    m = statistics.median(xs)
    return fmt.format(m) + (f' ({fmt.format(min(xs))}-{fmt.format(max(xs))})' if len(xs) > 1 else '')


print('| server | calls in flight | req/s median (min-max) | ÷ echo | p50 ms | load average |')
print('| --- | --- | --- | --- | --- | --- |')
for c in conc:
    echo = figures('echo', c)[0]
    for name in names:
        rps, p50, la = figures(name, c)
        ratio = f'{statistics.median(rps) / statistics.median(echo):.2f}' if rps and echo else 'n/a'
        print(f'| {name} | {c} | {spread(rps, "{:.0f}")} | {ratio} | {spread(p50, "{:.3f}")} | {spread(la, "{:.2f}")} |')
print(f'(runs with errors are left out; reports and logs: {work})')
EOF
