"""Length-aware building blocks shared by the example models.

Every block here takes explicit per-row lengths (or a boolean mask derived from them) so that whatever lies
past a row's real length, padding of any value, never changes the output on the real part. All length
arithmetic is done with tensor ops on `lengths` (never Python branches on values) so that one trace stays
valid for every batch of that shape.
"""
import math

import torch
from torch import nn
import torch.nn.functional as F

# Added (via masked_fill) to attention scores of padded keys. Large enough that exp() underflows to exactly 0
# next to any real score, small enough to stay finite in fp16/bf16 (an -inf would turn an all-masked row into
# NaN, and Neuron may lower the graph to reduced precision).
MASKED_SCORE = -1.0e4


def length_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Bool [B, max_len]: True where position < that row's length."""
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def ceil_div(lengths: torch.Tensor, divisor: int) -> torch.Tensor:
    return torch.div(lengths + (divisor - 1), divisor, rounding_mode="floor")


def conv_out_lengths(lengths: torch.Tensor, kernel: int, stride: int, padding: int) -> torch.Tensor:
    """Same integer formula PyTorch uses for a conv's output size, applied to each row's real length."""
    return torch.div(lengths + 2 * padding - kernel, stride, rounding_mode="floor") + 1


def sinusoidal_positions(length: int, dim: int, device: torch.device) -> torch.Tensor:
    """[length, dim] absolute encoding (sin half, then cos half). Computed per trace: a constant per bucket."""
    pos = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1)
    freqs = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    angles = pos * freqs.unsqueeze(0)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class MaskedSelfAttention(nn.Module):
    """Multi-head self-attention written with matmul/softmax; padded keys get MASKED_SCORE.

    Padded queries still produce (finite, meaningless) rows; later stages mask them again where it matters.
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # each [B, H, T, Dh]
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        # masked_fill (not an add) so that whatever garbage a padded key holds cannot leak through.
        scores = scores.masked_fill(~mask[:, None, None, :], MASKED_SCORE)
        weights = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(weights, v).transpose(1, 2).reshape(b, t, d)
        return self.out(ctx)


class FeedForward(nn.Module):
    """Pre-norm position-wise FFN (position-wise, so padding cannot leak through it)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.up(self.norm(x))))
