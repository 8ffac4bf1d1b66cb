#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_triton_generate (tests/fuzz/corpus/triton_generate/): serialized
ModelInferRequest messages in Triton's decoupled text-generation protocol (server/llm/frontend/triton_stream_codec.h), valid
and near-valid. Wire format by hand, with make_grpc_seeds.py's helpers. Rewrites the directory's seed_* files."""
import pathlib
import struct
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_grpc_seeds import lfield, packed, parameter  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "triton_generate"


def bytes_input(name, values, raw=False):  # BYTES [len(values)], typed (bytes_contents = 8) unless raw
    msg = lfield(1, name) + lfield(2, "BYTES") + packed(3, [len(values)])
    if not raw:
        msg += lfield(5, b"".join(lfield(8, v) for v in values))
    return msg


def scalar_input(name, datatype, field, value, fmt=None):  # one-element typed input
    return lfield(1, name) + lfield(2, datatype) + packed(3, [1]) + lfield(5, packed(field, [value], fmt))


def request(inputs, params=(), raw=(), rid="g1", model="llama_tiny"):
    msg = lfield(1, model) + lfield(3, rid)
    msg += b"".join(lfield(4, parameter(*p)) for p in params)
    msg += b"".join(lfield(5, i) for i in inputs)
    msg += b"".join(lfield(7, r) for r in raw)
    return msg


def element(s):  # BYTES serialization: 4-byte little-endian length, then the bytes
    s = s.encode() if isinstance(s, str) else s
    return struct.pack("<I", len(s)) + s


SEEDS = {
    "seed_text_only": request([bytes_input("text_input", ["Once upon a time"])]),
    "seed_stream_sampling": request(
        [bytes_input("text_input", ["Hello"]), scalar_input("stream", "BOOL", 1, 1),
         scalar_input("max_tokens", "INT32", 2, 16),
         bytes_input("sampling_parameters",
                     ['{"temperature": "0.7", "top_p": 0.9, "top_k": 40, "seed": 7, "stop": ["\\n", "The"], '
                      '"ignore_eos": false, "max_tokens": "8"}']),
         scalar_input("exclude_input_in_output", "BOOL", 1, 1)],
        params=[("triton_enable_empty_final_response", "bool", True), ("temperature", "double", 0.0)]),
    "seed_trtllm_scalars": request(
        [bytes_input("text_input", ["x"]), scalar_input("temperature", "FP32", 6, 0.5, "<f"),
         scalar_input("top_p", "FP32", 6, 0.95, "<f"), scalar_input("top_k", "INT32", 2, 5),
         scalar_input("random_seed", "UINT64", 5, 12345), scalar_input("max_tokens", "INT64", 3, 4)],
        params=[("top_k", "int64", 3), ("seed", "string", "9"), ("stop", "string", "end")]),
    "seed_raw_contents": request(
        [bytes_input("text_input", ["ignored"], raw=True), lfield(1, "max_tokens") + lfield(2, "INT32") + packed(3, [1])],
        raw=[element("raw prompt"), struct.pack("<i", 3)]),
    # near-valid: no text_input, an unknown input, two prompts, a bad sampling_parameters JSON, a streamed echo,
    # a wrong datatype, a negative max_tokens, an unset parameter
    "seed_missing_text": request([scalar_input("max_tokens", "INT32", 2, 4)]),
    "seed_unknown_input": request([bytes_input("text_input", ["a"]), bytes_input("bogus", ["b"])]),
    "seed_two_prompts": request([bytes_input("text_input", ["a", "b"])]),
    "seed_bad_sampling_json": request([bytes_input("text_input", ["a"]),
                                       bytes_input("sampling_parameters", ['{"temperature": [1, {"x": nul'])]),
    "seed_unknown_sampling_key": request([bytes_input("text_input", ["a"]),
                                          bytes_input("sampling_parameters", ['{"beam_width": 2}'])]),
    "seed_stream_echo": request([bytes_input("text_input", ["a"]), scalar_input("stream", "BOOL", 1, 1),
                                 scalar_input("exclude_input_in_output", "BOOL", 1, 0)]),
    "seed_wrong_dtype": request([lfield(1, "text_input") + lfield(2, "INT32") + packed(3, [1]) +
                                 lfield(5, packed(2, [65]))]),
    "seed_negative_max_tokens": request([bytes_input("text_input", ["a"]), scalar_input("max_tokens", "INT64", 3, -5)],
                                        params=[("priority", "none", None)]),
    "seed_raw_truncated_element": request([bytes_input("text_input", ["x"], raw=True)],
                                          raw=[struct.pack("<I", 100) + b"short"]),
}

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("seed_*"):
        old.unlink()
    for name, data in SEEDS.items():
        (OUT / name).write_bytes(data)
    print(f"{len(SEEDS)} seeds in {OUT}")
