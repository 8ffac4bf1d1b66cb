#!/usr/bin/env bash
# loadtest/bench/peer_bench.sh: a peer benchmark (issue 17): sluice-server against NVIDIA Triton Inference Server (the
# tritonserver of PyPI's nvidia-pytriton, loadtest/bench/peer_requirements.txt) serving the SAME asr_ctc per-bucket
# TorchScript graphs, and the same accelerator-like sim cost. Numbers, not tests: nothing passes or fails on a
# number.
#
# Servers (each one model instance; Triton's through loadtest/bench/peer_triton.py, a pytriton Python callable):
#   sluice   sluice-server on asr_ctc's exported config.yaml (buckets 16000..256000 x batch 1, 2, 4, 8,
#            max_queue_delay_ms 5, one cpu instance with intra_op_threads 1), or on the sim model below.
#   stock    Triton, stock dynamic batching (max batch 8, 5 ms queue delay): Triton batches only equal shapes;
#            the callable pads each request to its bucket and runs the bucket's graph.
#   ragged   Triton, dynamic batching with allow_ragged_batch on the input (any lengths in one batch); the
#            callable splits the batch by bucket and runs each group padded to its bucket and batch size.
#   padmax   Triton, ragged batching, every request padded to the largest bucket (256000).
# Scenarios:
#   cpu      asr_ctc's CPU graphs (--model-dir, default build/models/asr_ctc); the Triton callable uses one
#            intra-op thread (torch, OpenMP, OpenBLAS) like sluice's instance, and warms each graph twice at load.
#   sim      sluice's sim backend, sim: {base_ms: 4, per_sample_us: 0.1}, buckets 16000..256000, batch sizes
#            1, 2, 4, 8 (as loadtest/bench/accel_bench.sh); the Triton callable sleeps the same cost per executed batch,
#            cost = 4 ms + 0.1 us x B x L (B = compiled batch size, L = bucket length), outputs of the right shape.
# Load: sluice-loadtest over KServe v2 gRPC, open loop (Poisson), seed 1, the same lengths for every server:
#   by default accel_bench.sh's speech mix of 0.5-16 s utterances (--mix; a 1000-line --lengths file: 70 % 0.5-1 s,
#   15 % 1-2 s, 10 % 2-4 s, 3 % 4-8 s, 2 % 8-16 s), or any sluice-loadtest spec with --lengths (e.g. speech).
# Per server, per repeat (a fresh server each time; servers interleaved, their order rotated every repeat):
#   1. start-up: seconds from launch to its READY line (models loaded and warmed, serving);
#   2. the equal offered load (--cpu-rate / --sim-rate req/s): p50/p95/p99, delivered share, the server's CPU;
#   3. a short open-loop rate sweep on the grid rate x factor^k (--factor): up in steps of factor^2 while a level
#      passes, then the level between; down (to ~0.9 x the delivered rate when the server fell behind) while one
#      fails (at most factor^4 at once). Later repeats start at the best level found so far and step by one. Each
#      level runs --duration seconds, longer at low rates (>= 60 requests, <= 4 x --duration). A level passes as in
#      sluice-loadtest's --sweep: p99 <= --p99-ms (1000), error rate <= 1 %, delivered >= 90 % of offered.
#      Reported: the highest passing level's measured audio-seconds/s;
#   4. closed loop (--concurrency, default 1,4,16,64 calls in flight): --duration measured seconds after
#      --warmup at each point, audio-seconds/s, req/s and p50/p99; the report adds each Triton server's ratio to
#      sluice per point (sluice ÷ Triton);
#   5. peak memory: VmHWM summed over the server's processes (tritonserver + Python backend stub + the callable's
#      Python process for Triton; shared pages count once per process).
#   Every level records /proc/loadavg (before, and sampled each second during it: the max 1-min value), the
#   server's CPU (utime + stime of every process in its session, from /proc), the client's CPU (getrusage), and
#   the rest of the machine's busy CPU (/proc/stat minus those two), so that a disturbed run can be recognised:
#   a measurement whose other load exceeds --max-other-cores (0.25 of a core) is marked '!' in the table, and the
#   table opens with a NOT QUIET line counting them (its figures are not for publishing; rerun on a quiet machine).
#
# Usage: loadtest/bench/peer_bench.sh [--scenarios cpu,sim] [--servers sluice,stock,ragged,padmax] [--repeats N]
#          [--duration S] [--warmup S] [--cpu-rate R] [--sim-rate R] [--factor F] [--p99-ms MS] [--mix SPEC]
#          [--lengths SPEC] [--seed N] [--concurrency LIST] [--max-other-cores X] [--model-dir DIR]
#          [--server PATH] [--loadtest PATH] [--venv DIR] [--out DIR]
#   defaults: both scenarios, all four servers, 3 repeats, 6 s measured after 2 s of warm-up per level,
#   --cpu-rate 30, --sim-rate 40 (req/s), --factor 1.25, --p99-ms 1000, the mix above, seed 1, --concurrency
#   1,4,16,64 (none: no closed-loop points), --max-other-cores 0.25,
#   build/models/asr_ctc, $SERVER or build/server/sluice-server, $LOADTEST or build/loadtest/sluice-loadtest,
#   build-peer/venv (made, and the pinned requirements installed from PyPI, when pytriton is missing), a new
#   /tmp/sluice-peer.XXXXXX. About 30 minutes with the defaults on a 2-core machine.
# Traffic goes to 127.0.0.1 only; every process started here is stopped on exit. The folder keeps
# peer_bench.json (sluice-peer-bench/1), table.txt, every sluice-loadtest report, the servers' logs and the Triton
# callable's per-group execution counts (*.stats.json).
set -euo pipefail

HERE=$(dirname "$(realpath "$0")")
ROOT=$(dirname "$(dirname "$HERE")")  # loadtest/bench/ -> the repository root
SERVER=${SERVER:-build/server/sluice-server}
LOADTEST=${LOADTEST:-build/loadtest/sluice-loadtest}
SCENARIOS=cpu,sim SERVERS=sluice,stock,ragged,padmax REPEATS=3 DURATION=6 WARMUP=2 CPU_RATE=30 SIM_RATE=40
FACTOR=1.25 P99_MS=1000 SEED=1 LENGTHS= OUT= MODEL_DIR=build/models/asr_ctc VENV=$ROOT/build-peer/venv
CONCURRENCY=1,4,16,64 MAX_OTHER=0.25
MIX=16000:0.70,32000:0.15,64000:0.10,128000:0.03,256000:0.02
usage() { sed -n '/^# Usage:/,/^#   \/tmp\/sluice-peer/p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
while (($#)); do
  case $1 in
    --scenarios) SCENARIOS=$2 ;;
    --servers) SERVERS=$2 ;;
    --repeats) REPEATS=$2 ;;
    --duration) DURATION=$2 ;;
    --warmup) WARMUP=$2 ;;
    --cpu-rate) CPU_RATE=$2 ;;
    --sim-rate) SIM_RATE=$2 ;;
    --factor) FACTOR=$2 ;;
    --p99-ms) P99_MS=$2 ;;
    --mix) MIX=$2 ;;
    --lengths) LENGTHS=$2 ;;
    --seed) SEED=$2 ;;
    --concurrency) CONCURRENCY=$2 ;;
    --max-other-cores) MAX_OTHER=$2 ;;
    --model-dir) MODEL_DIR=$2 ;;
    --server) SERVER=$2 ;;
    --loadtest) LOADTEST=$2 ;;
    --venv) VENV=$2 ;;
    --out) OUT=$2 ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
  (($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
PY=/usr/bin/python3  # Debian's python3 (standard library only) drives the runs; the venv's runs peer_triton.py
for bin in "$SERVER" "$LOADTEST"; do [[ -x $bin ]] || { echo "missing $bin (--server/--loadtest)" >&2; exit 2; }; done
SERVER=$(realpath "$SERVER") LOADTEST=$(realpath "$LOADTEST")
num='^[0-9]+([.][0-9]+)?$'
[[ $DURATION =~ $num && $WARMUP =~ $num && $CPU_RATE =~ $num && $SIM_RATE =~ $num && $FACTOR =~ $num &&
   $P99_MS =~ $num && $REPEATS =~ ^[1-9][0-9]*$ && $SEED =~ ^[0-9]+$ && $MAX_OTHER =~ $num &&
   ($CONCURRENCY == none || $CONCURRENCY =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$) ]] ||
  { echo "bad --duration, --warmup, --cpu-rate, --sim-rate, --factor, --p99-ms, --repeats, --seed," \
      "--max-other-cores or --concurrency (a list like 1,4,16,64, or none)" >&2; exit 2; }
$PY -c "import sys; sys.exit(not (float('$FACTOR') > 1.01 and float('$DURATION') >= 2))" ||
  { echo "--factor must be > 1.01 and --duration >= 2" >&2; exit 2; }
for s in ${SERVERS//,/ }; do
  [[ $s =~ ^(sluice|stock|ragged|padmax)$ ]] || { echo "--servers: unknown server '$s'" >&2; exit 2; }
done
for s in ${SCENARIOS//,/ }; do [[ $s =~ ^(cpu|sim)$ ]] || { echo "--scenarios: unknown '$s'" >&2; exit 2; }; done
if [[ ,$SCENARIOS, == *,cpu,* ]]; then
  ls "$MODEL_DIR"/graphs/b*_l*.pt > /dev/null 2>&1 && [[ -f $MODEL_DIR/config.yaml ]] ||
    { echo "no config.yaml and graphs/b<B>_l<L>.pt in $MODEL_DIR (--model-dir)" >&2; exit 2; }
  MODEL_DIR=$(realpath "$MODEL_DIR")
fi

# The Triton side: a venv over Debian's interpreter (python3-torch visible), the pinned PyPI packages.
if [[ $SERVERS != sluice ]] && ! "$VENV/bin/python" -c 'import pytriton' 2> /dev/null; then
  echo "peer_bench: making $VENV and installing loadtest/bench/peer_requirements.txt from PyPI" >&2
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/peer_requirements.txt"
fi

if [[ -n $OUT ]]; then mkdir -p "$OUT"; WORK=$(realpath "$OUT"); else WORK=$(mktemp -d /tmp/sluice-peer.XXXXXX); fi

# The lengths: the mix as a 1000-line file (as accel_bench.sh), unless --lengths gives a spec.
if [[ -z $LENGTHS ]]; then
  $PY - "$MIX" > "$WORK/lengths.txt" <<'EOF' || exit 2
import sys
buckets = [16000, 32000, 64000, 128000, 256000]
shares = {}
for item in sys.argv[1].split(','):
    try:
        length, share = int(item.split(':')[0]), float(item.split(':')[1])
    except (ValueError, IndexError):
        sys.exit(f"--mix: '{item}' is not BUCKET_LENGTH:SHARE")
    if length not in buckets or length in shares:
        sys.exit(f"--mix: {length} is not a bucket length {buckets} or is given twice")
    shares[length] = share
if abs(sum(shares.values()) - 1) > 1e-9:
    sys.exit(f"--mix: shares sum to {sum(shares.values())}, not 1")
lines = []
for i, b in enumerate(buckets):
    n = round(shares.get(b, 0) * 1000)
    lo = buckets[i - 1] + 1 if i else b // 2 + 1
    lines += [lo + (b - lo) * k // max(1, n - 1) for k in range(n)]
print(''.join(f'{x}\n' for x in lines), end='')
EOF
  LENGTHS="file:$WORK/lengths.txt"
fi

# Repositories: asr_ctc as exported (a link to --model-dir), and accel_bench.sh's sim model.
mkdir -p "$WORK/repo_cpu" "$WORK/repo_sim/speech_sim"
[[ ,$SCENARIOS, != *,cpu,* ]] || ln -sfn "$MODEL_DIR" "$WORK/repo_cpu/asr_ctc"
cat > "$WORK/repo_sim/speech_sim/config.yaml" <<'EOF'
name: speech_sim
kind: speech
inputs:
  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}
outputs:
  - {name: log_probs, dtype: FP32, shape: [-1]}
buckets: {lengths: [16000, 32000, 64000, 128000, 256000], batch_sizes: [1, 2, 4, 8]}
batching: {max_queue_delay_ms: 5, max_queue_size: 1024}
instances: [{count: 1, device: sim}]
sim: {base_ms: 4, per_sample_us: 0.1, output_steps_per_input_step: 0.01}
EOF
for s in cpu sim; do
  printf 'grpc: {address: 127.0.0.1:0}\nhttp: {address: 127.0.0.1:0}\nmodel_repository: %s\nlog_level: warn\n' \
    "$WORK/repo_$s" > "$WORK/sluice_$s.yaml"
done
printf 'latency_ms: {p99: %s}\nmax_error_rate: 0.01\n' "$P99_MS" > "$WORK/slo.yaml"

DRIVER_PID=
stop_driver() { [[ -z $DRIVER_PID ]] || { kill -TERM "$DRIVER_PID" 2> /dev/null || :; wait "$DRIVER_PID" 2> /dev/null || :; }; }
trap stop_driver EXIT
trap 'exit 130' INT TERM

printf '[%s] peer bench: scenarios %s, servers %s, %s repeats, %s s + %s s per level, lengths %s; folder %s\n' \
  "$(date +%T)" "$SCENARIOS" "$SERVERS" "$REPEATS" "$WARMUP" "$DURATION" "$LENGTHS" "$WORK"
# The driver (Python standard library): starts and stops the servers, runs sluice-loadtest per level, samples
# /proc, writes peer_bench.json and table.txt. It stops every process it started (each server runs in its own
# session; the whole session is killed) on exit, error or signal.
$PY - "$WORK" "$SERVER" "$LOADTEST" "$VENV/bin/python" "$HERE/peer_triton.py" "$SCENARIOS" "$SERVERS" "$REPEATS" \
  "$DURATION" "$WARMUP" "$CPU_RATE" "$SIM_RATE" "$FACTOR" "$P99_MS" "$SEED" "$LENGTHS" "${MODEL_DIR:-}" "$MIX" \
  "$CONCURRENCY" "$MAX_OTHER" <<'EOF' &
import json, math, os, re, signal, statistics, subprocess, sys, threading, time

(WORK, SERVER, LOADTEST, VENV_PY, PEER, SCENARIOS, SERVERS, REPEATS, DURATION, WARMUP, CPU_RATE, SIM_RATE, FACTOR,
 P99_MS, SEED, LENGTHS, MODEL_DIR, MIX, CONCURRENCY, MAX_OTHER) = sys.argv[1:]
CONCURRENCY = [] if CONCURRENCY == 'none' else [int(c) for c in CONCURRENCY.split(',')]
MAX_OTHER = float(MAX_OTHER)
SCENARIOS, SERVERS = SCENARIOS.split(','), SERVERS.split(',')
REPEATS, DURATION, WARMUP, FACTOR, P99_MS = int(REPEATS), float(DURATION), float(WARMUP), float(FACTOR), float(P99_MS)
EQUAL = {'cpu': float(CPU_RATE), 'sim': float(SIM_RATE)}
MODEL = {'cpu': 'asr_ctc', 'sim': 'speech_sim'}
CLK = os.sysconf('SC_CLK_TCK')
KMAX, KMIN = round(math.log(12) / math.log(FACTOR)), -round(math.log(20) / math.log(FACTOR))
sessions = []  # session ids (= leader pids) of the servers started and not yet stopped


def log(msg):
    print(f"[{time.strftime('%T')}] {msg}", flush=True)


def stat_fields(pid):
    with open(f'/proc/{pid}/stat') as f:
        text = f.read()
    return text[text.rindex(')') + 2:].split()  # fields from 3 (state) on: index i = field i + 3


def session_pids(sid):
    pids = []
    for name in os.listdir('/proc'):
        if name.isdigit():
            try:
                if int(stat_fields(name)[3]) == sid:  # field 6: session
                    pids.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return pids


def kill_session(sid, sig=signal.SIGKILL):
    for pid in session_pids(sid):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def cleanup(*_):
    for sid in list(sessions):
        kill_session(sid)
    if _:
        sys.exit(130)


signal.signal(signal.SIGTERM, cleanup)
signal.signal(signal.SIGINT, cleanup)


def server_sample(sid):
    """CPU seconds (utime + stime) and VmHWM (KiB) of every process in the server's session."""
    cpu, hwm, procs = 0.0, 0, {}
    for pid in session_pids(sid):
        try:
            f = stat_fields(pid)
            c = (int(f[11]) + int(f[12])) / CLK  # fields 14, 15
            with open(f'/proc/{pid}/status') as s:
                h = int(next((l.split()[1] for l in s if l.startswith('VmHWM:')), 0))
            with open(f'/proc/{pid}/comm') as s:
                comm = s.read().strip()
        except (OSError, ValueError):
            continue
        cpu += c
        hwm += h
        procs[f'{comm}[{pid}]'] = {'cpu_s': round(c, 2), 'vmhwm_mib': round(h / 1024, 1)}
    return cpu, hwm, procs


def machine_busy():
    """(busy, steal) seconds of the whole machine from /proc/stat's cpu line."""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    steal = v[7] if len(v) > 7 else 0
    return (sum(v[:8]) - idle - steal) / CLK, steal / CLK


def loadavg():
    with open('/proc/loadavg') as f:
        return [float(x) for x in f.read().split()[:3]]


class Server:
    def __init__(self, kind, scenario, tag):
        self.kind, self.tag = kind, tag
        logf = open(f'{WORK}/{tag}.log', 'w')
        if kind == 'sluice':
            cmd = [SERVER, '--config', f'{WORK}/sluice_{scenario}.yaml']
        else:
            cmd = [VENV_PY, PEER, '--mode', kind, '--backend', scenario, '--model-name', MODEL[scenario],
                   '--workspace', f'{WORK}/{tag}.workspace', '--stats-file', f'{WORK}/{tag}.stats.json']
            if scenario == 'cpu':
                cmd += ['--model-dir', MODEL_DIR]
        self.loadavg_before = loadavg()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        sessions.append(self.proc.pid)
        ready = re.compile(r' READY grpc=(\S+)')
        while True:
            with open(f'{WORK}/{tag}.log', errors='replace') as f:
                m = ready.search(f.read())
            if m:
                break
            if self.proc.poll() is not None or time.monotonic() - t0 > 300:
                raise RuntimeError(f'{tag}: server exited or not ready after 300 s; see {WORK}/{tag}.log')
            time.sleep(0.05)
        self.startup_s = time.monotonic() - t0
        self.grpc = m.group(1)
        self.cpu_ready = server_sample(self.proc.pid)[0]

    def stop(self):
        _, hwm, procs = server_sample(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        kill_session(self.proc.pid)  # what is left (a Triton child that outlived its parent, or a hung server)
        self.proc.wait()
        sessions.remove(self.proc.pid)
        return hwm, procs


def measure(server, cmd, tag):
    """Runs one sluice-loadtest (cmd) against the server; returns what the machine did meanwhile."""
    la_before = loadavg()
    cpu0, _, _ = server_sample(server.proc.pid)
    busy0, steal0 = machine_busy()
    t0 = time.monotonic()
    with open(f'{WORK}/{tag}.txt', 'w') as out:
        lt = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    samples, done = [], threading.Event()

    def sampler():
        while not done.wait(1.0):
            samples.append(loadavg()[0])
    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    _, status, usage = os.wait4(lt.pid, 0)
    lt.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    th.join()
    wall = time.monotonic() - t0
    cpu1, _, _ = server_sample(server.proc.pid)
    busy1, steal1 = machine_busy()
    client_cpu = usage.ru_utime + usage.ru_stime
    other = max(0.0, busy1 - busy0 - (cpu1 - cpu0) - client_cpu) / wall
    return {'tag': tag, 'rc': lt.returncode, 'wall_s': round(wall, 2),
           'server_cpu_s': round(cpu1 - cpu0, 2), 'server_cores': round((cpu1 - cpu0) / wall, 3),
           'client_cpu_s': round(client_cpu, 2),
           'other_cores': round(other, 3), 'disturbed': other > MAX_OTHER,
           'steal_cores': round((steal1 - steal0) / wall, 3),
           'loadavg_before': la_before, 'loadavg_max': max(samples + [la_before[0]]),
           'loadavg_mean': round(statistics.mean(samples), 2) if samples else la_before[0]}


def base_command(server, scenario, json_path, duration):
    return [LOADTEST, '--no-progress', '--seed', SEED, '-u', server.grpc, '--metrics-url', 'none',
            '-m', MODEL[scenario], '--model-repository', f'{WORK}/repo_{scenario}', '--lengths', LENGTHS,
            '-d', f'{duration:g}', '--warmup', f'{WARMUP:g}', '--timeout-ms', '10000',
            '--max-duration', f'{WARMUP + duration + 60:g}', '--json', json_path]


def run_level(server, scenario, rate, tag):
    """One open-loop level as a one-level sluice-loadtest sweep (its pass rule); returns the figures."""
    json_path = f'{WORK}/{tag}.json'
    # at least ~60 measured requests at low rates (the delivered >= 90 % rule is noise below that), <= 4 x duration
    duration = round(max(DURATION, min(4 * DURATION, 60 / rate)), 1)
    cmd = base_command(server, scenario, json_path, duration) + [
        '--sweep', 'rate', '--sweep-levels', f'{rate:.6g}', '--slo', f'{WORK}/slo.yaml']
    res = {'rate': rate, 'duration_s': duration, **measure(server, cmd, tag)}
    try:
        with open(json_path) as f:
            step = json.load(f)['sweep']['steps'][0]
        lat = step['latency_ms']
        res.update({'pass': bool(step['pass']), 'req_per_s': step['req_per_s'],
                    'audio_s_per_s': step['audio_s_per_s'], 'error_rate': step['error_rate'],
                    'delivered': step['req_per_s'] / rate,
                    'p50_ms': lat['p50'], 'p95_ms': lat['p95'], 'p99_ms': lat['p99'], 'ok': lat['count']})
    except (OSError, KeyError, IndexError, ValueError) as e:
        res.update({'pass': False, 'error': f'no report ({e}); see {WORK}/{tag}.txt', 'delivered': 0.0})
    v = 'PASS' if res['pass'] else 'FAIL'
    log(f"  {tag}: {rate:.1f} req/s offered -> {res.get('req_per_s', 0):.1f} req/s, "
        f"{res.get('audio_s_per_s', 0):.1f} audio-s/s, p50/p95/p99 {res.get('p50_ms', 0):.0f}/"
        f"{res.get('p95_ms', 0):.0f}/{res.get('p99_ms', 0):.0f} ms, err {res.get('error_rate', 1):.3f}: {v}; "
        f"server {res['server_cores']:.2f} cores, other {res['other_cores']:.2f}; loadavg max {res['loadavg_max']:.2f}")
    return res


def run_closed(server, scenario, concurrency, tag):
    """One closed-loop point: `concurrency` calls in flight for --duration seconds after --warmup."""
    json_path = f'{WORK}/{tag}.json'
    cmd = base_command(server, scenario, json_path, DURATION) + ['-c', str(concurrency)]
    res = {'concurrency': concurrency, **measure(server, cmd, tag)}
    try:
        with open(json_path) as f:
            r = json.load(f)['results']
        lat = r['latency_ms']
        res.update({'req_per_s': r['req_per_s'], 'audio_s_per_s': r['audio_s_per_s'], 'error_rate': r['error_rate'],
                    'p50_ms': lat['p50'], 'p99_ms': lat['p99']})
    except (OSError, KeyError, ValueError) as e:
        res['error'] = f'no report ({e}); see {WORK}/{tag}.txt'
    log(f"  {tag}: -c {concurrency}: {res.get('req_per_s', 0):.1f} req/s, {res.get('audio_s_per_s', 0):.1f} audio-s/s, "
        f"p50/p99 {res.get('p50_ms', 0):.0f}/{res.get('p99_ms', 0):.0f} ms, err {res.get('error_rate', 1):.3f}; "
        f"other {res['other_cores']:.2f} cores")
    return res


def search(server, scenario, tag, equal_result, hint):
    """The rate sweep on the grid EQUAL x FACTOR^k (k = 0 is the equal-load run already made)."""
    E = EQUAL[scenario]
    tested = {0: equal_result}

    def test(k):
        if k not in tested:
            tested[k] = run_level(server, scenario, E * FACTOR ** k, f'{tag}.k{k:+d}')
        return tested[k]['pass']

    def jump_below(k):  # the next level down after a failure at k
        r = tested[k]
        if r['delivered'] < 0.9 and r.get('req_per_s', 0) > 0:  # the server fell behind: aim under what it did,
            # at most 4 levels at once (answers that timed out make the delivered rate an underestimate)
            aim = math.floor(math.log(0.9 * r['req_per_s'] / E) / math.log(FACTOR))
            return max(KMIN, k - 4, min(k - 1, aim))
        if r['delivered'] < 0.9:
            return max(KMIN, k - 4)
        return k - (1 if hint is not None else 2)

    step = 1 if hint is not None else 2
    k = hint if hint is not None else 0
    if test(k):
        while k + step <= KMAX and test(k + step):
            k += step
        if step == 2 and k + 1 <= KMAX:  # the level between the last pass and the first failure (or the top)
            test(k + 1)
    else:
        while k > KMIN:
            k = max(KMIN, jump_below(k))
            if test(k):
                break
        if tested[k]['pass'] and k + 1 not in tested and k + 1 <= KMAX:
            test(k + 1)
    passing = [j for j, r in tested.items() if r['pass']]
    best = max(passing) if passing else None
    return best, [tested[j] for j in sorted(tested)]


runs = []
hints = {}
try:
    for scenario in SCENARIOS:
        for rep in range(1, REPEATS + 1):
            order = SERVERS[(rep - 1) % len(SERVERS):] + SERVERS[:(rep - 1) % len(SERVERS)]
            for kind in order:
                tag = f'{scenario}.{kind}.r{rep}'
                log(f'{tag}: starting')
                server = Server(kind, scenario, tag)
                log(f'  {tag}: ready in {server.startup_s:.2f} s (loadavg {server.loadavg_before[0]:.2f})')
                equal = run_level(server, scenario, EQUAL[scenario], f'{tag}.equal')
                prev = hints.get((scenario, kind))
                best, levels = search(server, scenario, tag, equal, round(statistics.median(prev)) if prev else None)
                if best is not None:
                    hints.setdefault((scenario, kind), []).append(best)
                closed = [run_closed(server, scenario, c, f'{tag}.c{c}') for c in CONCURRENCY]
                hwm, procs = server.stop()
                best_r = next((r for r in levels if best is not None and
                               abs(r['rate'] - EQUAL[scenario] * FACTOR ** best) < 1e-9), None)
                runs.append({'scenario': scenario, 'server': kind, 'repeat': rep, 'startup_s': round(server.startup_s, 3),
                             'startup_loadavg': server.loadavg_before, 'startup_cpu_s': round(server.cpu_ready, 2),
                             'peak_mib': round(hwm / 1024, 1), 'processes': procs, 'equal': equal,
                             'best_k': best, 'best': best_r, 'levels': levels, 'closed': closed})
                log(f"  {tag}: best {'%.1f audio-s/s at %.1f req/s' % (best_r['audio_s_per_s'], best_r['rate']) if best_r else 'none'}"
                    f"; peak memory {hwm / 1024:.0f} MiB")
                with open(f'{WORK}/runs.json', 'w') as f:
                    json.dump(runs, f, indent=1)
finally:
    cleanup()

# The report.
def med(xs, fmt='{:.0f}'):
    xs = [x for x in xs if x is not None]
    if not xs:
        return '-'
    m = statistics.median(xs)
    return fmt.format(m) + (f' ({fmt.format(min(xs))}–{fmt.format(max(xs))})' if len(xs) > 1 else '')

doc = {'schema': 'sluice-peer-bench/1', 'duration_s': DURATION, 'warmup_s': WARMUP, 'repeats': REPEATS,
       'factor': FACTOR, 'p99_ms': P99_MS, 'seed': int(SEED), 'lengths': LENGTHS, 'mix': MIX,
       'equal_rate': EQUAL, 'concurrency': CONCURRENCY, 'max_other_cores': MAX_OTHER, 'nproc': os.cpu_count(),
       'runs': runs}
with open(f'{WORK}/peer_bench.json', 'w') as f:
    json.dump(doc, f, indent=1)
NAMES = {'sluice': 'sluice', 'stock': 'Triton stock', 'ragged': 'Triton ragged', 'padmax': 'Triton pad-to-max'}
measurements = [m for r in runs for m in r['levels'] + r['closed']]
disturbed = sum(1 for m in measurements if m['disturbed'])
lines = [f"NOT QUIET: {disturbed} of {len(measurements)} measurements ran while other processes held more than "
         f"{MAX_OTHER:g} of a core ('!' below); do not publish these figures, rerun on a quiet machine" if disturbed
         else f"quiet: every measurement ran with other processes under {MAX_OTHER:g} of a core"]
for scenario in SCENARIOS:
    E = EQUAL[scenario]
    lines += [f"\n{scenario}: {'asr_ctc CPU graphs' if scenario == 'cpu' else 'sim cost 4 ms + 0.1 us x B x L'}; "
              f"median (min–max) of {REPEATS} repeats; equal load {E:g} req/s",
              '| server | max audio-s/s, p99 <= %g ms [req/s] | equal load: delivered %% | p50 ms | p95 ms | p99 ms | '
              'server CPU cores | peak memory MiB | start-up s | loadavg (max 1-min during its levels) | '
              'other CPU cores |' % P99_MS, '|' + ' --- |' * 11]
    for kind in SERVERS:
        rs = [r for r in runs if r['scenario'] == scenario and r['server'] == kind]
        if not rs:
            continue
        eq = [r['equal'] for r in rs]
        best = [r['best']['audio_s_per_s'] if r['best'] else None for r in rs]
        best_rate = [r['best']['rate'] if r['best'] else None for r in rs]
        none = sum(1 for b in best if b is None)
        lavg = [l['loadavg_max'] for r in rs for l in r['levels']]
        other = [l['other_cores'] for r in rs for l in r['levels']]
        lines.append(
            f"| {NAMES[kind]} | {med(best, '{:.0f}')} [{med(best_rate, '{:.1f}')}]"
            f"{f' ({none} with none)' if none else ''} | {med([100 * e['delivered'] for e in eq])} | "
            f"{med([e.get('p50_ms') for e in eq])} | {med([e.get('p95_ms') for e in eq])} | "
            f"{med([e.get('p99_ms') for e in eq])} | {med([e['server_cores'] for e in eq], '{:.2f}')} | "
            f"{med([r['peak_mib'] for r in rs])} | {med([r['startup_s'] for r in rs], '{:.1f}')} | "
            f"{med(lavg, '{:.1f}')} | {med(other, '{:.2f}')} |")
    if CONCURRENCY:
        lines += [f'\nclosed loop, {scenario}: audio-s/s median (min–max) [p99 ms median] per calls in flight',
                  '| server | ' + ' | '.join(f'c={c}' for c in CONCURRENCY) + ' |', '|' + ' --- |' * (1 + len(CONCURRENCY))]
        point = {}  # (server, c) -> that point's runs
        for r in runs:
            if r['scenario'] == scenario:
                for m in r['closed']:
                    point.setdefault((r['server'], m['concurrency']), []).append(m)
        for kind in SERVERS:
            cells = []
            for c in CONCURRENCY:
                ms = point.get((kind, c), [])
                mark = '!' if any(m['disturbed'] for m in ms) else ''
                cells.append(f"{med([m.get('audio_s_per_s') for m in ms])}{mark} [{med([m.get('p99_ms') for m in ms])}]")
            lines.append(f'| {NAMES[kind]} | ' + ' | '.join(cells) + ' |')
        if 'sluice' in SERVERS:
            for kind in [k for k in SERVERS if k != 'sluice']:
                ratios = []
                for c in CONCURRENCY:
                    ours = [m.get('audio_s_per_s') for m in point.get(('sluice', c), []) if m.get('audio_s_per_s')]
                    theirs = [m.get('audio_s_per_s') for m in point.get((kind, c), []) if m.get('audio_s_per_s')]
                    ratios.append(f'{statistics.median(ours) / statistics.median(theirs):.2f}x'
                                  if ours and theirs else '-')
                lines.append(f'| sluice ÷ {NAMES[kind]} | ' + ' | '.join(ratios) + ' |')
    lines.append('\nper run (every level: offered -> delivered req/s, audio-s/s, p99 ms, PASS/FAIL, loadavg max):')
    for r in [r for r in runs if r['scenario'] == scenario]:
        lv = '; '.join(f"{l['rate']:.1f}->{l.get('req_per_s', 0):.1f} {l.get('audio_s_per_s', 0):.0f} "
                       f"p99 {l.get('p99_ms', 0):.0f} {'P' if l['pass'] else 'F'} la {l['loadavg_max']:.1f}"
                       f"{'!' if l['disturbed'] else ''}"
                       for l in r['levels'])
        lines.append(f"  {r['server']:7s} r{r['repeat']}: start-up {r['startup_s']:.1f} s (la {r['startup_loadavg'][0]:.1f}),"
                     f" {r['peak_mib']:.0f} MiB; {lv}")
text = '\n'.join(lines) + '\n'
with open(f'{WORK}/table.txt', 'w') as f:
    f.write(text)
print(text, flush=True)
EOF
DRIVER_PID=$!
rc=0
wait "$DRIVER_PID" || rc=$?
DRIVER_PID=
exit "$rc"
