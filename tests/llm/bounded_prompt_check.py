"""Checks for bounded_prompt_test.sh (standard library only): python3 bounded_prompt_check.py HOST:PORT"""
import http.client
import json
import re
import sys
import threading

ADDRESS = sys.argv[1]
HOST, PORT = ADDRESS.rsplit(":", 1)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def request(method, path, body=None, timeout=60):
    """(status, body bytes); body: bytes or a JSON-able object."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    conn = http.client.HTTPConnection(HOST, int(PORT), timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def strict_json(raw):
    """The body as JSON, decoding it as strict UTF-8 (None when it is not valid)."""
    try:
        return json.loads(raw.decode("utf-8", errors="strict"))
    except (UnicodeDecodeError, ValueError):
        return None


# 1. A 10 MB prompt is refused from its size, naming the byte limit; so is a chat with a 10 MB message.
big = "a" * (10 << 20)
status, raw = request("POST", "/v1/completions", {"model": "tiny_sim", "prompt": big, "max_tokens": 2})
error = (strict_json(raw) or {}).get("error", {})
check(status == 400, f"10 MB prompt: HTTP {status} (400 expected)")
message = error.get("message", "")
limit = re.search(r"at most (\d+) bytes", message)
check(limit is not None, f"10 MB prompt: the message names the byte limit: {message[:200]!r}")
check(error.get("param") == "prompt", f"10 MB prompt: param {error.get('param')!r}")
max_bytes = int(limit.group(1)) if limit else 1000
status, raw = request("POST", "/v1/chat/completions",
                      {"model": "tiny_sim", "messages": [{"role": "user", "content": big}]})
error = (strict_json(raw) or {}).get("error", {})
check(status == 400 and "bytes" in error.get("message", "") and error.get("param") == "messages",
      f"10 MB chat message: HTTP {status}, {error}")

# 2. A prompt exactly at the bound is tokenized (and then refused for its tokens): the bound refuses nothing
#    that could fit.
status, raw = request("POST", "/v1/completions", {"model": "tiny_sim", "prompt": "x" * max_bytes})
error = (strict_json(raw) or {}).get("error", {})
check(status == 400 and "tokens" in error.get("message", "") and "bytes" not in error.get("message", ""),
      f"prompt of {max_bytes} bytes: refused for its tokens, not its bytes: {status} {error}")

# 3. While many long prompts (oversized, and at the bound, which are tokenized) are handled, /v2/health/live is
#    answered: a generous deadline, not a timing assertion.
stop = threading.Event()
statuses = []
lock = threading.Lock()


def flood(prompt):
    while not stop.is_set():
        try:
            s, _ = request("POST", "/v1/completions", {"model": "tiny_sim", "prompt": prompt}, timeout=120)
        except OSError as e:
            s = repr(e)
        with lock:
            statuses.append(s)


threads = [threading.Thread(target=flood, args=(big,)) for _ in range(3)]
threads += [threading.Thread(target=flood, args=("hello world " * (max_bytes // 12),)) for _ in range(3)]
for t in threads:
    t.start()
live = []
for _ in range(20):
    try:
        s, _ = request("GET", "/v2/health/live", timeout=10)
    except OSError as e:
        s = repr(e)
    live.append(s)
stop.set()
for t in threads:
    t.join()
check(all(s == 200 for s in live), f"/v2/health/live during the flood: {live}")
check(len(statuses) >= 6 and all(s in (400, 429) for s in statuses),
      f"flood answers: {len(statuses)}, statuses {sorted(set(map(str, statuses)))}")

# 4. Invalid UTF-8 that a body repeats (the echoed prompt, a model name, a role) comes back as valid JSON.
raw_body = b'{"model": "tiny_sim", "prompt": "caf\xc3 \xff!", "echo": true, "max_tokens": 2}'
status, raw = request("POST", "/v1/completions", raw_body)
doc = strict_json(raw)
check(status == 200 and doc is not None and doc["choices"][0]["text"].startswith("caf\ufffd \ufffd!"),
      f"echo of invalid UTF-8: HTTP {status}, valid JSON: {doc is not None}")
status, raw = request("POST", "/v1/completions", b'{"model": "nope\xff", "prompt": "x"}')
check(status == 404 and strict_json(raw) is not None, f"unknown model with invalid UTF-8: {status} {raw[:120]!r}")
status, raw = request("POST", "/v1/chat/completions",
                      b'{"model": "tiny_sim", "messages": [{"role": "w\xffzard", "content": "x"}]}')
check(status == 400 and strict_json(raw) is not None, f"role with invalid UTF-8: {status} {raw[:120]!r}")

# 5. Range errors report the value sent and name the field.
status, raw = request("POST", "/v1/completions", {"model": "tiny_sim", "prompt": "x", "max_tokens": 10 ** 12})
error = (strict_json(raw) or {}).get("error", {})
check(status == 400 and "1000000000000" in error.get("message", "") and error.get("param") == "max_tokens",
      f"max_tokens 10^12: {status} {error}")
status, raw = request("POST", "/v1/completions", {"model": "tiny_sim", "prompt": [1, 2 ** 31]})
error = (strict_json(raw) or {}).get("error", {})
check(status == 400 and "out of range" in error.get("message", "") and error.get("param") == "prompt",
      f"token id 2^31: {status} {error}")
status, raw = request("POST", "/v1/completions", {"model": "tiny_sim", "prompt": "x", "temperature": -1})
error = (strict_json(raw) or {}).get("error", {})
check(status == 400 and error.get("param") == "temperature", f"temperature -1: {status} {error}")

# 6. Malformed requests are counted once, as invalid, in sluice_generation_requests_total.
status, raw = request("GET", "/metrics")
counted = re.search(rb'sluice_generation_requests_total\{model="tiny_sim",outcome="invalid"\} (\d+)', raw)
check(counted is not None and int(counted.group(1)) >= statuses.count(400) + 7,
      f"invalid requests counted: {counted.group(1) if counted else None} (>= {statuses.count(400) + 7})")

if failures:
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("all checks passed")
