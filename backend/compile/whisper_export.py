#!/usr/bin/env python3
"""Exports a transformers Whisper checkpoint (e.g. ct2_whisper_to_hf.py's output) as sluice's static-shape graphs,
graph format 2 (README.md "Graph format": weights.pt once, every graph takes the weights as trailing inputs):

  OUT/weights.pt                       every parameter once (float32)
  OUT/graphs/b{B}_l480000.pt           the encoder: forward(audio f32[B, 480000], lengths i64[B]) -> (hidden
                                       f32[B, 1500, d],): log-mel front end + encoder (whisper.py EncoderGraph); one
                                       audio length, Whisper's 30 s window, per batch size (the bucket graphs'
                                       names: the server's dynamic batcher runs them)
  OUT/graphs/prefill_l{L}.pt           admission: forward(tokens i64[1, L], length i64[1], slot i64[1],
                                       encoder_hidden f32[1, 1500, d], k_cache, v_cache, cross_k, cross_v)
                                       -> logits f32[1, vocab]
  OUT/graphs/decode_b{B}_k{K}.pt       forward(tokens i64[B], positions i64[B], slots i64[B], k_cache, v_cache,
                                       cross_k, cross_v) -> logits f32[B, vocab]
  OUT/whisper.json                     the graphs, cache shapes, prompt / EOS / suppress token ids (from the
                                       checkpoint's generation_config.json), for Python runners (whisper_check.py)
  OUT/config.yaml                      what sluice-server loads: kind speech, the encoder as (batch, 480000)
                                       buckets, speech: {recognizer: whisper, whisper: {prompt, language and
                                       suppress token ids}}, generation: the decoder (prefill = admission writing
                                       cross K/V; cross_attention) — keys in server/README.md "Whisper"; the model's
                                       name is OUT's directory name
  OUT/tokenizer.json                   copied from the checkpoint

  python3 backend/compile/whisper_export.py --checkpoint HF_DIR --out OUT [--encoder-batch-sizes 1,2,4,8]
      [--prefill-lengths 8,64] [--decode-batch-sizes 1,4,8,16] [--kv-lengths 64,128,448] [--slots 16]
      [--max-audio-seconds 600] [--max-queue-delay-ms 20] [--target cpu|neuron]
Runs with Debian's python3 + python3-torch (safetensors read by hf_checkpoint.py). --target cpu (the default):
`torch.jit.trace` then `torch.jit.freeze`. --target neuron: every graph through `torch_neuronx.trace` (the weights
as NEFF inputs, as llama_export.py does) and `device: neuron` instances in config.yaml; NOT RUN ON NEURON HARDWARE
(no SDK here; tests/voice/whisper_export_target_test.py checks the routing with a stand-in torch_neuronx).
Exit codes: 0 ok, 2 bad arguments or --target neuron without torch_neuronx.
"""
import argparse
import json
import os
import shutil
import sys
import time
from typing import List

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import export_checks  # noqa: E402
import graph_format  # noqa: E402
import whisper  # noqa: E402


def _ints(text: str) -> List[int]:
    values = sorted({int(v) for v in text.split(",") if v.strip()})
    if not values or values[0] < 1:
        raise SystemExit(f"bad list {text!r}: positive integers wanted")
    return values


def special_ids(hf_dir: str) -> dict:
    with open(os.path.join(hf_dir, "generation_config.json")) as f:
        gen = json.load(f)
    need = ["decoder_start_token_id", "eos_token_id", "no_timestamps_token_id", "lang_to_id", "task_to_id",
            "suppress_tokens", "begin_suppress_tokens"]
    missing = [k for k in need if gen.get(k) is None]
    if missing:
        raise SystemExit(f"{hf_dir}/generation_config.json lacks {missing}")
    return {k: gen[k] for k in need}


def server_config(name: str, manifest: dict, max_audio_seconds: float, max_queue_delay_ms: float,
                  batch_size_policy: str = "measured", target: str = "cpu") -> str:
    """The model's config.yaml for sluice-server (server/README.md "Whisper" documents each key)."""
    layers, _, context, heads, head_dim = manifest["self_cache_shape"]
    positions, hidden = manifest["encoder_hidden_shape"]
    langs = sorted(manifest["lang_to_id"].items(), key=lambda kv: kv[1])
    codes = [code.strip("<|>") for code, _ in langs]
    slots = manifest["slots"]
    max_seqs = min(slots, manifest["decode_batch_sizes"][-1])
    prompt_bucket = manifest["prefill_lengths"][-1]
    ints = lambda values: "[" + ", ".join(str(int(v)) for v in values) + "]"  # noqa: E731
    if target == "neuron":
        instances = ('# neuron instance settings are unverified on hardware\n'
                     'instances: [{count: 1, device: neuron, cores: "0-1"}]')
    else:
        instances = "instances: [{count: 1, device: cpu, intra_op_threads: 1}]"
    return f"""# Written by backend/compile/whisper_export.py --target {target} (server/README.md "Whisper").
name: {name}
kind: speech
inputs: [{{name: audio, dtype: FP32, shape: [-1], sample_rate: {manifest["sample_rate"]}}}]
outputs: [{{name: encoder_hidden, dtype: FP32, shape: [{positions}, {hidden}]}}]
# The encoder: log-mel + encoder graphs, one 30 s bucket, every exported batch size (the dynamic batcher).
buckets: {{lengths: [{manifest["audio_length"]}], batch_sizes: {ints(manifest["encoder_batch_sizes"])}}}
batching: {{max_queue_delay_ms: {max_queue_delay_ms:g}, max_queue_size: 64, batch_size_policy: {batch_size_policy}}}
{instances}
speech:
  recognizer: whisper
  output: encoder_hidden
  max_audio_seconds: {max_audio_seconds:g}
  whisper:
    start_token_id: {manifest["decoder_start_token_id"]}
    transcribe_token_id: {manifest["task_to_id"]["transcribe"]}
    no_timestamps_token_id: {manifest["no_timestamps_token_id"]}
    languages: [{", ".join(json.dumps(c) for c in codes)}]
    language_token_ids: {ints(i for _, i in langs)}
    suppress_tokens: {ints(manifest["suppress_tokens"])}
    begin_suppress_tokens: {ints(manifest["begin_suppress_tokens"])}
# The decoder (the continuous batcher): admission = prefill writing the sequence's cross-attention K/V.
generation:
  tokenizer: tokenizer.json
  vocab_size: {manifest["vocab_size"]}
  context_length: {context}
  kv_cache: {{slots: {slots}, layers: {layers}, kv_heads: {heads}, head_dim: {head_dim}}}
  cross_attention: {{encoder_positions: {positions}, encoder_hidden: {hidden}}}
  prefill_lengths: {ints(manifest["prefill_lengths"])}
  decode_batch_sizes: {ints(manifest["decode_batch_sizes"])}
  kv_lengths: {ints(manifest["kv_lengths"])}
  eos_token_id: {manifest["eos_token_id"]}
  max_num_seqs: {max_seqs}
  prefill_token_budget: {max_seqs * prompt_bucket}
  default_max_tokens: {context - 4}
"""


def export(hf_dir: str, out: str, encoder_batches, prefill_lengths, decode_batches, kv_lengths, slots: int,
           max_audio_seconds: float = 600, max_queue_delay_ms: float = 20, batch_size_policy: str = "measured",
           log=print, target: str = "cpu") -> None:
    torch.set_grad_enabled(False)
    model = whisper.load_checkpoint(hf_dir)
    dims = model.dims
    if kv_lengths[-1] > dims.max_target_positions:
        raise SystemExit(f"--kv-lengths {kv_lengths[-1]} > max_target_positions {dims.max_target_positions}")
    if prefill_lengths[-1] > kv_lengths[-1]:
        raise SystemExit(f"--prefill-lengths {prefill_lengths[-1]} > the largest kv length {kv_lengths[-1]}")
    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "graphs"))
    self_k = whisper.empty_self_cache(dims, slots)
    cross_k, cross_v = whisper.empty_cross_caches(dims, slots)
    caches = (self_k, self_k.clone(), cross_k, cross_v)
    hidden = torch.zeros(1, dims.max_source_positions, dims.d_model)
    gen = torch.Generator().manual_seed(27)
    jobs = []
    for b in encoder_batches:
        audio = torch.randn(b, whisper.CHUNK_SAMPLES, generator=gen) * 0.1
        jobs.append((f"b{b}_l{whisper.CHUNK_SAMPLES}", whisper.EncoderBucketGraph(model),
                     (audio, torch.full((b,), whisper.CHUNK_SAMPLES // 2))))
    for length in prefill_lengths:
        tokens = torch.randint(0, dims.vocab_size, (1, length), generator=gen)
        jobs.append((f"prefill_l{length}", whisper.PrefillGraph(model),
                     (tokens, torch.tensor([max(1, length - 3)]), torch.tensor([0]), hidden) + caches))
    for b in decode_batches:
        for k in kv_lengths:
            tokens = torch.randint(0, dims.vocab_size, (b,), generator=gen)
            jobs.append((f"decode_b{b}_k{k}", whisper.DecodeGraph(model, k),
                         (tokens, torch.arange(b) * (k - 1) // b, torch.arange(b) % slots) + caches))
    # Every wrapper holds the model as `m`: one name list (one weights.pt) serves every graph.
    names, weights = graph_format.weight_tensors(jobs[0][1])
    nbytes = graph_format.write_weights(names, weights, os.path.join(tmp, graph_format.WEIGHTS_FILE))
    log(f"  {graph_format.WEIGHTS_FILE:<26} {len(names)} tensors, {nbytes / 2**20:.1f} MiB (stored once)")
    for name, module, example in jobs:
        assert graph_format.weight_tensors(module)[0] == names, f"{name}: weights differ"
        t0 = time.monotonic()
        path = os.path.join(tmp, "graphs", name + ".pt")
        # --target neuron is UNVERIFIED: as llama_export.py's, the prefill and decode graphs update their cache inputs
        # in place, which Neuron's functional graphs may not keep.
        torch.jit.save(common.trace_graph(module.eval(), example, target, names, weights), path)
        log(f"  {name + '.pt':<26} {time.monotonic() - t0:6.2f} s  {os.path.getsize(path) / 2**20:6.2f} MiB")
    manifest = {
        "format_version": graph_format.FORMAT_VERSION,
        "sample_rate": whisper.SAMPLE_RATE, "audio_length": whisper.CHUNK_SAMPLES,
        "encoder_batch_sizes": encoder_batches, "prefill_lengths": prefill_lengths,
        "decode_batch_sizes": decode_batches, "kv_lengths": kv_lengths, "slots": slots,
        "self_cache_shape": list(self_k.shape),
        "cross_k_shape": list(cross_k.shape), "cross_v_shape": list(cross_v.shape),
        "encoder_hidden_shape": [dims.max_source_positions, dims.d_model],
        "vocab_size": dims.vocab_size, "max_target_positions": dims.max_target_positions,
        **special_ids(hf_dir),
    }
    with open(os.path.join(tmp, "whisper.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(tmp, "config.yaml"), "w") as f:
        f.write(server_config(os.path.basename(out), manifest, max_audio_seconds, max_queue_delay_ms,
                              batch_size_policy, target))
    shutil.copyfile(os.path.join(hf_dir, "tokenizer.json"), os.path.join(tmp, "tokenizer.json"))
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--encoder-batch-sizes", default="1,2,4,8")
    p.add_argument("--prefill-lengths", default="8,64")
    p.add_argument("--decode-batch-sizes", default="1,4,8,16")
    p.add_argument("--kv-lengths", default="64,128,448")
    p.add_argument("--slots", type=int, default=16)
    p.add_argument("--max-audio-seconds", type=float, default=600,
                   help="config.yaml speech.max_audio_seconds (longer audio: 30 s windows)")
    p.add_argument("--max-queue-delay-ms", type=float, default=20, help="config.yaml batching.max_queue_delay_ms")
    p.add_argument("--batch-size-policy", choices=["measured", "largest"], default="measured",
                   help="config.yaml batching.batch_size_policy (measured: on a CPU the 30 s encoder often runs "
                        "fastest one window at a time, so it stops batching there)")
    p.add_argument("--target", choices=["cpu", "neuron"], default="cpu",
                   help="cpu: torch.jit.trace + freeze; neuron: torch_neuronx.trace (unverified on hardware)")
    a = p.parse_args()
    if a.target == "neuron" and export_checks.neuron_missing():
        print(export_checks.neuron_missing(), file=sys.stderr)
        return 2
    t0 = time.monotonic()
    export(a.checkpoint, os.path.abspath(a.out), _ints(a.encoder_batch_sizes), _ints(a.prefill_lengths),
           _ints(a.decode_batch_sizes), _ints(a.kv_lengths), a.slots, a.max_audio_seconds, a.max_queue_delay_ms,
           a.batch_size_policy, target=a.target)
    print(f"whisper_export: {a.out} in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
