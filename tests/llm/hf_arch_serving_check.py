"""hf_export.py's exports served by a real sluice-server: greedy tokens over OpenAI /v1/completions (HTTP, SSE) and
Triton ModelStreamInfer (gRPC, streamed) == the reference tokens, under continuous batching. Run by hf_arch_test.sh
after hf_arch_check.py, with every case's export as one model of one repository.

  python hf_arch_serving_check.py --http HOST:PORT --grpc HOST:PORT --repository DIR --proto-python DIR

Each model directory holds the reference_generation.json hf_arch_check.py wrote (transformers' greedy tokens, batch
1, unpadded, EOS off; for qwen3_self llama.py's eager model) and the word-level tokenizer.json it wrote (token i is
the word "t<i>", whitespace-split, decoded joined by spaces), so served text maps back to ids one for one and a
text prompt encodes to exactly the reference's ids.

Every reference case of every model is sent twice at once, staggered (request k starts at k x STAGGER_S, models
interleaved): over HTTP with the case's prompt ids (stream: true, usage included), and over gRPC as its text on one
ModelStreamInfer stream per model (all of that model's requests in flight on it together). Each model serves at
most max_num_seqs sequences (config.yaml: 4) of its 12 requests at a time, so sequences queue, join the running
decode batch and leave it at different steps: continuous batching, with prompt and batch padding. Served tokens
must equal the reference; a difference is allowed only at a near tie (the reference's top-2 margin at the first
differing token below float_tolerance.NEAR_TIE, reported): llama_serving_check.judge_difference. Usage must count the
prompt's and the reference's tokens. Exit 0 ok, 1 mismatch, 2 transport or usage error.
The gRPC messages come from proto/grpc_service.proto compiled by protoc at test time into --proto-python (Debian's
python3-grpcio and python3-protobuf: no generated code is committed).
"""
import argparse
import json
import os
import queue
import struct
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llama_serving_check import judge_difference, stream  # noqa: E402  (the SSE reader and the near-tie rule)

STAGGER_S = 0.003  # 96 requests in ~0.3 s: a model's next request comes ~24 ms after its last, well inside a generation
SERVICE = "/inference.GRPCInferenceService/ModelStreamInfer"


def words(ids):
    return " ".join(f"t{i}" for i in ids)


def ids_of(text):
    """The ids a served text spells (tokenizer.json: "t<i>" words); None for a word that is not one."""
    ids = []
    for word in text.split():
        if not (word.startswith("t") and word[1:].isdigit()):
            return None
        ids.append(int(word[1:]))
    return ids


def decode_batching(address, model):
    """(decode steps, real rows, padding rows) the server's /metrics counts for `model` so far."""
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()

    def value(name, *labels):
        for line in text.splitlines():
            if line.startswith(name + "{") and f'model="{model}"' in line and all(x in line for x in labels):
                return float(line.rsplit(" ", 1)[1])
        return 0.0
    return (value("sluice_generation_step_seconds_count", 'step="decode"'),
            value("sluice_generation_decode_rows_total"), value("sluice_generation_decode_padded_rows_total"))


def bytes_element(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


def triton_request(pb, model, request_id, prompt_text, max_tokens):
    request = pb.ModelInferRequest(model_name=model, id=request_id)
    raw = []
    for name, datatype, content in (
            ("text_input", "BYTES", bytes_element(prompt_text.encode())),
            ("stream", "BOOL", b"\x01"),
            ("max_tokens", "INT32", struct.pack("<i", max_tokens)),
            ("sampling_parameters", "BYTES",
             bytes_element(json.dumps({"temperature": 0, "ignore_eos": True}).encode()))):
        request.inputs.add(name=name, datatype=datatype, shape=[1])
        raw.append(content)
    request.raw_input_contents.extend(raw)
    return request


def text_output(response) -> str:
    """text_output of one streamed response (BYTES [1]: a 4-byte length, then the bytes); '' without outputs."""
    for i, out in enumerate(response.outputs):
        if out.name == "text_output" and i < len(response.raw_output_contents):
            raw = response.raw_output_contents[i]
            (n,) = struct.unpack_from("<I", raw)
            return raw[4:4 + n].decode()
    return ""


def triton_stream(channel, pb, model, jobs, results):
    """One ModelStreamInfer stream carrying every (slot, request id, prompt text, max_tokens, start time) of
    `jobs`; results[slot] = text (the streamed deltas joined) or an Exception."""
    call = channel.stream_stream(SERVICE, request_serializer=pb.ModelInferRequest.SerializeToString,
                                 response_deserializer=pb.ModelStreamInferResponse.FromString)
    done = threading.Event()

    def requests():
        for _, request_id, text, max_tokens, start in jobs:
            time.sleep(max(0.0, start - time.monotonic()))
            yield triton_request(pb, model, request_id, text, max_tokens)
        done.wait(timeout=120)  # keep the stream open until every answer is in

    slot_of = {request_id: slot for slot, request_id, _, _, _ in jobs}
    texts = {request_id: "" for request_id in slot_of}
    open_ids = set(slot_of)
    try:
        for r in call(requests(), timeout=120):
            if r.error_message:
                rid = r.infer_response.id
                results[slot_of.get(rid, jobs[0][0])] = RuntimeError(f"stream error: {r.error_message}")
                open_ids.discard(rid)
            else:
                rid = r.infer_response.id
                texts[rid] += text_output(r.infer_response)
                final = r.infer_response.parameters.get("triton_final_response")
                if final is not None and final.bool_param:
                    open_ids.discard(rid)
            if not open_ids:
                break
    except Exception as e:  # noqa: BLE001 - reported per request
        for rid in open_ids:
            results[slot_of[rid]] = e
    finally:
        done.set()
    for rid, slot in slot_of.items():
        if results[slot] is None:
            results[slot] = texts[rid]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", required=True)
    parser.add_argument("--grpc", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--proto-python", required=True, help="protoc --python_out of proto/grpc_service.proto")
    args = parser.parse_args()
    sys.path.insert(0, args.proto_python)
    import grpc
    import grpc_service_pb2 as pb

    models = sorted(m for m in os.listdir(args.repository)
                    if os.path.exists(os.path.join(args.repository, m, "reference_generation.json")))
    refs = {}
    for m in models:
        with open(os.path.join(args.repository, m, "reference_generation.json")) as f:
            refs[m] = json.load(f)["cases"]
    # jobs: (model, case index, protocol); interleaved so every model has requests starting throughout.
    jobs = [(m, i, proto) for i in range(max(len(c) for c in refs.values())) for proto in ("http", "grpc")
            for m in models if i < len(refs[m])]
    t0 = time.monotonic() + 0.1
    starts = [t0 + k * STAGGER_S for k in range(len(jobs))]
    results = [None] * len(jobs)

    def http_job(k, m, i):
        time.sleep(max(0.0, starts[k] - time.monotonic()))
        case = refs[m][i]
        try:
            text, usage, _ = stream(args.http, "/v1/completions", {
                "model": m, "prompt": case["prompt_ids"], "max_tokens": len(case["output_ids"]), "temperature": 0,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}, timeout=120)
            results[k] = (text, usage)
        except Exception as e:  # noqa: BLE001 - reported per request
            results[k] = e

    channel = grpc.insecure_channel(args.grpc)
    threads = []
    for k, (m, i, proto) in enumerate(jobs):
        if proto == "http":
            threads.append(threading.Thread(target=http_job, args=(k, m, i)))
    for m in models:
        stream_jobs = [(k, f"{m}-{i}", words(refs[m][i]["prompt_ids"]), len(refs[m][i]["output_ids"]), starts[k])
                       for k, (mm, i, proto) in enumerate(jobs) if mm == m and proto == "grpc"]
        threads.append(threading.Thread(target=triton_stream, args=(channel, pb, m, stream_jobs, results)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    channel.close()

    failures, near_ties, transport = 0, 0, 0
    per_model = {m: [0, 0] for m in models}  # identical, requests
    for k, (m, i, proto) in enumerate(jobs):
        case = refs[m][i]
        label = f"{m} case {i} ({len(case['prompt_ids'])} prompt ids) over {proto}"
        result = results[k]
        per_model[m][1] += 1
        if isinstance(result, Exception) or result is None:
            print(f"FAIL {label}: {result}")
            transport += 1
            continue
        text, usage = (result if proto == "http" else (result, None))
        want = case["output_ids"]
        if proto == "http":
            expected_usage = (len(case["prompt_ids"]), len(want))
            if usage is None or (usage["prompt_tokens"], usage["completion_tokens"]) != expected_usage:
                print(f"FAIL {label}: usage {usage}, expected prompt/completion tokens {expected_usage}")
                transport += 1
        got = ids_of(text)
        if got is None:
            print(f"FAIL {label}: served text is not t<i> words: {text!r}")
            failures += 1
            continue
        if got == want:
            per_model[m][0] += 1
            continue
        at = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        if judge_difference(label, case, at, got, want, near_tie_possible=at < len(got)):
            near_ties += 1
        else:
            failures += 1
    # Continuous batching really happened: each model's decode steps carried several sequences on average (its
    # requests overlapped). A behaviour, not a timing: it fails only if every sequence decoded alone.
    for m, (same, total) in per_model.items():
        steps, rows, padded = decode_batching(args.http, m)
        together = steps > 0 and rows / steps > 1.0
        if not together:
            failures += 1
        print(f"{'ok  ' if same == total and together else 'FAIL'} served {m}: {same}/{total} requests "
              f"token-identical (HTTP /v1/completions + gRPC ModelStreamInfer); {steps:.0f} decode steps, "
              f"{rows / max(steps, 1):.2f} sequences per step on average (+{padded / max(steps, 1):.2f} padding rows)")
    total_tokens = sum(len(refs[m][i]["output_ids"]) for m, i, _ in jobs)
    print(f"{len(jobs)} requests over {len(models)} models, {total_tokens} tokens, all in flight together, in "
          f"{wall:.1f} s: {len(jobs) - failures - near_ties - transport} identical, {near_ties} near ties, "
          f"{failures} mismatches, {transport} usage/transport errors")
    if transport:
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
