"""Reads a local Hugging Face causal-LM checkpoint directory into llama.py's model, or refuses it by name.

  config.json                      model_type llama | mistral | qwen2 | qwen3 (see FAMILIES); anything else refused
  model.safetensors                or model.safetensors.index.json + its shards, or pytorch_model.bin (+ .index.json)
  generation_config.json           optional: bos/eos ids (eos may be a list), preferred over config.json's

Weights are read in their stored dtype (float32, bfloat16 or float16, whatever config.json's torch_dtype says) and
upcast to float32, exactly (every bf16/fp16 value is a float32 value): the exported CPU graphs compute in float32.
The safetensors format is read here directly (an 8-byte header length, a JSON header, raw little-endian tensors),
so no PyPI package is needed.

Every config key that changes the computation is either mapped onto a LlamaConfig switch or refused with the key
and value named (ValueError): never silently ignored.
"""
import json
import os
import struct
from typing import Any, Dict, List, Optional, Tuple

import torch

import llama

# model_type -> the architectures entries it may name (config.json "architectures").
FAMILIES = {
    "llama": ("LlamaForCausalLM",),
    "mistral": ("MistralForCausalLM",),
    "qwen2": ("Qwen2ForCausalLM",),
    "qwen3": ("Qwen3ForCausalLM",),
}
# Every family is checked against transformers greedy decoding (tests/llm/hf_arch_test.sh with 4.44.2; Qwen3, which
# 4.44.2 predates, by tests/torch2/qwen3_transformers_test.sh with 4.57.1).
# Keys whose truthy value changes the model in ways llama.py does not compute. (`layer_types`: see _layer_types.)
_REFUSED_KEYS = ("quantization_config", "partial_rotary_factor", "attn_logit_softcapping",
                 "final_logit_softcapping", "no_rope_layers", "moe_intermediate_size",
                 "num_experts", "num_local_experts")

_ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
              "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
              "BOOL": torch.bool}


def read_json(path: str) -> Dict[str, Any]:
    with open(path) as f:
        return json.load(f)


# ---- config.json -> LlamaConfig -----------------------------------------------------------------------------------

def model_config(hf: Dict[str, Any], where: str = "config.json") -> llama.LlamaConfig:
    """The LlamaConfig of a Hugging Face config dict; ValueError names the unsupported type or key."""
    family = hf.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"{where}: model_type {family!r} (architectures {hf.get('architectures')}) is not "
                         f"supported; supported: {', '.join(FAMILIES)}")
    wrong = [a for a in hf.get("architectures") or [] if a not in FAMILIES[family]]
    if wrong:
        raise ValueError(f"{where}: architectures {wrong} are not supported for model_type {family!r} "
                         f"(supported: {', '.join(FAMILIES[family])})")
    refused = [f"{k}={hf[k]!r}" for k in _REFUSED_KEYS if hf.get(k)] + _layer_types(hf, family)
    act = hf.get("hidden_act", "silu")
    if act != "silu":
        refused.append(f"hidden_act={act!r} (only silu)")
    if refused:
        raise ValueError(f"{where}: unsupported by llama.py: {', '.join(refused)}")
    heads = _required(hf, "num_attention_heads", where)
    kv_heads = hf.get("num_key_value_heads")
    if kv_heads is None:
        if family != "llama":  # the families' defaults differ (Mistral 8, Qwen2 32): never guess
            raise ValueError(f"{where}: num_key_value_heads missing")
        kv_heads = heads  # Llama 1 / 2-7B configs predate grouped-query attention
    attention_bias = bool(hf.get("attention_bias", False))
    cfg = dict(
        vocab_size=_required(hf, "vocab_size", where), hidden_size=_required(hf, "hidden_size", where),
        intermediate_size=_required(hf, "intermediate_size", where),
        num_hidden_layers=_required(hf, "num_hidden_layers", where), num_attention_heads=heads,
        num_key_value_heads=kv_heads, rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        rope_theta=float(hf.get("rope_theta", 10000.0)),
        max_position_embeddings=int(hf.get("max_position_embeddings", 2048)),
        head_dim=int(hf.get("head_dim") or 0),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        rope_scaling=hf.get("rope_scaling") or None)
    if family == "llama":
        cfg.update(qkv_bias=attention_bias, o_bias=attention_bias, mlp_bias=bool(hf.get("mlp_bias", False)))
    elif family == "mistral":
        cfg.update(sliding_window=int(hf.get("sliding_window") or 0))
    elif family == "qwen2":
        cfg.update(qkv_bias=True)
    elif family == "qwen3":
        cfg.update(qkv_bias=attention_bias, o_bias=attention_bias, qk_norm=True)
    try:
        return llama.LlamaConfig(**cfg)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _layer_types(hf: Dict[str, Any], family: str) -> List[str]:
    """transformers >= 4.53 writes `layer_types` (one attention type per layer) into every Qwen2/Qwen3 config.json:
    all "full_attention" is the model llama.py computes; "sliding_attention" layers come from use_sliding_window,
    which refused_window rules on (Qwen only). Anything else is refused."""
    types = hf.get("layer_types") or []
    allowed = {"full_attention"}
    if family in ("qwen2", "qwen3") and hf.get("use_sliding_window"):
        allowed.add("sliding_attention")
    other = sorted(set(types) - allowed)
    return [f"layer_types with {other}"] if other else []


def _required(hf: Dict[str, Any], key: str, where: str) -> int:
    if key not in hf:
        raise ValueError(f"{where}: {key} missing")
    return int(hf[key])


def refused_window(hf: Dict[str, Any], context: int) -> Optional[str]:
    """Why a Qwen-style sliding window (use_sliding_window) cannot be exported at this context length, or None.
    transformers' Qwen2/Qwen3 apply it only to some layers (max_window_layers), differently across versions, so it
    is not computed here; it is harmless, and accepted, when the whole context fits inside the window."""
    if hf.get("model_type") in ("qwen2", "qwen3") and hf.get("use_sliding_window") and hf.get("sliding_window"):
        window = int(hf["sliding_window"])
        if context > window:
            return (f"use_sliding_window with sliding_window {window} < context length {context} (not computed "
                    f"by llama.py: export a context of at most {window})")
    return None


# ---- weights -------------------------------------------------------------------------------------------------------

def read_safetensors(path: str) -> Dict[str, torch.Tensor]:
    """Every tensor of one .safetensors file, in its stored dtype (copies: the file is not kept open)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        (header_len,) = struct.unpack("<Q", f.read(8))
        if header_len > size - 8:
            raise ValueError(f"{path}: not a safetensors file (header length {header_len}, file {size} bytes)")
        header = json.loads(f.read(header_len))
        data = bytearray(f.read())  # writable, so torch.frombuffer views it without a copy or a warning
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _ST_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {entry['dtype']}, not supported")
        begin, end = entry["data_offsets"]
        shape = entry["shape"]
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * torch.tensor([], dtype=dtype).element_size() or end > len(data):
            raise ValueError(f"{path}: tensor {name}: bytes [{begin}, {end}) for shape {shape} {entry['dtype']} "
                             f"(data {len(data)} bytes)")
        if count == 0:
            out[name] = torch.empty(shape, dtype=dtype)
            continue
        out[name] = torch.frombuffer(data, dtype=dtype, count=count, offset=begin).reshape(shape).clone()
    return out


def weight_files(path: str) -> Tuple[str, List[str]]:
    """("safetensors" | "bin", the weight files of a checkpoint directory, shards in index order)."""
    for index_name, kind in (("model.safetensors.index.json", "safetensors"), ("pytorch_model.bin.index.json", "bin")):
        index = os.path.join(path, index_name)
        if os.path.exists(index):
            shards = sorted(set(read_json(index)["weight_map"].values()))
            missing = [s for s in shards if not os.path.exists(os.path.join(path, s))]
            if missing:
                raise ValueError(f"{index}: shards missing: {missing}")
            return kind, [os.path.join(path, s) for s in shards]
    for name, kind in (("model.safetensors", "safetensors"), ("pytorch_model.bin", "bin")):
        if os.path.exists(os.path.join(path, name)):
            return kind, [os.path.join(path, name)]
    raise ValueError(f"{path}: no weights (model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                     "pytorch_model.bin.index.json)")


def read_state(path: str) -> Dict[str, torch.Tensor]:
    kind, files = weight_files(path)
    state: Dict[str, torch.Tensor] = {}
    for file in files:
        part = read_safetensors(file) if kind == "safetensors" else torch.load(file, map_location="cpu")
        clash = set(part) & set(state)
        if clash:
            raise ValueError(f"{file}: tensors also in another shard: {sorted(clash)[:5]}")
        state.update(part)
    return state


def load_weights(model: llama.LlamaForCausalLM, state: Dict[str, torch.Tensor], where: str) -> Dict[str, int]:
    """Loads `state` (any float dtype) into `model` as float32, strictly; returns {stored dtype: tensor count}."""
    state = {k: v for k, v in state.items() if not k.endswith("rotary_emb.inv_freq")}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # some tied checkpoints store the copy too; transformers ignores it
    dtypes: Dict[str, int] = {}
    for k, v in state.items():
        if not v.is_floating_point():
            raise ValueError(f"{where}: tensor {k} is {v.dtype}, not a float weight")
        dtypes[str(v.dtype).replace("torch.", "")] = dtypes.get(str(v.dtype).replace("torch.", ""), 0) + 1
    want = model.state_dict()
    missing = sorted(set(want) - set(state))
    unexpected = sorted(set(state) - set(want))
    shapes = [f"{k} {list(state[k].shape)} != {list(want[k].shape)}" for k in want
              if k in state and state[k].shape != want[k].shape]
    if missing or unexpected or shapes:
        raise ValueError(f"{where}: weights do not match this config: missing {missing[:5]}, unexpected "
                         f"{unexpected[:5]}, shapes {shapes[:3]}")
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    return dtypes


# ---- special tokens ---------------------------------------------------------------------------------------------

def special_tokens(path: str, hf: Dict[str, Any]) -> Tuple[int, List[int], bool]:
    """(bos id or -1, eos ids (possibly several; [] when none), whether the tokenizer prepends BOS).
    generation_config.json wins over config.json. BOS is prepended when tokenizer_config.json says add_bos_token,
    or its tokenizer.json post-processor template puts the BOS token first, or (no tokenizer.json) for a
    SentencePiece tokenizer.model, whose LlamaTokenizer adds it by default."""
    gen_path = os.path.join(path, "generation_config.json")
    gen = read_json(gen_path) if os.path.exists(gen_path) else {}
    bos = gen.get("bos_token_id", hf.get("bos_token_id"))
    eos = gen.get("eos_token_id", hf.get("eos_token_id"))
    eos_ids = [int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None]
    bos = -1 if bos is None else int(bos[0] if isinstance(bos, list) else bos)
    tok_cfg_path = os.path.join(path, "tokenizer_config.json")
    tok_cfg = read_json(tok_cfg_path) if os.path.exists(tok_cfg_path) else {}
    tok_json = os.path.join(path, "tokenizer.json")
    if "add_bos_token" in tok_cfg:
        adds = bool(tok_cfg["add_bos_token"])
    elif os.path.exists(tok_json):
        adds = _post_processor_adds_bos(read_json(tok_json).get("post_processor"), bos)
    else:
        adds = os.path.exists(os.path.join(path, "tokenizer.model"))
    return bos, eos_ids, adds and bos >= 0


def _post_processor_adds_bos(post: Optional[Dict[str, Any]], bos: int) -> bool:
    if not post:
        return False
    if post.get("type") == "Sequence":
        return any(_post_processor_adds_bos(p, bos) for p in post.get("processors", []))
    if post.get("type") != "TemplateProcessing":
        return False
    single = post.get("single") or []
    first = single[0].get("SpecialToken") if single else None
    if not first:
        return False
    ids = post.get("special_tokens", {}).get(first["id"], {}).get("ids", [])
    return ids[:1] == [bos]


# ---- everything -----------------------------------------------------------------------------------------------------

class Checkpoint:
    """A loaded checkpoint: .model (float32, eval), .hf (config.json), .bos, .eos_ids, .adds_bos, .stored_dtypes."""

    def __init__(self, path: str):
        self.path = path
        config_path = os.path.join(path, "config.json")
        if not os.path.exists(config_path):
            raise ValueError(f"{path}: no config.json")
        self.hf = read_json(config_path)
        self.config = model_config(self.hf, config_path)
        self.model = llama.LlamaForCausalLM(self.config)
        self.stored_dtypes = load_weights(self.model, read_state(path), path)
        self.model.eval()
        self.bos, self.eos_ids, self.adds_bos = special_tokens(path, self.hf)
        # transformers >= 4.56 writes "dtype" where older ones wrote "torch_dtype".
        self.torch_dtype = self.hf.get("torch_dtype") or self.hf.get("dtype") or "float32"
