"""Example model `asr_ctc_stream`: the cache-aware streaming twin of `asr_ctc` (same vocabulary, sample rate and
frame_samples), random weights. It keeps the stream-step contract (README.md "Cache-aware streaming"): every
frame is computed once, from a chunk of new audio and per-stream state held in the backend's slots. The same
architecture with its own settings, trained, is asr_digits_stream (asr_digits_stream.py).

Architecture (everything causal or chunk-local, so a chunk's output needs no future audio):
  front end  causal log-mel: hop t covers samples [t*HOP + HOP - WIN, t*HOP + HOP), i.e. it ends at its hop's end
             and reads WIN - HOP samples of the previous audio (state `front`: the last 240 samples of the stream)
  subsample  4 consecutive mel hops stacked -> linear (chunk-local: a chunk is chunk_frames whole frames)
  blocks     conformer blocks: chunked attention (a frame sees its own chunk and the left_frames frames before it;
             state `kv`: those frames' keys and values per layer) and a causal depthwise convolution (state
             `conv`: the last conv_kernel - 1 inputs per layer)
  head       linear -> log_softmax over the 29 CTC classes
No absolute positions (a stream has no bounded position): order comes from the causal convolutions.

Graphs:
  b<B>_l<L>         forward(audio [B, S], lengths [B]) -> (log_probs [B, T, 29], out_lengths [B]), T = ceil(S / 640):
                    the offline model, over the whole utterance with the streaming chunking (attention masked as
                    chunks of chunk_frames frames from sample 0), padding-invariant as the other examples.
  stream_step_b<B>  stream_step(audio [B, chunk_samples], lengths [B], slots [B], reset [B], front, kv, conv, seen)
                    -> log_probs [B, chunk_frames, 29]; updates rows `slots` of the four state tensors in place.
"""
import math
import os

import torch
from torch import nn
import torch.nn.functional as F

import asr_ctc
import layers

SAMPLE_RATE = asr_ctc.SAMPLE_RATE
WIN, HOP, N_MELS = asr_ctc.WIN, asr_ctc.HOP, asr_ctc.N_MELS
VOCAB = asr_ctc.VOCAB
STACK = 4                       # mel hops per output frame: 4 x 10 ms = 40 ms, asr_ctc's frame_samples
FRAME_SAMPLES = STACK * HOP     # 640
FRONT_TAIL = WIN - HOP          # 240 samples of earlier audio each hop's window reaches back into
STREAM_SLOTS = 64
STREAM_BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64]
# asr_ctc_stream's architecture. chunk_frames: output frames per chunk (2: 80 ms); left_frames: the attention's
# left context (32: 1.28 s). asr_digits_stream (the trained twin) is the same class with its own settings.
# 80 ms chunks, with a step waiting up to one chunk for the other streams (TICK_MS), put nearly every stream in
# every step at 64 streams and keep chunk latency p95 under 300 ms on this project's 2-core VM; with 160 ms chunks a
# whole-chunk wait could not (loadtest/bench/results/streaming.md, 2026-12-06).
ARCH = {"d_model": 144, "heads": 4, "blocks": 2, "ff_mult": 4, "conv_kernel": 15, "chunk_frames": 2,
        "left_frames": 32}
TICK_MS = 80  # speech.stream_step.max_wait_ms: one chunk, the shared tick (every real-time stream has a chunk by then)


def chunk_attention_allowed(frames: int, chunk_frames: int, left_frames: int) -> torch.Tensor:
    """Bool [T, T]: query i may attend key j (the offline twin of the streaming cache): j is in i's chunk or one
    before it, and at most left_frames before i's chunk start."""
    i = torch.arange(frames).unsqueeze(1)
    j = torch.arange(frames).unsqueeze(0)
    chunk_start = torch.div(i, chunk_frames, rounding_mode="floor") * chunk_frames
    return (j < chunk_start + chunk_frames) & (j >= chunk_start - left_frames)


class CausalLogMel(nn.Module):
    """The causal log-mel front end (no parameters)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("basis", torch.tensor(asr_ctc.dft_basis(), dtype=torch.float32))
        fb = asr_ctc.mel_filterbank(asr_ctc.N_FFT // 2 + 1, N_MELS, SAMPLE_RATE, asr_ctc.N_FFT)
        self.register_buffer("mel_fb", torch.tensor(fb, dtype=torch.float32))

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor):
        """A whole utterance from its first sample -> (log-mel [B, frames * STACK, 80], hop counts [B]): every
        output frame's STACK hops, the last frame's computed over zeros past the row's end, as a stream's last
        chunk is. Training computes these once; the offline graph is this + encode()."""
        num_samples = audio.shape[1]
        frames = (num_samples + FRAME_SAMPLES - 1) // FRAME_SAMPLES
        audio = audio.masked_fill(~layers.length_mask(lengths, num_samples), 0.0)
        audio = F.pad(audio, (FRONT_TAIL, frames * FRAME_SAMPLES - num_samples))
        return self.from_tail(audio), layers.ceil_div(lengths, FRAME_SAMPLES) * STACK

    def from_tail(self, audio_with_tail: torch.Tensor) -> torch.Tensor:
        """Audio already preceded by FRONT_TAIL samples of earlier audio (or zeros) -> [B, hops, 80] log-mel."""
        frames = audio_with_tail.unfold(1, WIN, HOP)            # [B, hops, WIN]
        spec = torch.matmul(frames, self.basis)
        half = spec.shape[-1] // 2
        power = spec[..., :half] ** 2 + spec[..., half:] ** 2
        return (torch.log(torch.matmul(power, self.mel_fb) + 1e-6) - asr_ctc.LOG_MEL_MEAN) / asr_ctc.LOG_MEL_STD


class ChunkAttention(nn.Module):
    """Self-attention over [earlier keys | this input]; `allowed` [B or 1, Tq, Tk] says which keys each query sees."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def project(self, x: torch.Tensor):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return q, k, v

    def attend(self, q, k, v, allowed):
        b, tq, d = q.shape
        tk = k.shape[1]
        q = q.reshape(b, tq, self.heads, self.head_dim).transpose(1, 2)
        k = k.reshape(b, tk, self.heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, tk, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        scores = scores.masked_fill(~allowed.unsqueeze(1), layers.MASKED_SCORE)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, tq, d)
        return self.out(ctx)


class CausalConvModule(nn.Module):
    """Conformer conv module with a causal depthwise conv: frame t sees inputs t - (K-1) .. t."""

    def __init__(self, dim: int, kernel: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.pointwise_in = nn.Linear(dim, 2 * dim)
        self.depthwise = nn.Conv1d(dim, dim, kernel, groups=dim)  # no padding: the caller prepends K-1 inputs
        self.depth_norm = nn.LayerNorm(dim)
        self.pointwise_out = nn.Linear(dim, dim)

    def conv_input(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        # Zero past the real end: what the kernel of a later frame would otherwise read.
        return F.glu(self.pointwise_in(self.norm(x)), dim=-1).masked_fill(~valid.unsqueeze(-1), 0.0)

    def finish(self, with_tail: torch.Tensor) -> torch.Tensor:
        y = self.depthwise(with_tail.transpose(1, 2)).transpose(1, 2)
        return self.pointwise_out(F.silu(self.depth_norm(y)))


class StreamingBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, ff_mult: int, conv_kernel: int):
        super().__init__()
        self.d_model = d_model
        self.ff1 = layers.FeedForward(d_model, ff_mult * d_model)
        self.attn_norm = nn.LayerNorm(d_model)
        self.attn = ChunkAttention(d_model, heads)
        self.conv = CausalConvModule(d_model, conv_kernel)
        self.ff2 = layers.FeedForward(d_model, ff_mult * d_model)
        self.out_norm = nn.LayerNorm(d_model)

    def forward(self, x, valid, allowed, earlier_kv, conv_tail):
        """x [B, T, D]; earlier_kv [B, P, 2D] keys|values of the P frames before x (P = 0 offline); conv_tail
        [B, K-1, D]. Returns (y, this input's keys|values [B, T, 2D], conv inputs [B, T, D])."""
        x = x + 0.5 * self.ff1(x)
        q, k, v = self.attn.project(self.attn_norm(x))
        keys = torch.cat([earlier_kv[..., :self.d_model], k], dim=1)
        values = torch.cat([earlier_kv[..., self.d_model:], v], dim=1)
        x = x + self.attn.attend(q, keys, values, allowed)
        conv_in = self.conv.conv_input(x, valid)
        x = x + self.conv.finish(torch.cat([conv_tail, conv_in], dim=1))
        x = x + 0.5 * self.ff2(x)
        return self.out_norm(x), torch.cat([k, v], dim=-1), conv_in


class StreamingConformerCtc(nn.Module):
    """The streaming conformer CTC model; `arch` holds every setting (ARCH's keys)."""

    def __init__(self, d_model: int, heads: int, blocks: int, ff_mult: int, conv_kernel: int, chunk_frames: int,
                 left_frames: int):
        super().__init__()
        self.arch = {"d_model": d_model, "heads": heads, "blocks": blocks, "ff_mult": ff_mult,
                     "conv_kernel": conv_kernel, "chunk_frames": chunk_frames, "left_frames": left_frames}
        self.d_model, self.conv_kernel = d_model, conv_kernel
        self.chunk_frames, self.left_frames = chunk_frames, left_frames
        self.chunk_samples = chunk_frames * FRAME_SAMPLES
        self.front_end = CausalLogMel()
        self.stack_proj = nn.Linear(STACK * N_MELS, d_model)
        self.blocks = nn.ModuleList([StreamingBlock(d_model, heads, ff_mult, conv_kernel) for _ in range(blocks)])
        self.head = nn.Linear(d_model, len(VOCAB))

    def _frames(self, mel: torch.Tensor) -> torch.Tensor:
        b, hops, _ = mel.shape
        return self.stack_proj(mel.reshape(b, hops // STACK, STACK * N_MELS))

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor):
        """Offline: the whole utterance, chunked from sample 0 exactly as a stream is."""
        return self.encode(*self.front_end(audio, lengths))

    def encode(self, mel: torch.Tensor, hop_lengths: torch.Tensor):
        """Log-mel [B, frames * STACK, 80] and hop counts (multiples of STACK, as front_end gives them) -> CTC
        log-probs [B, frames, V] and frame counts. Hops past a row's count are never read."""
        b = mel.shape[0]
        x = self._frames(mel)
        frames = x.shape[1]
        out_lengths = torch.div(hop_lengths, STACK, rounding_mode="floor")
        valid = layers.length_mask(out_lengths, frames)
        allowed = chunk_attention_allowed(frames, self.chunk_frames, self.left_frames).to(mel.device)
        allowed = allowed.unsqueeze(0) & valid.unsqueeze(1)
        no_kv = x.new_zeros(b, 0, 2 * self.d_model)
        no_tail = x.new_zeros(b, self.conv_kernel - 1, self.d_model)
        for block in self.blocks:
            x, _, _ = block(x, valid, allowed, no_kv, no_tail)
        return torch.log_softmax(self.head(x), dim=-1), out_lengths

    def stream_step(self, audio, lengths, slots, reset, front, kv, conv, seen):
        """One chunk per row. lengths: real samples of the row's chunk (chunk_samples but at a stream's end);
        reset 1: the row's stream starts here (its slot's state is read as zeros). State tensors, rows per slot:
        front [S+1, FRONT_TAIL], kv [S+1, blocks, left_frames, 2D], conv [S+1, blocks, K-1, D], seen [S+1, 1]
        (earlier frames of the stream, at most left_frames; a float holding a small integer)."""
        b = audio.shape[0]
        chunk_frames, left_frames = self.chunk_frames, self.left_frames
        keep = (reset == 0).to(audio.dtype)                      # [B]
        front_rows = front.index_select(0, slots) * keep[:, None]
        kv_rows = kv.index_select(0, slots) * keep[:, None, None, None]
        conv_rows = conv.index_select(0, slots) * keep[:, None, None, None]
        seen_rows = seen.index_select(0, slots) * keep[:, None]
        audio = audio.masked_fill(~layers.length_mask(lengths, self.chunk_samples), 0.0)
        x = self._frames(self.front_end.from_tail(torch.cat([front_rows, audio], dim=1)))
        valid = layers.length_mask(layers.ceil_div(lengths, FRAME_SAMPLES), chunk_frames)   # [B, F]
        # Cached key k (of left_frames) holds the frame left_frames - k before the chunk: real once seen covers it.
        cached = torch.arange(left_frames, device=audio.device).unsqueeze(0) >= (left_frames - seen_rows)
        key_valid = torch.cat([cached, valid], dim=1)                                      # [B, L + F]
        allowed = key_valid.unsqueeze(1).expand(b, chunk_frames, left_frames + chunk_frames)
        new_kv, new_conv = [], []
        for i, block in enumerate(self.blocks):
            x, kv_here, conv_in = block(x, valid, allowed, kv_rows[:, i], conv_rows[:, i])
            new_kv.append(torch.cat([kv_rows[:, i], kv_here], dim=1)[:, chunk_frames:])
            new_conv.append(torch.cat([conv_rows[:, i], conv_in], dim=1)[:, chunk_frames:])
        front.index_copy_(0, slots, torch.cat([front_rows, audio], dim=1)[:, -FRONT_TAIL:])
        kv.index_copy_(0, slots, torch.stack(new_kv, dim=1))
        conv.index_copy_(0, slots, torch.stack(new_conv, dim=1))
        seen.index_copy_(0, slots, torch.clamp(seen_rows + chunk_frames, max=float(left_frames)))
        return torch.log_softmax(self.head(x), dim=-1)


def build_asr_ctc_stream() -> StreamingConformerCtc:
    return StreamingConformerCtc(**ARCH)


def state_shapes(arch):
    """Per-slot shape of each state tensor, in the graph's argument order (the backend allocates [slots + 1, ...])."""
    return [{"name": "front", "shape": [FRONT_TAIL]},
            {"name": "kv", "shape": [arch["blocks"], arch["left_frames"], 2 * arch["d_model"]]},
            {"name": "conv", "shape": [arch["blocks"], arch["conv_kernel"] - 1, arch["d_model"]]},
            {"name": "seen", "shape": [1]}]


def new_states(arch, slots: int):
    return [torch.zeros([slots + 1] + s["shape"]) for s in state_shapes(arch)]


def stream_step_speech(arch, max_wait_ms=None) -> dict:
    """The config's speech.stream_step section for a model of this architecture (max_wait_ms: None leaves the
    engine's default, a quarter chunk)."""
    section = {"chunk_samples": arch["chunk_frames"] * FRAME_SAMPLES, "slots": STREAM_SLOTS,
               "batch_sizes": STREAM_BATCH_SIZES, "states": state_shapes(arch)}
    if max_wait_ms is not None:
        section["max_wait_ms"] = max_wait_ms
    return section


def export_stream_graphs(model, out_dir: str, target: str, names, weights):
    """graphs/stream_step_b<B>.pt for every stream batch size (graph format 2: the weights as trailing inputs)."""
    import graph_format
    for b in STREAM_BATCH_SIZES:
        gen = torch.Generator().manual_seed(7 + b)
        example = (torch.randn(b, model.chunk_samples, generator=gen) * 0.1,
                   torch.full((b,), model.chunk_samples, dtype=torch.int64),
                   torch.arange(b, dtype=torch.int64) % STREAM_SLOTS,
                   torch.zeros(b, dtype=torch.int64), *new_states(model.arch, STREAM_SLOTS))
        if names is None:
            raise ValueError("cache-aware streaming models export graph format 2 only")
        wrapper = graph_format.WeightsAsInputs(model, names, len(example), method="stream_step").eval()
        with torch.no_grad():
            if target == "neuron":
                # UNVERIFIED (no Neuron hardware here); in-place state updates must alias the inputs on Neuron.
                import torch_neuronx
                graph = torch_neuronx.trace(wrapper, example + tuple(weights))
            else:
                graph = torch.jit.freeze(torch.jit.trace(wrapper, example + tuple(weights), check_trace=False))
        torch.jit.save(graph, os.path.join(out_dir, "graphs", f"stream_step_b{b}.pt"))
    print(f"[{os.path.basename(out_dir)}]   stream_step_b{{{','.join(map(str, STREAM_BATCH_SIZES))}}}.pt", flush=True)


def spec():
    from common import ModelSpec
    return ModelSpec(
        name="asr_ctc_stream",
        kind="speech",
        inputs=[{"name": "audio", "dtype": "FP32", "shape": [-1], "sample_rate": SAMPLE_RATE}],
        outputs=[{"name": "log_probs", "dtype": "FP32", "shape": [-1, len(VOCAB)]}],
        lengths=[16000, 32000, 64000, 128000, 256000],
        batch_sizes=[1, 2, 4, 8],
        seed=1003,
        build=build_asr_ctc_stream,
        make_input=asr_ctc.make_input,
        speech={"vocabulary": VOCAB, "blank": 0, "word_separator": " ", "frame_samples": FRAME_SAMPLES,
                "stream_step": stream_step_speech(ARCH, TICK_MS)},
        export_extra=export_stream_graphs,
    )
