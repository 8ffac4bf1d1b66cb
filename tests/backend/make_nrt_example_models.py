#!/usr/bin/python3
"""Writes the example models as Neuron Runtime models (device neuron, runtime nrt) for the fake libnrt
(tests/backend/fake_libnrt.cc), from the exported TorchScript models (graph format 2), so that tests serve them
through sluice's libnrt backend and compare the answers with the TorchScript path.

  make_nrt_example_models.py --models build/models --out build/models-nrt --library <fake libnrt.so>

For each model M (text_embed, asr_digits; llama_tiny, a generation model, below) writes OUT/M_nrt/ as backend/compile/neff_export.py would on a Trn2 —
config.yaml and neff_manifest.yaml from neff_export's own writers, weights.safetensors from weights.pt — except that
each neffs/b{B}_l{L}.neff is a fake NEFF: a text file declaring the tensors a compiled NEFF would have (the weights
as inputs input0.., then the model inputs, then the lengths; output0..), with the byte sizes and shapes the bucket
graph really takes and returns, and "compute torchscript <graph> ..." so that the fake runs the bucket's exported
TorchScript graph over the bytes sluice bound to those tensors. OUT/M links to the TorchScript model, so OUT is one
repository serving each model both ways. Nothing is committed: everything comes from the exported models.

llama_tiny_nrt: one fake NEFF per prefill length and per (decode batch size, KV length), manifest from
neff_export.generation_manifest_yaml, the KV caches bound as inputs and as aliased outputs ("alias" lines): the
fake runs the exported prefill/decode graph, which updates the cache in place in the bytes sluice bound.
"""
import argparse
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "backend", "compile"))

import torch  # noqa: E402

import export_models  # noqa: E402
import graph_format  # noqa: E402
import neff_export  # noqa: E402

CORES = {"text_embed": "0-1", "asr_digits": "2-3", "llama_tiny": "4-5"}  # two replicas each, disjoint cores
FAKE_DTYPES = {torch.float32: ("FLOAT32", "F32"), torch.int64: ("INT64", "I64"), torch.int32: ("INT32", "I32")}


def write_safetensors(path, names, tensors):
    """The safetensors layout: u64 little-endian header length, JSON header, raw little-endian bytes."""
    header, chunks, offset = {}, [], 0
    for name, tensor in zip(names, tensors):
        data = tensor.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": FAKE_DTYPES[tensor.dtype][1], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the format allows trailing spaces; keeps the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for chunk in chunks:
            f.write(chunk)


def tensor_line(direction, name, tensor):
    return " ".join(["tensor", direction, name, FAKE_DTYPES[tensor.dtype][0]] + [str(d) for d in tensor.shape])


def fake_neff(spec, graph_path, weights, batch, length):
    """The fake NEFF of one bucket: tensor names as neff_export.manifest_yaml binds them, shapes as the graph runs."""
    inputs = []
    for spec_input in spec.inputs:
        dtype = torch.int64 if spec_input["dtype"] == "INT64" else torch.float32
        inputs.append(torch.zeros([batch, length] + list(spec_input["shape"][1:]), dtype=dtype))
    lengths = torch.full([batch], length, dtype=torch.int64)
    graph = torch.jit.load(graph_path)
    with torch.no_grad():
        outputs = graph(*inputs, lengths, *weights)
    lines = ["fake-neff 1"]
    names = [f"input{k}" for k in range(len(weights) + len(inputs) + 1)]
    for name, tensor in zip(names, list(weights) + inputs + [lengths]):
        lines.append(tensor_line("in", name, tensor))
    out_names = [f"output{j}" for j in range(len(outputs))]
    lines += [tensor_line("out", name, t) for name, t in zip(out_names, outputs)]
    # The graph's argument order (inputs, lengths, weights) differs from the NEFF's (weights first), as a compiled
    # NEFF's names need not follow the TorchScript signature: the manifest binds by name.
    args = names[len(weights):] + names[:len(weights)]
    lines.append(" ".join(["compute torchscript", os.path.abspath(graph_path)] + args + ["->"] + out_names))
    return "\n".join(lines) + "\n"


def write_model(models_dir, out_dir, name, library):
    spec = export_models.MODELS[name]()
    source = os.path.join(models_dir, name)
    weight_names, weights = graph_format.read_weights(source)
    target = os.path.join(out_dir, f"{name}_nrt")
    os.makedirs(os.path.join(target, "neffs"), exist_ok=True)
    for b in spec.batch_sizes:
        for length in spec.lengths:
            graph = os.path.join(source, "graphs", f"b{b}_l{length}.pt")
            with open(os.path.join(target, "neffs", f"b{b}_l{length}.neff"), "w") as f:
                f.write(fake_neff(spec, graph, weights, b, length))
    write_safetensors(os.path.join(target, "weights.safetensors"), weight_names, weights)
    with open(os.path.join(target, "neff_manifest.yaml"), "w") as f:
        f.write(neff_export.manifest_yaml(spec, weight_names))
    with open(os.path.join(target, "config.yaml"), "w") as f:
        f.write(neff_export.nrt_config_yaml(spec, CORES[name], name=f"{name}_nrt", neuron_library=library))
    link = os.path.join(out_dir, name)
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(source), link)
    print(f"[{name}_nrt] {len(spec.batch_sizes) * len(spec.lengths)} fake NEFFs, {len(weight_names)} weights "
          f"-> {target}")


def fake_generation_neff(graph_path, weights, args, cfg, rows):
    """The fake NEFF of one prefill or decode graph, its tensors as neff_export.generation_manifest_yaml binds
    them: weights input0.., the graph's arguments, k_cache, v_cache; logits output0 and the caches' in-place
    write-backs output1/output2, declared as aliases of the cache inputs (one buffer, updated by the graph)."""
    c = cfg["kv_cache"]
    cache = torch.zeros([c["layers"], c["slots"] + 1, cfg["context_length"], c["kv_heads"], c["head_dim"]])
    tensors = list(weights) + args + [cache, cache]
    names = [f"input{k}" for k in range(len(tensors))]
    lines = ["fake-neff 1"] + [tensor_line("in", n, t) for n, t in zip(names, tensors)]
    lines.append(tensor_line("out", "output0", torch.zeros([rows, cfg["vocab_size"]])))
    k_in, v_in = names[-2], names[-1]
    lines += [tensor_line("out", "output1", cache), tensor_line("out", "output2", cache)]
    lines += [f"alias output1 {k_in}", f"alias output2 {v_in}"]
    # The graph takes (its arguments, k_cache, v_cache, weights...); the NEFF lists the weights first.
    graph_args = names[len(weights):] + names[:len(weights)]
    lines.append(" ".join(["compute torchscript", os.path.abspath(graph_path)] + graph_args + ["->", "output0"]))
    return "\n".join(lines) + "\n"


def write_generation_model(models_dir, out_dir, name, library):
    import yaml
    source = os.path.join(models_dir, name)
    with open(os.path.join(source, "config.yaml")) as f:
        config_text = f.read()
    cfg = yaml.safe_load(config_text)["generation"]
    weight_names, weights = graph_format.read_weights(source)
    target = os.path.join(out_dir, f"{name}_nrt")
    os.makedirs(os.path.join(target, "neffs"), exist_ok=True)
    i64 = torch.int64
    for length in cfg["prefill_lengths"]:
        args = [torch.zeros([1, length], dtype=i64), torch.zeros([1], dtype=i64), torch.zeros([1], dtype=i64)]
        with open(os.path.join(target, "neffs", f"prefill_l{length}.neff"), "w") as f:
            f.write(fake_generation_neff(os.path.join(source, "graphs", f"prefill_l{length}.pt"), weights, args,
                                         cfg, 1))
    for b in cfg["decode_batch_sizes"]:
        for k in cfg["kv_lengths"]:
            args = [torch.zeros([b], dtype=i64)] * 3
            with open(os.path.join(target, "neffs", f"decode_b{b}_k{k}.neff"), "w") as f:
                f.write(fake_generation_neff(os.path.join(source, "graphs", f"decode_b{b}_k{k}.pt"), weights, args,
                                             cfg, b))
    write_safetensors(os.path.join(target, "weights.safetensors"), weight_names, weights)
    with open(os.path.join(target, "neff_manifest.yaml"), "w") as f:
        f.write(neff_export.generation_manifest_yaml(cfg["prefill_lengths"], cfg["decode_batch_sizes"],
                                                     cfg["kv_lengths"], weight_names))
    with open(os.path.join(target, "config.yaml"), "w") as f:
        f.write(neff_export.nrt_generation_config_yaml(config_text, CORES[name], f"{name}_nrt", library))
    shutil.copyfile(os.path.join(source, "tokenizer.model"), os.path.join(target, "tokenizer.model"))
    link = os.path.join(out_dir, name)
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(source), link)
    graphs = len(cfg["prefill_lengths"]) + len(cfg["decode_batch_sizes"]) * len(cfg["kv_lengths"])
    print(f"[{name}_nrt] {graphs} fake NEFFs, {len(weight_names)} weights -> {target}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", required=True, help="the exported example models (graph format 2)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--library", required=True, help="the fake libnrt, written into each config.yaml")
    parser.add_argument("--names", default="text_embed,asr_digits,llama_tiny")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names.split(","):
        if name not in CORES:
            print(f"--names: {name} is not one of {', '.join(CORES)}", file=sys.stderr)
            return 2
        if name == "llama_tiny":
            write_generation_model(args.models, args.out, name, args.library)
        else:
            write_model(args.models, args.out, name, args.library)
    return 0


if __name__ == "__main__":
    sys.exit(main())
