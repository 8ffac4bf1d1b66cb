#!/usr/bin/env python3
"""The report of loadtest/bench/reliability.sh: reads its work folder, prints the figures and writes OUT/reliability.json
(schema sluice-reliability/1) and OUT/reliability.txt. Usage: reliability_report.py WORK OUT CHECK (CHECK = 1: exit 1
when a correctness finding fails — the server's outcome counters differ from what the clients saw, the drain did
not exit 0 or lost an accepted request, fds/threads/in-flight not back after the faulty clients, errors in the
normal run after them). Timings are reported, never judged. Debian's python3, standard library only.
"""
import datetime
import json
import os
import re
import sys

WORK, OUT, CHECK = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
# sluice-loadtest / probe codes -> the server's sluice_requests_total{outcome} (server/metrics/server_metrics.cc OutcomeFor)
OUTCOME = {"OK": "ok", "INVALID_ARGUMENT": "invalid", "NOT_FOUND": "invalid", "OUT_OF_RANGE": "invalid",
           "UNAUTHENTICATED": "invalid", "RESOURCE_EXHAUSTED": "rejected", "UNAVAILABLE": "rejected",
           "DEADLINE_EXCEEDED": "timeout", "CANCELLED": "cancelled"}
NOT_SENT = {"CLIENT_DROPPED", "CONNECTION_ERROR"}  # never reached the server
OUTCOMES = ["ok", "rejected", "invalid", "timeout", "cancelled", "backend_error"]
lines = []
checks = []


def say(text=""):
    lines.append(text)
    print(text)


def load(name):
    path = os.path.join(WORK, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_lines(name):
    path = os.path.join(WORK, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check(name, ok, detail):
    checks.append({"name": name, "pass": bool(ok), "detail": detail})
    return "EQUAL" if ok else "DIFFERENT"


def client_codes(report):
    r = report["results"]
    return {"OK": r["ok"], **r["errors_by_code"]}


def add_codes(*dicts):
    out = {}
    for d in dicts:
        for k, v in (d or {}).items():
            out[k] = out.get(k, 0) + v
    return out


def to_outcomes(codes):
    out = {o: 0 for o in OUTCOMES}
    for code, n in codes.items():
        if code in NOT_SENT:
            continue
        out[OUTCOME.get(code, "backend_error")] += n
    return out


def server_delta(before, after):
    return {o: after["requests_total"].get(o, 0) - before["requests_total"].get(o, 0) for o in OUTCOMES}


def compare_counts(label, client, server):
    """Prints client vs server per outcome; returns EQUAL / DIFFERENT and records the check."""
    say(f"  {'outcome':<14} {'client':>9} {'server':>9}")
    for o in OUTCOMES:
        mark = "" if client[o] == server[o] else "   <- differs"
        say(f"  {o:<14} {client[o]:>9} {server[o]:>9}{mark}")
    verdict = check(f"{label}: sluice_requests_total == client counts", client == server,
                    {"client": client, "server": server})
    say(f"  server counters vs clients: {verdict}")
    return verdict


def mib(kib):
    return None if kib is None else round(kib / 1024, 1)


def lat(block, *keys):
    if not block or not block.get("count"):
        return "-"
    return " ".join(f"{k} {block[k]:.1f}" for k in keys if block.get(k) is not None)


def loadavg():
    out = []
    path = os.path.join(WORK, "loadavg.txt")
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            out.append({"at": f[0], "load1": float(f[1]), "load5": float(f[2]), "load15": float(f[3])})
    return out


LOADAVG = loadavg()


def load_at(label):
    for entry in LOADAVG:
        if entry["at"] == label:
            return f"loadavg {entry['load1']:.2f} {entry['load5']:.2f} {entry['load15']:.2f}"
    return "loadavg ?"


def slope_per_hour(samples, key="rss_kib"):
    pts = [(s["t_s"] / 3600, s[key] / 1024) for s in samples if s.get(key) is not None]
    if len(pts) < 3:
        return None
    tm = sum(t for t, _ in pts) / len(pts)
    ym = sum(y for _, y in pts) / len(pts)
    den = sum((t - tm) ** 2 for t, _ in pts)
    return None if den == 0 else sum((t - tm) * (y - ym) for t, y in pts) / den


def overload(meta, sat_rate):
    result = {}
    for p in ("grpc", "http"):
        lt = load(f"overload_{p}.json")
        if lt is None:
            continue
        probe = load(f"overload_{p}_probe.json") or {"by_code": {}, "latency_ms": {}, "sent": 0}
        before, after = load(f"overload_{p}_before.metrics.json"), load(f"overload_{p}_after.metrics.json")
        pb, pa = load(f"overload_{p}_before.proc.json"), load(f"overload_{p}_after.proc.json")
        samples = load_lines(f"overload_{p}.samples.jsonl")
        r, run = lt["results"], lt["run"]
        codes = client_codes(lt)
        refused = codes.get("RESOURCE_EXHAUSTED", 0) + codes.get("UNAVAILABLE", 0)
        dropped = codes.get("CLIENT_DROPPED", 0)
        known = ("OK", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "CLIENT_DROPPED")
        other = {k: v for k, v in codes.items() if k not in known}
        sent = r["requests"] - dropped
        peak_rss = max((s["rss_kib"] for s in samples if s.get("rss_kib")), default=None)
        peak_anon = max((s["rss_anon_kib"] for s in samples if s.get("rss_anon_kib")), default=None)
        refusal_lat = probe["latency_ms"].get("RESOURCE_EXHAUSTED") or probe["latency_ms"].get("UNAVAILABLE")
        say(f"\n== 1. overload over {p.upper()}: {run['rate']:.1f} req/s offered (Poisson) for "
            f"{meta['overload_seconds']} s = {meta['overload_factor']}x the saturated {sat_rate:.1f} req/s "
            f"({load_at('overload_' + p)} at start, {load_at('overload_' + p + '_end')[8:]} at end)")
        seconds = meta["overload_seconds"]
        say(f"  offered {r['requests']} in {seconds} s ({r['requests'] / seconds:.1f} req/s; client send lag max "
            f"{run['max_send_lag_ms']:.0f} ms; {dropped} dropped by the client before sending); the window ran "
            f"{run['window_s']:.1f} s, to the last admitted answer")
        say(f"  served {r['ok']} ({r['req_per_s']:.1f} req/s) | refused {refused} "
            f"({', '.join(f'{k} {v}' for k, v in codes.items() if k in ('RESOURCE_EXHAUSTED', 'UNAVAILABLE'))}) | "
            f"other errors {sum(other.values())} {other if other else ''}")
        say("  admitted latency ms (sluice-loadtest, from scheduled send): "
            f"{lat(r['latency_ms'], 'p50', 'p99', 'max')}")
        say(f"  probe beside it ({probe['sent']} requests at {meta['probe_rate']} req/s, same server): "
            f"{probe['by_code']}")
        say(f"    refusal latency ms: {lat(refusal_lat, 'p50', 'p99', 'max')} | admitted: "
            f"{lat(probe['latency_ms'].get('OK'), 'p50', 'p99')}")
        say(f"  server RSS MiB: before {mib(pb['rss_kib'])}, sampled peak {mib(peak_rss)} (every 1 s), after "
            f"{mib(pa['rss_kib'])}; VmHWM {mib(pb['hwm_kib'])} -> {mib(pa['hwm_kib'])} (the process's peak, load "
            f"included); RssAnon {mib(pb['rss_anon_kib'])} -> peak {mib(peak_anon)} -> {mib(pa['rss_anon_kib'])}; "
            f"fds {pb['fds']} -> {pa['fds']}, threads {pb['threads']} -> {pa['threads']}")
        client = to_outcomes(add_codes(codes, probe["by_code"]))
        server = server_delta(before, after)
        say("  sluice_requests_total{outcome} delta over the run vs sluice-loadtest + probe:")
        verdict = compare_counts(f"overload {p}", client, server)
        result[p] = {
            "offered_rate": run["rate"], "window_s": run["window_s"], "offered": r["requests"],
            "client_dropped": dropped, "sent": sent, "served": r["ok"], "served_per_s": r["req_per_s"],
            "refused": refused, "other_errors": other, "admitted_latency_ms": r["latency_ms"],
            "max_send_lag_ms": run["max_send_lag_ms"], "probe": probe, "refusal_latency_ms": refusal_lat,
            "rss_mib": {"before": mib(pb["rss_kib"]), "sampled_peak": mib(peak_rss), "after": mib(pa["rss_kib"]),
                        "hwm_before": mib(pb["hwm_kib"]), "hwm_after": mib(pa["hwm_kib"]),
                        "anon_before": mib(pb["rss_anon_kib"]), "anon_sampled_peak": mib(peak_anon),
                        "anon_after": mib(pa["rss_anon_kib"])},
            "fds": [pb["fds"], pa["fds"]], "threads": [pb["threads"], pa["threads"]],
            "counters": {"client": client, "server": server, "verdict": verdict},
            "server_idle_after_s": (load(f"overload_{p}_after.idle.json") or {}).get("seconds")}
    return result


def soak(meta, sat_rate):
    pieces = []
    i = 1
    while (rep := load(f"soak_{i}.json")) is not None:
        pieces.append(rep)
        i += 1
    if not pieces:
        return None
    samples = load_lines("soak.samples.jsonl")
    start, end = load("soak_start.proc.json"), load("soak_end.proc.json")
    rate = pieces[0]["run"]["rate"]
    say(f"\n== 2. soak: {rate:.2f} req/s (70 % of {sat_rate:.1f}) over gRPC, {len(pieces)} x "
        f"{meta['soak_piece_seconds']} s back to back ({meta['soak_seconds']} s)")
    say(f"  {'piece':>5} {'sent':>7} {'ok':>7} {'errors':>6} {'req/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        f"  loadavg at its end")
    per_piece = []
    codes = {}
    for k, rep in enumerate(pieces, 1):
        r = rep["results"]
        codes = add_codes(codes, client_codes(rep))
        la = next((e for e in LOADAVG if e["at"] == f"soak_{k}"), None)
        say(f"  {k:>5} {r['requests']:>7} {r['ok']:>7} {r['errors']:>6} {r['req_per_s']:>7.1f} "
            f"{r['latency_ms']['p50']:>8.1f} {r['latency_ms']['p99']:>8.1f} {r['latency_ms']['max']:>8.1f}"
            f"  {la['load1'] if la else '?'}")
        per_piece.append({"piece": k, "requests": r["requests"], "ok": r["ok"], "errors": r["errors_by_code"],
                          "req_per_s": r["req_per_s"], "p50_ms": r["latency_ms"]["p50"],
                          "p99_ms": r["latency_ms"]["p99"], "max_ms": r["latency_ms"]["max"],
                          "load1_at_end": la["load1"] if la else None})
    rss = [s["rss_kib"] for s in samples if s.get("rss_kib")]
    anon = [s["rss_anon_kib"] for s in samples if s.get("rss_anon_kib")]
    first = meta["soak_piece_seconds"]
    warm = [s for s in samples if s["t_s"] >= first]
    slope_all, slope_warm = slope_per_hour(samples), slope_per_hour(warm)
    anon_all, anon_warm = slope_per_hour(samples, "rss_anon_kib"), slope_per_hour(warm, "rss_anon_kib")
    fmt = lambda v: "n/a" if v is None else f"{v:+.1f}"
    say(f"  RSS MiB ({len(rss)} samples every {meta['soak_sample_seconds']} s): VmRSS start {mib(start['rss_kib'])}, "
        f"end {mib(end['rss_kib'])}, min {mib(min(rss))}, max {mib(max(rss))}; RssAnon start "
        f"{mib(start['rss_anon_kib'])}, end {mib(end['rss_anon_kib'])}, min {mib(min(anon))}, max {mib(max(anon))}; "
        f"VmHWM {mib(start['hwm_kib'])} -> {mib(end['hwm_kib'])}")
    say(f"  least-squares slope, MiB per hour: VmRSS {fmt(slope_all)} (all samples), {fmt(slope_warm)} (after the "
        f"first {first} s); RssAnon {fmt(anon_all)}, {fmt(anon_warm)}")
    per_piece_anon = []
    for k in range(len(pieces) + 1):  # the sample nearest each piece's boundary: a step or a ramp?
        near = min(samples, key=lambda x: abs(x["t_s"] - k * first)) if samples else None
        per_piece_anon.append(mib(near["rss_anon_kib"]) if near else None)
    say(f"  RssAnon MiB at each piece boundary: {', '.join(str(v) for v in per_piece_anon)}")
    say(f"  fds {start['fds']} -> {end['fds']}, threads {start['threads']} -> {end['threads']}")
    client = to_outcomes(codes)
    server = server_delta(load("soak_before.metrics.json"), load("soak_after.metrics.json"))
    verdict = compare_counts("soak", client, server)
    return {"rate": rate, "pieces": per_piece,
            "samples": [{"t_s": s["t_s"], "rss_mib": mib(s["rss_kib"]), "rss_anon_mib": mib(s["rss_anon_kib"]),
                         "fds": s["fds"], "threads": s["threads"]} for s in samples],
            "rss_mib": {"start": mib(start["rss_kib"]), "end": mib(end["rss_kib"]), "min": mib(min(rss)),
                        "max": mib(max(rss)), "hwm_start": mib(start["hwm_kib"]), "hwm_end": mib(end["hwm_kib"]),
                        "anon_start": mib(start["rss_anon_kib"]), "anon_end": mib(end["rss_anon_kib"]),
                        "anon_min": mib(min(anon)), "anon_max": mib(max(anon))},
            "rss_slope_mib_per_hour": slope_all, "rss_slope_mib_per_hour_after_first_piece": slope_warm,
            "rss_anon_slope_mib_per_hour": anon_all, "rss_anon_slope_mib_per_hour_after_first_piece": anon_warm,
            "rss_anon_mib_at_piece_boundaries": per_piece_anon,
            "fds": [start["fds"], end["fds"]], "threads": [start["threads"], end["threads"]],
            "counters": {"client": client, "server": server, "verdict": verdict}}


def drain(meta):
    ex = load("drain_exit.json")
    if ex is None:
        return None
    log = open(ex["log"], errors="replace").read()
    m_in = re.search(r"draining (\d+) accepted request", log)
    m_dr = re.search(r"drained (\S+): (\d+) succeeded, (\d+) failed in total", log)
    complete = "drain complete" in log
    before, at = load("drain_before.metrics.json"), load("drain_at_sigterm.metrics.json")
    g, h = load("drain_grpc.json"), load("drain_http.json")
    pg, ph = load("drain_grpc_probe.json") or {"by_code": {}}, load("drain_http_probe.json") or {"by_code": {}}
    cg, ch = client_codes(g), client_codes(h)
    ok_clients = cg["OK"] + ch["OK"] + pg["by_code"].get("OK", 0) + ph["by_code"].get("OK", 0)
    ok_before = before["requests_total"].get("ok", 0)
    failed_before = sum(v for k, v in before["requests_total"].items() if k != "ok")
    succeeded = int(m_dr.group(2)) - ok_before if m_dr else None
    failed = int(m_dr.group(3)) - failed_before if m_dr else None
    say(f"\n== 3. drain under load: closed loops of 16 over gRPC and over HTTP + a probe per protocol at "
        f"{meta['probe_rate']} req/s; SIGTERM after {meta['drain_hold_seconds']} s with both loops running "
        f"({load_at('drain')} at start)")
    say(f"  at SIGTERM: in flight {at.get('in_flight')}, queue depth {at.get('queue_depth')}; server log: "
        f"\"draining {m_in.group(1) if m_in else '?'} accepted request(s)\", "
        f"\"drained {m_dr.group(1) if m_dr else '?'}: {m_dr.group(2) if m_dr else '?'} succeeded, "
        f"{m_dr.group(3) if m_dr else '?'} failed in total\", drain complete: {complete}")
    t0 = ex["sigterm_epoch"]

    def log_time(pattern):  # seconds after SIGTERM of the first log line matching pattern
        m = re.search(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] \[\w+\] .*" + pattern, log, re.M)
        if not m:
            return None
        return round(datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp() - t0, 3)
    timeline = {"draining_logged_s": log_time("draining"), "drain_complete_logged_s": log_time("drain complete"),
                "exit_s": round(ex["exit_epoch"] - t0, 3)}
    say(f"  exit code {ex['exit_code']}; after SIGTERM: \"draining\" logged at +{timeline['draining_logged_s']} s, "
        f"\"drain complete\" at +{timeline['drain_complete_logged_s']} s (every accepted request answered), process "
        f"gone at +{timeline['exit_s']} s (listeners closed: gRPC Shutdown with a 2 s deadline, HTTP stop)")
    say(f"  sluice-loadtest gRPC: {cg} | HTTP: {ch}")
    say(f"  probes (tell a refusal from a refused connection) gRPC: {pg['by_code']} | HTTP: {ph['by_code']}")
    probe_times = {}
    for name, pr in (("grpc", pg), ("http", ph)):
        per = {}
        for sent_at, code, _ in pr.get("events", []):
            per.setdefault(code, []).append(round(sent_at - t0, 3))
        probe_times[name] = {c: {"count": len(v), "first_s": min(v), "last_s": max(v),
                                 **({"sent_s": v} if len(v) <= 5 else {})} for c, v in sorted(per.items())}
        say(f"    {name} probe, send times after SIGTERM by code: " + "; ".join(
            f"{c} {t['count']} in [{t['first_s']:+.2f}, {t['last_s']:+.2f}] s" + (f" at {t['sent_s']}" if "sent_s" in t
                                                                                   else "")
            for c, t in probe_times[name].items()))
    exit_ok = str(ex["exit_code"]) == "0" and complete
    say(f"  exit 0 and \"drain complete\": {'yes' if exit_ok else 'NO'}")
    check("drain: exit code 0 and 'drain complete'", exit_ok, ex)
    v = check("drain: server's succeeded (this run) == clients' OK", succeeded == ok_clients,
              {"server_succeeded": succeeded, "clients_ok": ok_clients})
    say(f"  accepted == completed: server succeeded {succeeded} (log total minus before) vs clients OK {ok_clients}: "
        f"{v}")
    allowed = {"OK", "UNAVAILABLE", "CONNECTION_ERROR", "CANCELLED"}  # CANCELLED: reported apart, below
    bad = {k: v for k, v in add_codes(cg, ch, pg["by_code"], ph["by_code"]).items() if k not in allowed}
    refusals = pg["by_code"].get("UNAVAILABLE", 0) + ph["by_code"].get("UNAVAILABLE", 0)
    failed_at_sigterm = sum(v for k, v in at["requests_total"].items() if k != "ok") - failed_before
    say(f"  refused: the server counted {failed} failed ({failed_at_sigterm} before SIGTERM, "
        f"{failed - failed_at_sigterm if failed is not None else '?'} after: refusals while draining); the probes got "
        f"{refusals} UNAVAILABLE/503 answers, then connection errors once it had exited; codes other than OK, "
        f"UNAVAILABLE/503, refused connections and CANCELLED: {bad if bad else 'none'}")
    cancelled = cg.get("CANCELLED", 0) + pg["by_code"].get("CANCELLED", 0)
    capped = g["run"]["capped"]
    if cancelled:
        when = probe_times["grpc"].get("CANCELLED")
        sent_at = f", sent at +{when['sent_s']} s" if when and "sent_s" in when else ""
        who = ("the load generator ran out of time and cancelled them" if capped else
               "not cancelled by the clients (the load generator was not capped; the probe never cancels)")
        say(f"  gRPC CANCELLED {cancelled} (sluice-loadtest {cg.get('CANCELLED', 0)}, probe "
            f"{pg['by_code'].get('CANCELLED', 0)}{sent_at}): {who}; "
            f"calls that reach the gRPC listener between \"drain complete\" and its Shutdown are not handed to the "
            f"service, and gRPC cancels them: the client gets CANCELLED, not UNAVAILABLE. The server never accepted "
            f"them (its succeeded count equals the clients' OK)")
    check("drain: clients saw only OK, UNAVAILABLE/503 or refused connections", not bad, bad)
    return {"exit_code": ex["exit_code"], "timeline_after_sigterm_s": timeline, "probe_send_times_s": probe_times,
            "drain_complete": complete,
            "in_flight_at_sigterm": at.get("in_flight"), "queue_depth_at_sigterm": at.get("queue_depth"),
            "log_in_flight": int(m_in.group(1)) if m_in else None, "server_succeeded": succeeded,
            "server_failed": failed, "clients_ok": ok_clients, "loadtest_grpc": cg, "loadtest_http": ch,
            "probe_grpc": pg["by_code"], "probe_http": ph["by_code"], "other_codes": bad,
            "grpc_cancelled_at_listener_shutdown": cancelled, "loadtest_capped": capped}


def faults(meta):
    f = load("faults.json")
    if f is None:
        return None
    pb, pa, pe = load("faults_before.proc.json"), load("faults_after.proc.json"), load("faults_end.proc.json")
    mb, ma = load("faults_before.metrics.json"), load("faults_after.metrics.json")
    idle = load("faults_after.idle.json")
    nb, na = load("faults_normal_before.json"), load("faults_normal_after.json")
    say(f"\n== 4. client faults ({f['count_per_fault']} requests per fault; the server's HTTP header_timeout_ms "
        f"{meta.get('header_timeout_ms')}; {load_at('faults')} at start)")
    say(f"  raw HTTP/2 client sanity check (one call read to its end): {f['grpc_raw_client_check_ok']}")
    sent = 1 if f["grpc_raw_client_check_ok"] else 0
    for name, v in f.items():
        if isinstance(v, dict):
            say(f"  {name}: {json.dumps(v)}")
            if name == "grpc_cancel":
                sent += v["requests"]
            elif name == "grpc_deadline":
                sent += v["requests"]
            elif name == "grpc_disconnect":
                sent += v["requests"]
            elif "complete_requests_sent" in v:
                sent += v["complete_requests_sent"]
    server = server_delta(mb, ma)
    say(f"  server outcomes over the faults: {server} = {sum(server.values())} of {sent} complete requests sent "
        f"(a call cancelled or expired before the server read it is never counted)")
    say(f"  after: queue depth {idle.get('queue_depth')}, in flight {idle.get('in_flight')} "
        f"(idle {idle['seconds']} s after the last client)")
    check("faults: queue depth and in flight back to 0", idle.get("idle"), idle)
    say(f"  fds {pb['fds']} -> {pa['fds']}, threads {pb['threads']} -> {pa['threads']}, RSS MiB "
        f"{mib(pb['rss_kib'])} -> {mib(pa['rss_kib'])} (RssAnon {mib(pb['rss_anon_kib'])} -> "
        f"{mib(pa['rss_anon_kib'])}); after the normal run: fds {pe['fds']}, threads {pe['threads']}, RSS "
        f"{mib(pe['rss_kib'])} (RssAnon {mib(pe['rss_anon_kib'])})")
    check("faults: no fd leak (fds back to the baseline)", pa["fds"] <= pb["fds"], [pb["fds"], pa["fds"]])
    check("faults: no thread leak (at most 4 more threads than before: gRPC sizes its pools with the load)",
          pa["threads"] <= pb["threads"] + 4, [pb["threads"], pa["threads"]])

    def row(label, rep):
        r = rep["results"]
        say(f"  normal run {label}: {r['requests']} sent, {r['ok']} ok, errors {r['errors_by_code'] or 0}, "
            f"{r['req_per_s']:.1f} req/s, latency ms {lat(r['latency_ms'], 'p50', 'p90', 'p99', 'max')}")
        return {"requests": r["requests"], "ok": r["ok"], "errors": r["errors_by_code"],
                "req_per_s": r["req_per_s"], "latency_ms": r["latency_ms"]}
    before, after = row("before", nb), row("after ", na)
    check("faults: the normal run after the faults has no errors", not na["results"]["errors_by_code"],
          na["results"]["errors_by_code"])
    return {"faults": f, "server_outcomes": server, "complete_requests_sent": sent, "idle_after": idle,
            "proc_before": pb, "proc_after": pa, "proc_end": pe, "normal_before": before, "normal_after": after}


def main():
    meta = load("meta.json")
    sat = load("saturation.json") or {}
    sat_rate = sat.get("measured", sat.get("given"))
    sat_run = load("saturation_run.json")
    say(f"\nsluice reliability report: model {meta['model']} (lengths {meta['lengths']}), {meta['nproc']} CPU cores; "
        f"{'quick mode; ' if meta['quick'] else ''}work folder {WORK}")
    if sat_rate is not None:
        how = (f"measured: closed loop -c {meta['saturation_concurrency']} over gRPC, p99 "
               f"{sat_run['results']['latency_ms']['p99']:.0f} ms, {load_at('saturation')}" if sat_run else "given")
        say(f"saturated rate: {sat_rate:.1f} req/s ({how})")
    report = {"schema": "sluice-reliability/1", "meta": meta, "saturated_rate": sat_rate, "saturation": sat,
              "loadavg": LOADAVG}
    report["overload"] = overload(meta, sat_rate) if sat_rate else None
    report["soak"] = soak(meta, sat_rate)
    report["drain"] = drain(meta)
    report["faults"] = faults(meta)
    report["checks"] = checks
    failed = [c for c in checks if not c["pass"]]
    say(f"\ncorrectness findings: {len(checks) - len(failed)} of {len(checks)} hold"
        + ("" if not failed else "; FAILED: " + "; ".join(c["name"] for c in failed)))
    say("load average (1/5/15 min) through the run: " +
        ", ".join(f"{e['at']} {e['load1']:.1f}" for e in LOADAVG))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "reliability.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(OUT, "reliability.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"\nwritten: {os.path.join(OUT, 'reliability.json')} and reliability.txt")
    sys.exit(1 if CHECK and failed else 0)


if __name__ == "__main__":
    main()
