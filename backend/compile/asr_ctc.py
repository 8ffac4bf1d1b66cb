"""Example model `asr_ctc`: 16 kHz PCM -> log-mel (inside the graph) -> small conformer -> CTC log-probs.

Graph: forward(audio [B, S] fp32, lengths [B] int64) -> (log_probs [B, T, 29] fp32, out_lengths [B] int64).
Padding invariance by construction: samples past a row's length are zeroed before framing, frames and every
subsampled step past the row's valid length are zeroed, attention masks padded keys, and the depthwise conv
sees zeros past the real end (exactly what it sees as zero padding when the row runs alone, unpadded).
"""
import math

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

import layers

SAMPLE_RATE = 16000
WIN = 400          # 25 ms
HOP = 160          # 10 ms
N_FFT = 512        # the 400-sample window is zero-padded to 512 for the DFT
N_MELS = 80
# Fixed stand-ins for global CMVN statistics: per-utterance statistics would read padded frames.
LOG_MEL_MEAN = -4.0
LOG_MEL_STD = 4.0
# blank, a-z, space, apostrophe
VOCAB = ["<blank>"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + [" ", "'"]

D_MODEL, HEADS, BLOCKS, FF_MULT, CONV_KERNEL, SUB_CHANNELS = 144, 4, 2, 4, 15, 64


def mel_filterbank(n_bins: int, n_mels: int, sample_rate: int, n_fft: int) -> np.ndarray:
    """[n_bins, n_mels] HTK-scale triangles with Slaney-style area normalisation, 0 Hz .. Nyquist."""
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2), n_mels + 2))
    bin_hz = np.arange(n_bins) * sample_rate / n_fft
    lo, centre, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bin_hz[None, :] - lo) / (centre - lo)
    falling = (hi - bin_hz[None, :]) / (hi - centre)
    tri = np.maximum(0.0, np.minimum(rising, falling)) * (2.0 / (hi - lo))
    return tri.T


def dft_basis() -> np.ndarray:
    """[WIN, 2 * n_bins]: Hann-windowed cos | -sin columns, so one matmul gives real | imaginary parts.

    A matmul instead of torch.fft because FFT ops do not lower well on Neuron.
    """
    n = np.arange(WIN)[:, None]
    k = np.arange(N_FFT // 2 + 1)[None, :]
    window = 0.5 - 0.5 * np.cos(2.0 * math.pi * np.arange(WIN) / WIN)  # periodic Hann
    angle = 2.0 * math.pi * n * k / N_FFT
    return np.concatenate([np.cos(angle), -np.sin(angle)], axis=1) * window[:, None]


class LogMelFrontEnd(nn.Module):
    """[B, S] audio + lengths -> [B, F, 80] normalised log-mel + frame lengths, F = ceil(S / HOP).

    No centring/reflection: frame t covers samples [t*HOP, t*HOP + WIN), the signal is right-padded with
    zeros, and a row has ceil(len / HOP) valid frames (>= 1 for len >= 1), the same count it gets alone.
    """

    def __init__(self):
        super().__init__()
        self.register_buffer("basis", torch.tensor(dft_basis(), dtype=torch.float32))
        fb = mel_filterbank(N_FFT // 2 + 1, N_MELS, SAMPLE_RATE, N_FFT)
        self.register_buffer("mel_fb", torch.tensor(fb, dtype=torch.float32))

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor):
        num_samples = audio.shape[1]
        # masked_fill, not a multiply: padding may hold NaN/inf, and 0 * inf is NaN.
        audio = audio.masked_fill(~layers.length_mask(lengths, num_samples), 0.0)
        num_frames = (num_samples + HOP - 1) // HOP
        audio = F.pad(audio, (0, (num_frames - 1) * HOP + WIN - num_samples))
        frames = audio.unfold(1, WIN, HOP)                      # [B, F, WIN]
        spec = torch.matmul(frames, self.basis)                 # [B, F, 2 * bins]
        half = spec.shape[-1] // 2
        power = spec[..., :half] ** 2 + spec[..., half:] ** 2
        feats = (torch.log(torch.matmul(power, self.mel_fb) + 1e-6) - LOG_MEL_MEAN) / LOG_MEL_STD
        frame_lengths = layers.ceil_div(lengths, HOP)
        feats = feats.masked_fill(~layers.length_mask(frame_lengths, num_frames).unsqueeze(-1), 0.0)
        return feats, frame_lengths


class ConvModule(nn.Module):
    """Conformer conv module: pointwise + GLU, depthwise conv over time, LayerNorm (not BatchNorm: batch
    statistics would mix rows), SiLU, pointwise."""

    def __init__(self, dim: int, kernel: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.pointwise_in = nn.Linear(dim, 2 * dim)
        self.depthwise = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.depth_norm = nn.LayerNorm(dim)
        self.pointwise_out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = F.glu(self.pointwise_in(self.norm(x)), dim=-1)
        # Zero past the real end so the kernel sees what zero padding gives an unpadded row.
        y = y.masked_fill(~mask.unsqueeze(-1), 0.0)
        y = self.depthwise(y.transpose(1, 2)).transpose(1, 2)
        return self.pointwise_out(F.silu(self.depth_norm(y)))


class ConformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, ff_mult: int, kernel: int):
        super().__init__()
        self.ff1 = layers.FeedForward(dim, ff_mult * dim)
        self.attn_norm = nn.LayerNorm(dim)
        self.attn = layers.MaskedSelfAttention(dim, heads)
        self.conv = ConvModule(dim, kernel)
        self.ff2 = layers.FeedForward(dim, ff_mult * dim)
        self.out_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.ff1(x)
        x = x + self.attn(self.attn_norm(x), mask)
        x = x + self.conv(x, mask)
        x = x + 0.5 * self.ff2(x)
        return self.out_norm(x)


class AsrCtc(nn.Module):
    def __init__(self):
        super().__init__()
        self.front_end = LogMelFrontEnd()
        self.sub1 = nn.Conv2d(1, SUB_CHANNELS, 3, stride=2, padding=1)
        self.sub2 = nn.Conv2d(SUB_CHANNELS, SUB_CHANNELS, 3, stride=2, padding=1)
        sub_freq = (N_MELS + 3) // 4  # 80 -> 40 -> 20 mel positions after two stride-2 convs
        self.sub_proj = nn.Linear(SUB_CHANNELS * sub_freq, D_MODEL)
        self.blocks = nn.ModuleList(
            [ConformerBlock(D_MODEL, HEADS, FF_MULT, CONV_KERNEL) for _ in range(BLOCKS)])
        self.head = nn.Linear(D_MODEL, len(VOCAB))

    @staticmethod
    def _subsample(conv: nn.Conv2d, x: torch.Tensor, lengths: torch.Tensor):
        x = F.relu(conv(x))  # [B, C, T', mel']
        lengths = layers.conv_out_lengths(lengths, 3, 2, 1)
        # After the activation: the next conv must read zeros past the real end, not relu(bias).
        x = x.masked_fill(~layers.length_mask(lengths, x.shape[2])[:, None, :, None], 0.0)
        return x, lengths

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor):
        feats, lengths = self.front_end(audio, lengths)
        x, lengths = self._subsample(self.sub1, feats.unsqueeze(1), lengths)
        x, lengths = self._subsample(self.sub2, x, lengths)
        b, c, t, f = x.shape
        x = self.sub_proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
        x = x + layers.sinusoidal_positions(t, D_MODEL, x.device).unsqueeze(0)
        mask = layers.length_mask(lengths, t)
        for block in self.blocks:
            x = block(x, mask)
        return torch.log_softmax(self.head(x), dim=-1), lengths


def make_input(length: int, gen: torch.Generator):
    """One unbatched input list: a few tones plus noise, roughly speech-level amplitude."""
    t = torch.arange(length, dtype=torch.float32) / SAMPLE_RATE
    audio = 0.02 * torch.randn(length, generator=gen)
    for _ in range(3):
        freq = 100.0 + 3000.0 * torch.rand((), generator=gen)
        amp = 0.1 * torch.rand((), generator=gen)
        audio = audio + amp * torch.sin(2.0 * math.pi * freq * t)
    return [audio]


def spec():
    from common import ModelSpec  # late import: common imports nothing model-specific
    return ModelSpec(
        name="asr_ctc",
        kind="speech",
        inputs=[{"name": "audio", "dtype": "FP32", "shape": [-1], "sample_rate": SAMPLE_RATE}],
        outputs=[{"name": "log_probs", "dtype": "FP32", "shape": [-1, len(VOCAB)]}],
        lengths=[16000, 32000, 64000, 128000, 256000],
        batch_sizes=[1, 2, 4, 8],
        seed=1001,
        build=AsrCtc,
        make_input=make_input,
        # What the voice API needs to decode: the CTC symbols, and 4x subsampling of 10 ms hops = 640 samples.
        speech={"vocabulary": VOCAB, "blank": 0, "word_separator": " ", "frame_samples": HOP * 4},
    )
