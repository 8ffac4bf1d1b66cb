"""minilm_embeddings_test.sh's served half: the unmodified `openai` client's embeddings.create against a real
sluice-server serving the exported all-MiniLM-L6-v2, each vector within 1e-4 cosine distance of transformers'
(minilm_reference.py's JSON); then the refusals over plain HTTP, each a 400 (404) in OpenAI's error shape, with the
server still answering afterwards.

  python minilm_serving_check.py --http HOST:PORT --model NAME --reference REF.json
"""
import argparse
import concurrent.futures
import json
import math
import sys
import time
import urllib.error
import urllib.request

import openai

MAX_COSINE_DISTANCE = 1e-4


def cosine_distance(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return 1 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def check_vectors(what, response, texts, ref):
    assert len(response.data) == len(texts), f"{what}: {len(response.data)} vectors for {len(texts)} inputs"
    worst = 0.0
    for i, (item, text) in enumerate(zip(response.data, texts)):
        assert item.index == i, f"{what}: data[{i}].index is {item.index}"
        want = ref["embeddings"][ref["texts"].index(text)]
        assert len(item.embedding) == len(want), f"{what}: {len(item.embedding)} dimensions, want {len(want)}"
        d = cosine_distance(item.embedding, want)
        assert d < MAX_COSINE_DISTANCE, f"{what}: input {i} ({text[:40]!r}): cosine distance {d:.2e}"
        worst = max(worst, d)
    tokens = sum(ref["tokens"][ref["texts"].index(t)] for t in texts)
    assert response.usage.prompt_tokens == tokens, f"{what}: usage.prompt_tokens {response.usage.prompt_tokens}, " \
        f"transformers' tokenizer gives {tokens}"
    assert response.usage.total_tokens == tokens
    return worst


def post(http, body):
    """(status, parsed JSON) of a raw POST /v1/embeddings."""
    request = urllib.request.Request(f"http://{http}/v1/embeddings", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def check_refusal(http, body, status, needle, param):
    got, answer = post(http, body)
    error = answer.get("error") or {}
    assert got == status and needle in error.get("message", "") and error.get("param") == param and \
        error.get("type"), f"{json.dumps(body)[:80]}: got {got} {answer}, want {status} with {needle!r}, " \
        f"param {param!r}"
    print(f"  refused {got}: {error['message'][:110]}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--reference", required=True)
    args = parser.parse_args()
    with open(args.reference) as f:
        ref = json.load(f)
    texts = ref["texts"]
    client = openai.OpenAI(base_url=f"http://{args.http}/v1", api_key="unused", max_retries=0, timeout=120)

    # Served by the same model, several calls in flight together: each text alone, the whole list (its rows have
    # different lengths and buckets), the list reversed; the client's default encoding (base64) and "float".
    start = time.monotonic()
    calls = [("single", [t], {}) for t in texts] + [("list", texts, {}), ("list float", texts[::-1],
                                                                        {"encoding_format": "float"}),
                                                    ("list dimensions=384", texts[:3], {"dimensions": 384})]
    worst = 0.0
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        futures = [(what, inputs, pool.submit(client.embeddings.create, model=args.model,
                                              input=inputs[0] if what == "single" else inputs, user="test", **extra))
                   for what, inputs, extra in calls]
        for what, inputs, future in futures:
            response = future.result()
            assert response.model == args.model and response.object == "list"
            worst = max(worst, check_vectors(what, response, inputs, ref))
    print(f"{len(calls)} concurrent embeddings.create calls ({sum(len(c[1]) for c in calls)} inputs, "
          f"{min(ref['tokens'])}..{max(ref['tokens'])} tokens) in {time.monotonic() - start:.2f} s; worst cosine "
          f"distance to transformers {worst:.2e}")

    # Refusals: 400 (404 for an unknown model) naming what is wrong, in OpenAI's error shape.
    try:
        client.embeddings.create(model=args.model, input="x", dimensions=128)
        raise AssertionError("dimensions=128 was accepted")
    except openai.BadRequestError as e:
        assert "dimensions" in str(e) and "384" in str(e), str(e)
        print(f"  openai client: dimensions=128 -> 400 ({e.message[:80]})")
    m = args.model
    check_refusal(args.http, {"model": m, "input": []}, 400, "empty array", "input")
    check_refusal(args.http, {"model": m, "input": ""}, 400, "empty string", "input")
    check_refusal(args.http, {"model": m, "input": ["ok", ""]}, 400, "input[1]", "input")
    check_refusal(args.http, {"model": m, "input": 5}, 400, "string or an array of strings", "input")
    check_refusal(args.http, {"model": m, "input": ["ok", {"text": "x"}]}, 400, "string or an array", "input")
    check_refusal(args.http, {"model": m, "input": [101, 7592, 102]}, 400, "token-id inputs", "input")
    check_refusal(args.http, {"model": m, "input": [[101, 102]]}, 400, "token-id inputs", "input")
    check_refusal(args.http, {"model": m}, 400, "'input' is required", "input")
    check_refusal(args.http, {"model": m, "input": "x", "encoding_format": "hex"}, 400, "encoding_format",
                  "encoding_format")
    check_refusal(args.http, {"model": m, "input": "x", "dimensions": "384"}, 400, "integer", "dimensions")
    check_refusal(args.http, {"model": m, "input": "x", "user": 7}, 400, "user", "user")
    check_refusal(args.http, {"model": m, "input": ["ok", ref["too_long"]]}, 400,
                  f"input[1] is {ref['too_long_tokens']} tokens; model '{m}' takes at most {ref['limit']}", "input")
    check_refusal(args.http, {"model": "nope", "input": "x"}, 404, "unknown model 'nope'", None)
    check_refusal(args.http, {"input": "x"}, 400, "'model'", "model")
    # Still serving after the refusals.
    after = client.embeddings.create(model=m, input=texts[1], encoding_format="float")
    check_vectors("after refusals", after, [texts[1]], ref)
    models = [card.id for card in client.models.list().data]
    assert m in models, f"/v1/models lists {models}"

    # The rows were batched: fewer executions than rows (KServe v2 statistics of the same model).
    with urllib.request.urlopen(f"http://{args.http}/v2/models/{m}/stats", timeout=30) as r:
        stats = json.loads(r.read())["model_stats"][0]
    rows, batches = int(stats["inference_count"]), int(stats["execution_count"])
    print(f"model statistics: {rows} rows in {batches} batch executions")
    assert batches < rows, "no two rows were ever batched together"
    print("minilm serving check: PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
