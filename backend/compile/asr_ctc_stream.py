"""Example model `asr_ctc_stream`: the cache-aware streaming twin of `asr_ctc` (same vocabulary, sample rate and
frame_samples), random weights. It keeps the stream-step contract (README.md "Cache-aware streaming"): every
frame is computed once, from a chunk of new audio and per-stream state held in the backend's slots.

Architecture (everything causal or chunk-local, so a chunk's output needs no future audio):
  front end  causal log-mel: hop t covers samples [t*HOP + HOP - WIN, t*HOP + HOP), i.e. it ends at its hop's end
             and reads WIN - HOP samples of the previous audio (state `front`: the last 240 samples of the stream)
  subsample  4 consecutive mel hops stacked -> linear (chunk-local: a chunk is CHUNK_FRAMES whole frames)
  blocks     conformer blocks: chunked attention (a frame sees its own chunk and the LEFT_FRAMES frames before it;
             state `kv`: those frames' keys and values per layer) and a causal depthwise convolution (state
             `conv`: the last CONV_KERNEL - 1 inputs per layer)
  head       linear -> log_softmax over the 29 CTC classes
No absolute positions (a stream has no bounded position): order comes from the causal convolutions.

Graphs:
  b<B>_l<L>         forward(audio [B, S], lengths [B]) -> (log_probs [B, T, 29], out_lengths [B]), T = ceil(S / 640):
                    the offline model, over the whole utterance with the streaming chunking (attention masked as
                    chunks of CHUNK_FRAMES frames from sample 0), padding-invariant as the other examples.
  stream_step_b<B>  stream_step(audio [B, CHUNK_SAMPLES], lengths [B], slots [B], reset [B], front, kv, conv, seen)
                    -> log_probs [B, CHUNK_FRAMES, 29]; updates rows `slots` of the four state tensors in place.
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
CHUNK_FRAMES = 4                # output frames per chunk (160 ms)
CHUNK_SAMPLES = CHUNK_FRAMES * FRAME_SAMPLES  # 2560
LEFT_FRAMES = 32                # attention left context: 1.28 s
FRONT_TAIL = WIN - HOP          # 240 samples of earlier audio each hop's window reaches back into
D_MODEL, HEADS, BLOCKS, FF_MULT, CONV_KERNEL = 144, 4, 2, 4, 15
STREAM_SLOTS = 64
STREAM_BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64]


def chunk_attention_allowed(frames: int) -> torch.Tensor:
    """Bool [T, T]: query i may attend key j (the offline twin of the streaming cache): j is in i's chunk or one
    before it, and at most LEFT_FRAMES before i's chunk start."""
    i = torch.arange(frames).unsqueeze(1)
    j = torch.arange(frames).unsqueeze(0)
    chunk_start = torch.div(i, CHUNK_FRAMES, rounding_mode="floor") * CHUNK_FRAMES
    return (j < chunk_start + CHUNK_FRAMES) & (j >= chunk_start - LEFT_FRAMES)


class CausalLogMel(nn.Module):
    """Audio (already preceded by FRONT_TAIL samples of earlier audio, or zeros) -> [B, hops, 80] log-mel."""

    def __init__(self):
        super().__init__()
        self.register_buffer("basis", torch.tensor(asr_ctc.dft_basis(), dtype=torch.float32))
        fb = asr_ctc.mel_filterbank(asr_ctc.N_FFT // 2 + 1, N_MELS, SAMPLE_RATE, asr_ctc.N_FFT)
        self.register_buffer("mel_fb", torch.tensor(fb, dtype=torch.float32))

    def forward(self, audio_with_tail: torch.Tensor) -> torch.Tensor:
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
    def __init__(self):
        super().__init__()
        self.ff1 = layers.FeedForward(D_MODEL, FF_MULT * D_MODEL)
        self.attn_norm = nn.LayerNorm(D_MODEL)
        self.attn = ChunkAttention(D_MODEL, HEADS)
        self.conv = CausalConvModule(D_MODEL, CONV_KERNEL)
        self.ff2 = layers.FeedForward(D_MODEL, FF_MULT * D_MODEL)
        self.out_norm = nn.LayerNorm(D_MODEL)

    def forward(self, x, valid, allowed, earlier_kv, conv_tail):
        """x [B, T, D]; earlier_kv [B, P, 2D] keys|values of the P frames before x (P = 0 offline); conv_tail
        [B, K-1, D]. Returns (y, this input's keys|values [B, T, 2D], conv inputs [B, T, D])."""
        x = x + 0.5 * self.ff1(x)
        q, k, v = self.attn.project(self.attn_norm(x))
        keys = torch.cat([earlier_kv[..., :D_MODEL], k], dim=1)
        values = torch.cat([earlier_kv[..., D_MODEL:], v], dim=1)
        x = x + self.attn.attend(q, keys, values, allowed)
        conv_in = self.conv.conv_input(x, valid)
        x = x + self.conv.finish(torch.cat([conv_tail, conv_in], dim=1))
        x = x + 0.5 * self.ff2(x)
        return self.out_norm(x), torch.cat([k, v], dim=-1), conv_in


class AsrCtcStream(nn.Module):
    def __init__(self):
        super().__init__()
        self.front_end = CausalLogMel()
        self.stack_proj = nn.Linear(STACK * N_MELS, D_MODEL)
        self.blocks = nn.ModuleList([StreamingBlock() for _ in range(BLOCKS)])
        self.head = nn.Linear(D_MODEL, len(VOCAB))

    def _frames(self, audio_with_tail: torch.Tensor, frame_count: int) -> torch.Tensor:
        mel = self.front_end(audio_with_tail)                    # [B, frame_count * STACK, 80]
        b = mel.shape[0]
        return self.stack_proj(mel.reshape(b, frame_count, STACK * N_MELS))

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor):
        """Offline: the whole utterance, chunked from sample 0 exactly as a stream is."""
        b, num_samples = audio.shape
        frames = (num_samples + FRAME_SAMPLES - 1) // FRAME_SAMPLES
        audio = audio.masked_fill(~layers.length_mask(lengths, num_samples), 0.0)
        audio = F.pad(audio, (FRONT_TAIL, frames * FRAME_SAMPLES - num_samples))
        x = self._frames(audio, frames)
        out_lengths = layers.ceil_div(lengths, FRAME_SAMPLES)
        valid = layers.length_mask(out_lengths, frames)
        allowed = chunk_attention_allowed(frames).to(audio.device).unsqueeze(0) & valid.unsqueeze(1)
        no_kv = x.new_zeros(b, 0, 2 * D_MODEL)
        no_tail = x.new_zeros(b, CONV_KERNEL - 1, D_MODEL)
        for block in self.blocks:
            x, _, _ = block(x, valid, allowed, no_kv, no_tail)
        return torch.log_softmax(self.head(x), dim=-1), out_lengths

    def stream_step(self, audio, lengths, slots, reset, front, kv, conv, seen):
        """One chunk per row. lengths: real samples of the row's chunk (CHUNK_SAMPLES but at a stream's end);
        reset 1: the row's stream starts here (its slot's state is read as zeros). State tensors, rows per slot:
        front [S+1, FRONT_TAIL], kv [S+1, BLOCKS, LEFT_FRAMES, 2D], conv [S+1, BLOCKS, K-1, D], seen [S+1, 1]
        (earlier frames of the stream, at most LEFT_FRAMES; a float holding a small integer)."""
        b = audio.shape[0]
        keep = (reset == 0).to(audio.dtype)                      # [B]
        front_rows = front.index_select(0, slots) * keep[:, None]
        kv_rows = kv.index_select(0, slots) * keep[:, None, None, None]
        conv_rows = conv.index_select(0, slots) * keep[:, None, None, None]
        seen_rows = seen.index_select(0, slots) * keep[:, None]
        audio = audio.masked_fill(~layers.length_mask(lengths, CHUNK_SAMPLES), 0.0)
        x = self._frames(torch.cat([front_rows, audio], dim=1), CHUNK_FRAMES)
        valid = layers.length_mask(layers.ceil_div(lengths, FRAME_SAMPLES), CHUNK_FRAMES)   # [B, F]
        # Cached key k (of LEFT_FRAMES) holds the frame LEFT_FRAMES - k before the chunk: real once seen covers it.
        cached = torch.arange(LEFT_FRAMES, device=audio.device).unsqueeze(0) >= (LEFT_FRAMES - seen_rows)
        key_valid = torch.cat([cached, valid], dim=1)                                      # [B, L + F]
        allowed = key_valid.unsqueeze(1).expand(b, CHUNK_FRAMES, LEFT_FRAMES + CHUNK_FRAMES)
        new_kv, new_conv = [], []
        for i, block in enumerate(self.blocks):
            x, kv_here, conv_in = block(x, valid, allowed, kv_rows[:, i], conv_rows[:, i])
            new_kv.append(torch.cat([kv_rows[:, i], kv_here], dim=1)[:, CHUNK_FRAMES:])
            new_conv.append(torch.cat([conv_rows[:, i], conv_in], dim=1)[:, CHUNK_FRAMES:])
        front.index_copy_(0, slots, torch.cat([front_rows, audio], dim=1)[:, -FRONT_TAIL:])
        kv.index_copy_(0, slots, torch.stack(new_kv, dim=1))
        conv.index_copy_(0, slots, torch.stack(new_conv, dim=1))
        seen.index_copy_(0, slots, torch.clamp(seen_rows + CHUNK_FRAMES, max=float(LEFT_FRAMES)))
        return torch.log_softmax(self.head(x), dim=-1)


def state_shapes():
    """Per-slot shape of each state tensor, in the graph's argument order (the backend allocates [slots + 1, ...])."""
    return [{"name": "front", "shape": [FRONT_TAIL]},
            {"name": "kv", "shape": [BLOCKS, LEFT_FRAMES, 2 * D_MODEL]},
            {"name": "conv", "shape": [BLOCKS, CONV_KERNEL - 1, D_MODEL]},
            {"name": "seen", "shape": [1]}]


def new_states(slots: int):
    return [torch.zeros([slots + 1] + s["shape"]) for s in state_shapes()]


def export_stream_graphs(model, out_dir: str, target: str, names, weights):
    """graphs/stream_step_b<B>.pt for every stream batch size (graph format 2: the weights as trailing inputs)."""
    import graph_format
    for b in STREAM_BATCH_SIZES:
        gen = torch.Generator().manual_seed(7 + b)
        example = (torch.randn(b, CHUNK_SAMPLES, generator=gen) * 0.1,
                   torch.full((b,), CHUNK_SAMPLES, dtype=torch.int64),
                   torch.arange(b, dtype=torch.int64) % STREAM_SLOTS,
                   torch.zeros(b, dtype=torch.int64), *new_states(STREAM_SLOTS))
        if names is None:
            raise ValueError("asr_ctc_stream exports graph format 2 only")
        wrapper = graph_format.WeightsAsInputs(model, names, len(example), method="stream_step").eval()
        with torch.no_grad():
            if target == "neuron":
                # UNVERIFIED (no Neuron hardware here); in-place state updates must alias the inputs on Neuron.
                import torch_neuronx
                graph = torch_neuronx.trace(wrapper, example + tuple(weights))
            else:
                graph = torch.jit.freeze(torch.jit.trace(wrapper, example + tuple(weights), check_trace=False))
        torch.jit.save(graph, os.path.join(out_dir, "graphs", f"stream_step_b{b}.pt"))
    print(f"[asr_ctc_stream]   stream_step_b{{{','.join(map(str, STREAM_BATCH_SIZES))}}}.pt", flush=True)


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
        build=AsrCtcStream,
        make_input=asr_ctc.make_input,
        speech={"vocabulary": VOCAB, "blank": 0, "word_separator": " ", "frame_samples": FRAME_SAMPLES,
                "stream_step": {"chunk_samples": CHUNK_SAMPLES, "slots": STREAM_SLOTS,
                                "batch_sizes": STREAM_BATCH_SIZES, "states": state_shapes()}},
        export_extra=export_stream_graphs,
    )
