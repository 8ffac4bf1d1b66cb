#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_grpc_infer (tests/fuzz/corpus/grpc_infer/): serialized KServe v2
ModelInferRequest messages for the fuzzers' `tagger` model (tests/fuzz/fuzz_model_under_test.h), valid and
near-valid. The protobuf wire format is written by hand (field numbers from proto/grpc_service.proto), so the
script needs nothing but python3. Run it from anywhere; it rewrites the directory's seed_* files."""
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "grpc_infer"


def varint(n):
    n &= (1 << 64) - 1  # negative int64s are ten-byte varints
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def vfield(field, n):  # varint field
    return key(field, 0) + varint(n)


def lfield(field, payload):  # length-delimited field
    if isinstance(payload, str):
        payload = payload.encode()
    return key(field, 2) + varint(len(payload)) + payload


def packed(field, values, fmt=None):
    body = b"".join(struct.pack(fmt, v) for v in values) if fmt else b"".join(varint(v) for v in values)
    return lfield(field, body)


def parameter(name, kind, value):  # map<string, InferParameter> entry: key = 1, value = 2
    if kind == "bool":
        p = vfield(1, int(value))
    elif kind == "int64":
        p = vfield(2, value)
    elif kind == "string":
        p = lfield(3, value)
    elif kind == "double":
        p = key(4, 1) + struct.pack("<d", value)
    elif kind == "uint64":
        p = vfield(5, value)
    else:
        p = b""  # no oneof set
    return lfield(1, name) + lfield(2, p)


def infer_input(name, datatype, shape, contents=b""):
    msg = lfield(1, name) + lfield(2, datatype) + packed(3, shape)
    return msg + (lfield(5, contents) if contents else b"")


def request(inputs, outputs=(), params=(), raw=(), rid="r1"):
    msg = lfield(1, "tagger") + lfield(3, rid)
    msg += b"".join(lfield(4, parameter(*p)) for p in params)
    msg += b"".join(lfield(5, i) for i in inputs)
    msg += b"".join(lfield(6, lfield(1, o)) for o in outputs)
    msg += b"".join(lfield(7, r) for r in raw)
    return msg


TOKENS = [1, 2]
FEATURES = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
SEEDS = {
    # typed contents: tokens INT64 [1, 2], features FP32 [1, 2, 3]
    "seed_typed": request([infer_input("tokens", "INT64", [1, 2], packed(3, TOKENS)),
                           infer_input("features", "FP32", [1, 2, 3], packed(6, FEATURES, "<f"))],
                          outputs=["logits", "score"]),
    # raw_input_contents, with schedule-policy parameters
    "seed_raw": request([infer_input("tokens", "INT64", [1, 2]), infer_input("features", "FP32", [1, 2, 3])],
                        params=[("priority", "int64", 1), ("timeout", "uint64", 1000000),
                                ("binary_data_output", "bool", True)],
                        raw=[struct.pack("<2q", *TOKENS), struct.pack("<6f", *FEATURES)]),
    # two rows
    "seed_two_rows": request([infer_input("tokens", "INT64", [2, 1], packed(3, [7, 8])),
                              infer_input("features", "FP32", [2, 1, 3], packed(6, FEATURES, "<f"))]),
    # near-valid: a token outside the declared range, a wrong datatype, an unset parameter, raw/typed mix,
    # a NaN feature, raw entries not matching the inputs
    "seed_out_of_range": request([infer_input("tokens", "INT64", [1, 1], packed(3, [1000])),
                                  infer_input("features", "FP32", [1, 1, 3], packed(6, FEATURES[:3], "<f"))]),
    "seed_wrong_dtype": request([infer_input("tokens", "INT32", [1, 2], packed(2, TOKENS)),
                                 infer_input("features", "FP32", [1, 2, 3], packed(6, FEATURES, "<f"))]),
    "seed_unset_parameter": request([infer_input("tokens", "INT64", [1, 1], packed(3, [1]))],
                                    params=[("priority", "none", None), ("custom", "string", "x"),
                                            ("ratio", "double", 0.5)]),
    "seed_raw_and_typed": request([infer_input("tokens", "INT64", [1, 2], packed(3, TOKENS))],
                                  raw=[struct.pack("<2q", *TOKENS)]),
    "seed_nan": request([infer_input("tokens", "INT64", [1, 1], packed(3, [3])),
                         infer_input("features", "FP32", [1, 1, 3], packed(6, [0.0, float("nan"), 1.0], "<f"))]),
    "seed_raw_count_mismatch": request([infer_input("tokens", "INT64", [1, 2]),
                                        infer_input("features", "FP32", [1, 2, 3])],
                                       raw=[struct.pack("<2q", *TOKENS)]),
    "seed_negative_shape": request([infer_input("tokens", "INT64", [-1, 2]), infer_input("features", "FP32", [1])],
                                   outputs=["logits", "logits", "nope"]),
}

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("seed_*"):
        old.unlink()
    for name, data in SEEDS.items():
        (OUT / name).write_bytes(data)
    print(f"{len(SEEDS)} seeds in {OUT}")
