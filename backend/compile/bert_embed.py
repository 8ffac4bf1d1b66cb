#!/usr/bin/python3
"""Exports a Hugging Face BERT encoder checkpoint used as a sentence embedder (sentence-transformers' layout, e.g.
all-MiniLM-L6-v2: config.json `model_type: bert`, model.safetensors, tokenizer.json, 1_Pooling/config.json with mean
pooling, a 2_Normalize module) as a bucketed `kind: text` model with an `embedding:` section, served by
POST /v1/embeddings:

  /usr/bin/python3 backend/compile/bert_embed.py --checkpoint CKPT_DIR --out REPO/NAME
      [--lengths 16,32,64,128,256] [--batch-sizes 1,4,8] [--target cpu|neuron]

Graph: forward(input_ids [B, L] int64, lengths [B] int64, weights...) -> (embedding [B, hidden] fp32,): BERT
embeddings (token type 0), the encoder with padded keys masked out, mean pooling over each row's real tokens and L2
normalisation, all inside the graph, so padding cannot change a row's vector. The largest length is capped at
max_position_embeddings. The checkpoint's tokenizer.json is copied beside config.yaml; the server adds its
post-processor's [CLS] ... [SEP] and refuses inputs over the largest length (no truncation).
Refused by name: another model_type, position_embedding_type other than absolute, hidden_act other than gelu,
pooling other than mean tokens. Exit codes: 0 ok, 1 export failed or refused, 2 bad arguments.
"""
import argparse
import math
import os
import shutil
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import hf_checkpoint  # noqa: E402
import layers  # noqa: E402

LENGTHS = [16, 32, 64, 128, 256]
BATCH_SIZES = [1, 4, 8]


class SelfAttention(nn.Module):
    """BERT's attention with HF's parameter names (query/key/value; output.dense + LayerNorm applied by the layer)."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def split(y):
            return y.view(b, t, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + key_bias
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)


class DenseNorm(nn.Module):
    """HF's BertSelfOutput / BertOutput: LayerNorm(dense(x) + residual)."""

    def __init__(self, d_in: int, hidden: int, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)  # noqa: N815 (HF's name, so the state dict loads as is)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, eps: float):
        super().__init__()
        self.self = SelfAttention(hidden, heads)
        self.output = DenseNorm(hidden, hidden, eps)

    def forward(self, x, key_bias):
        return self.output(self.self(x, key_bias), x)


class Intermediate(nn.Module):
    def __init__(self, hidden: int, ff: int):
        super().__init__()
        self.dense = nn.Linear(hidden, ff)

    def forward(self, x):
        return F.gelu(self.dense(x))  # erf GELU: HF's "gelu"


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, ff: int, eps: float):
        super().__init__()
        self.attention = Attention(hidden, heads, eps)
        self.intermediate = Intermediate(hidden, ff)
        self.output = DenseNorm(ff, hidden, eps)

    def forward(self, x, key_bias):
        x = self.attention(x, key_bias)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList([Layer(cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"],
                                          cfg["layer_norm_eps"]) for _ in range(cfg["num_hidden_layers"])])


class Embeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hidden = cfg["hidden_size"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], hidden)
        self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], hidden)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=cfg["layer_norm_eps"])  # noqa: N815


class BertSentenceEmbedder(nn.Module):
    """BertModel (no pooler) + mean pooling over real tokens + L2 normalisation (sentence-transformers' pipeline)."""

    def __init__(self, cfg):
        super().__init__()
        self.vocab_size = cfg["vocab_size"]
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor):
        t = input_ids.shape[1]
        mask = layers.length_mask(lengths, t)
        # Padding may hold any int64: replaced before the lookup; real ids are clamped so that one bad id cannot
        # fail the batch (the server refuses ids outside the config's range up front).
        ids = input_ids.masked_fill(~mask, 0).clamp(0, self.vocab_size - 1)
        e = self.embeddings
        positions = torch.arange(t, device=ids.device)
        x = e.word_embeddings(ids) + e.position_embeddings(positions).unsqueeze(0) \
            + e.token_type_embeddings.weight[0]
        x = e.LayerNorm(x)
        # Padded keys get the most negative float added, as transformers' extended attention mask does.
        key_bias = (~mask).to(x.dtype)[:, None, None, :] * torch.finfo(x.dtype).min
        for layer in self.encoder.layer:
            x = layer(x, key_bias)
        weights = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(1) / weights.sum(1).clamp(min=1e-9)  # sentence-transformers' mean pooling
        return (F.normalize(pooled, p=2, dim=1),)


def refusal(ckpt_dir: str, cfg) -> str:
    """Why this checkpoint cannot be exported as is, or ""."""
    if cfg.get("model_type") != "bert":
        return f"model_type {cfg.get('model_type')!r} is not supported (only bert)"
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        return f"position_embedding_type {cfg['position_embedding_type']!r} is not supported (only absolute)"
    if cfg.get("hidden_act") != "gelu":
        return f"hidden_act {cfg.get('hidden_act')!r} is not supported (only gelu)"
    pooling = os.path.join(ckpt_dir, "1_Pooling", "config.json")
    if os.path.exists(pooling):
        modes = {k: v for k, v in hf_checkpoint.read_json(pooling).items() if k.startswith("pooling_mode") and v}
        if list(modes) != ["pooling_mode_mean_tokens"]:
            return f"{pooling}: pooling {sorted(modes)} is not supported (only pooling_mode_mean_tokens)"
    if not os.path.exists(os.path.join(ckpt_dir, "tokenizer.json")):
        return "no tokenizer.json (the server tokenizes with it)"
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True, help="REPO/NAME: the model directory to write")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    parser.add_argument("--target", choices=["cpu", "neuron"], default="cpu")
    parser.add_argument("--reference-cases", type=int, default=4)
    args = parser.parse_args()
    try:
        lengths = [int(v) for v in args.lengths.split(",")]
        batch_sizes = [int(v) for v in args.batch_sizes.split(",")]
    except ValueError:
        lengths = batch_sizes = []
    if not lengths or lengths != sorted(set(lengths)) or lengths[0] < 1 or not batch_sizes or \
            batch_sizes != sorted(set(batch_sizes)) or batch_sizes[0] < 1:
        print("--lengths and --batch-sizes must be positive ascending integers", file=sys.stderr)
        return 2
    try:
        cfg = hf_checkpoint.read_json(os.path.join(args.checkpoint, "config.json"))
        why = refusal(args.checkpoint, cfg)
        if not why and lengths[-1] > cfg["max_position_embeddings"]:
            why = f"largest length {lengths[-1]} exceeds max_position_embeddings {cfg['max_position_embeddings']}"
        if why:
            raise ValueError(f"{args.checkpoint}: {why}")
        state = {k: v.float() for k, v in hf_checkpoint.read_state(args.checkpoint).items()
                 if not k.startswith("pooler.") and k != "embeddings.position_ids"}

        def build():
            model = BertSentenceEmbedder(cfg)
            model.load_state_dict(state, strict=True)  # every weight, named as transformers names them
            return model

        vocab = cfg["vocab_size"]
        out = os.path.abspath(args.out)
        spec = common.ModelSpec(
            name=os.path.basename(out), kind="text",
            inputs=[{"name": "input_ids", "dtype": "INT64", "shape": [-1], "range": [0, vocab - 1]}],
            outputs=[{"name": "embedding", "dtype": "FP32", "shape": [cfg["hidden_size"]]}],
            lengths=lengths, batch_sizes=batch_sizes, seed=0, build=build,
            make_input=lambda n, gen: [torch.randint(0, vocab, (n,), generator=gen, dtype=torch.int64)],
            embedding={"tokenizer": "tokenizer.json", "output": "embedding"})
        torch.set_num_threads(1)
        common.export_model(spec, os.path.dirname(out), args.target, args.reference_cases)
        shutil.copy(os.path.join(args.checkpoint, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    except (ValueError, KeyError, OSError) as e:
        print(f"bert_embed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
