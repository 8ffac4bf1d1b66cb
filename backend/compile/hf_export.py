#!/usr/bin/python3
"""Exports a local Hugging Face causal-LM checkpoint (Llama 1/2/3.x, Mistral, Qwen2/2.5, Qwen3: hf_checkpoint.py)
as a sluice generation model directory: weights.pt (every weight once, float32), graphs/prefill_l<L>.pt and
graphs/decode_b<B>_k<K>.pt (graph format 2, as llama_export.py), config.yaml (kind generation), and the
checkpoint's tokenizer and generation files copied beside them for the server (tokenizer.json,
tokenizer_config.json with its chat template, generation_config.json, special_tokens_map.json, tokenizer.model).

  /usr/bin/python3 backend/compile/hf_export.py --checkpoint CKPT_DIR --out REPO/NAME [--target cpu|neuron]
      [--prefill-lengths 64,128,256,512,1024] [--decode-batch-sizes 1,2,4,8,16] [--kv-lengths 256,512,1024]
      [--slots 16]

The context length is the last --kv-lengths (at most max_position_embeddings). Weights stored as bfloat16 or
float16 are upcast to float32 exactly and the graphs compute in float32 (CPU). An unsupported architecture or
config key is refused by name, before anything is written. No Python tokenizer is needed (no reference
generations are written: tests/llm/hf_arch_test.sh checks exports against transformers).
Exit codes: 0 ok, 1 export failed or refused, 2 bad arguments.
"""
import argparse
import os
import shutil
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_checks  # noqa: E402
import hf_checkpoint  # noqa: E402
import llama_export  # noqa: E402

# Copied from the checkpoint when present: what the server's tokenizer and chat template read.
SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json",
              "tokenizer.model")


def buckets(ckpt: hf_checkpoint.Checkpoint, prefill, batches, kvs):
    """The bucket lists, defaults capped at the model's max_position_embeddings."""
    limit = ckpt.config.max_position_embeddings
    kvs = kvs or [k for k in export_checks.KV_LENGTHS if k <= limit] or [limit]
    prefill = prefill or [p for p in export_checks.PREFILL_LENGTHS if p <= kvs[-1]] or [kvs[-1]]
    return prefill, batches or list(export_checks.DECODE_BATCH_SIZES), kvs


def export(checkpoint: str, out: str, target: str = "cpu", prefill=None, batches=None, kvs=None,
           slots: int = export_checks.SLOTS) -> float:
    start = time.monotonic()
    out = os.path.abspath(out)
    out_dir, name = os.path.dirname(out), os.path.basename(out)

    def log(msg):
        print(f"[{name}] {msg}", flush=True)

    ckpt = hf_checkpoint.Checkpoint(checkpoint)
    cfg = ckpt.config
    prefill, batches, kvs = buckets(ckpt, prefill, batches, kvs)
    context = kvs[-1]
    export_checks.check_buckets(prefill, kvs, cfg.max_position_embeddings, os.path.join(checkpoint, "config.json"))
    why = hf_checkpoint.refused_window(ckpt.hf, context)
    if why:
        raise ValueError(f"{checkpoint}/config.json: {why}")
    tokenizer = next((t for t in ("tokenizer.json", "tokenizer.model")
                      if os.path.exists(os.path.join(checkpoint, t))), None)
    if tokenizer is None:
        raise ValueError(f"{checkpoint}: no tokenizer.json or tokenizer.model")
    log(f"{ckpt.hf['model_type']} ({ckpt.hf.get('architectures')}), "
        f"{sum(p.numel() for p in ckpt.model.parameters()) / 1e6:.2f}M parameters stored as {ckpt.stored_dtypes} "
        f"(torch_dtype {ckpt.torch_dtype}; computed in float32), loaded in {time.monotonic() - start:.1f} s; "
        f"{len(prefill) + len(batches) * len(kvs)} graphs, target {target}")
    os.makedirs(out_dir, exist_ok=True)
    tmp = llama_export.staging_dir(out_dir, name)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        llama_export.export_graphs(ckpt.model, os.path.join(tmp, "graphs"), target, prefill, batches, kvs, slots,
                                   log)
        notes = [f"{ckpt.hf['model_type']} checkpoint, weights {ckpt.stored_dtypes} -> float32",
                 f"eos ids of the checkpoint: {ckpt.eos_ids}"]
        if cfg.sliding_window:
            notes.append(f"sliding_window {cfg.sliding_window}: honoured inside the graphs")
        with open(os.path.join(tmp, "config.yaml"), "w") as f:
            f.write(llama_export.config_yaml(
                name, cfg, target, prefill, batches, kvs, slots, ckpt.bos if ckpt.adds_bos else -1,
                eos_setting(ckpt.eos_ids), f"from {os.path.abspath(checkpoint)}", tokenizer, notes,
                "hf_export.py"))
        copied = [f for f in SIDE_FILES if os.path.exists(os.path.join(checkpoint, f))]
        for f in copied:
            shutil.copyfile(os.path.join(checkpoint, f), os.path.join(tmp, f))
        log(f"  copied {', '.join(copied)}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        torch.set_num_threads(threads)
    final = llama_export.publish(tmp, out_dir, name)
    seconds = time.monotonic() - start
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(final) for f in fs)
    log(f"exported in {seconds:.1f} s, {size / 2**20:.0f} MiB -> {final}")
    return seconds


def eos_setting(eos_ids):
    """config.yaml's eos_token_id: the one id, or the whole list when the checkpoint has several (Llama 3 ends on
    <|end_of_text|> and <|eot_id|>; the server stops on any of them); -1 when it has none."""
    if not eos_ids:
        return -1
    return eos_ids[0] if len(eos_ids) == 1 else list(eos_ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="local Hugging Face checkpoint directory")
    parser.add_argument("--out", required=True, help="the model directory to write: REPO/NAME")
    export_checks.add_arguments(parser)
    args = parser.parse_args()
    try:
        prefill, batches, kvs = export_checks.parse_arguments(args)
    except export_checks.UsageError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        export(args.checkpoint, args.out, args.target, prefill, batches, kvs, args.slots)
    except (ValueError, OSError, KeyError) as e:
        print(f"hf_export: refused: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
