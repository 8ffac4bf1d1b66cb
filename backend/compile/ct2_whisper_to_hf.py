#!/usr/bin/env python3
"""Converts a CTranslate2 Whisper model (WhisperSpec, the layout faster-whisper ships) into a Hugging Face
WhisperForConditionalGeneration checkpoint directory:

  config.json               WhisperConfig: sizes from the variables' shapes, the suppress lists
  model.safetensors         every variable widened to float32 (CPU), fused projections split (below)
  generation_config.json    decoder start, EOS, language and task token ids, no-timestamps id, the suppress and
                            begin-suppress lists and alignment heads of CTranslate2's config.json: what
                            WhisperForConditionalGeneration.generate(language=..., task=...) reads
  tokenizer.json            CTranslate2's copy, unchanged; tokenizer_config.json and special_tokens_map.json beside it
  preprocessor_config.json  WhisperFeatureExtractor (80 log-mel bins, n_fft 400, hop 160, 30 s chunks)

  python3 backend/compile/ct2_whisper_to_hf.py CT2_DIR OUT_DIR
CT2_DIR holds model.bin, or its parts model.bin.part1 .. model.bin.partN (read in that order, as one file), plus
config.json and tokenizer.json. Needs numpy, safetensors and transformers (tests/llm/requirements-hf.txt).

Variable names (CTranslate2's whisper_spec.py + transformer_spec.py) -> transformers' (modeling_whisper.py):
  encoder/conv{1,2}, encoder/position_encodings/encodings  -> model.encoder.conv{1,2}, .embed_positions.weight
  */layer_N/self_attention/linear_0 = [q; k; v] rows       -> layers.N.self_attn.{q,k,v}_proj (k has no bias in
                                                              transformers: CTranslate2's zero k bias is checked)
  */layer_N/self_attention/linear_1                        -> layers.N.self_attn.out_proj
  */layer_N/self_attention/layer_norm                      -> layers.N.self_attn_layer_norm
  decoder/layer_N/attention/linear_0, linear_1 = [k; v]    -> layers.N.encoder_attn.q_proj, {k,v}_proj
  decoder/layer_N/attention/linear_2, layer_norm           -> layers.N.encoder_attn.out_proj, encoder_attn_layer_norm
  */layer_N/ffn/linear_0, linear_1, layer_norm             -> layers.N.fc1, fc2, final_layer_norm
  */layer_norm, decoder/embeddings, decoder/position_encodings -> .layer_norm, .embed_tokens, .embed_positions
  decoder/projection (an alias of decoder/embeddings)      -> proj_out, tied (not stored)
The spec's scalar flags must say what transformers' Whisper computes (pre-norm, erf GELU, no ALiBi, unscaled
embeddings); any other value, any unknown or missing variable, another spec or revision is refused by name.
"""
import glob
import json
import os
import re
import shutil
import sys
import tempfile
from typing import Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_model_file  # noqa: E402

SPEC, REVISION = "WhisperSpec", 3
GELU = 3  # CTranslate2's ops::ActivationType::GELU (erf form), what transformers' "gelu" computes
# Scalars the mapping depends on: name -> required value.
REQUIRED_FLAGS = {"decoder/activation": GELU, "decoder/pre_norm": 1, "decoder/alibi": 0,
                  "decoder/scale_embeddings": 0, "decoder/start_from_zero_embedding": 0}
# Scalars that carry nothing transformers needs (CTranslate2's own alignment-head selection; the heads themselves
# come from config.json).
IGNORED_SCALARS = {"decoder/alignment_heads", "decoder/alignment_layer", "encoder/num_heads", "decoder/num_heads"}
LINEAR = ("weight", "bias")
NORM = {"gamma": "weight", "beta": "bias"}


class ConversionError(ValueError):
    pass


def read_ct2_variables(ct2_dir: str) -> Dict[str, np.ndarray]:
    """The variables of CT2_DIR's model.bin (or its parts joined), aliases resolved, spec and revision checked."""
    single = os.path.join(ct2_dir, "model.bin")
    parts = sorted(glob.glob(single + ".part*"), key=lambda p: int(re.sub(r".*\.part", "", p) or 0))
    if os.path.exists(single):
        spec, rev, variables, aliases = ct2_model_file.read_model(single)
    elif parts:
        with tempfile.NamedTemporaryFile(suffix=".bin") as joined:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, joined)
            joined.flush()
            spec, rev, variables, aliases = ct2_model_file.read_model(joined.name)
            variables = {k: v.copy() for k, v in variables.items()}  # no views into the temp file's bytes
    else:
        raise ConversionError(f"{ct2_dir}: no model.bin and no model.bin.part*")
    if spec != SPEC or rev != REVISION:
        raise ConversionError(f"{ct2_dir}: spec {spec!r} revision {rev}; only {SPEC} revision {REVISION} is "
                              f"converted")
    for alias, target in aliases.items():
        variables[alias] = variables[target]
    return variables


def _layer_count(variables: Dict[str, np.ndarray], stack: str) -> int:
    ids = {int(m.group(1)) for n in variables if (m := re.match(rf"{stack}/layer_(\d+)/", n))}
    if not ids or ids != set(range(len(ids))):
        raise ConversionError(f"{stack} layers {sorted(ids)}: not 0..N-1")
    return len(ids)


class _Mapper:
    """Moves CTranslate2 variables into a transformers state dict, each consumed once."""

    def __init__(self, variables: Dict[str, np.ndarray]):
        self.left = dict(variables)
        self.out: Dict[str, np.ndarray] = {}

    def take(self, name: str) -> np.ndarray:
        if name not in self.left:
            raise ConversionError(f"missing variable {name}")
        return np.ascontiguousarray(self.left.pop(name), dtype=np.float32)

    def put(self, hf: str, value: np.ndarray) -> None:
        self.out[hf] = np.ascontiguousarray(value, dtype=np.float32)

    def linear(self, ct2: str, hf: str) -> None:
        for p in LINEAR:
            self.put(f"{hf}.{p}", self.take(f"{ct2}/{p}"))

    def norm(self, ct2: str, hf: str) -> None:
        for c, h in NORM.items():
            self.put(f"{hf}.{h}", self.take(f"{ct2}/{c}"))

    def split(self, ct2: str, hf_names: List[str], no_bias: str) -> None:
        """A fused projection (rows stacked in hf_names' order) -> one Linear each; no_bias is the one whose
        transformers Linear has bias=False, so its part of the fused bias must be zero."""
        w, b = self.take(f"{ct2}/weight"), self.take(f"{ct2}/bias")
        if w.shape[0] % len(hf_names) or b.shape != (w.shape[0],):
            raise ConversionError(f"{ct2}: weight {list(w.shape)} / bias {list(b.shape)} do not split into "
                                  f"{len(hf_names)}")
        for name, wk, bk in zip(hf_names, np.split(w, len(hf_names)), np.split(b, len(hf_names))):
            self.put(f"{name}.weight", wk)
            if name.endswith(no_bias):
                if np.any(bk != 0):
                    raise ConversionError(f"{ct2}: the {no_bias} part of the bias is not zero "
                                          f"(max |b| {np.abs(bk).max()}); transformers' Whisper has none")
            else:
                self.put(f"{name}.bias", bk)


def convert_state(variables: Dict[str, np.ndarray]) -> (Dict[str, np.ndarray], Dict[str, int]):
    for name, want in REQUIRED_FLAGS.items():
        if name not in variables:
            raise ConversionError(f"missing variable {name}")
        if int(variables[name]) != want:
            raise ConversionError(f"{name} = {int(variables[name])}: only {want} matches transformers' Whisper")
    m = _Mapper({k: v for k, v in variables.items() if k not in REQUIRED_FLAGS})
    for s in IGNORED_SCALARS:
        m.left.pop(s, None)
    sizes = {"encoder_layers": _layer_count(variables, "encoder"),
             "decoder_layers": _layer_count(variables, "decoder"),
             "encoder_attention_heads": int(variables["encoder/num_heads"]),
             "decoder_attention_heads": int(variables["decoder/num_heads"])}
    for conv in ("conv1", "conv2"):
        m.linear(f"encoder/{conv}", f"model.encoder.{conv}")
    m.put("model.encoder.embed_positions.weight", m.take("encoder/position_encodings/encodings"))
    m.norm("encoder/layer_norm", "model.encoder.layer_norm")
    for i in range(sizes["encoder_layers"]):
        c, h = f"encoder/layer_{i}", f"model.encoder.layers.{i}"
        m.norm(f"{c}/self_attention/layer_norm", f"{h}.self_attn_layer_norm")
        m.split(f"{c}/self_attention/linear_0", [f"{h}.self_attn.{p}_proj" for p in "qkv"], "k_proj")
        m.linear(f"{c}/self_attention/linear_1", f"{h}.self_attn.out_proj")
        m.norm(f"{c}/ffn/layer_norm", f"{h}.final_layer_norm")
        m.linear(f"{c}/ffn/linear_0", f"{h}.fc1")
        m.linear(f"{c}/ffn/linear_1", f"{h}.fc2")
    embed = m.take("decoder/embeddings/weight")
    projection = m.take("decoder/projection/weight")
    if projection.shape != embed.shape or not np.array_equal(projection, embed):
        raise ConversionError("decoder/projection/weight differs from decoder/embeddings/weight: transformers' "
                              "Whisper ties them")
    m.put("model.decoder.embed_tokens.weight", embed)
    m.put("model.decoder.embed_positions.weight", m.take("decoder/position_encodings/encodings"))
    m.norm("decoder/layer_norm", "model.decoder.layer_norm")
    for i in range(sizes["decoder_layers"]):
        c, h = f"decoder/layer_{i}", f"model.decoder.layers.{i}"
        m.norm(f"{c}/self_attention/layer_norm", f"{h}.self_attn_layer_norm")
        m.split(f"{c}/self_attention/linear_0", [f"{h}.self_attn.{p}_proj" for p in "qkv"], "k_proj")
        m.linear(f"{c}/self_attention/linear_1", f"{h}.self_attn.out_proj")
        m.norm(f"{c}/attention/layer_norm", f"{h}.encoder_attn_layer_norm")
        m.linear(f"{c}/attention/linear_0", f"{h}.encoder_attn.q_proj")
        m.split(f"{c}/attention/linear_1", [f"{h}.encoder_attn.{p}_proj" for p in "kv"], "k_proj")
        m.linear(f"{c}/attention/linear_2", f"{h}.encoder_attn.out_proj")
        m.norm(f"{c}/ffn/layer_norm", f"{h}.final_layer_norm")
        m.linear(f"{c}/ffn/linear_0", f"{h}.fc1")
        m.linear(f"{c}/ffn/linear_1", f"{h}.fc2")
    if m.left:
        raise ConversionError(f"unexpected variables (not in WhisperSpec revision {REVISION} as converted): "
                              f"{sorted(m.left)}")
    out = m.out
    sizes.update(vocab_size=embed.shape[0], d_model=embed.shape[1],
                 num_mel_bins=out["model.encoder.conv1.weight"].shape[1],
                 encoder_ffn_dim=out["model.encoder.layers.0.fc1.weight"].shape[0],
                 decoder_ffn_dim=out["model.decoder.layers.0.fc1.weight"].shape[0],
                 max_source_positions=out["model.encoder.embed_positions.weight"].shape[0],
                 max_target_positions=out["model.decoder.embed_positions.weight"].shape[0])
    return out, sizes


def special_ids(tokenizer_json: Dict) -> Dict[str, int]:
    return {t["content"]: t["id"] for t in tokenizer_json["added_tokens"] if t.get("special")}


def write_checkpoint(ct2_dir: str, out_dir: str) -> Dict[str, int]:
    from safetensors.numpy import save_file
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor
    from transformers.utils import logging as hf_logging
    # save_pretrained warns that suppress lists in config.json belong in generation_config.json; both get them on
    # purpose (see the WhisperConfig call), so that warning is noise here.
    hf_logging.set_verbosity_error()

    with open(os.path.join(ct2_dir, "config.json")) as f:
        ct2_config = json.load(f)
    with open(os.path.join(ct2_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    state, sizes = convert_state(read_ct2_variables(ct2_dir))
    ids = special_ids(tok)
    name_of = {v: k for k, v in ids.items()}

    def need(token: str) -> int:
        if token not in ids:
            raise ConversionError(f"tokenizer.json has no special token {token}")
        return ids[token]

    eot, sot = need("<|endoftext|>"), need("<|startoftranscript|>")
    lang_to_id = {}
    for i in ct2_config.get("lang_ids", []):
        if i not in name_of:
            raise ConversionError(f"config.json lang_ids: {i} is not a special token of tokenizer.json")
        lang_to_id[name_of[i]] = i
    if not lang_to_id:
        raise ConversionError("config.json has no lang_ids: only multilingual Whisper models are converted")
    suppress, begin_suppress = ct2_config.get("suppress_ids", []), ct2_config.get("suppress_ids_begin", [])
    alignment_heads = [list(h) for h in ct2_config.get("alignment_heads", [])]
    config = WhisperConfig(
        **sizes, activation_function="gelu", scale_embedding=False, tie_word_embeddings=True,
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
        # Also here, as openai/whisper-* config.json files have them: WhisperConfig's own default begin-suppress
        # list ([220, 50256]) is the English-only models' and would be wrong for anything reading this file alone.
        suppress_tokens=suppress, begin_suppress_tokens=begin_suppress,
        architectures=["WhisperForConditionalGeneration"], torch_dtype="float32")
    os.makedirs(out_dir, exist_ok=True)
    config.save_pretrained(out_dir)
    generation = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
        max_length=sizes["max_target_positions"], suppress_tokens=suppress, begin_suppress_tokens=begin_suppress,
        alignment_heads=alignment_heads, is_multilingual=True, lang_to_id=lang_to_id,
        task_to_id={"transcribe": need("<|transcribe|>"), "translate": need("<|translate|>")},
        no_timestamps_token_id=need("<|notimestamps|>"), prev_sot_token_id=need("<|startofprev|>"),
        max_initial_timestamp_index=50, return_timestamps=False)
    generation.save_pretrained(out_dir)
    save_file(state, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    shutil.copyfile(os.path.join(ct2_dir, "tokenizer.json"), os.path.join(out_dir, "tokenizer.json"))
    specials = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "WhisperTokenizer", "model_max_length": 1024, "add_prefix_space": False,
                   "errors": "replace", **specials}, f, indent=2)
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump(specials, f, indent=2)
    WhisperFeatureExtractor(feature_size=sizes["num_mel_bins"]).save_pretrained(out_dir)
    return sizes


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        sizes = write_checkpoint(sys.argv[1], sys.argv[2])
    except (ConversionError, ct2_model_file.Ct2FormatError, OSError, KeyError) as e:
        print(f"ct2_whisper_to_hf: {e}", file=sys.stderr)
        return 1
    print(f"ct2_whisper_to_hf: {sys.argv[2]}: " + ", ".join(f"{k} {v}" for k, v in sorted(sizes.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
