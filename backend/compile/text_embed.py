"""Example model `text_embed`: token ids -> 2-layer masked transformer encoder -> mean-pooled L2-normed vector.

Graph: forward(input_ids [B, L] int64, lengths [B] int64) -> (embedding [B, 256] fp32,). The output has no
variable axis, so the tuple carries no lengths element.
"""
import torch
from torch import nn
import torch.nn.functional as F

import layers

VOCAB_SIZE = 8192
D_MODEL, HEADS, LAYERS, FF_DIM, OUT_DIM = 256, 4, 2, 1024, 256


class EncoderLayer(nn.Module):
    """Pre-norm transformer layer. Written out by hand: nn.TransformerEncoderLayer's fast path misbehaves
    when traced with masks."""

    def __init__(self):
        super().__init__()
        self.attn_norm = nn.LayerNorm(D_MODEL)
        self.attn = layers.MaskedSelfAttention(D_MODEL, HEADS)
        self.ff = layers.FeedForward(D_MODEL, FF_DIM)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), mask)
        return x + self.ff(x)


class TextEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB_SIZE, D_MODEL)
        self.layers = nn.ModuleList([EncoderLayer() for _ in range(LAYERS)])
        self.final_norm = nn.LayerNorm(D_MODEL)
        self.proj = nn.Linear(D_MODEL, OUT_DIM)

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor):
        t = input_ids.shape[1]
        mask = layers.length_mask(lengths, t)
        # Padding may hold any int64 (negative, >= vocab): replace it before the lookup. Real ids are clamped
        # too, so one bad id cannot make the CPU gather throw and fail every request in the batch (or read
        # out of bounds on an accelerator); the server should still reject ids >= 8192 up front.
        ids = input_ids.masked_fill(~mask, 0).clamp(0, VOCAB_SIZE - 1)
        x = self.tokens(ids) + layers.sinusoidal_positions(t, D_MODEL, ids.device).unsqueeze(0)
        for layer in self.layers:
            x = layer(x, mask)
        x = self.final_norm(x).masked_fill(~mask.unsqueeze(-1), 0.0)
        # clamp: lengths >= 1 in practice; keeps a zero-length row finite instead of dividing by zero.
        pooled = x.sum(dim=1) / lengths.clamp(min=1).unsqueeze(1).to(x.dtype)
        return (F.normalize(self.proj(pooled), dim=-1),)


def make_input(length: int, gen: torch.Generator):
    return [torch.randint(0, VOCAB_SIZE, (length,), generator=gen, dtype=torch.int64)]


def spec():
    from common import ModelSpec
    return ModelSpec(
        name="text_embed",
        kind="text",
        inputs=[{"name": "input_ids", "dtype": "INT64", "shape": [-1], "range": [0, VOCAB_SIZE - 1]}],
        outputs=[{"name": "embedding", "dtype": "FP32", "shape": [OUT_DIM]}],
        lengths=[32, 64, 128, 256, 512],
        batch_sizes=[1, 4, 8],
        seed=2002,
        build=TextEmbed,
        make_input=make_input,
    )
