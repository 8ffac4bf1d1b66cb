#!/usr/bin/python3
"""Exports a Llama-family generation model into DIR/<name>/: SentencePiece tokenizer.model, per-bucket TorchScript
graphs (graphs/prefill_l<L>.pt, graphs/decode_b<B>_k<K>.pt, chunked prefill's graphs/prefill_chunk_c<C>_k<K>.pt),
config.yaml (kind generation), and
reference_generation.json (greedy generations of the eager model). For the example model `llama_tiny` it also
writes hf/, a Hugging Face checkpoint of the same weights and tokenizer (LlamaForCausalLM + LlamaTokenizer).

  /usr/bin/python3 backend/compile/llama_export.py --out DIR [--target cpu|neuron]          # llama_tiny
  /usr/bin/python3 backend/compile/llama_export.py --out DIR --checkpoint HF_DIR --name NAME  # bring your own
      [--prefill-lengths 64,128,256,512,1024] [--decode-batch-sizes 1,2,4,8,16] [--kv-lengths 256,512,1024]
      [--slots 16] [--prefill-chunk-lengths 32,128|none] [--no-reference]

--checkpoint takes a local Hugging Face Llama-family directory (hf_checkpoint.py) with a SentencePiece
tokenizer.model (for checkpoints with tokenizer.json, use hf_export.py). The context length is the last --kv-lengths.
Exit codes: 0 ok, 1 export failed or refused (buckets beyond the model's context: export_checks.py), 2 bad arguments
or --target neuron without torch_neuronx.
"""
import argparse
import json
import os
import shutil
import sys
import time
from typing import Dict, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import export_checks  # noqa: E402
import graph_format  # noqa: E402
import hf_checkpoint  # noqa: E402
import llama  # noqa: E402
import llm_tokenizer  # noqa: E402

NAME = "llama_tiny"
PREFILL_LENGTHS = export_checks.PREFILL_LENGTHS
DECODE_BATCH_SIZES = export_checks.DECODE_BATCH_SIZES
KV_LENGTHS = export_checks.KV_LENGTHS
SLOTS = export_checks.SLOTS
# Chunked prefill's chunk lengths (graphs/prefill_chunk_c<C>_k<K>.pt for every C and K; each C at most the smallest
# KV length). 32 and 128: a 1,024-token prompt is 8 chunks of 128; a decode step shares an iteration with one.
PREFILL_CHUNK_LENGTHS = [32, 128]
MAX_NEW_TOKENS = 48
CHAT_TEMPLATE = {"system": "System: ", "user": "User: ", "assistant": "Assistant: ", "separator": "\n"}

# Reference prompts: fixed real text of very different lengths (3 to ~290 ids with the llama_tiny tokenizer, BOS
# included).
PROMPTS = [
    "Hi",
    "The quick brown fox jumps over the lazy dog.",
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software",
    "Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker who "
    "repaired every clock in the valley.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Température: 21,5 °C — ciel dégagé; 東京の天気は晴れです. Prices rose 3.7% in 2023.",
    "This program is free software: you can redistribute it and/or modify it under the terms of the GNU General "
    "Public License as published by the Free Software Foundation, either version 3 of the License, or (at your "
    "option) any later version. This program is distributed in the hope that it will be useful, but WITHOUT ANY "
    "WARRANTY; without even the implied warranty of MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.",
    "A river is a natural flowing watercourse, usually freshwater, flowing towards an ocean, sea, lake or another "
    "river. In some cases, a river flows into the ground and becomes dry at the end of its course without "
    "reaching another body of water. Small rivers can be referred to using names such as creek, brook, rivulet, "
    "and rill. There are no official definitions for the generic term river as applied to geographic features. "
    "Rivers are part of the water cycle; water generally collects in a river from precipitation through a "
    "drainage basin from surface runoff and other sources such as groundwater recharge, springs, and the release "
    "of stored water in natural ice and snowpacks.",
    "The Licensor hereby grants You a worldwide, royalty-free, non-sublicensable, non-exclusive, irrevocable "
    "license to exercise the Licensed Rights in the Licensed Material to reproduce and Share the Licensed "
    "Material, in whole or in part; and produce, reproduce, and Share Adapted Material. For the avoidance of "
    "doubt, where Exceptions and Limitations apply to Your use, this Public License does not apply, and You do "
    "not need to comply with its terms and conditions. The term of this Public License is specified in Section "
    "6(a). The Licensor authorizes You to exercise the Licensed Rights in all media and formats whether now known "
    "or hereafter created, and to make technical modifications necessary to do so. The Licensor waives and/or "
    "agrees not to assert any right or authority to forbid You from making technical modifications necessary to "
    "exercise the Licensed Rights, including technical modifications necessary to circumvent Effective "
    "Technological Measures. For purposes of this Public License, simply making modifications authorized by this "
    "Section never produces Adapted Material.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 65536",
]
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "Write a haiku about the sea."}],
    [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello. How can I help?"},
     {"role": "user", "content": "Tell me a joke about compilers."}],
]


def chat_prompt(messages: List[Dict[str, str]], template: Dict[str, str] = CHAT_TEMPLATE) -> str:
    """The chat template as generation_config.h defines it: <prefix><content><separator> per message, then the
    assistant prefix."""
    return "".join(template[m["role"]] + m["content"] + template["separator"] for m in messages) + \
        template["assistant"]


# ---- graphs -------------------------------------------------------------------------------------------------------

def empty_cache(cfg: llama.LlamaConfig, slots: int, context: int) -> torch.Tensor:
    return torch.zeros(cfg.num_hidden_layers, slots + 1, context, cfg.num_key_value_heads, cfg.head_dim)


def prefill_example(cfg, length: int, slots: int, context: int):
    tokens = torch.randint(0, cfg.vocab_size, (1, length), generator=torch.Generator().manual_seed(length))
    return (tokens, torch.tensor([max(1, length - 3)]), torch.tensor([0]), empty_cache(cfg, slots, context),
            empty_cache(cfg, slots, context))


def chunk_example(cfg, chunk: int, slots: int, context: int, kv_length: int):
    tokens = torch.randint(0, cfg.vocab_size, (1, chunk), generator=torch.Generator().manual_seed(chunk + kv_length))
    return (tokens, torch.tensor([kv_length - chunk]), torch.tensor([max(1, chunk - 3)]), torch.tensor([0]),
            empty_cache(cfg, slots, context), empty_cache(cfg, slots, context))


def decode_example(cfg, batch: int, slots: int, context: int, kv_length: int):
    gen = torch.Generator().manual_seed(batch * 7919 + kv_length)
    tokens = torch.randint(0, cfg.vocab_size, (batch,), generator=gen)
    positions = torch.arange(batch) * (kv_length - 1) // max(1, batch)
    return (tokens, positions, torch.arange(batch) % slots, empty_cache(cfg, slots, context),
            empty_cache(cfg, slots, context))


def export_graphs(model, graphs_dir: str, target: str, prefill_lengths, batch_sizes, kv_lengths, slots, log,
                  chunk_lengths=()):
    cfg = model.config
    context = kv_lengths[-1]
    jobs = [(f"prefill_l{length}.pt", llama.PrefillGraph(model), prefill_example(cfg, length, slots, context))
            for length in prefill_lengths]
    jobs += [(f"prefill_chunk_c{c}_k{k}.pt", llama.PrefillChunkGraph(model, k),
              chunk_example(cfg, c, slots, context, k)) for c in chunk_lengths for k in kv_lengths]
    jobs += [(f"decode_b{b}_k{k}.pt", llama.DecodeGraph(model, k), decode_example(cfg, b, slots, context, k))
             for b in batch_sizes for k in kv_lengths]
    # Prefill and decode wrappers hold the model as `m`: one name list (and one weights.pt) serves every graph.
    names, weights = graph_format.weight_tensors(jobs[0][1])
    weight_bytes = graph_format.write_weights(names, weights,
                                              os.path.join(os.path.dirname(graphs_dir), graph_format.WEIGHTS_FILE))
    log(f"  {graph_format.WEIGHTS_FILE:<22} {len(names)} tensors, {weight_bytes / 2**20:.1f} MiB (stored once)")
    for name, module, example in jobs:
        assert graph_format.weight_tensors(module)[0] == names, f"{name}: weights differ from the prefill graph's"
        t0 = time.monotonic()
        with torch.no_grad():
            # --target neuron is UNVERIFIED: the graphs update the KV-cache inputs in place; Neuron graphs are
            # functional, and whether that update survives compilation is unknown.
            graph = common.trace_graph(module.eval(), example, target, names, weights)
        path = os.path.join(graphs_dir, name)
        torch.jit.save(graph, path)
        log(f"  {name:<22} {time.monotonic() - t0:6.2f} s  {os.path.getsize(path) / 2**20:6.1f} MiB")


# ---- config.yaml --------------------------------------------------------------------------------------------------

def config_yaml(name: str, cfg: llama.LlamaConfig, target: str, prefill_lengths, batch_sizes, kv_lengths,
                slots: int, bos: int, eos, source: str, tokenizer: str = "tokenizer.model",
                notes=(), tool: str = "llama_export.py", chunk_lengths=()) -> str:
    """config.yaml text. `eos`: one id or a list (every id ends a sequence). `notes`: extra comment lines written
    after the header. `chunk_lengths`: chunked prefill's (none: whole prefills)."""
    import yaml
    f = common._flow  # noqa: SLF001 (the house YAML flow emitter)
    if target == "neuron":
        instances = [{"count": 1, "device": "neuron", "cores": "0-1"}]
    else:
        instances = [{"count": 1, "device": "cpu", "intra_op_threads": 1}]
    gen = {
        "tokenizer": tokenizer,
        "vocab_size": cfg.vocab_size,
        "context_length": kv_lengths[-1],
        "kv_cache": {"slots": slots, "layers": cfg.num_hidden_layers, "kv_heads": cfg.num_key_value_heads,
                     "head_dim": cfg.head_dim},
        "prefill_lengths": list(prefill_lengths),
        "decode_batch_sizes": list(batch_sizes),
        "kv_lengths": list(kv_lengths),
        "bos_token_id": bos,
        "eos_token_id": eos,
        "max_num_seqs": min(slots, batch_sizes[-1], 16),
        "prefill_token_budget": max(1024, prefill_lengths[-1]),
        "max_queue_size": 256,
        **({"prefill_chunk_lengths": list(chunk_lengths)} if chunk_lengths else {}),
        "default_max_tokens": min(128, kv_lengths[-1] - 1),
        "chat_template": CHAT_TEMPLATE,
    }
    lines = [f"# Generated by backend/compile/{tool} --target {target} ({source}); re-run it rather than edit."]
    lines += [f"# {note}" for note in notes]
    lines += [f"name: {f(name)}", "kind: generation", "generation:"]
    lines += [f"  {key}: {f(value)}" for key, value in gen.items()]
    if target == "neuron":
        lines.append("# neuron instance settings are unverified on hardware")
    lines.append(f"instances: {f(instances)}")
    text = "\n".join(lines) + "\n"
    doc = {"name": name, "kind": "generation", "generation": gen, "instances": instances}
    assert yaml.safe_load(text) == doc, "config.yaml emitter disagrees with its own data"
    return text


# ---- reference generations ----------------------------------------------------------------------------------------

def greedy_reference(model, prompt_ids: List[int], max_new_tokens: int):
    """Eager, batch 1, full recompute every step (no cache), EOS ignored."""
    ids = list(prompt_ids)
    out, margins = [], []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model.logits(model.hidden(torch.tensor([ids]))[0, -1])  # = model(ids)[0, -1]
            top = logits.topk(2).values
            margins.append(round(float(top[0] - top[1]), 6))
            token = int(logits.argmax())
            out.append(token)
            ids.append(token)
    return out, margins


def write_reference(model, sp, name: str, bos: int, path: str, log):
    cases = [{"prompt": p} for p in PROMPTS] + [{"prompt": chat_prompt(c), "messages": c} for c in CHATS]
    for case in cases:
        ids = ([bos] if bos >= 0 else []) + sp.encode(case["prompt"])
        case["prompt_ids"] = ids
        case["output_ids"], case["top2_margins"] = greedy_reference(model, ids, MAX_NEW_TOKENS)
    with open(path, "w") as f:
        json.dump({"model": name, "max_new_tokens": MAX_NEW_TOKENS, "cases": cases}, f, indent=1,
                  ensure_ascii=False)
    margins = torch.tensor([m for c in cases for m in c["top2_margins"]])
    q = [float(margins.quantile(x)) for x in (0.01, 0.05, 0.5)]
    log(f"  reference_generation.json: {len(cases)} cases, prompt lengths "
        f"{sorted(len(c['prompt_ids']) for c in cases)}; top-2 margins min {float(margins.min()):.2e}, "
        f"p1 {q[0]:.2e}, p5 {q[1]:.2e}, median {q[2]:.2e}, < 1e-4: {int((margins < 1e-4).sum())}, "
        f"< 1e-3: {int((margins < 1e-3).sum())} of {margins.numel()}")


# ---- Hugging Face checkpoints -------------------------------------------------------------------------------------

def write_hf(model, cfg: llama.LlamaConfig, tokenizer_path: str, out_dir: str, bos: int, eos: int):
    os.makedirs(out_dir)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_key_value_heads,
        "num_hidden_layers": cfg.num_hidden_layers, "head_dim": cfg.head_dim, "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps, "rope_theta": cfg.rope_theta, "rope_scaling": None,
        "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1,
        "vocab_size": cfg.vocab_size, "max_position_embeddings": cfg.max_position_embeddings,
        "bos_token_id": bos, "eos_token_id": eos, "tie_word_embeddings": False, "torch_dtype": "float32",
        "initializer_range": 0.02, "use_cache": True,
    }
    files = {
        "config.json": config,
        "generation_config.json": {"bos_token_id": bos, "eos_token_id": eos, "do_sample": False},
        "special_tokens_map.json": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        "tokenizer_config.json": {
            "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
            # legacy: tokenize exactly as plain SentencePiece (then BOS), which is what sluice does.
            "legacy": True, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
            "model_max_length": cfg.max_position_embeddings, "clean_up_tokenization_spaces": False,
            "sp_model_kwargs": {}},
    }
    for name, value in files.items():
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(value, f, indent=2)
            f.write("\n")
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    torch.save(state, os.path.join(out_dir, "pytorch_model.bin"))
    shutil.copyfile(tokenizer_path, os.path.join(out_dir, "tokenizer.model"))


def load_checkpoint(path: str):
    """(LlamaForCausalLM, bos, eos) from a local Hugging Face Llama-family directory (hf_checkpoint.py: what is
    supported, and the refusals); ValueError names what is missing or unsupported. bos is -1 when the tokenizer
    does not prepend it; eos is the first of the checkpoint's eos ids (-1: none)."""
    ckpt = hf_checkpoint.Checkpoint(path)
    return ckpt.model, (ckpt.bos if ckpt.adds_bos else -1), (ckpt.eos_ids[0] if ckpt.eos_ids else -1)


# ---- driver -------------------------------------------------------------------------------------------------------

def staging_dir(out_dir: str, name: str) -> str:
    """A fresh hidden temp dir for DIR/<name> (with graphs/), after removing dead exporters' leftovers."""
    for stale in [os.path.join(out_dir, e) for e in os.listdir(out_dir) if e.startswith(f".{name}.")]:
        if not common._pid_alive(stale.rsplit("-", 1)[1]):  # noqa: SLF001
            shutil.rmtree(stale, ignore_errors=True)
    tmp = os.path.join(out_dir, f".{name}.tmp-{os.getpid()}")
    os.makedirs(os.path.join(tmp, "graphs"))
    return tmp


def publish(tmp: str, out_dir: str, name: str) -> str:
    """Renames the finished temp dir into DIR/<name>, replacing an older export; returns the final path."""
    final = os.path.join(out_dir, name)
    old = os.path.join(out_dir, f".{name}.old-{os.getpid()}")
    if os.path.exists(final):
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def export(out_dir: str, target: str = "cpu", checkpoint: Optional[str] = None, name: str = NAME,
           prefill_lengths=None, batch_sizes=None, kv_lengths=None, slots: int = SLOTS,
           reference: bool = True, chunk_lengths=None) -> float:
    """Builds DIR/<name>/ in a temp dir, then renames it into place (as common.export_model). Returns seconds."""
    import sentencepiece as spm
    prefill_lengths = prefill_lengths or PREFILL_LENGTHS
    batch_sizes = batch_sizes or DECODE_BATCH_SIZES
    kv_lengths = kv_lengths or KV_LENGTHS
    chunk_lengths = [c for c in (PREFILL_CHUNK_LENGTHS if chunk_lengths is None else chunk_lengths)
                     if c <= kv_lengths[0]]
    start = time.monotonic()
    tmp = staging_dir(out_dir, name)

    def log(msg):
        print(f"[{name}] {msg}", flush=True)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the reference generations do not depend on how many cores the machine has
    try:
        tokenizer_path = os.path.join(tmp, "tokenizer.model")
        if checkpoint:
            model, bos, eos = load_checkpoint(checkpoint)
            shutil.copyfile(os.path.join(checkpoint, "tokenizer.model"), tokenizer_path)
            source = f"from {os.path.abspath(checkpoint)}"
        else:
            t0 = time.monotonic()
            sp = llm_tokenizer.train(tokenizer_path)
            log(f"  tokenizer.model: {sp.get_piece_size()} pieces, trained in {time.monotonic() - t0:.1f} s")
            model = llama.build(llama.LlamaConfig(vocab_size=sp.get_piece_size()))
            bos, eos = llm_tokenizer.BOS_ID, llm_tokenizer.EOS_ID
            source = f"llama.py seed {llama.SEED}"
        export_checks.check_buckets(prefill_lengths, kv_lengths, model.config.max_position_embeddings,
                                    os.path.join(checkpoint, "config.json") if checkpoint else f"llama.py {name}")
        sp = spm.SentencePieceProcessor(model_file=tokenizer_path)
        cfg = model.config
        if sp.get_piece_size() > cfg.vocab_size:
            raise ValueError(f"tokenizer has {sp.get_piece_size()} pieces, the model only {cfg.vocab_size} logits")
        log(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
            f"{len(prefill_lengths) + (len(batch_sizes) + len(chunk_lengths)) * len(kv_lengths)} graphs, "
            f"target {target}")
        export_graphs(model, os.path.join(tmp, "graphs"), target, prefill_lengths, batch_sizes, kv_lengths,
                      slots, log, chunk_lengths)
        with open(os.path.join(tmp, "config.yaml"), "w") as f:
            f.write(config_yaml(name, cfg, target, prefill_lengths, batch_sizes, kv_lengths, slots, bos, eos,
                                source, chunk_lengths=chunk_lengths))
        if reference:
            t0 = time.monotonic()
            write_reference(model, sp, name, bos, os.path.join(tmp, "reference_generation.json"), log)
            log(f"  reference in {time.monotonic() - t0:.1f} s")
        if not checkpoint:
            write_hf(model, cfg, tokenizer_path, os.path.join(tmp, "hf"), bos, eos)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        torch.set_num_threads(threads)
    final = publish(tmp, out_dir, name)
    seconds = time.monotonic() - start
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(final) for f in fs)
    log(f"exported in {seconds:.1f} s, {size / 2**20:.0f} MiB -> {final}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="model repository directory to write into")
    parser.add_argument("--checkpoint", help="local Hugging Face Llama directory (default: build llama_tiny)")
    parser.add_argument("--name", help=f"model name (default {NAME}; required with --checkpoint)")
    export_checks.add_arguments(parser)
    parser.add_argument("--prefill-chunk-lengths", default=",".join(map(str, PREFILL_CHUNK_LENGTHS)),
                        help="chunked prefill's chunk lengths, ascending (those over the smallest KV length are "
                             "dropped), or none: whole prefills only")
    parser.add_argument("--no-reference", action="store_true", help="skip reference_generation.json")
    args = parser.parse_args()
    try:
        prefill, batches, kvs = export_checks.parse_arguments(args)
        chunks = [] if args.prefill_chunk_lengths == "none" else export_checks.lengths(args.prefill_chunk_lengths,
                                                                                      "prefill-chunk-lengths")
        if args.checkpoint and not args.name:
            raise export_checks.UsageError("--checkpoint needs --name")
    except export_checks.UsageError as e:
        print(e, file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    try:
        export(args.out, args.target, args.checkpoint, args.name or NAME, prefill, batches, kvs, args.slots,
               not args.no_reference, chunks)
    except (ValueError, OSError, KeyError) as e:
        print(f"export failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
