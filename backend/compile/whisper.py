"""Whisper (OpenAI's encoder-decoder speech recognizer) as transformers' WhisperForConditionalGeneration computes it,
split into the static-shape graphs sluice serves, plus the log-mel front end. Parameter names are transformers'
(model.encoder.layers.N.self_attn.q_proj.weight, ...), so its state dict loads unchanged (`load_checkpoint`).

  LogMel: audio f32 [B, 480000] (30 s at 16 kHz, right-padded with zeros) -> [B, 80, 3000], what
    WhisperFeatureExtractor computes: periodic Hann window 400, hop 160, centred frames (reflect padding), the
    power spectrum by a DFT done as a matmul, Slaney-normalised Slaney-scale mel filters (mel_filters(), built
    here), log10 of max(mel, 1e-10), the last frame dropped, floored at each row's max - 8, then (x + 4) / 4.
  EncoderGraph: forward(audio [B, 480000], lengths [B]) -> hidden [B, 1500, d_model] (EncoderBucketGraph: the same
    as the 1-tuple (hidden,), the server's bucket-graph convention). Samples at or past a row's
    length are zeroed first (the house convention: padding may hold anything, NaN included), which is exactly the
    zero padding Whisper itself expects; so one bucket length, Whisper's 30 s, serves every shorter clip.
  PrefillGraph (admission): forward(tokens [1, L], length [1], slot [1], encoder_hidden [1, 1500, d], k_cache,
    v_cache, cross_k, cross_v) -> logits [1, vocab] of position length-1. Writes the sequence's cross-attention
    K/V (computed once from encoder_hidden) into cross_*[:, slot] and the prompt's self-attention K/V into
    *_cache[:, slot, 0:L], in place.
  DecodeGraph(kv_length K): forward(tokens [B], positions [B], slots [B], k_cache, v_cache, cross_k, cross_v) ->
    logits [B, vocab]. Each row writes its K/V at cache[:, slot, position], attends over cache[:, slot, 0:K]
    (positions > position masked) and over its slot's cross K/V.
Caches (FP32, owned by the caller, slot `slots` is scratch for padding rows): self [layers, slots + 1, 448, heads,
head_dim]; cross_k [layers, slots + 1, heads, head_dim, 1500] and cross_v [layers, slots + 1, heads, 1500, head_dim],
laid out as the attention matmuls read them, so a decode step's gather of its rows' slots is the only copy of the
(large: 1500 positions) cross K/V.
"""
import dataclasses
import json
import math
import os
from typing import Dict

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
CHUNK_SAMPLES = 30 * SAMPLE_RATE  # Whisper's one input length
MASKED_SCORE = -1.0e9             # far below any real score: softmax gives exactly 0 to masked keys


@dataclasses.dataclass
class WhisperDims:
    vocab_size: int = 51865
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    num_mel_bins: int = 80
    max_source_positions: int = 1500
    max_target_positions: int = 448

    @staticmethod
    def from_hf_config(path: str) -> "WhisperDims":
        with open(path) as f:
            cfg = json.load(f)
        if cfg.get("model_type") != "whisper":
            raise ValueError(f"{path}: model_type {cfg.get('model_type')!r}, not whisper")
        for key, want in (("activation_function", "gelu"), ("scale_embedding", False)):
            if cfg.get(key, want) != want:
                raise ValueError(f"{path}: {key} {cfg[key]!r}; only {want!r} is built")
        return WhisperDims(**{f.name: int(cfg[f.name]) for f in dataclasses.fields(WhisperDims)})


def _hz_to_slaney_mel(hz: np.ndarray) -> np.ndarray:
    # Slaney's scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above (27 mels per factor 6.4).
    hz = np.asarray(hz, dtype=np.float64)
    mel = 3.0 * hz / 200.0
    log_region = hz >= 1000.0
    return np.where(log_region, 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) * 27.0 / np.log(6.4), mel)


def _slaney_mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    hz = 200.0 * mel / 3.0
    return np.where(mel >= 15.0, 1000.0 * np.exp(np.log(6.4) * (mel - 15.0) / 27.0), hz)


def mel_filters(n_mels: int = 80, n_fft: int = N_FFT, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """[n_fft // 2 + 1, n_mels] triangular filters, equally spaced on the Slaney mel scale from 0 Hz to Nyquist,
    each scaled by 2 / its width in Hz (Slaney normalisation: constant energy per filter)."""
    fft_hz = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    edges = _slaney_mel_to_hz(np.linspace(_hz_to_slaney_mel(0.0), _hz_to_slaney_mel(sample_rate / 2.0), n_mels + 2))
    width = np.diff(edges)
    offset = edges[None, :] - fft_hz[:, None]                        # [bins, n_mels + 2]
    rising = -offset[:, :-2] / width[:-1]
    falling = offset[:, 2:] / width[1:]
    tri = np.maximum(0.0, np.minimum(rising, falling))
    return tri * (2.0 / (edges[2:] - edges[:-2]))[None, :]


class LogMel(nn.Module):
    def __init__(self, n_mels: int):
        super().__init__()
        n = torch.arange(N_FFT, dtype=torch.float64)
        window = 0.5 - 0.5 * torch.cos(2.0 * math.pi * n / N_FFT)  # periodic Hann, as torch.hann_window(400)
        k = torch.arange(N_FFT // 2 + 1, dtype=torch.float64)
        angle = 2.0 * math.pi * n[:, None] * k[None, :] / N_FFT
        # Constants of the traced graph (plain attributes, not weights): windowed DFT bases and the filters.
        self.dft_cos = (window[:, None] * torch.cos(angle)).float()        # [400, 201]
        self.dft_sin = (window[:, None] * torch.sin(angle)).float()
        self.filters = torch.from_numpy(mel_filters(n_mels)).float()       # [201, n_mels]

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """audio [B, 480000] -> log-mel [B, n_mels, 3000]."""
        padded = F.pad(audio.unsqueeze(1), (N_FFT // 2, N_FFT // 2), mode="reflect").squeeze(1)
        frames = padded.unfold(-1, N_FFT, HOP)[:, :-1]                      # [B, 3000, 400]: last frame dropped
        power = torch.matmul(frames, self.dft_cos) ** 2 + torch.matmul(frames, self.dft_sin) ** 2
        log_spec = torch.matmul(power, self.filters).clamp(min=1e-10).log10()   # [B, 3000, n_mels]
        peak = log_spec.amax(dim=(1, 2), keepdim=True)
        log_spec = torch.maximum(log_spec, peak - 8.0)
        return ((log_spec + 4.0) / 4.0).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[:-1] + (self.heads, self.head_dim))

    def keys_values(self, x: torch.Tensor):
        """x [B, T, dim] -> k, v [B, T, heads, head_dim]."""
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def attend(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed=None) -> torch.Tensor:
        """queries from x [B, Tq, dim]; k/v [B, Tk, heads, hd]; allowed bool [B, Tq, Tk] or None (all)."""
        return self.attend_heads(x, k.permute(0, 2, 3, 1), v.transpose(1, 2), allowed)

    def attend_heads(self, x: torch.Tensor, kt: torch.Tensor, vh: torch.Tensor, allowed=None) -> torch.Tensor:
        """attend() with keys as kt [B, heads, hd, Tk] and values as vh [B, heads, Tk, hd]."""
        b, tq = x.shape[0], x.shape[1]
        q = self.split(self.q_proj(x) * (self.head_dim ** -0.5)).transpose(1, 2)    # [B, H, Tq, hd]
        scores = torch.matmul(q, kt)                                                 # [B, H, Tq, Tk]
        if allowed is not None:
            scores = scores.masked_fill(~allowed.unsqueeze(1), MASKED_SCORE)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), vh)                        # [B, H, Tq, hd]
        return self.out_proj(ctx.transpose(1, 2).reshape(b, tq, self.heads * self.head_dim))


class EncoderLayer(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        d = dims.d_model
        self.self_attn = Attention(d, dims.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, dims.encoder_ffn_dim)
        self.fc2 = nn.Linear(dims.encoder_ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.self_attn_layer_norm(x)
        k, v = self.self_attn.keys_values(h)
        x = x + self.self_attn.attend(h, k, v)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class Encoder(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        d = dims.d_model
        self.conv1 = nn.Conv1d(dims.num_mel_bins, d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(dims.max_source_positions, d)
        self.layers = nn.ModuleList([EncoderLayer(dims) for _ in range(dims.encoder_layers)])
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2)   # [B, 1500, d]
        x = x + self.embed_positions.weight
        for layer in self.layers:
            x = layer(x)
        return self.layer_norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        d = dims.d_model
        self.self_attn = Attention(d, dims.decoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = Attention(d, dims.decoder_attention_heads)
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, dims.decoder_ffn_dim)
        self.fc2 = nn.Linear(dims.decoder_ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class Decoder(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        d = dims.d_model
        self.embed_tokens = nn.Embedding(dims.vocab_size, d)
        self.embed_positions = nn.Embedding(dims.max_target_positions, d)
        self.layers = nn.ModuleList([DecoderLayer(dims) for _ in range(dims.decoder_layers)])
        self.layer_norm = nn.LayerNorm(d)


class _Model(nn.Module):
    def __init__(self, dims: WhisperDims):
        super().__init__()
        self.encoder = Encoder(dims)
        self.decoder = Decoder(dims)


class Whisper(nn.Module):
    """transformers' parameter layout (proj_out tied to model.decoder.embed_tokens, not stored)."""

    def __init__(self, dims: WhisperDims):
        super().__init__()
        self.dims = dims
        self.model = _Model(dims)
        self.log_mel = LogMel(dims.num_mel_bins)

    def embed(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        dec = self.model.decoder
        # Out-of-range ids or positions are clamped in the graph, so one bad row cannot fail a batch; the server
        # must still refuse them.
        tokens = tokens.clamp(0, self.dims.vocab_size - 1)
        positions = positions.clamp(0, self.dims.max_target_positions - 1)
        return dec.embed_tokens(tokens) + dec.embed_positions(positions)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.model.decoder.layer_norm(hidden), self.model.decoder.embed_tokens.weight.t())


def load_checkpoint(hf_dir: str) -> Whisper:
    """A Whisper with the weights of a transformers checkpoint dir (config.json + model.safetensors or
    pytorch_model.bin), every tensor as float32; unknown, missing or mis-shaped tensors are refused by name."""
    dims = WhisperDims.from_hf_config(os.path.join(hf_dir, "config.json"))
    model = Whisper(dims)
    safetensors_path = os.path.join(hf_dir, "model.safetensors")
    if os.path.exists(safetensors_path):
        import hf_checkpoint  # reads safetensors with torch alone (no PyPI package)
        state: Dict[str, torch.Tensor] = hf_checkpoint.read_safetensors(safetensors_path)
    else:
        state = torch.load(os.path.join(hf_dir, "pytorch_model.bin"), map_location="cpu")
    state = {k: v for k, v in state.items() if k != "proj_out.weight"}  # tied to embed_tokens
    own = model.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise ValueError(f"{hf_dir}: weights do not match Whisper: missing {missing}, unexpected {unexpected}")
    for k, v in state.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise ValueError(f"{hf_dir}: {k} has shape {list(v.shape)}, the config needs {list(own[k].shape)}")
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval()


class EncoderGraph(nn.Module):
    def __init__(self, model: Whisper):
        super().__init__()
        self.m = model

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        t = audio.shape[1]
        past_end = torch.arange(t, device=audio.device).unsqueeze(0) >= lengths.unsqueeze(1)
        audio = audio.masked_fill(past_end, 0.0)  # masked_fill, not a multiply: the padding may be NaN
        return self.m.model.encoder(self.m.log_mel(audio))


class EncoderBucketGraph(nn.Module):
    """EncoderGraph as a (batch, length) bucket graph of the server's convention: the outputs as a tuple
    (one fixed-shape output here: no output lengths)."""

    def __init__(self, model: Whisper):
        super().__init__()
        self.m = model
        self.encoder = EncoderGraph(model)

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor):
        return (self.encoder(audio, lengths),)


def empty_self_cache(dims: WhisperDims, slots: int) -> torch.Tensor:
    return torch.zeros(dims.decoder_layers, slots + 1, dims.max_target_positions, dims.decoder_attention_heads,
                       dims.d_model // dims.decoder_attention_heads)


def empty_cross_caches(dims: WhisperDims, slots: int):
    """(cross_k [layers, slots + 1, heads, hd, 1500], cross_v [layers, slots + 1, heads, 1500, hd])."""
    lead = (dims.decoder_layers, slots + 1, dims.decoder_attention_heads)
    hd, src = dims.d_model // dims.decoder_attention_heads, dims.max_source_positions
    return torch.zeros(lead + (hd, src)), torch.zeros(lead + (src, hd))


class PrefillGraph(nn.Module):
    """Admission of one sequence: cross K/V into its slot, then its prompt (see the module comment)."""

    def __init__(self, model: Whisper):
        super().__init__()
        self.m = model

    def forward(self, tokens, length, slot, encoder_hidden, k_cache, v_cache, cross_k, cross_v):
        t = tokens.shape[1]
        positions = torch.arange(t, device=tokens.device)
        # Causal: the padding after the prompt cannot reach the real logits; its K/V are written but never read
        # (decode overwrites position p before attending to it and masks positions > p).
        allowed = (positions.unsqueeze(0) <= positions.unsqueeze(1)).unsqueeze(0)   # [1, T, T]
        slot_index = slot.expand(t)
        x = self.m.embed(tokens, positions.unsqueeze(0))
        for i, layer in enumerate(self.m.model.decoder.layers):
            ck, cv = layer.encoder_attn.keys_values(encoder_hidden)                  # [1, 1500, H, hd]
            ck, cv = ck.permute(0, 2, 3, 1), cv.transpose(1, 2)                       # the caches' layouts
            cross_k[i].index_copy_(0, slot, ck)
            cross_v[i].index_copy_(0, slot, cv)
            h = layer.self_attn_layer_norm(x)
            k, v = layer.self_attn.keys_values(h)
            k_cache[i].index_put_((slot_index, positions), k[0])
            v_cache[i].index_put_((slot_index, positions), v[0])
            x = x + layer.self_attn.attend(h, k, v, allowed)
            x = x + layer.encoder_attn.attend_heads(layer.encoder_attn_layer_norm(x), ck, cv)
            x = layer.ffn(x)
        last = x[0].index_select(0, (length - 1).clamp(0, t - 1))                    # [1, d]
        return self.m.logits(last)


class DecodeGraph(nn.Module):
    """One token for each of B sequences, attending over the first kv_length self-attention cache positions."""

    def __init__(self, model: Whisper, kv_length: int):
        super().__init__()
        self.m = model
        self.kv_length = kv_length

    def forward(self, tokens, positions, slots, k_cache, v_cache, cross_k, cross_v):
        kv = torch.arange(self.kv_length, device=tokens.device)
        written = kv.unsqueeze(0) <= positions.unsqueeze(1)                           # [B, K]
        allowed = written.unsqueeze(1)                                                # [B, 1, K]
        unwritten = ~written[:, :, None, None]
        x = self.m.embed(tokens, positions).unsqueeze(1)                              # [B, 1, d]
        for i, layer in enumerate(self.m.model.decoder.layers):
            h = layer.self_attn_layer_norm(x)
            k, v = layer.self_attn.keys_values(h)
            # Write first, then read the slot back: the row's own K/V is part of what it attends to.
            k_cache[i].index_put_((slots, positions), k[:, 0])
            v_cache[i].index_put_((slots, positions), v[:, 0])
            keys = k_cache[i, :, :self.kv_length].index_select(0, slots)
            # A masked value still meets its zero weight in the matmul and 0 * NaN is NaN: zero values past each
            # row's position so a never-written cache region cannot leak in.
            values = v_cache[i, :, :self.kv_length].index_select(0, slots).masked_fill(unwritten, 0.0)
            x = x + layer.self_attn.attend(h, keys, values, allowed)
            ck, cv = cross_k[i].index_select(0, slots), cross_v[i].index_select(0, slots)
            x = x + layer.encoder_attn.attend_heads(layer.encoder_attn_layer_norm(x), ck, cv)
            x = layer.ffn(x)
        return self.m.logits(x[:, 0])
