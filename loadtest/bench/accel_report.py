"""The arithmetic, table and JSON of loadtest/bench/accel_bench.sh, from the files its runs left in WORK.

Usage: accel_report.py WORK   (standard library only). Reads WORK/params.json and, per run TAG (CONFIG_rN),
TAG.json (sluice-loadtest), TAG.{A,B}.{prom,time,loadavg,procstat,server_stat,loadtest_stat,loadtest_alive},
TAG.before.loadavg and TAG.rc; prints the tables and writes WORK/accel_bench.json (schema sluice-accel-bench/1).
"""
import json
import os
import re
import statistics
import sys

work = sys.argv[1]
params = json.load(open(os.path.join(work, 'params.json')))
TICK = os.sysconf('SC_CLK_TCK')
LENGTHS = params['bucket_lengths']


def read(name, default=None):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return f.read()


def prom(name):
    """{metric: [(labels dict, value)]} of a Prometheus text page."""
    out = {}
    for line in (read(name) or '').splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$', line.strip())
        if m:
            out.setdefault(m.group(1), []).append((dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or '')),
                                                   float(m.group(4))))
    return out


def total(page, metric, **match):
    return sum(v for labels, v in page.get(metric, []) if all(labels.get(k) == w for k, w in match.items()))


def cpu_seconds(name):
    """utime + stime of a /proc/PID/stat copy, in seconds (None when the process was gone)."""
    text = read(name)
    if not text:
        return None
    fields = text[text.rindex(')') + 2:].split()  # after "pid (comm) "; field 3 (state) is fields[0]
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy_seconds(name):
    """(busy, steal) CPU seconds of all cores from a copy of /proc/stat's first line."""
    v = [int(x) for x in read(name).split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / TICK, steal / TICK


def ideal_rps(shares, batch):
    """Requests/s of the cost model with every batch full at size `batch`: 1 / sum_b p_b cost(batch, L_b) / batch."""
    s_per_request = sum(p * (params['base_ms'] / 1e3 + params['per_sample_us'] / 1e6 * batch * length) / batch
                        for length, p in shares.items())
    return 1 / s_per_request


mix = {int(k): float(v) for k, v in (item.split(':') for item in params['mix'].split(','))}


def run_figures(config, repeat):
    tag = f'{config}_r{repeat}'
    batch = max(params['configs'][config])
    fig = {'tag': tag, 'config': config, 'repeat': repeat, 'loadtest_rc': int((read(f'{tag}.rc') or '-1').strip())}
    report = json.loads(read(f'{tag}.json') or 'null')
    if report:
        r = report['results']
        fig.update(served_rps=r['req_per_s'], requests=r['requests'], ok=r['ok'], errors=r['errors'],
                   p50_ms=r['latency_ms']['p50'], p99_ms=r['latency_ms']['p99'],
                   audio_s_per_s=r.get('audio_s_per_s'))
        stats = (report.get('server') or {}).get('model_stats') or [{}]
        fig['loadtest_rows_per_execution'] = stats[0].get('rows_per_execution')
    a, b = prom(f'{tag}.A.prom'), prom(f'{tag}.B.prom')
    dt = total(b, 'sluice_uptime_seconds') - total(a, 'sluice_uptime_seconds')
    d = lambda metric, **m: total(b, metric, **m) - total(a, metric, **m)
    rows, executions = d('sluice_inferences_total'), d('sluice_batch_executions_total')
    busy = d('sluice_instance_busy_seconds_total')
    # What the cost model says the executed batches take: executions x base + per-sample cost x computed samples
    # (sluice_computed_samples_total = sum of B x L over the batches, dummy rows included).
    modelled = executions * params['base_ms'] / 1e3 + d('sluice_computed_samples_total') * params['per_sample_us'] / 1e6
    # Offered requests per bucket in the window: differences of the cumulative le="<bucket length>" counts.
    cumulative = [d('sluice_request_length_bucket', le=str(length)) for length in LENGTHS]
    offered = [c - (cumulative[i - 1] if i else 0) for i, c in enumerate(cumulative)]
    realized = {length: n / sum(offered) for length, n in zip(LENGTHS, offered)} if sum(offered) else {}
    ideal = ideal_rps(mix, batch)
    # The cost model's ideal for the lengths that arrived in the window: the draws from the lengths file stray
    # from the nominal mix (a few more long requests cost the ideal ~1 %), so the decomposition uses this one.
    ideal_window = ideal_rps(realized, batch) if realized else ideal
    wall = float(read(f'{tag}.B.time')) - float(read(f'{tag}.A.time'))
    cpu = {}
    for proc in ('server', 'loadtest'):
        t0, t1 = cpu_seconds(f'{tag}.A.{proc}_stat'), cpu_seconds(f'{tag}.B.{proc}_stat')
        cpu[proc] = (t1 - t0) / wall if t0 is not None and t1 is not None else None
    (busy0, steal0), (busy1, steal1) = (machine_busy_seconds(f'{tag}.{x}.procstat') for x in 'AB')
    machine = (busy1 - busy0) / wall
    fig.update(
        window_s=dt,
        largest_batch=batch,
        ideal_rps=ideal,
        served_over_ideal=fig['served_rps'] / ideal if 'served_rps' in fig else None,
        server_rps_window=rows / dt if dt else None,
        rows_per_batch=rows / executions if executions else None,
        compiled_batch_mean=(d('sluice_batch_size_sum') / d('sluice_batch_size_count')
                             if d('sluice_batch_size_count') else None),
        executions_per_bucket={str(length): d('sluice_batch_executions_total', bucket=str(length))
                               for length in LENGTHS},
        # offered requests / executed batches per bucket in the window: an approximation of the real rows per
        # batch of each bucket (the server counts rows per model only); the closed loop keeps the two close.
        rows_per_batch_by_bucket={str(length): n / d('sluice_batch_executions_total', bucket=str(length))
                                  for length, n in zip(LENGTHS, offered)
                                  if d('sluice_batch_executions_total', bucket=str(length))},
        server_cpu_cores_metric=d('sluice_process_cpu_seconds') / dt if dt else None,
        busy_ratio=busy / dt if dt else None,
        busy_ratio_since_start=total(b, 'sluice_instance_busy_ratio'),
        # the instance's idle time per executed batch in the window (gathering, scattering, hand-offs, waiting)
        idle_ms_per_batch=(dt - busy) / executions * 1e3 if executions else None,
        busy_s_per_request=busy / rows if rows else None,
        # ideal seconds per request / measured busy seconds per request: the share of the instance's busy time
        # that full batches of the largest size would have needed (served/ideal ~ busy_ratio x this).
        batching_efficiency=(1 / ideal) / (busy / rows) if rows and busy else None,
        # ... split in two: fill = the ideal cost of these rows / the modelled cost of the batches that ran (partial
        # batches, smaller batch sizes); timing = modelled / measured busy seconds (the sim's sleeps overrunning).
        # served/ideal ~ busy_ratio x fill x timing.
        modelled_busy_s=modelled,
        fill_efficiency=(rows / ideal_window) / modelled if modelled else None,
        timing_efficiency=modelled / busy if busy else None,
        realized_mix={str(k): v for k, v in realized.items()},
        ideal_rps_realized_mix=ideal_window if realized else None,
        # the server's own rate (its counters over the window) / the ideal of the window's mix: = busy x fill x timing
        server_over_window_ideal=rows / dt / ideal_window if dt else None,
        capacity_max_rps_gauge=total(b, 'sluice_capacity_max_requests_per_second'),
        loadavg_before=(read(f'{tag}.before.loadavg') or '').split()[:3],
        loadavg_a=read(f'{tag}.A.loadavg').split()[:3],
        loadavg_b=read(f'{tag}.B.loadavg').split()[:3],
        server_cpu_cores=cpu['server'],
        loadtest_cpu_cores=cpu['loadtest'],
        machine_busy_cores=machine,
        machine_steal_cores=(steal1 - steal0) / wall,
        other_cpu_cores=machine - (cpu['server'] or 0) - (cpu['loadtest'] or 0),
        loadtest_alive_at_b=(read(f'{tag}.B.loadtest_alive') or '0').strip() == '1',
    )
    return fig


runs = [run_figures(config, r) for r in range(1, params['repeats'] + 1) for config in params['configs']]


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {'median': statistics.median(values), 'min': min(values), 'max': max(values), 'n': len(values)}


KEYS = ['served_rps', 'server_rps_window', 'ideal_rps', 'served_over_ideal', 'server_over_window_ideal', 'rows_per_batch', 'compiled_batch_mean',
        'busy_ratio', 'idle_ms_per_batch', 'batching_efficiency', 'fill_efficiency', 'timing_efficiency', 'p50_ms',
        'p99_ms', 'server_cpu_cores', 'loadtest_cpu_cores', 'other_cpu_cores', 'machine_busy_cores', 'loadavg_1m_b']
for f in runs:
    f['loadavg_1m_b'] = float(f['loadavg_b'][0])
summary = {config: {k: spread([f.get(k) for f in runs if f['config'] == config]) for k in KEYS}
           for config in params['configs']}


def fmt(s, digits, scale=1.0):
    if not s:
        return '-'
    if s['n'] == 1:
        return f"{s['median'] * scale:.{digits}f}"
    return f"{s['median'] * scale:.{digits}f} ({s['min'] * scale:.{digits}f}-{s['max'] * scale:.{digits}f})"


print()
print(f"accel bench: sim cost {params['base_ms']} ms + {params['per_sample_us']} us x B x L per batch; buckets "
      f"{LENGTHS}; mix {params['mix']}; closed loop -c {params['concurrency']} over gRPC, "
      f"{params['warmup_s']} s warm-up + {params['duration_s']} s; one instance; {params['nproc']} CPUs")
print(f"median (min-max) of {params['repeats']} runs per configuration; server figures over the window "
      f"[warm-up + 1 s, warm-up + duration - 1 s] after the first answer")
print()
cols = [('config', 8), ('batch sizes', 11), ('ideal req/s', 11), ('served req/s', 20), ('served/ideal %', 18),
        ('server/ideal* %', 18), ('rows/batch', 16), ('busy', 19), ('fill', 19), ('timing', 19), ('p50 ms', 15), ('p99 ms', 16)]
print(' '.join(f'{name:<{w}}' for name, w in cols))
for config, sizes in params['configs'].items():
    s = summary[config]
    cells = [config, ','.join(map(str, sizes)), f"{s['ideal_rps']['median']:.1f}", fmt(s['served_rps'], 1),
             fmt(s['served_over_ideal'], 1, 100), fmt(s['server_over_window_ideal'], 1, 100),
             fmt(s['rows_per_batch'], 2), fmt(s['busy_ratio'], 3),
             fmt(s['fill_efficiency'], 3), fmt(s['timing_efficiency'], 3), fmt(s['p50_ms'], 0), fmt(s['p99_ms'], 0)]
    print(' '.join(f'{c:<{w}}' for c, (_, w) in zip(cells, cols)))
for config in params['configs']:
    by_bucket = {str(length): spread([f['rows_per_batch_by_bucket'].get(str(length)) for f in runs
                                      if f['config'] == config]) for length in LENGTHS}
    summary[config]['rows_per_batch_by_bucket'] = by_bucket
    print(f"  {config}: rows per batch by bucket (offered / executions in the window, median): " +
          ', '.join(f"{length}: {by_bucket[str(length)]['median']:.2f}" for length in LENGTHS
                    if by_bucket[str(length)]))
print()
print('per run (to recognise a disturbed one): loadavg = /proc/loadavg 1-min before the run / at the end of the'
      ' window; CPU in cores over the window: server, client, rest of the machine (all busy minus those two)')
cols = [('run', 12), ('req/s', 7), ('srv r/s', 7), ('/ideal', 7), ('/ideal*', 7), ('rows/b', 6), ('busy', 6), ('idle', 5), ('fill', 6),
        ('timing', 6), ('p50', 5), ('p99', 5), ('errors', 6), ('loadavg', 11), ('server', 6), ('client', 6),
        ('other', 6), ('steal', 5)]
print(' '.join(f'{name:>{w}}' for name, w in cols))
for f in runs:
    n = lambda k, spec: format(f[k], spec) if f.get(k) is not None else '-'
    ratio = f"{100 * f['served_over_ideal']:.1f}%" if f.get('served_over_ideal') else '-'
    window_ratio = f"{100 * f['server_over_window_ideal']:.1f}%" if f.get('server_over_window_ideal') else '-'
    cells = [f['tag'], n('served_rps', '.1f'), n('server_rps_window', '.1f'), ratio, window_ratio,
             n('rows_per_batch', '.2f'),
             n('busy_ratio', '.3f'), n('idle_ms_per_batch', '.1f'), n('fill_efficiency', '.3f'),
             n('timing_efficiency', '.3f'), n('p50_ms', '.0f'), n('p99_ms', '.0f'), str(f.get('errors', '-')),
             f"{(f['loadavg_before'] or ['-'])[0]}/{f['loadavg_b'][0]}", n('server_cpu_cores', '.2f'),
             n('loadtest_cpu_cores', '.2f'), n('other_cpu_cores', '.2f'), n('machine_steal_cores', '.2f')]
    flags = []
    if f['loadtest_rc'] != 0:
        flags.append(f"sluice-loadtest exit {f['loadtest_rc']}")
    if not f['loadtest_alive_at_b']:
        flags.append('load ended before the second scrape')
    print(' '.join(f'{c:>{w}}' for c, (_, w) in zip(cells, cols)) + ('  ' + '; '.join(flags) if flags else ''))
print()
print('ideal = 1 / sum_b p_b cost(B, L_b) / B, B = the largest compiled batch size, every batch full (p_b: the mix)')
print('served/ideal: the client\'s measured rate / that ideal; server/ideal* (/ideal*): the server\'s rate (srv r/s) /')
print('  the ideal of the lengths that arrived in the window (sluice_request_length; draws stray from the nominal mix)')
print('server/ideal* = busy x fill x timing: busy = delta busy seconds / delta uptime (the instance running a batch);')
print('  idle = the instance\'s idle ms per executed batch in the window: (delta uptime - delta busy) / executions;')
print('  fill = ideal* cost of the served rows / cost-model cost of the batches that ran (partial batches);')
print('  timing = that cost-model cost / measured busy seconds (the sim sleeps overrunning on a loaded machine)')
print('rows/b = real rows per executed batch (delta inferences / delta executions);'
      ' srv r/s = delta sluice_inferences_total / delta uptime')
print("req/s, p50, p99: sluice-loadtest's measured window")
json.dump({'schema': 'sluice-accel-bench/1', 'params': params, 'summary': summary, 'runs': runs},
          open(os.path.join(work, 'accel_bench.json'), 'w'), indent=1)
print(f"JSON: {os.path.join(work, 'accel_bench.json')}")
