"""The generation front ends against a real sluice-server, through unmodified clients from PyPI: the `openai`
Python client (completions and chat, whole and streamed, usage, errors) and `tritonclient[grpc]` (decoupled
ModelStreamInfer: streamed tokens, the final flag, several requests on one stream, errors that leave the stream
usable). Answers are compared with openai_peers_reference.py's independent computation of the sim device's
greedy tokens. Run by openai_peers_test.sh.

  python openai_peers_check.py --http HOST:PORT --grpc HOST:PORT --model NAME --reference REF.json --token T
(the server requires "Authorization: Bearer T" on every API call)
"""
import argparse
import json
import queue
import re
import sys
import time
import urllib.request

import numpy as np
import openai
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

FAILURES = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


def expect_error(call, error_type, status, needle, what):
    try:
        call()
    except error_type as e:
        body = getattr(e, "body", None) or {}
        message = body.get("message", "") if isinstance(body, dict) else str(body)
        check(e.status_code == status and needle in message,
              f"{what}: {error_type.__name__} {e.status_code} '{message}'")
        return body
    except Exception as e:  # noqa: BLE001 - any other outcome is the failure being reported
        check(False, f"{what}: raised {type(e).__name__}: {e}")
        return None
    check(False, f"{what}: no error raised")
    return None


def metric(args, name, labels):
    request = urllib.request.Request(f"http://{args.http}/metrics", headers={"Authorization": f"Bearer {args.token}"})
    text = urllib.request.urlopen(request, timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def openai_checks(args, ref):
    client = openai.OpenAI(base_url=f"http://{args.http}/v1", api_key=args.token, max_retries=0, timeout=60)
    model = args.model

    # Bearer auth applies as on the KServe routes, answered in OpenAI's shape.
    intruder = openai.OpenAI(base_url=f"http://{args.http}/v1", api_key="wrong", max_retries=0, timeout=60)
    body = expect_error(lambda: intruder.models.list(), openai.AuthenticationError, 401, "", "wrong API key")
    check(isinstance(body, dict) and body.get("type") == "authentication_error", f"401 body: {body}")

    models = client.models.list()
    check([m.id for m in models.data] == [model] and models.data[0].owned_by == "sluice",
          f"models.list: {[m.id for m in models.data]}")

    # Whole completion, greedy: the sim device's tokens, detokenized.
    r = ref["plain"]
    c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=16, temperature=0)
    check(c.object == "text_completion" and c.id.startswith("cmpl-") and c.model == model, "completion object/id/model")
    check(c.choices[0].text == r["text"], f"completion text {c.choices[0].text!r} == {r['text']!r}")
    check(c.choices[0].finish_reason == r["finish"], f"completion finish_reason {c.choices[0].finish_reason}")
    check((c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) ==
          (r["prompt_tokens"], r["completion_tokens"], r["prompt_tokens"] + r["completion_tokens"]),
          f"completion usage {c.usage}")

    # Streamed completion with usage: the chunks add up to the same text.
    chunks = list(client.completions.create(model=model, prompt="Once upon a time", max_tokens=16, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    check(text == r["text"], f"streamed completion text {text!r}")
    check(len(chunks) >= 3, f"streamed completion came in {len(chunks)} chunks")
    check(finishes == [r["finish"]], f"streamed completion finish reasons {finishes}")
    check(chunks[-1].choices == [] and chunks[-1].usage is not None and
          chunks[-1].usage.completion_tokens == r["completion_tokens"], f"usage chunk {chunks[-1]}")

    # Token-id prompt and echo.
    r_ids = ref["ids"]
    c = client.completions.create(model=model, prompt=[1, 200, 300, 400], max_tokens=8, temperature=0)
    check(c.choices[0].text == r_ids["text"] and c.usage.prompt_tokens == 4, f"token-id prompt {c.choices[0].text!r}")
    c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=16, temperature=0, echo=True)
    check(c.choices[0].text == "Once upon a time" + r["text"], f"echo {c.choices[0].text!r}")

    # A stop string taken from the expected text: the text ends before it, finish "stop".
    words = [w for w in re.split(r"\s+", r["text"]) if len(w) >= 2]
    if words:
        stop = words[len(words) // 2]
        cut = r["text"][: r["text"].find(stop)]
        c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=16, temperature=0, stop=[stop])
        check(c.choices[0].text == cut and c.choices[0].finish_reason == "stop",
              f"stop {stop!r}: {c.choices[0].text!r} ({c.choices[0].finish_reason})")

    # Seeded sampling repeats itself.
    a = client.completions.create(model=model, prompt="Hello", max_tokens=10, temperature=1.0, seed=7)
    b = client.completions.create(model=model, prompt="Hello", max_tokens=10, temperature=1.0, seed=7)
    check(a.choices[0].text == b.choices[0].text, "seeded sampling is repeatable")

    # Chat, whole and streamed.
    r_chat = ref["chat"]
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something."}]
    c = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
    check(c.object == "chat.completion" and c.id.startswith("chatcmpl-"), "chat object/id")
    check(c.choices[0].message.role == "assistant" and c.choices[0].message.content == r_chat["text"],
          f"chat content {c.choices[0].message.content!r} == {r_chat['text']!r}")
    check(c.usage.prompt_tokens == r_chat["prompt_tokens"], f"chat usage {c.usage}")
    chunks = list(client.chat.completions.create(model=model, messages=messages, max_completion_tokens=12,
                                                 temperature=0, stream=True, stream_options={"include_usage": True}))
    check(chunks[0].object == "chat.completion.chunk" and chunks[0].choices[0].delta.role == "assistant",
          "chat stream starts with the assistant role")
    content = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check(content == r_chat["text"], f"chat stream content {content!r}")
    last_choice = [ch for ch in chunks if ch.choices][-1]
    check(last_choice.choices[0].finish_reason == r_chat["finish"], "chat stream finish chunk")
    check(chunks[-1].choices == [] and chunks[-1].usage.total_tokens ==
          r_chat["prompt_tokens"] + r_chat["completion_tokens"], "chat stream usage chunk")

    # Errors in OpenAI's shape with the status table's codes.
    body = expect_error(lambda: client.completions.create(model="no_such_model", prompt="x", max_tokens=2),
                        openai.NotFoundError, 404, "no_such_model", "unknown model")
    check(isinstance(body, dict) and body.get("code") == "model_not_found", f"unknown model code: {body}")
    expect_error(lambda: client.completions.create(model=model, prompt="word " * 400, max_tokens=2),
                 openai.BadRequestError, 400, "prompt", "too-long prompt")
    expect_error(lambda: client.completions.create(model=model, prompt="x", max_tokens=2, temperature=-1),
                 openai.BadRequestError, 400, "temperature", "negative temperature")
    expect_error(lambda: client.completions.create(model=model, prompt=["a", "b"], max_tokens=2),
                 openai.BadRequestError, 400, "batched prompts are not supported", "batched prompts")
    expect_error(lambda: client.completions.create(model=model, prompt="x", max_tokens=2, n=2),
                 openai.BadRequestError, 400, "n = 1", "n = 2")
    expect_error(lambda: client.chat.completions.create(model=model, messages=[], max_tokens=2),
                 openai.BadRequestError, 400, "messages", "empty messages")

    # A streaming client that goes away frees its sequence long before max_tokens would have.
    before = metric(args, "sluice_generation_requests_total", {"model": model, "outcome": "cancelled"}) or 0
    stream = client.completions.create(model=model, prompt="Once", max_tokens=200, temperature=0,
                                       extra_body={"ignore_eos": True},
                                       stream=True)
    next(iter(stream))
    started = time.time()
    stream.close()
    freed = None
    while time.time() - started < 10:
        running = metric(args, "sluice_generation_running", {"model": model})
        cancelled = metric(args, "sluice_generation_requests_total", {"model": model, "outcome": "cancelled"})
        if running == 0 and cancelled == before + 1:
            freed = time.time() - started
            break
        time.sleep(0.02)
    # 200 tokens take >= 200 sim steps of base_ms each (about 2 s); a disconnect must end it well before.
    check(freed is not None and freed < 1.0, f"disconnect frees the sequence (after {freed} s)")


class Collector:
    def __init__(self):
        self.items = queue.Queue()

    def __call__(self, result, error):
        self.items.put((result, error))

    def until_final(self, count=1, timeout=30):
        """Responses until `count` requests have sent their final flag (or an error)."""
        got, finals = [], 0
        deadline = time.time() + timeout
        while finals < count:
            result, error = self.items.get(timeout=max(0.1, deadline - time.time()))
            got.append((result, error))
            if error is not None:
                finals += 1
                continue
            params = result.get_response().parameters
            if "triton_final_response" in params and params["triton_final_response"].bool_param:
                finals += 1
        return got


def text_of(result):
    out = result.as_numpy("text_output")
    return b"".join(out.reshape(-1)).decode() if out is not None else None


def inputs(prompt, stream, max_tokens=16, sampling=None, exclude_input=None):
    tensors = []
    t = grpcclient.InferInput("text_input", [1], "BYTES")
    t.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
    tensors.append(t)
    s = grpcclient.InferInput("stream", [1], "BOOL")
    s.set_data_from_numpy(np.array([stream], dtype=bool))
    tensors.append(s)
    m = grpcclient.InferInput("max_tokens", [1], "INT32")
    m.set_data_from_numpy(np.array([max_tokens], dtype=np.int32))
    tensors.append(m)
    p = grpcclient.InferInput("sampling_parameters", [1], "BYTES")
    p.set_data_from_numpy(np.array([json.dumps(sampling or {"temperature": 0}).encode()], dtype=np.object_))
    tensors.append(p)
    if exclude_input is not None:
        e = grpcclient.InferInput("exclude_input_in_output", [1], "BOOL")
        e.set_data_from_numpy(np.array([exclude_input], dtype=bool))
        tensors.append(e)
    return tensors


def triton_checks(args, ref):
    model = args.model
    r = ref["plain"]
    headers = {"authorization": f"Bearer {args.token}"}
    client = grpcclient.InferenceServerClient(url=args.grpc)
    try:
        client.is_model_ready(model)
        check(False, "ModelReady without the token is refused")
    except InferenceServerException as e:
        check("UNAUTHENTICATED" in str(e.status()), f"ModelReady without the token: {e.status()}")
    check(client.is_model_ready(model, headers=headers), "tritonclient is_model_ready")
    metadata = client.get_model_metadata(model, headers=headers, as_json=True)
    check(metadata["inputs"][0]["name"] == "text_input" and metadata["outputs"][0]["name"] == "text_output",
          "tritonclient model metadata")
    config = client.get_model_config(model, headers=headers, as_json=True)["config"]
    check(config["name"] == model and config["output"][0]["data_type"] == "TYPE_STRING", "tritonclient model config")

    # Streamed: a response per text delta, then the final flag (an empty text_output by default).
    collector = Collector()
    client.start_stream(callback=collector, headers=headers)
    client.async_stream_infer(model, inputs("Once upon a time", True), request_id="s1")
    got = collector.until_final()
    errors = [e for _, e in got if e is not None]
    check(not errors, f"streamed request: no errors {errors}")
    texts = [text_of(res) for res, _ in got]
    check(all(res.get_response().id == "s1" for res, _ in got), "every response echoes the request id")
    check("".join(t or "" for t in texts) == r["text"], f"streamed tokens {''.join(t or '' for t in texts)!r}")
    check(len(got) >= 3, f"streamed in {len(got)} responses")
    finals = [res.get_response().parameters["triton_final_response"].bool_param for res, _ in got]
    check(finals == [False] * (len(got) - 1) + [True], f"final flags {finals}")

    # Empty final response requested: the last response has no outputs.
    client.async_stream_infer(model, inputs("Once upon a time", True), request_id="s2",
                              enable_empty_final_response=True)
    got = collector.until_final()
    check(text_of(got[-1][0]) is None, "empty final response carries no text_output")
    check("".join(text_of(res) or "" for res, _ in got) == r["text"], "empty-final stream carries the whole text")

    # Two requests in flight on one stream, both complete; an unknown model errors and the stream goes on.
    client.async_stream_infer(model, inputs("Once upon a time", True), request_id="a")
    client.async_stream_infer("no_such_model", inputs("x", True), request_id="bad")
    client.async_stream_infer(model, inputs("Once upon a time", False, exclude_input=True), request_id="b")
    got = collector.until_final(count=3)
    errors = [str(e) for _, e in got if e is not None]
    check(len(errors) == 1 and "no_such_model" in errors[0], f"unknown model on the stream: {errors}")
    by_id = {}
    for res, err in got:
        if err is None:
            by_id.setdefault(res.get_response().id, []).append(text_of(res) or "")
    check("".join(by_id.get("a", [])) == r["text"], "interleaved request a")
    check(by_id.get("b") == [r["text"]], f"non-streamed request b: one response {by_id.get('b')}")
    client.stop_stream()

    # Not streamed, prompt echoed (vLLM's backend default); then the stream is usable for a fresh start.
    collector = Collector()
    client.start_stream(callback=collector, headers=headers)
    client.async_stream_infer(model, inputs("Once upon a time", False), request_id="w")
    got = collector.until_final()
    check(len(got) == 1 and text_of(got[0][0]) == "Once upon a time" + r["text"], f"whole answer {text_of(got[0][0])!r}")
    client.async_stream_infer(model, inputs("x", True, max_tokens=0), request_id="zero")
    got = collector.until_final()
    check(got[-1][1] is not None and "max_tokens" in str(got[-1][1]), f"max_tokens 0 refused: {got[-1][1]}")
    client.stop_stream()

    # Cancelling the stream cancels its running generation at once (its KV slot is freed).
    before = metric(args, "sluice_generation_requests_total", {"model": model, "outcome": "cancelled"}) or 0
    collector = Collector()
    client.start_stream(callback=collector, headers=headers)
    client.async_stream_infer(model, inputs("Once", True, max_tokens=200,
                                            sampling={"temperature": 0, "ignore_eos": True}), request_id="long")
    collector.items.get(timeout=30)  # the first token: it runs
    started = time.time()
    client.stop_stream(cancel_requests=True)
    freed = None
    while time.time() - started < 10:
        running = metric(args, "sluice_generation_running", {"model": model})
        cancelled = metric(args, "sluice_generation_requests_total", {"model": model, "outcome": "cancelled"})
        if running == 0 and cancelled == before + 1:
            freed = time.time() - started
            break
        time.sleep(0.02)
    check(freed is not None and freed < 1.0, f"stream cancel frees the sequence (after {freed} s)")
    client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--grpc", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    ref = json.load(open(args.reference))
    print(f"openai {openai.__version__}, tritonclient {getattr(grpcclient, '__version__', '?')}", flush=True)
    openai_checks(args, ref)
    triton_checks(args, ref)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed: {FAILURES}", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
