#!/usr/bin/env python3
"""Converts a llama.cpp GGUF file of a Llama-architecture model (general.architecture llama, a GPT-2 byte-level
BPE tokenizer: tokenizer.ggml.model gpt2) into a Hugging Face checkpoint directory that hf_export.py reads:

  config.json              LlamaForCausalLM, from the llama.* metadata (tied embeddings when there is no output.weight)
  model.safetensors        every tensor dequantized to float32 (gguf.quants.dequantize), q/k un-permuted
  generation_config.json   bos / eos / pad ids of the GGUF
  tokenizer.json           BPE vocab + merges of the GGUF, its pre-tokenizer (tokenizer.ggml.pre), byte-level decoder,
                           the control tokens as special added tokens
  tokenizer_config.json    the special tokens, add_bos_token, and the GGUF's Jinja tokenizer.chat_template

  python3 backend/compile/gguf_to_hf.py MODEL.gguf OUT_DIR
Needs the PyPI packages gguf, safetensors and tokenizers (pinned in tests/llm/requirements-hf-tools.txt); used for
the SmolLM2 example (tests/llm/smollm2_test.sh). Anything else (another architecture, tokenizer model or pre-tokenizer)
is refused by name.

llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) reorders the rows of attn_q / attn_k within each
head from Hugging Face's rotate_half layout (first half of the head's dims, then second half) to GGML's interleaved
rotary pairs: rows (h, 2, d/2) -> (h, d/2, 2). unpermute() reverses it (for attn_k with the KV head count).
"""
import json
import os
import sys
from typing import Dict, List

import numpy as np

import gguf

# tokenizer.ggml.pre -> the Hugging Face pre-tokenizer the original tokenizer.json has (llama.cpp's llama-vocab.cpp
# maps these names to the same regexes: "\p{N}" then the GPT-2 pattern for smollm).
PRE_TOKENIZERS = {
    "smollm": [{"type": "Digits", "individual_digits": True},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}],
    "gpt2": [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}],
}
CONTROL = 3  # tokenizer.ggml.token_type of control (special) tokens

NAMES = {  # GGUF tensor name (per block: blk.N.) -> Hugging Face name
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


def field(reader: gguf.GGUFReader, key: str, default=None):
    """A metadata value: str, number, or list of them."""
    f = reader.fields.get(key)
    if f is None:
        return default
    kinds = f.types
    if kinds[0] == gguf.GGUFValueType.ARRAY:
        if kinds[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if kinds[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]].tolist()[0]


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """GGML's interleaved rotary row order of attn_q / attn_k back to Hugging Face's (see the module comment)."""
    d = w.shape[0] // heads
    return w.reshape(heads, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_config(reader: gguf.GGUFReader, tied: bool) -> Dict:
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"general.architecture {arch!r}: only llama is converted")

    def meta(key, default=None):
        value = field(reader, f"llama.{key}", default)
        if value is None:
            raise ValueError(f"llama.{key} missing")
        return value

    heads = int(meta("attention.head_count"))
    hidden = int(meta("embedding_length"))
    if int(meta("rope.dimension_count", hidden // heads)) != hidden // heads:
        raise ValueError("llama.rope.dimension_count != head dim (partial rotary): not supported")
    if field(reader, "llama.rope.scaling.type") not in (None, "none"):
        raise ValueError(f"llama.rope.scaling.type {field(reader, 'llama.rope.scaling.type')!r}: not converted")
    tokens = field(reader, "tokenizer.ggml.tokens")
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": hidden, "intermediate_size": int(meta("feed_forward_length")),
        "num_hidden_layers": int(meta("block_count")), "num_attention_heads": heads,
        "num_key_value_heads": int(meta("attention.head_count_kv", heads)),
        "rms_norm_eps": float(f"{meta('attention.layer_norm_rms_epsilon'):.7g}"),  # f32 in GGUF: 1e-5, not 9.99999974e-06
        "rope_theta": float(meta("rope.freq_base", 10000.0)), "rope_scaling": None,
        "max_position_embeddings": int(meta("context_length")),
        "vocab_size": int(meta("vocab_size", len(tokens))), "tie_word_embeddings": tied,
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
        "bos_token_id": field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
    }


def tensors(reader: gguf.GGUFReader, cfg: Dict) -> Dict[str, np.ndarray]:
    out = {}
    for t in reader.tensors:
        name = t.name
        block = ""
        if name.startswith("blk."):
            _, n, rest = name.split(".", 2)
            block, name = f"model.layers.{int(n)}.", rest
        if name not in NAMES:
            raise ValueError(f"GGUF tensor {t.name}: not a Llama tensor this converter knows")
        w = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        want = tuple(int(x) for x in reversed(t.shape.tolist()))  # GGUF lists ne innermost first
        w = w.reshape(want)
        if name == "attn_q.weight":
            w = unpermute(w, cfg["num_attention_heads"])
        elif name == "attn_k.weight":
            w = unpermute(w, cfg["num_key_value_heads"])
        out[block + NAMES[name]] = w
    return out


def tokenizer_files(reader: gguf.GGUFReader):
    """(tokenizer.json dict, tokenizer_config.json dict)."""
    model = field(reader, "tokenizer.ggml.model")
    pre = field(reader, "tokenizer.ggml.pre", "gpt2")
    if model != "gpt2":
        raise ValueError(f"tokenizer.ggml.model {model!r}: only gpt2 (byte-level BPE) is converted")
    if pre not in PRE_TOKENIZERS:
        raise ValueError(f"tokenizer.ggml.pre {pre!r}: not one of {sorted(PRE_TOKENIZERS)}")
    tokens: List[str] = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = field(reader, "tokenizer.ggml.merges")
    special = [i for i, t in enumerate(types) if t == CONTROL]
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i in special],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": PRE_TOKENIZERS[pre]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }

    def name_of(key):
        i = field(reader, key)
        return tokens[i] if i is not None else None

    config = {
        "tokenizer_class": "GPT2Tokenizer", "add_bos_token": bool(field(reader, "tokenizer.ggml.add_bos_token", False)),
        "add_prefix_space": False, "bos_token": name_of("tokenizer.ggml.bos_token_id"),
        "eos_token": name_of("tokenizer.ggml.eos_token_id"), "unk_token": name_of("tokenizer.ggml.unknown_token_id"),
        "pad_token": name_of("tokenizer.ggml.padding_token_id"),
        "additional_special_tokens": [tokens[i] for i in special],
        "model_max_length": field(reader, "llama.context_length"), "clean_up_tokenization_spaces": False,
        "chat_template": field(reader, "tokenizer.chat_template"),
    }
    return tok, {k: v for k, v in config.items() if v is not None}


def convert(gguf_path: str, out_dir: str) -> Dict:
    from safetensors.numpy import save_file
    reader = gguf.GGUFReader(gguf_path)
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    cfg = hf_config(reader, tied)
    state = tensors(reader, cfg)
    tok, tok_cfg = tokenizer_files(reader)
    os.makedirs(out_dir, exist_ok=True)
    save_file(state, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    gen = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"], "do_sample": False}
    pad = field(reader, "tokenizer.ggml.padding_token_id")
    if pad is not None:
        gen["pad_token_id"] = pad
    for name, value in (("config.json", cfg), ("generation_config.json", gen), ("tokenizer.json", tok),
                        ("tokenizer_config.json", tok_cfg)):
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(value, f, indent=1 if name != "tokenizer.json" else None, ensure_ascii=False)
            f.write("\n")
    return cfg


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        cfg = convert(sys.argv[1], sys.argv[2])
    except (ValueError, OSError) as e:
        print(f"gguf_to_hf: {e}", file=sys.stderr)
        return 1
    print(f"{sys.argv[2]}: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, vocab {cfg['vocab_size']}, "
          f"tied {cfg['tie_word_embeddings']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
