#!/usr/bin/env python3
"""Clients for loadtest/bench/reliability.sh (issue 14's reliability figures), against a running sluice-server on 127.0.0.1.
Debian's python3: the standard library, python3-yaml (the model's config) and python3-grpcio (gRPC clients; requests
are encoded by hand, so no generated stubs). Every client is bounded in count and time.

  procstat --pid PID                      one JSON line: VmRSS / VmHWM / RssAnon / RssFile (KiB), fds, threads
  sample --pid PID --interval S --out F   a procstat line every S seconds (with t_s) until the process ends
  metrics --url URL --model M             sluice_requests_total by outcome, queue depth, in flight (JSON)
  wait-idle --url URL --model M           polls until sluice_queue_depth and sluice_in_flight are 0 (JSON: seconds);
                                          with --min-in-flight N until at least N are in flight
  probe --protocol grpc|http ...          requests at a steady rate beside a load run: latency and outcome of each
  faults --grpc A --http A ...            clients that disconnect, cancel, time out, stall or trickle (JSON counts)
"""
import argparse
import json
import math
import os
import random
import re
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"
HTTP_CODES = {200: "OK", 400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 408: "DEADLINE_EXCEEDED", 413: "INVALID_ARGUMENT",
              429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 503: "UNAVAILABLE",
              504: "DEADLINE_EXCEEDED"}


# ---- the server process and its /metrics ------------------------------------------------------------------------

def procstat(pid):
    """VmRSS, VmHWM and RssAnon (the heap: what a leak grows; RssFile, the mapped libraries, shrinks and grows with
    the machine's page cache) in KiB, open fds and threads."""
    keys = {"VmRSS:": "rss_kib", "VmHWM:": "hwm_kib", "RssAnon:": "rss_anon_kib", "RssFile:": "rss_file_kib"}
    out = {v: None for v in keys.values()}
    out.update({"fds": None, "threads": None})
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(maxsplit=1)[0]
                if key in keys:
                    out[keys[key]] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
        out["threads"] = len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        pass
    return out


def scrape(url, model):
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {"requests_total": {}}
    label = f'model="{model}"'
    for line in text.splitlines():
        if line.startswith("#") or label not in line:
            continue
        m = re.match(r'^(\w+)\{([^}]*)\}\s+(\S+)$', line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2), float(m.group(3))
        if name == "sluice_requests_total":
            outcome = re.search(r'outcome="([^"]+)"', labels).group(1)
            out["requests_total"][outcome] = int(value)
        elif name in ("sluice_queue_depth", "sluice_in_flight", "sluice_inferences_total"):
            out[name[len("sluice_"):]] = value
    return out


def cmd_procstat(a):
    print(json.dumps(procstat(a.pid)))


def cmd_sample(a):
    start = time.monotonic()
    with open(a.out, "a") as f:
        while os.path.exists(f"/proc/{a.pid}"):
            s = procstat(a.pid)
            if s["rss_kib"] is None:
                break
            s["t_s"] = round(time.monotonic() - start, 3)
            f.write(json.dumps(s) + "\n")
            f.flush()
            time.sleep(max(0.0, a.interval - (time.monotonic() - start) % a.interval))


def cmd_metrics(a):
    print(json.dumps(scrape(a.url, a.model)))


def cmd_wait_idle(a):
    """Idle: queue depth and in flight 0; with --min-in-flight N, the opposite: at least N in flight."""
    start = time.monotonic()
    m = {}
    while time.monotonic() - start < a.timeout:
        m = scrape(a.url, a.model)
        busy = a.min_in_flight and m.get("in_flight", 0) >= a.min_in_flight
        if busy or (not a.min_in_flight and m.get("queue_depth") == 0 and m.get("in_flight") == 0):
            print(json.dumps({"idle": True, "seconds": round(time.monotonic() - start, 3), **m}))
            return
        time.sleep(0.2)
    print(json.dumps({"idle": False, "seconds": round(time.monotonic() - start, 3), **m}))


# ---- requests ---------------------------------------------------------------------------------------------------

class Payloads:
    """Seeded requests for the model's first input: lengths uniform in [lo, hi], KServe v2 over gRPC (protobuf
    encoded here) and over HTTP (JSON header + binary tensor data)."""

    def __init__(self, repository, model, lengths, seed):
        import yaml
        with open(os.path.join(repository, model, "config.yaml")) as f:
            config = yaml.safe_load(f)
        spec = config["inputs"][0]
        self.model, self.name, self.dtype = model, spec["name"], spec["dtype"]
        self.top = int(spec.get("range", [0, 8191])[1]) if self.dtype.startswith("INT") else 0
        lo, hi = (int(x) for x in lengths.split("-"))
        self.lo, self.hi = lo, hi
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def _tensor(self):
        with self.lock:
            n = self.rng.randint(self.lo, self.hi)
            if self.dtype == "INT64":
                return n, struct.pack(f"<{n}q", *(self.rng.randint(1, self.top) for _ in range(n)))
            if self.dtype == "INT32":
                return n, struct.pack(f"<{n}i", *(self.rng.randint(1, self.top) for _ in range(n)))
            return n, struct.pack(f"<{n}f", *(self.rng.uniform(-0.5, 0.5) for _ in range(n)))

    def grpc(self):
        n, raw = self._tensor()
        shape = b"".join(_varint(d) for d in (1, n))
        tensor = _field(1, self.name.encode()) + _field(2, self.dtype.encode()) + _field(3, shape)
        return _field(1, self.model.encode()) + _field(5, tensor) + _field(7, raw)

    def http(self, host):
        n, raw = self._tensor()
        header = json.dumps({"inputs": [{"name": self.name, "datatype": self.dtype, "shape": [1, n],
                                         "parameters": {"binary_data_size": len(raw)}}]}).encode()
        head = (f"POST /v2/models/{self.model}/infer HTTP/1.1\r\nHost: {host}\r\n"
                f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(header)}\r\n"
                f"Content-Length: {len(header) + len(raw)}\r\n\r\n").encode()
        return head, header + raw


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number, data):  # a length-delimited protobuf field
    return _varint((number << 3) | 2) + _varint(len(data)) + data


def _split(address):
    host, port = address.rsplit(":", 1)
    return host, int(port)


def http_connect(address, rcvbuf=0, timeout=30):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connect, so the window stays small
    s.settimeout(timeout)
    s.connect(_split(address))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def http_read_response(f):
    """Reads one HTTP/1.1 response from a buffered socket file; returns (status, keep_alive)."""
    status_line = f.readline()
    if not status_line:
        raise ConnectionError("connection closed")
    status = int(status_line.split()[1])
    length, chunked, close = 0, False, False
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        k, v = k.strip().lower(), v.strip().lower()
        if k == "content-length":
            length = int(v)
        elif k == "transfer-encoding" and "chunked" in v:
            chunked = True
        elif k == "connection" and v == "close":
            close = True
    if chunked:
        while True:
            size = int(f.readline().split(b";")[0], 16)
            f.read(size + 2)
            if size == 0:
                break
    else:
        f.read(length)
    return status, not close


def abort(s):
    """Closes with RST (SO_LINGER 0), as a crashed or killed client would."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def grpc_infer_callable(address):
    import grpc
    channel = grpc.insecure_channel(address)
    return channel, channel.unary_unary(INFER_METHOD)  # bytes in, bytes out


# ---- probe: steady requests beside a load run ---------------------------------------------------------------------

def percentiles(values):
    v = sorted(values)
    if not v:
        return {"count": 0}

    def rank(p):
        return v[max(0, math.ceil(p / 100 * len(v)) - 1)]
    return {"count": len(v), "p50": rank(50), "p90": rank(90), "p99": rank(99), "max": v[-1],
            "mean": sum(v) / len(v)}


def cmd_probe(a):
    """Sends rate x duration requests at a constant rate (workers so a slow answer does not hold the next one) and
    times each from its send to its answer, by outcome: the refusal latency the load generator does not report."""
    payloads = Payloads(a.repository, a.model, a.lengths, a.seed)
    total = int(round(a.rate * a.duration))
    start = time.monotonic() + 0.2
    next_index = [0]
    lock = threading.Lock()
    results = []  # (code, ms, late_ms, send time since the epoch)

    in_a_row = [0]

    def take():
        with lock:
            if a.stop_after_connection_errors and in_a_row[0] >= a.stop_after_connection_errors:
                return None
            i = next_index[0]
            next_index[0] += 1
        return i if i < total else None

    def worker():
        conn = None
        f = None
        channel = call = None
        if a.protocol == "grpc":
            channel, call = grpc_infer_callable(a.address)
        while (i := take()) is not None:
            due = start + i / a.rate
            time.sleep(max(0.0, due - time.monotonic()))
            t0, sent_at = time.monotonic(), time.time()
            if a.protocol == "grpc":
                import grpc
                try:
                    call(payloads.grpc(), timeout=a.timeout)
                    code = "OK"
                except grpc.RpcError as e:
                    code = e.code().name
                    details = (e.details() or "").lower()
                    if code == "UNAVAILABLE" and any(w in details for w in ("connect", "socket closed", "reset")):
                        code = "CONNECTION_ERROR"  # no server answered (as for HTTP below), not a refusal
            else:
                try:
                    if conn is None:
                        conn = http_connect(a.address, timeout=a.timeout)
                        f = conn.makefile("rb")
                    head, body = payloads.http(a.address)
                    conn.sendall(head + body)
                    status, keep = http_read_response(f)
                    code = HTTP_CODES.get(status, f"HTTP_{status}")
                    if not keep:
                        conn.close()
                        conn = None
                except (OSError, ValueError, ConnectionError):
                    code = "CONNECTION_ERROR"
                    if conn is not None:
                        conn.close()
                    conn = None
            t1 = time.monotonic()
            with lock:
                results.append((code, (t1 - t0) * 1e3, max(0.0, (t0 - due) * 1e3), sent_at))
                in_a_row[0] = in_a_row[0] + 1 if code == "CONNECTION_ERROR" else 0
        if conn is not None:
            conn.close()
        if channel is not None:
            channel.close()

    threads = [threading.Thread(target=worker) for _ in range(a.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_code = {}
    for code, ms, _, _ in results:
        by_code.setdefault(code, []).append(ms)
    out = {"protocol": a.protocol, "rate": a.rate, "duration_s": a.duration, "sent": len(results),
           "by_code": {c: len(v) for c, v in sorted(by_code.items())},
           "latency_ms": {c: percentiles(v) for c, v in sorted(by_code.items())},
           "max_send_lag_ms": max((r[2] for r in results), default=0.0)}
    if a.events:  # every request: [send time since the epoch, code, ms]
        out["events"] = sorted([round(r[3], 4), r[0], round(r[1], 2)] for r in results)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


# ---- faults ----------------------------------------------------------------------------------------------------

def run_threads(n_threads, fn, count):
    """Runs fn(i) for i in range(count) on n_threads threads; returns the results."""
    out = [None] * count
    it = iter(range(count))
    lock = threading.Lock()

    def loop():
        while True:
            with lock:
                i = next(it, None)
            if i is None:
                return
            out[i] = fn(i)

    threads = [threading.Thread(target=loop) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def fault_http_close_after_send(a, p):
    """A whole request sent, then the connection closed at once or after up to 30 ms (half with FIN, half RST)."""
    rng = random.Random(a.seed + 1)
    delays = [rng.uniform(0, 0.03) for _ in range(a.count)]

    def one(i):
        try:
            s = http_connect(a.http)
            head, body = p.http(a.http)
            s.sendall(head + body)
            time.sleep(delays[i])
            abort(s) if i % 2 else s.close()
            return "sent"
        except OSError as e:
            return f"error: {e}"
    r = run_threads(8, one, a.count)
    return {"requests": a.count, "complete_requests_sent": r.count("sent"), "errors": a.count - r.count("sent")}


def fault_http_half_body(a, p):
    """Head and half the body, then close (the request never completes)."""
    def one(i):
        try:
            s = http_connect(a.http)
            head, body = p.http(a.http)
            s.sendall(head + body[: len(body) // 2])
            time.sleep(0.005)
            abort(s) if i % 2 else s.close()
            return "sent"
        except OSError as e:
            return f"error: {e}"
    r = run_threads(8, one, a.count)
    return {"requests": a.count, "partial_requests_sent": r.count("sent"), "errors": a.count - r.count("sent")}


def fault_http_no_read(a, p, url):
    """Connections with a 4 KiB receive buffer pipeline requests and never read the answers for hold_s seconds;
    then close (half RST). Reports the server's in-flight gauge while they are held."""
    per_conn = 30
    conns = max(1, a.count // per_conn)
    socks, sent = [], 0
    for i in range(conns):
        try:
            s = http_connect(a.http, rcvbuf=4096, timeout=5)
            data = b"".join(h + b for h, b in (p.http(a.http) for _ in range(per_conn)))
            s.sendall(data)
            sent += per_conn
            socks.append(s)
        except OSError:
            pass
    time.sleep(a.hold_s / 2)
    during = scrape(url, a.model)
    time.sleep(a.hold_s / 2)
    for i, s in enumerate(socks):
        abort(s) if i % 2 else s.close()
    return {"connections": conns, "pipelined_per_connection": per_conn, "complete_requests_sent": sent,
            "hold_s": a.hold_s, "server_in_flight_while_held": during.get("in_flight"),
            "server_queue_depth_while_held": during.get("queue_depth")}


def fault_http_slowloris(a, result):
    """Connections that send a request head one byte per second and never finish it; each is watched until the
    server closes it (header_timeout_ms, 10 s by default) or slowloris_s pass (then closed here)."""
    n = a.slowloris
    head = (f"POST /v2/models/{a.model}/infer HTTP/1.1\r\nHost: x\r\n" + "X-Slow: " + "y" * 200).encode()
    socks = {}
    start = time.monotonic()
    for i in range(n):
        try:
            s = http_connect(a.http, timeout=5)
            s.sendall(head[:40])
            s.setblocking(False)
            socks[s] = 40
        except OSError:
            pass
    opened = len(socks)
    closed_at, answers = [], {}
    next_byte = start + 1
    while socks and time.monotonic() - start < a.slowloris_s:
        readable, _, _ = select.select(list(socks), [], [], 0.1)
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data.startswith(b"HTTP/1.1 "):
                code = data.split()[1].decode()
                answers[code] = answers.get(code, 0) + 1
            if not data or data.startswith(b"HTTP/1.1 "):
                closed_at.append(time.monotonic() - start)
                socks.pop(s)
                s.close()
        if time.monotonic() >= next_byte:
            next_byte += 1
            for s, k in list(socks.items()):
                try:
                    s.send(head[k:k + 1] if k < len(head) else b"y")
                    socks[s] = k + 1
                except (BlockingIOError, OSError):
                    pass
    still_open = len(socks)
    for s in socks:
        abort(s)
    result.update({"connections": opened, "closed_by_server": len(closed_at), "still_open_at_end": still_open,
                   "watched_s": a.slowloris_s, "server_answers": answers,
                   "closed_after_s": percentiles(closed_at)})


def fault_grpc_cancel(a, p):
    """Calls started in bursts of 20, then cancelled one after another 0-7.5 ms apart (RST_STREAM CANCEL from the
    client), so some are cancelled while queued, some while in a batch and a few after their answer."""
    import grpc
    channel, call = grpc_infer_callable(a.grpc)
    rng = random.Random(a.seed + 2)
    cancelled = finished = 0
    codes = {}
    for burst in range(0, a.count, 20):
        futures = [call.future(p.grpc(), timeout=30) for _ in range(min(20, a.count - burst))]
        for f in futures:
            time.sleep(rng.uniform(0, 0.03) / 4)
            if f.cancel():
                cancelled += 1
            else:
                finished += 1
        for f in futures:
            try:
                f.result()
                codes["OK"] = codes.get("OK", 0) + 1
            except grpc.FutureCancelledError:
                codes["CANCELLED"] = codes.get("CANCELLED", 0) + 1
            except grpc.RpcError as e:
                codes[e.code().name] = codes.get(e.code().name, 0) + 1
    channel.close()
    return {"requests": a.count, "cancelled_by_client": cancelled, "finished_before_cancel": finished,
            "client_codes": codes}


def fault_grpc_deadline(a, p):
    """Calls with a 1-20 ms deadline, in bursts of 20, so most expire in the queue or the batch."""
    import grpc
    channel, call = grpc_infer_callable(a.grpc)
    rng = random.Random(a.seed + 3)
    codes = {}
    for burst in range(0, a.count, 20):
        futures = [call.future(p.grpc(), timeout=rng.uniform(0.001, 0.02)) for _ in range(min(20, a.count - burst))]
        for f in futures:
            try:
                f.result()
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            codes[code] = codes.get(code, 0) + 1
    channel.close()
    return {"requests": a.count, "client_codes": codes}


def fault_grpc_disconnect(a):
    """Child processes that each start 10 calls and exit 0-30 ms later without closing anything (the kernel closes
    the TCP connection: no RST_STREAM, no GOAWAY), 4 at a time."""
    per_child = 10
    children = max(1, a.count // per_child)
    exits = []
    procs = []
    for i in range(children):
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "_grpc_disconnect_child",
                                       "--grpc", a.grpc, "--repository", a.repository, "--model", a.model,
                                       "--lengths", a.lengths, "--seed", str(a.seed + 100 + i),
                                       "--count", str(per_child)]))
        if len(procs) >= 4:
            exits.append(procs.pop(0).wait(timeout=60))
    exits += [pr.wait(timeout=60) for pr in procs]
    return {"processes": children, "calls_per_process": per_child, "requests": children * per_child,
            "child_exit_codes": {str(c): exits.count(c) for c in set(exits)}}


def cmd_grpc_disconnect_child(a):
    p = Payloads(a.repository, a.model, a.lengths, a.seed)
    _, call = grpc_infer_callable(a.grpc)
    futures = [call.future(p.grpc(), timeout=30) for _ in range(a.count)]
    time.sleep(random.Random(a.seed).uniform(0, 0.03))
    sys.stdout.flush()
    del futures
    os._exit(0)


# A minimal HTTP/2 client (no dependency): enough to send gRPC calls and then never read, with a stream window of 0 so
# the server cannot send a single byte of any answer.
def _h2_frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _hpack_literal(name, value):  # literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)
    def string(s):
        b = s.encode()
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x00" + string(name) + string(value)


def _h2_open(address, window):
    s = socket.create_connection(_split(address), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    settings = struct.pack(">HI", 0x4, window) + struct.pack(">HI", 0x2, 0)  # INITIAL_WINDOW_SIZE, ENABLE_PUSH 0
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _h2_frame(0x4, 0, 0, settings))
    buf = b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # read until the server's SETTINGS, then acknowledge it
        buf += s.recv(65536)
        while len(buf) >= 9:
            length = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + length:
                break
            kind, flags = buf[3], buf[4]
            buf = buf[9 + length:]
            if kind == 0x4 and not flags & 0x1:
                s.sendall(_h2_frame(0x4, 0x1, 0, b""))
                return s, buf
    raise ConnectionError("no SETTINGS from the server")


def _h2_call(s, address, stream, message):
    headers = b"".join(_hpack_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", INFER_METHOD), (":authority", address),
        ("content-type", "application/grpc"), ("te", "trailers")))
    s.sendall(_h2_frame(0x1, 0x4, stream, headers) +
              _h2_frame(0x0, 0x1, stream, b"\x00" + struct.pack(">I", len(message)) + message))


def h2_check(address, p):
    """One call over the raw client with a normal window, read to its end: proves the stalled calls are valid."""
    s, buf = _h2_open(address, 65535)
    _h2_call(s, address, 1, p.grpc())
    got_data = ended = False
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        while len(buf) >= 9:
            length = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + length:
                break
            kind, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            buf = buf[9 + length:]
            if stream == 1 and kind == 0x0 and length > 5:
                got_data = True
            if stream == 1 and flags & 0x1 and kind in (0x0, 0x1):
                ended = True
        if not ended:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    s.close()
    return got_data and ended


def fault_grpc_stall(a, p, url):
    """HTTP/2 connections that announce a stream window of 0, send 30 calls each and read nothing for hold_s (the
    answers cannot leave the server), then close (half with RST)."""
    per_conn = 30
    conns = max(1, a.count // per_conn)
    socks, sent = [], 0
    for _ in range(conns):
        try:
            s, _ = _h2_open(a.grpc, 0)
            for k in range(per_conn):
                _h2_call(s, a.grpc, 1 + 2 * k, p.grpc())
            sent += per_conn
            socks.append(s)
        except OSError:
            pass
    time.sleep(a.hold_s / 2)
    during = scrape(url, a.model)
    time.sleep(a.hold_s / 2)
    for i, s in enumerate(socks):
        abort(s) if i % 2 else s.close()
    return {"connections": conns, "calls_per_connection": per_conn, "complete_requests_sent": sent, "hold_s": a.hold_s,
            "server_in_flight_while_held": during.get("in_flight"),
            "server_queue_depth_while_held": during.get("queue_depth")}


def cmd_faults(a):
    url = f"http://{a.http}/metrics"
    p = Payloads(a.repository, a.model, a.lengths, a.seed)
    out = {"count_per_fault": a.count}
    timed = lambda name, fn: out.__setitem__(name, dict(fn(), seconds=round(time.monotonic() - t0, 2)))
    slow = {}
    slow_thread = threading.Thread(target=fault_http_slowloris, args=(a, slow))  # watched while the rest run
    slow_thread.start()
    out["grpc_raw_client_check_ok"] = h2_check(a.grpc, p)
    for name, fn in (("http_close_after_send", lambda: fault_http_close_after_send(a, p)),
                     ("http_half_body_close", lambda: fault_http_half_body(a, p)),
                     ("http_no_read", lambda: fault_http_no_read(a, p, url)),
                     ("grpc_cancel", lambda: fault_grpc_cancel(a, p)),
                     ("grpc_deadline", lambda: fault_grpc_deadline(a, p)),
                     ("grpc_disconnect", lambda: fault_grpc_disconnect(a)),
                     ("grpc_stall_window_0", lambda: fault_grpc_stall(a, p, url))):
        t0 = time.monotonic()
        timed(name, fn)
        print(f"  {name}: {json.dumps(out[name])}", flush=True)
    slow_thread.join()
    out["http_slowloris"] = slow
    print(f"  http_slowloris: {json.dumps(slow)}", flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def target(p, need_grpc=False, need_http=False):
        p.add_argument("--repository", required=True, help="model repository (the model's config.yaml)")
        p.add_argument("--model", required=True)
        p.add_argument("--lengths", default="16-128", help="request lengths, uniform A-B steps")
        p.add_argument("--seed", type=int, default=1)
        if need_grpc:
            p.add_argument("--grpc", required=True, help="gRPC address host:port")
        if need_http:
            p.add_argument("--http", required=True, help="HTTP address host:port")

    p = sub.add_parser("procstat")
    p.add_argument("--pid", type=int, required=True)
    p.set_defaults(fn=cmd_procstat)
    p = sub.add_parser("sample")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--interval", type=float, default=10)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_sample)
    for name, fn in (("metrics", cmd_metrics), ("wait-idle", cmd_wait_idle)):
        p = sub.add_parser(name)
        p.add_argument("--url", required=True)
        p.add_argument("--model", required=True)
        p.add_argument("--timeout", type=float, default=60)
        p.add_argument("--min-in-flight", type=int, default=0)
        p.set_defaults(fn=fn)
    p = sub.add_parser("probe")
    target(p)
    p.add_argument("--protocol", choices=["grpc", "http"], required=True)
    p.add_argument("--address", required=True)
    p.add_argument("--rate", type=float, default=20)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--events", action="store_true", help="also write each request's send time, code and latency")
    p.add_argument("--stop-after-connection-errors", type=int, default=0,
                   help="stop once this many requests in a row found no server (it has exited)")
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_probe)
    p = sub.add_parser("faults")
    target(p, need_grpc=True, need_http=True)
    p.add_argument("--count", type=int, default=300, help="requests (or connections) per fault")
    p.add_argument("--slowloris", type=int, default=200, help="slow-header connections")
    p.add_argument("--slowloris-s", type=float, default=13, help="seconds the slow connections are watched")
    p.add_argument("--hold-s", type=float, default=5, help="seconds the non-reading clients hold their answers")
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_faults)
    p = sub.add_parser("_grpc_disconnect_child")
    target(p, need_grpc=True)
    p.add_argument("--count", type=int, default=10)
    p.set_defaults(fn=cmd_grpc_disconnect_child)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
