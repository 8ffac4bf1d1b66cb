#!/usr/bin/python3
"""Greedy generations of the example LLM served by sluice-server equal the exporter's batch-1 eager references.

  llama_serving_check.py HTTP_ADDRESS MODEL_DIR

Sends every case of MODEL_DIR/reference_generation.json at once, staggered (case i starts at i x 150 ms, so
sequences join and leave the running batch at different times: continuous batching), over the OpenAI API with
stream: true (Server-Sent Events), temperature 0, ignore_eos and max_tokens = the reference's length. Text cases
send the reference's exact prompt token ids; chat cases send their messages (so the chat template is checked: the
server's prompt_tokens must equal the reference's). The streamed text must equal the reference ids decoded by
SentencePiece (Debian's python3-sentencepiece), and usage must count the reference's tokens.
A mismatch is allowed only at a near tie: the reference's top-2 logit margin at the first differing token is
below float_tolerance.NEAR_TIE (reported); anything else fails. Exit 0 ok, 1 mismatch, 2 usage/transport error.
"""
import json
import os
import sys
import threading
import time
import urllib.request

import sentencepiece

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend", "compile"))
from float_tolerance import NEAR_TIE  # noqa: E402  (the rule shared by every check against the references)


def stream(address, path, body, timeout=300):
    """POSTs `body` with stream: true; returns (text, usage, chunk count). Also used by hf_arch_serving_check.py."""
    request = urllib.request.Request(f"http://{address}{path}", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    text, usage, chunks = "", None, 0
    with urllib.request.urlopen(request, timeout=timeout) as response:
        if response.status != 200 or "text/event-stream" not in response.headers.get("content-type", ""):
            raise RuntimeError(f"{path}: status {response.status}, {response.headers.get('content-type')}")
        done = False
        for raw in response:
            line = raw.decode().rstrip("\n")
            if not line.startswith("data: "):
                continue
            payload = line[len("data: "):]
            if payload == "[DONE]":
                done = True
                break
            event = json.loads(payload)
            if "error" in event:
                raise RuntimeError(f"{path}: error event {event['error']}")
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices", []):
                piece = choice.get("text") if "text" in choice else choice.get("delta", {}).get("content")
                if piece:
                    text += piece
                    chunks += 1
        if not done:
            raise RuntimeError(f"{path}: the stream ended without [DONE]")
    return text, usage, chunks


def judge_difference(label, case, at, served, expected, near_tie_possible=True):
    """A served generation differs from the reference `case` from token `at` on: prints the verdict and returns True
    for a near tie (the reference's top-2 logit margin there below NEAR_TIE: allowed), False for a mismatch.
    `near_tie_possible` False (the served output ended before `at`) makes it a mismatch whatever the margin.
    The one rule of every served-generation check here (hf_arch_serving_check.py imports it)."""
    margin = case["top2_margins"][at] if at < len(case["top2_margins"]) else float("nan")
    if near_tie_possible and margin < NEAR_TIE:
        print(f"near tie {label}: differs from token {at} on (reference top-2 margin {margin:.2e} < {NEAR_TIE})")
        return True
    print(f"FAIL {label}: differs from token {at} on (reference top-2 margin {margin:.3g}: not a near tie)\n"
          f"  served:   {served!r}\n  expected: {expected!r}")
    return False


def first_difference(sp, output_ids, text):
    """The index of the first reference token whose text the served text does not continue with."""
    for i in range(1, len(output_ids) + 1):
        if not text.startswith(sp.decode(output_ids[:i])):
            return i - 1
    return len(output_ids)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    address, model_dir = sys.argv[1], sys.argv[2]
    reference = json.load(open(f"{model_dir}/reference_generation.json"))
    sp = sentencepiece.SentencePieceProcessor(model_file=f"{model_dir}/tokenizer.model")
    cases = reference["cases"]
    results = [None] * len(cases)

    def run(i, case):
        time.sleep(i * 0.15)
        common = {"model": reference["model"], "max_tokens": len(case["output_ids"]), "temperature": 0,
                  "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        try:
            if "messages" in case:
                results[i] = stream(address, "/v1/chat/completions", dict(common, messages=case["messages"]))
            else:
                results[i] = stream(address, "/v1/completions", dict(common, prompt=case["prompt_ids"]))
        except Exception as e:  # noqa: BLE001 - reported per case below
            results[i] = e

    start = time.monotonic()
    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(cases)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start

    failures, near_ties, transport = 0, 0, 0
    for i, (case, result) in enumerate(zip(cases, results)):
        label = f"case {i} ({'chat' if 'messages' in case else 'text'}, {len(case['prompt_ids'])} prompt tokens)"
        if isinstance(result, Exception):
            print(f"{label}: {result}")
            transport += 1
            continue
        text, usage, chunks = result
        expected = sp.decode(case["output_ids"])
        want_usage = (len(case["prompt_ids"]), len(case["output_ids"]))
        if usage is None or (usage["prompt_tokens"], usage["completion_tokens"]) != want_usage:
            print(f"{label}: usage {usage}, expected prompt/completion tokens {want_usage}")
            transport += 1
        if text == expected:
            continue
        if judge_difference(label, case, first_difference(sp, case["output_ids"], text), text, expected):
            near_ties += 1
        else:
            failures += 1
    total_tokens = sum(len(c["output_ids"]) for c in cases)
    print(f"{len(cases)} cases, {total_tokens} tokens in {wall:.1f} s: {len(cases) - failures - near_ties - transport}"
          f" identical, {near_ties} near ties, {failures} mismatches, {transport} usage/transport errors")
    if transport:
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
