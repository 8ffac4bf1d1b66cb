"""The arithmetic and the printout of loadtest/bench/bench.sh, from the files its steps left in WORK.

Usage: bench_report.py WORK ASR_CONFIG_YAML CONCURRENCY   (standard library only)
"""
import json
import os
import re
import sys

work, asr_config, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])


def load(name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)


def prom(name):
    """{(metric, frozenset(labels)): value} of a Prometheus text page."""
    out = {}
    with open(os.path.join(work, name)) as f:
        for line in f:
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$', line.strip())
            if m:
                labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ''))
                out[(m.group(1), labels)] = float(m.group(4))
    return out


def pct(x):
    return f'{100 * x:.1f} %'


# --- inputs -----------------------------------------------------------------------------------------------
# sluice-bench-backend rows: batch, length, p50_ms, min_ms, rows/s, audio_s/s
raw = {}  # length -> (best ms per row, batch size)
with open(os.path.join(work, 'backend.txt')) as f:
    for line in f:
        fields = line.split()
        if len(fields) == 6 and all(re.match(r'^[0-9.]+$', x) for x in fields):
            batch, length, p50_ms = int(fields[0]), int(fields[1]), float(fields[2])
            per_row = p50_ms / batch
            if length not in raw or per_row < raw[length][0]:
                raw[length] = (per_row, batch)
scheduler = open(os.path.join(work, 'scheduler.txt')).read().splitlines()
plan = load('plan.json')['models'][0]
saturated, rate70 = load('saturated.json'), load('rate70.json')
max_delay_ms = float(re.search(r'max_queue_delay_ms:\s*([0-9.]+)', open(asr_config).read()).group(1))

# --- 1. serving efficiency ----------------------------------------------------------------------------------
# The raw best on the same mix: every request costs its bucket's best per-row time (that bucket's graph at its
# fastest compiled batch size, every row at full bucket length, as the server pads it).
n = plan['requests']
raw_s_per_request = sum(b['requests'] / n * raw[b['length']][0] / 1e3 for b in plan['buckets'] if b['length'])
raw_rps = 1 / raw_s_per_request
audio_per_request = plan['audio_seconds'] / n
served = saturated['results']
print()
print('1. serving efficiency: asr_ctc, lognormal speech profile (median 7 s), one CPU instance (1 intra-op thread)')
print('   raw backend best, per bucket (sluice-bench-backend p50, fastest batch size; share of the mix):')
for b in plan['buckets']:
    if b['length']:
        ms, batch = raw[b['length']]
        print(f"     {b['length']:>7} samples: {ms:7.2f} ms/row at batch {batch}, {b['requests'] / n:6.1%} of requests")
print(f'   raw best on this mix:   {raw_rps:7.2f} req/s = {raw_rps * audio_per_request:7.1f} audio-s/s')
print(f"   served, closed loop -c {concurrency}, {saturated['run']['window_s']:.0f} s: "
      f"{served['req_per_s']:7.2f} req/s = {served['audio_s_per_s']:7.1f} audio-s/s "
      f"(p50 {served['latency_ms']['p50']:.0f} ms, {served['errors']} errors)")
print(f"   serving efficiency = served / raw = {pct(served['req_per_s'] / raw_rps)}")

# --- 2. batching capture --------------------------------------------------------------------------------------
print()
print('2. batching capture (sluice-bench-scheduler, sim cost model):')
for line in scheduler:
    if line.startswith(('1.', '2.')):
        print('   ' + line[3:])

# --- 3. padding efficiency ----------------------------------------------------------------------------------
print()
lengths = [b['length'] for b in plan['buckets'] if b['length']]
print(f"3. padding efficiency, speech profile, {n} requests drawn as the runs send them, buckets {lengths}:")
print(f"   row padding with buckets {pct(plan['efficiency'])} vs pad-to-max ({plan['max_bucket']}) "
      f"{pct(plan['pad_to_max_efficiency'])}: {plan['efficiency'] / plan['pad_to_max_efficiency']:.2f}x less "
      f"computed per real sample")
after = prom('after_70.prom')
gauge = after.get(('sluice_padding_efficiency', frozenset({('model', 'asr_ctc')})))
runs = [(f'saturated run', saturated), ('70 % run', rate70)]
measured = ', '.join(f"{name} {pct(r['server']['padding_efficiency']['asr_ctc'])}" for name, r in runs
                     if 'asr_ctc' in r.get('server', {}).get('padding_efficiency', {}))
print(f'   server /metrics (real / computed samples; counts the dummy rows that fill partial batches too): {measured}; '
      f"sluice_padding_efficiency gauge {pct(gauge) if gauge is not None else 'not reported'} (server lifetime)")

# --- 4. transport -------------------------------------------------------------------------------------------
print()
print('4. transport: the same client (sluice-loadtest, gRPC) and requests (1024 FP32 = 4 KiB in, 4 KiB out), '
      'sluice-server on a zero-cost sim model vs sluice-echo-server:')
for c in (1, 8):
    echo, full = load(f'echo_c{c}.json')['results'], load(f'sluice_c{c}.json')['results']
    p50_echo, p50_full = echo['latency_ms']['p50'], full['latency_ms']['p50']
    print(f"   concurrency {c}: echo {echo['req_per_s']:8.1f} req/s p50 {p50_echo:.3f} ms | "
          f"sluice {full['req_per_s']:8.1f} req/s p50 {p50_full:.3f} ms | ratio "
          f"{full['req_per_s'] / echo['req_per_s']:.2f}, p50 +{p50_full - p50_echo:.3f} ms"
          f" (errors {echo['errors']} / {full['errors']})")
    http = load(f'http_c{c}.json')['results']
    print(f"   {'':15} sluice over HTTP/REST (binary data), same client: {http['req_per_s']:8.1f} req/s "
          f"p50 {http['latency_ms']['p50']:.3f} ms, {http['req_per_s'] / full['req_per_s']:.2f}x of gRPC "
          f"(errors {http['errors']})")

# --- 5. p99 at 70 % of saturation ---------------------------------------------------------------------------
print()
r = rate70['results']
before = prom('before_70.prom')
per_bucket = {}
for (name, labels), value in after.items():
    if name == 'sluice_batch_compute_seconds_sum' and ('model', 'asr_ctc') in labels:
        count_key = ('sluice_batch_compute_seconds_count', labels)
        count = after[count_key] - before.get(count_key, 0)
        if count > 0:
            per_bucket[dict(labels).get('bucket', '?')] = ((value - before.get((name, labels), 0)) / count * 1e3, count)
compute_ms = rate70['server'].get('compute_ms_mean')
print(f"5. latency at 70 % of saturation: open loop, Poisson, {rate70['run']['rate']:.2f} req/s offered "
      f"(0.7 x {served['req_per_s']:.2f}) for {rate70['config']['duration_s']:g} s: {r['requests']} requests, "
      f"{r['errors']} errors, the last answered {rate70['run']['window_s']:.1f} s after the first arrival")
print(f"   rows per batch {rate70['server'].get('batch_size_mean', float('nan')):.2f} "
      f"(saturated run: {saturated['server'].get('batch_size_mean', float('nan')):.2f})")
print(f"   p50 {r['latency_ms']['p50']:.1f} ms, p99 {r['latency_ms']['p99']:.1f} ms")
if compute_ms is not None:
    bound = max_delay_ms + 2 * compute_ms
    print(f'   max_queue_delay {max_delay_ms:g} ms + 2 x mean batch compute {compute_ms:.1f} ms = {bound:.1f} ms: '
          f"p99 is {r['latency_ms']['p99'] / bound:.2f}x of it")
if per_bucket:
    slowest, (ms, count) = max(per_bucket.items(), key=lambda kv: kv[1][0])
    print(f'   per bucket mean batch compute (ms, batches): ' +
          ', '.join(f'{b}: {v[0]:.1f} ({v[1]:.0f})' for b, v in sorted(per_bucket.items(), key=lambda kv: int(kv[0]))
                    if b.isdigit()))
    print(f'   with the slowest bucket ({slowest}): {max_delay_ms:g} + 2 x {ms:.1f} = {max_delay_ms + 2 * ms:.1f} ms: '
          f"p99 is {r['latency_ms']['p99'] / (max_delay_ms + 2 * ms):.2f}x of it")
print()
print(f'(reports, logs and raw tool output: {work})')
