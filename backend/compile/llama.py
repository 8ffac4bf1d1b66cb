"""The Llama-family decoder (one module, the families' differences as LlamaConfig switches), and the example
generation model `llama_tiny` (small, fixed-seed random weights).

Llama as Hugging Face's LlamaForCausalLM computes it: RMSNorm, rotary position embeddings in the rotate_half
convention, grouped-query attention, a SwiGLU MLP. Parameter names are Hugging Face's
(model.layers.N.self_attn.q_proj.weight, ...), so a state dict moves both ways unchanged. The switches (defaults:
llama_tiny, plain Llama 2) cover the families hf_checkpoint.py maps onto them:
  - head_dim: explicit (Qwen3, Mistral-Nemo) or hidden_size / heads;
  - qkv_bias (Qwen2/2.5), o_bias and mlp_bias (Llama's attention_bias / mlp_bias);
  - qk_norm: an RMSNorm over head_dim on each query and key head before the rotation (Qwen3);
  - tie_word_embeddings: logits from model.embed_tokens.weight, no lm_head parameter (stored once);
  - rope_scaling: {"rope_type": "linear", "factor"} or {"rope_type": "llama3", "factor", "low_freq_factor",
    "high_freq_factor", "original_max_position_embeddings"} (Llama 3.1/3.2), applied to the inverse frequencies
    as transformers does;
  - sliding_window: each position attends to itself and the sliding_window - 1 before it (Mistral); 0 = none.

Four ways to run the same weights (llama_export.py traces the last three; check_generation_padding.py checks that
they agree with the first):
  - LlamaForCausalLM.forward(tokens [1, T]) -> logits [1, T, vocab]: the eager reference, full recompute.
  - PrefillGraph: forward(tokens [1, L], length [1], slot [1], k_cache, v_cache) -> logits [1, vocab] of position
    length-1; writes the prompt's K/V into cache[:, slot, 0:L] in place.
  - PrefillChunkGraph(kv_length K): forward(tokens [1, C], start [1], length [1], slot [1], k_cache, v_cache) ->
    logits [1, vocab] of position start+length-1; one chunk of a prompt whose positions [0, start) are already in
    the slot (earlier chunks, or a cached prefix): writes cache[:, slot, start:start+length] in place (padding rows
    write into the scratch slot), then attends over cache[:, slot, 0:K] causally.
  - DecodeGraph(kv_length K): forward(tokens [B], positions [B], slots [B], k_cache, v_cache) -> logits [B, vocab];
    writes each row's K/V at cache[:, slot, position] in place, then attends over cache[:, slot, 0:K] with
    positions > position masked.
The KV cache tensors are FP32 [layers, slots + 1, context_length, kv_heads, head_dim]; slot `slots` is scratch.
"""
import dataclasses
import math
from typing import Any, Dict, Optional

import torch
from torch import nn
import torch.nn.functional as F

import layers


@dataclasses.dataclass
class LlamaConfig:
    vocab_size: int = 2000
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = 4
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 1024
    head_dim: int = 0               # 0: hidden_size // num_attention_heads
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    tie_word_embeddings: bool = False
    rope_scaling: Optional[Dict[str, Any]] = None
    sliding_window: int = 0         # 0: full causal attention

    def __post_init__(self):
        if not self.head_dim:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                             f"num_key_value_heads {self.num_key_value_heads}")
        rope_inv_freq(self)  # validates rope_scaling


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


ROPE_TYPES = ("default", "linear", "llama3")


def rope_inv_freq(cfg: "LlamaConfig") -> torch.Tensor:
    """The rotary inverse frequencies [head_dim / 2], rope_scaling applied as transformers' rope_type functions
    (modeling_rope_utils: _compute_linear_scaling_rope_parameters, _compute_llama3_parameters) compute them. Both
    types keep the attention scaling at 1. ValueError for another type or a missing parameter."""
    dim = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    scaling = cfg.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise ValueError(f"rope_scaling type {kind!r} is not supported (supported: {', '.join(ROPE_TYPES)})")
    try:
        if kind == "linear":
            return inv_freq / float(scaling["factor"])
        if kind == "llama3":
            factor, low, high = (float(scaling[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
            old_context = float(scaling["original_max_position_embeddings"])
    except KeyError as e:
        raise ValueError(f"rope_scaling {kind}: missing {e.args[0]!r}") from None
    if kind != "llama3":
        return inv_freq
    low_wavelen, high_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    # Long wavelengths are divided by factor, short ones kept, the band between interpolated smoothly.
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor):
    """cos, sin [..., head_dim] for int64 positions [...] (Hugging Face's layout: the frequencies twice)."""
    freqs = positions.float().unsqueeze(-1) * inv_freq.to(positions.device)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def attention_allowed(query_positions: torch.Tensor, key_positions: torch.Tensor, window: int) -> torch.Tensor:
    """bool [..., Tq, Tk]: key position <= query position, and (window > 0) within the last `window` positions
    (transformers' sliding-window mask: key > query - window)."""
    q, k = query_positions.unsqueeze(-1), key_positions.unsqueeze(-2)
    allowed = k <= q
    if window > 0:
        allowed = allowed & (k > q - window)
    return allowed


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.inv_freq = rope_inv_freq(cfg)  # a constant of the traced graphs, not a weight (plain attribute)
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=cfg.qkv_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=cfg.o_bias)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.qk_norm = cfg.qk_norm

    def qkv(self, x: torch.Tensor, positions: torch.Tensor):
        """x [..., hidden], positions [...] -> q [..., heads, Dh], k and v [..., kv_heads, Dh] (q, k rotated)."""
        lead = x.shape[:-1]
        q = self.q_proj(x).view(lead + (self.heads, self.head_dim))
        k = self.k_proj(x).view(lead + (self.kv_heads, self.head_dim))
        v = self.v_proj(x).view(lead + (self.kv_heads, self.head_dim))
        if self.qk_norm:  # Qwen3: per head, before the rotation
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """q [B, Tq, heads, Dh], k/v [B, Tk, kv_heads, Dh], allowed bool [B, Tq, Tk] -> [B, Tq, hidden]."""
        b, tq = q.shape[0], q.shape[1]
        group = self.heads // self.kv_heads
        # Grouped-query attention: query head h uses KV head h // group (Hugging Face's repeat_kv order).
        qg = q.reshape(b, tq, self.kv_heads, group, self.head_dim).permute(0, 2, 3, 1, 4)  # [B, KVH, G, Tq, Dh]
        kt = k.permute(0, 2, 3, 1).unsqueeze(2)                                             # [B, KVH, 1, Dh, Tk]
        vt = v.permute(0, 2, 1, 3).unsqueeze(2)                                             # [B, KVH, 1, Tk, Dh]
        scores = torch.matmul(qg, kt) * (1.0 / math.sqrt(self.head_dim))                  # [B, KVH, G, Tq, Tk]
        scores = scores.masked_fill(~allowed[:, None, None, :, :], layers.MASKED_SCORE)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), vt)                              # [B, KVH, G, Tq, Dh]
        return self.o_proj(ctx.permute(0, 3, 1, 2, 4).reshape(b, tq, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class LlamaModel(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.config = cfg
        self.model = LlamaModel(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Final-normed hidden states [..., hidden] -> logits [..., vocab] (tied: the embedding matrix)."""
        if self.config.tie_word_embeddings:
            return F.linear(hidden, self.model.embed_tokens.weight)
        return self.lm_head(hidden)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        # Ids outside the vocabulary (padding may hold anything) are clamped rather than failing the gather.
        return self.model.embed_tokens(tokens.clamp(0, self.config.vocab_size - 1))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Eager reference: tokens [B, T] -> logits [B, T, vocab], causal, no cache."""
        return self.logits(self.hidden(tokens))

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        """The final-normed hidden states [B, T, hidden] (what lm_head maps to logits)."""
        t = tokens.shape[1]
        positions = torch.arange(t, device=tokens.device)
        allowed = attention_allowed(positions, positions, self.config.sliding_window).unsqueeze(0)  # [1, T, T]
        x = self.embed(tokens)
        for layer in self.model.layers:
            q, k, v = layer.self_attn.qkv(layer.input_layernorm(x), positions)
            x = x + layer.self_attn.attend(q, k, v, allowed)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.model.norm(x)


class PrefillGraph(nn.Module):
    """One prompt of a bucket length L into one slot (see the module comment)."""

    def __init__(self, model: LlamaForCausalLM):
        super().__init__()
        self.m = model

    def forward(self, tokens, length, slot, k_cache, v_cache):
        t = tokens.shape[1]
        positions = torch.arange(t, device=tokens.device)
        # Causal: a real position only ever sees earlier positions, so the padding after the prompt (any ids)
        # cannot reach the real logits. Padding positions' K/V are written too; they are never read (decode
        # overwrites position p before attending to it, and masks positions > p).
        allowed = attention_allowed(positions, positions, self.m.config.sliding_window).unsqueeze(0)
        slot_index = slot.expand(t)
        x = self.m.embed(tokens)
        for i, layer in enumerate(self.m.model.layers):
            q, k, v = layer.self_attn.qkv(layer.input_layernorm(x), positions)
            k_cache[i].index_put_((slot_index, positions), k[0])
            v_cache[i].index_put_((slot_index, positions), v[0])
            x = x + layer.self_attn.attend(q, k, v, allowed)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        last = x[0].index_select(0, (length - 1).clamp(0, t - 1))  # [1, hidden]
        return self.m.logits(self.m.model.norm(last))


class PrefillChunkGraph(nn.Module):
    """One chunk of C prompt tokens at positions [start, start + C) of one slot, attending over the first kv_length
    cache positions (see the module comment)."""

    def __init__(self, model: LlamaForCausalLM, kv_length: int):
        super().__init__()
        self.m = model
        self.kv_length = kv_length

    def forward(self, tokens, start, length, slot, k_cache, v_cache):
        c = tokens.shape[1]
        offsets = torch.arange(c, device=tokens.device)
        positions = start + offsets                                                  # [C]
        real = offsets < length
        # Padding rows write into the scratch slot (the last one), at a position clamped into the cache: the
        # slot's positions past the chunk keep what they hold (a cached prefix's next blocks, later).
        scratch = torch.full_like(offsets, k_cache.shape[1] - 1)
        write_slots = torch.where(real, slot.expand(c), scratch)
        write_positions = positions.clamp(0, k_cache.shape[2] - 1)
        kv = torch.arange(self.kv_length, device=tokens.device)
        allowed = attention_allowed(positions, kv, self.m.config.sliding_window).unsqueeze(0)  # [1, C, K]
        # As in DecodeGraph: zero the values past the chunk's last real position, so that a never-written cache
        # region cannot reach the logits through 0 * NaN.
        unwritten = ~(kv < start + length)[None, :, None, None]                     # [1, K, 1, 1]
        x = self.m.embed(tokens)                                                     # [1, C, hidden]
        for i, layer in enumerate(self.m.model.layers):
            q, k, v = layer.self_attn.qkv(layer.input_layernorm(x), positions)
            # Write first, then read the slot back: the chunk attends to itself and to what came before it.
            k_cache[i].index_put_((write_slots, write_positions), k[0])
            v_cache[i].index_put_((write_slots, write_positions), v[0])
            keys = k_cache[i, :, :self.kv_length].index_select(0, slot)              # [1, K, kv_heads, Dh]
            values = v_cache[i, :, :self.kv_length].index_select(0, slot).masked_fill(unwritten, 0.0)
            x = x + layer.self_attn.attend(q, keys, values, allowed)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        last = x[0].index_select(0, (length - 1).clamp(0, c - 1))                   # [1, hidden]
        return self.m.logits(self.m.model.norm(last))


class DecodeGraph(nn.Module):
    """One token for each of B sequences, attending over the first kv_length cache positions."""

    def __init__(self, model: LlamaForCausalLM, kv_length: int):
        super().__init__()
        self.m = model
        self.kv_length = kv_length

    def forward(self, tokens, positions, slots, k_cache, v_cache):
        kv = torch.arange(self.kv_length, device=tokens.device)
        allowed = attention_allowed(positions.unsqueeze(1), kv, self.m.config.sliding_window)  # [B, 1, K]
        unwritten = ~(kv.unsqueeze(0) <= positions.unsqueeze(1))[:, :, None, None]           # [B, K, 1, 1]
        x = self.m.embed(tokens).unsqueeze(1)                               # [B, 1, hidden]
        for i, layer in enumerate(self.m.model.layers):
            q, k, v = layer.self_attn.qkv(layer.input_layernorm(x), positions.unsqueeze(1))
            # Write first, then read the slot back: the row's own K/V is part of what it attends to.
            k_cache[i].index_put_((slots, positions), k[:, 0])
            v_cache[i].index_put_((slots, positions), v[:, 0])
            keys = k_cache[i, :, :self.kv_length].index_select(0, slots)    # [B, K, kv_heads, Dh]
            # Masked scores are replaced, but a masked value still meets its zero weight in the matmul, and
            # 0 * NaN is NaN: zero the values past each row's position, so a never-written (uninitialised)
            # cache region cannot leak into the logits.
            values = v_cache[i, :, :self.kv_length].index_select(0, slots).masked_fill(unwritten, 0.0)
            x = x + layer.self_attn.attend(q, keys, values, allowed)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.m.logits(self.m.model.norm(x[:, 0]))


def init_weights(model: LlamaForCausalLM, seed: int) -> None:
    """Fixed-seed random weights, scaled so greedy decoding is not degenerate: unit-variance embeddings, Linear
    weights N(0, gain / fan_in) (gain 1 keeps activations at unit scale through the residual stream), an lm_head
    that gives logits a spread of a few units (clear top-1/top-2 margins), norms at 1."""
    gen = torch.Generator().manual_seed(seed)
    cfg = model.config
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name == "model.embed_tokens.weight":
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name == "lm_head.weight":
                p.copy_(torch.randn(p.shape, generator=gen) * (LM_HEAD_SCALE / math.sqrt(cfg.hidden_size)))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * (LINEAR_GAIN / math.sqrt(p.shape[1])))


LINEAR_GAIN = 1.0
LM_HEAD_SCALE = 8.0
SEED = 20261101


def build(cfg: LlamaConfig = None, seed: int = SEED) -> LlamaForCausalLM:
    model = LlamaForCausalLM(cfg or LlamaConfig())
    init_weights(model, seed)
    return model.eval()
