"""Independent clients against a running sluice-server: Triton's `tritonclient` (gRPC and HTTP, unmodified, from
PyPI) and a gRPC server-reflection client (`grpcio-reflection`).

Run by triton_peers_test.sh in its venv:
    triton_peers_check.py --grpc HOST:PORT --http HOST:PORT --references DIR
DIR holds <model>.npz from dump_reference.py (input{k}/output{k}: the unpadded input and the eager model's output
on it alone). Checks health, server/model metadata, Triton's model config and statistics, and inference on every
case (gRPC raw tensors, HTTP binary-data and JSON tensors, one two-row request) within 1e-4 of the reference.
Exits non-zero on the first mismatch; prints one summary line per client and model.
"""
import argparse
import os
import sys
import time

import grpc
import numpy as np
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

# Served (a padded bucket) vs the reference (batch 1, unpadded): two graph shapes, other BLAS kernels, so the bound
# scales with the values' magnitude (backend/compile/float_tolerance.py and tests/float_tolerance.h: the same rule).
RTOL, ATOL = 1e-5, 1e-5
MODELS = {  # model -> (input, datatype, output)
    "asr_ctc": ("audio", "FP32", "log_probs"),
    "text_embed": ("input_ids", "INT64", "embedding"),
}


def check(condition, message):
    if not condition:
        raise SystemExit(f"triton_peers_check: FAILED: {message}")


def load_cases(directory, model):
    data = np.load(os.path.join(directory, f"{model}.npz"))
    count = len([k for k in data.files if k.startswith("input")])
    return [(data[f"input{k}"], data[f"output{k}"]) for k in range(count)]


def compare(got, expected, what):
    check(got is not None, f"{what}: no output")
    check(got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}")
    diff = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))) if got.size else 0.0
    bound = ATOL + RTOL * (float(np.max(np.abs(expected))) if expected.size else 0.0)
    check(diff <= bound, f"{what}: max |diff| {diff:.3g} > {bound:.3g}")
    return diff


def check_metadata(client, kind):
    check(client.is_server_live(), f"{kind}: server not live")
    check(client.is_server_ready(), f"{kind}: server not ready")
    server = client.get_server_metadata(**({"as_json": True} if kind == "grpc" else {}))
    check(server["name"] == "sluice", f"{kind}: server metadata {server}")
    for model, (input_name, datatype, output_name) in MODELS.items():
        check(client.is_model_ready(model), f"{kind}: {model} not ready")
        extra = {"as_json": True} if kind == "grpc" else {}
        meta = client.get_model_metadata(model, **extra)
        inputs = meta["inputs"]
        check(len(inputs) == 1 and inputs[0]["name"] == input_name and inputs[0]["datatype"] == datatype,
              f"{kind}: {model} metadata inputs {inputs}")
        check([int(d) for d in inputs[0]["shape"]] == [-1, -1], f"{kind}: {model} input shape {inputs[0]['shape']}")
        check(meta["outputs"][0]["name"] == output_name, f"{kind}: {model} metadata outputs {meta['outputs']}")
        config = client.get_model_config(model, **extra)
        config = config.get("config", config)
        check(int(config["max_batch_size"]) >= 1, f"{kind}: {model} config {config}")
        check(config["input"][0]["name"] == input_name, f"{kind}: {model} config input {config['input']}")
        check("dynamic_batching" in config, f"{kind}: {model} config has no dynamic_batching")
        stats = client.get_inference_statistics(model, **extra)
        check(stats["model_stats"][0]["name"] == model, f"{kind}: {model} statistics {stats}")
        print(f"  {kind} metadata {model}: inputs {[(i['name'], i['datatype'], i['shape']) for i in inputs]} "
              f"max_batch_size {config['max_batch_size']}")


def infer_all(client, module, kind, model, cases, binary, rows=1):
    input_name, datatype, output_name = MODELS[model]
    worst, start = 0.0, time.monotonic()
    for k, (x, expected) in enumerate(cases):
        batch = np.stack([x] * rows)
        infer_input = module.InferInput(input_name, list(batch.shape), datatype)
        if kind == "grpc":
            infer_input.set_data_from_numpy(batch)
            output = module.InferRequestedOutput(output_name)
        else:
            infer_input.set_data_from_numpy(batch, binary_data=binary)
            output = module.InferRequestedOutput(output_name, binary_data=binary)
        result = client.infer(model, [infer_input], outputs=[output], request_id=f"{kind}-{model}-{k}")
        got = result.as_numpy(output_name)
        check(got is not None and got.shape[0] == rows, f"{kind} {model} case {k}: batch dim of {None if got is None else got.shape}")
        for r in range(rows):
            worst = max(worst, compare(got[r], expected, f"{kind} {model} case {k} (length {x.shape[0]}) row {r}"))
    elapsed = time.monotonic() - start
    form = "raw" if kind == "grpc" else ("binary" if binary else "json")
    print(f"  tritonclient {kind}/{form} {model}: {len(cases)} request(s) x {rows} row(s) match the reference, "
          f"max |diff| {worst:.2e}, mean {1000 * elapsed / len(cases):.1f} ms/request")


def check_reflection(address):
    channel = grpc.insecure_channel(address)
    database = ProtoReflectionDescriptorDatabase(channel)
    services = set(database.get_services())
    for wanted in ("inference.GRPCInferenceService", "grpc.health.v1.Health"):
        check(wanted in services, f"reflection lists {sorted(services)}, missing {wanted}")
    pool = descriptor_pool.DescriptorPool(database)
    service = pool.FindServiceByName("inference.GRPCInferenceService")
    methods = {m.name for m in service.methods}
    for wanted in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                   "ModelConfig", "ModelStatistics"):
        check(wanted in methods, f"reflection: GRPCInferenceService lacks {wanted} (has {sorted(methods)})")
    infer = pool.FindMessageTypeByName("inference.ModelInferRequest")
    check(infer.fields_by_name["raw_input_contents"].number == 7, "reflection: raw_input_contents is not field 7")
    channel.close()
    print(f"  grpc reflection: services {sorted(services)}; GRPCInferenceService has {len(methods)} methods")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--grpc", required=True)
    parser.add_argument("--http", required=True)
    parser.add_argument("--references", required=True)
    args = parser.parse_args()
    cases = {model: load_cases(args.references, model) for model in MODELS}

    check_reflection(args.grpc)
    grpc_client = tgrpc.InferenceServerClient(url=args.grpc)
    http_client = thttp.InferenceServerClient(url=args.http, network_timeout=120.0, connection_timeout=60.0)
    check_metadata(grpc_client, "grpc")
    check_metadata(http_client, "http")
    before = {m: int(grpc_client.get_inference_statistics(m, as_json=True)["model_stats"][0].get("inference_count", 0))
              for m in MODELS}
    rows_sent = dict.fromkeys(MODELS, 0)
    for model, model_cases in cases.items():
        infer_all(grpc_client, tgrpc, "grpc", model, model_cases, binary=True)
        infer_all(http_client, thttp, "http", model, model_cases, binary=True)
        # JSON tensors: every text_embed case; for audio the short ones (JSON floats are text).
        json_cases = model_cases if model == "text_embed" else [c for c in model_cases if c[0].shape[0] <= 2000]
        infer_all(http_client, thttp, "http", model, json_cases, binary=False)
        infer_all(grpc_client, tgrpc, "grpc", model, model_cases[-1:], binary=True, rows=2)
        rows_sent[model] = 2 * len(model_cases) + len(json_cases) + 2
    for model in MODELS:
        stats = grpc_client.get_inference_statistics(model, as_json=True)["model_stats"][0]
        after = int(stats.get("inference_count", 0))
        check(after - before[model] == rows_sent[model],
              f"{model}: statistics counted {after - before[model]} inferences, sent {rows_sent[model]}")
        print(f"  statistics {model}: inference_count +{after - before[model]}, "
              f"execution_count {stats.get('execution_count')}")
    grpc_client.close()
    http_client.close()
    print("triton_peers_check: OK")


if __name__ == "__main__":
    sys.exit(main())
