#!/usr/bin/env python3
"""Figures (not a test) for the HTTP front end under connection attacks, against a running sluice-server:
opens N idle keep-alive connections (each after one request) and M slow-header connections (one header line every
few seconds), then times GET /v2/health/live on fresh connections while they are held. Prints p50/p99/max of those
probes, how many attack connections the server still holds, and the server's RSS (with --pid). Python stdlib only.

  loadtest/tools/http_attack_figures.py --address 127.0.0.1:8000 --idle 2000 --slow 64 --probes 50 --pid PID
"""
import argparse
import resource
import socket
import statistics
import threading
import time


def rss_mib(pid):
    if not pid:
        return float("nan")
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def connect(host, port):
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def probe(host, port):
    start = time.monotonic()
    s = connect(host, port)
    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    ok = data.startswith(b"HTTP/1.1 200")
    return (time.monotonic() - start) * 1000, ok


def alive(sock):
    """True while the server has not closed the connection."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--address", default="127.0.0.1:8000")
    ap.add_argument("--idle", type=int, default=2000, help="idle keep-alive connections to hold")
    ap.add_argument("--slow", type=int, default=64, help="slow-header connections to trickle")
    ap.add_argument("--trickle-s", type=float, default=2.0, help="seconds between header lines")
    ap.add_argument("--probes", type=int, default=50)
    ap.add_argument("--pid", type=int, default=0, help="server pid, for its RSS")
    args = ap.parse_args()
    host, port = args.address.rsplit(":", 1)
    port = int(port)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    rss_before = rss_mib(args.pid)
    idle = []
    for _ in range(args.idle):
        s = connect(host, port)
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(4096)
        idle.append(s)
    slow = [connect(host, port) for _ in range(args.slow)]
    stop = threading.Event()

    def trickle():
        for s in slow:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\n")
        n = 0
        while not stop.wait(args.trickle_s):
            for s in slow:
                try:
                    s.sendall(b"X-Slow-%d: y\r\n" % n)
                except OSError:
                    pass
            n += 1

    t = threading.Thread(target=trickle)
    t.start()
    time.sleep(1.0)
    times, failures = [], 0
    for _ in range(args.probes):
        ms, ok = probe(host, port)
        times.append(ms)
        failures += 0 if ok else 1
    held_idle = sum(alive(s) for s in idle)
    held_slow = sum(alive(s) for s in slow)
    rss_during = rss_mib(args.pid)
    stop.set()
    t.join()
    times.sort()
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    print(f"attack: {args.idle} idle keep-alive + {args.slow} slow-header connections (a line every {args.trickle_s} s)")
    print(f"/v2/health/live on fresh connections while held: {args.probes} probes, {failures} failed, "
          f"p50 {statistics.median(times):.1f} ms, p99 {p99:.1f} ms, max {times[-1]:.1f} ms")
    print(f"still open after the probes: {held_idle}/{args.idle} idle, {held_slow}/{args.slow} slow")
    print(f"server RSS: {rss_before:.0f} MiB before, {rss_during:.0f} MiB while held")
    for s in idle + slow:
        s.close()


if __name__ == "__main__":
    main()
