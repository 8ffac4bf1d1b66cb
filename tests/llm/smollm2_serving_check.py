"""SmolLM2-135M-Instruct served by a real sluice-server, through the unmodified `openai` client (issue 26 item 4).
Run by smollm2_test.sh with the openai venv's python (no torch, no transformers: the reference comes as JSON).

  python smollm2_serving_check.py --http HOST:PORT --model NAME --reference served_reference.json --pid PID
                                  [--bench-repeats N] [--bench-tokens T]

served_reference.json (written by smollm2_check.py): per chat its messages, transformers' greedy tokens with EOS
off (MAX_NEW_TOKENS), the text of every prefix of them (tokenizer.decode, special tokens skipped) and the top-2
logit margins; the checkpoint's eos ids. Greedy is deterministic, so the answer with EOS on is that list cut at
the first eos id: the server must stop there (finish_reason "stop", the eos token counted in completion_tokens as
the scheduler delivers it) or run to max_tokens ("length").

1. Every chat twice, streamed and not, all requests at once (staggered 100 ms, more requests than max_num_seqs:
   sequences join, leave and queue: continuous batching): served text == transformers' greedy text, usage
   prompt_tokens == the transformers chat template's token count, completion_tokens and finish_reason as above.
   A mismatch passes only at a near tie (float_tolerance.NEAR_TIE, the rule of every check against references).
2. The capital-of-France answer names Paris (real English, not just equal tokens).
3. Printed, never pass/fail: sluice-server's RSS (/proc), sluice_model_memory_bytes (/metrics), decode tokens/s at
   1 and 4 concurrent streams (ignore_eos, --bench-tokens each; first token excluded from the decode rate).
Exit 0 ok, 1 mismatch.
"""
import argparse
import json
import os
import sys
import threading
import time
import urllib.request

import openai

NEAR_TIE = 1e-3  # = backend/compile/float_tolerance.NEAR_TIE (that module needs torch; this venv has none)
FAILURES = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


def expected_answer(case, eos_ids):
    """(tokens, text, finish, completion_tokens) the server must produce with EOS on and max_tokens = len(output)."""
    out = case["output_ids"]
    stop = next((i for i, t in enumerate(out) if t in eos_ids), None)
    if stop is None:
        return out, case["prefix_texts"][len(out)], "length", len(out)
    return out[:stop], case["prefix_texts"][stop], "stop", stop + 1


def ask(client, model, case, streamed):
    """(text, finish_reason, usage) of one chat request, greedy."""
    common = dict(model=model, messages=case["messages"], max_tokens=len(case["output_ids"]), temperature=0)
    if not streamed:
        c = client.chat.completions.create(**common)
        return c.choices[0].message.content, c.choices[0].finish_reason, c.usage
    text, finish, usage = "", None, None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **common):
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish, usage


def first_difference(case, text):
    for i in range(1, len(case["output_ids"]) + 1):
        if not text.startswith(case["prefix_texts"][i]):
            return i - 1
    return len(case["output_ids"])


def chats_at_once(client, model, ref):
    jobs = [(case, streamed) for case in ref["cases"] for streamed in (True, False)]
    results = [None] * len(jobs)

    def run(i, case, streamed):
        time.sleep(i * 0.1)
        try:
            results[i] = ask(client, model, case, streamed)
        except Exception as e:  # noqa: BLE001 - reported per request below
            results[i] = e

    start = time.monotonic()
    threads = [threading.Thread(target=run, args=(i, c, s)) for i, (c, s) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"     {len(jobs)} chat requests at once in {time.monotonic() - start:.1f} s", flush=True)
    for (case, streamed), result in zip(jobs, results):
        label = f"{'streamed' if streamed else 'whole   '} {case['messages'][-1]['content']!r}"
        if isinstance(result, Exception):
            check(False, f"{label}: {type(result).__name__}: {result}")
            continue
        text, finish, usage = result
        tokens, want_text, want_finish, want_completion = expected_answer(case, ref["eos_ids"])
        if text != want_text:
            at = first_difference(case, text)
            margin = case["top2_margins"][at] if at < len(case["top2_margins"]) else float("nan")
            check(margin < NEAR_TIE, f"{label}: differs from transformers at token {at} (top-2 margin {margin:.3g};"
                  f" near tie < {NEAR_TIE}):\n       served:       {text!r}\n       transformers: {want_text!r}")
            continue
        check(finish == want_finish and usage is not None and usage.prompt_tokens == len(case["prompt_ids"]) and
              usage.completion_tokens == want_completion,
              f"{label} -> {text!r} == transformers' greedy ({len(tokens)} tokens; finish {finish} == {want_finish};"
              f" usage prompt {usage and usage.prompt_tokens} == {len(case['prompt_ids'])}, completion "
              f"{usage and usage.completion_tokens} == {want_completion})")
    capital = next((r for (c, _), r in zip(jobs, results) if "capital of France" in c["messages"][-1]["content"]),
                   None)
    check(isinstance(capital, tuple) and "Paris" in capital[0], f"the capital of France: {capital!r}")


def metrics_memory(http, model):
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("sluice_model_memory_bytes{") and f'model="{model}"' in line:
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            out[kind] = float(line.rsplit(" ", 1)[1])
    return out


def rss_mib(pid):
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


def one_stream(client, model, messages, tokens):
    """(seconds from the first to the last token, tokens after the first)."""
    first = last = None
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=tokens, temperature=0,
                                                stream=True, extra_body={"ignore_eos": True}):
        if chunk.choices and chunk.choices[0].delta.content:
            last = time.monotonic()
            first = first or last
    return (last - first) if first else 0.0, tokens - 1


def bench(client, model, messages, streams, tokens):
    results = [None] * streams
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, one_stream(client, model, messages, tokens)))
               for i in range(streams)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    slowest = max(s for s, _ in results)
    return streams * (tokens - 1) / slowest, streams * tokens / wall


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--bench-repeats", type=int, default=1)
    parser.add_argument("--bench-tokens", type=int, default=32)
    args = parser.parse_args()
    ref = json.load(open(args.reference))
    client = openai.OpenAI(base_url=f"http://{args.http}/v1", api_key="unused", max_retries=0, timeout=600)
    chats_at_once(client, args.model, ref)

    memory = metrics_memory(args.http, args.model)
    rss = rss_mib(args.pid)
    print(f"     memory: sluice-server RSS {rss['VmRSS']:.0f} MiB (peak {rss['VmHWM']:.0f} MiB); "
          f"sluice_model_memory_bytes " + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in sorted(memory.items())),
          flush=True)
    messages = ref["cases"][0]["messages"]
    for streams in (1, 4):
        for _ in range(args.bench_repeats):
            decode, overall = bench(client, args.model, messages, streams, args.bench_tokens)
            print(f"     bench: {streams} stream(s) x {args.bench_tokens} tokens: decode {decode:.1f} tokens/s "
                  f"(all streams), {overall:.1f} tokens/s including prefill; load average "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    print("PASS" if not FAILURES else f"FAIL ({len(FAILURES)} checks)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
