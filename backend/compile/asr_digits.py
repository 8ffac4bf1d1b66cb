"""Example model `asr_digits`: a small CTC recognizer for digits and a few dozen command words, TRAINED on
synthetic espeak-ng speech (asr_digits_train.py); its weights are committed in weights/asr_digits.pt.

A toy vocabulary on synthetic voices: it exists so that transcripts and WER through the voice API mean
something. Same architecture family and graph convention as asr_ctc, built from asr_ctc's own blocks (log-mel
front end inside the graph, 2x stride-2 conv subsampling, masked conformer blocks, CTC over characters), only
smaller, so padding invariance and bucketing hold exactly as they do for asr_ctc.

Graph: forward(audio [B, S] fp32 @16 kHz, lengths [B] int64) -> (log_probs [B, T, 29], out_lengths [B] int64),
T = ceil(ceil(ceil(S / 160) / 2) / 2). The export loads the committed weights; it never trains.
"""
import os

import torch
from torch import nn

import asr_ctc
import layers

WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights", "asr_digits.pt")
VOCAB = asr_ctc.VOCAB  # blank, a-z, space, apostrophe: words are spelled out ("four two")

# Every architecture setting; the weights file records them too and build() checks they agree.
ARCH = {"d_model": 96, "heads": 4, "blocks": 2, "ff_mult": 2, "conv_kernel": 15, "sub_channels": 16}


class AsrDigits(nn.Module):
    def __init__(self, d_model: int, heads: int, blocks: int, ff_mult: int, conv_kernel: int,
                 sub_channels: int):
        super().__init__()
        self.d_model = d_model
        self.front_end = asr_ctc.LogMelFrontEnd()
        self.sub1 = nn.Conv2d(1, sub_channels, 3, stride=2, padding=1)
        self.sub2 = nn.Conv2d(sub_channels, sub_channels, 3, stride=2, padding=1)
        self.sub_proj = nn.Linear(sub_channels * ((asr_ctc.N_MELS + 3) // 4), d_model)
        self.blocks = nn.ModuleList(
            [asr_ctc.ConformerBlock(d_model, heads, ff_mult, conv_kernel) for _ in range(blocks)])
        self.head = nn.Linear(d_model, len(VOCAB))

    def encode(self, feats: torch.Tensor, frame_lengths: torch.Tensor):
        """Log-mel [B, F, 80] (zero past each row's frames, as the front end leaves it) -> CTC log-probs.

        Training calls this on precomputed features; forward() is front end + encode, exactly.
        """
        x, lengths = asr_ctc.AsrCtc._subsample(self.sub1, feats.unsqueeze(1), frame_lengths)
        x, lengths = asr_ctc.AsrCtc._subsample(self.sub2, x, lengths)
        b, c, t, f = x.shape
        x = self.sub_proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
        x = x + layers.sinusoidal_positions(t, self.d_model, x.device).unsqueeze(0)
        mask = layers.length_mask(lengths, t)
        for block in self.blocks:
            x = block(x, mask)
        return torch.log_softmax(self.head(x), dim=-1), lengths

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor):
        return self.encode(*self.front_end(audio, lengths))


def build_untrained() -> AsrDigits:
    return AsrDigits(**ARCH)


def build(path: str = WEIGHTS) -> AsrDigits:
    """The trained model from the committed weights file (fails loudly if it is missing or mismatched)."""
    return load_trained(build_untrained(), path, "asr_digits", ARCH, "asr_digits.py")


def load_trained(model: nn.Module, path: str, name: str, arch: dict, source: str) -> nn.Module:
    """`model` (untrained, of `arch`) with the weights a training run saved to `path` (asr_digits_train.py)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name}: weights file {path} is missing; it is committed with the "
                                f"repository (re-create it with backend/compile/asr_digits_train.py --model {name})")
    saved = torch.load(path, map_location="cpu")
    if saved["arch"] != arch or saved["vocab"] != VOCAB:
        raise ValueError(f"{name}: {path} was trained with arch {saved['arch']} / its own vocabulary, "
                         f"but {source} declares {arch}; retrain or fix ARCH")
    # Stored as fp16 to halve the file; the buffers (DFT basis, mel filters) are rebuilt, not stored.
    state = {k: v.float() for k, v in saved["state_dict"].items()}
    state.update({k: v for k, v in model.state_dict().items() if k.startswith("front_end.")})
    model.load_state_dict(state)
    return model.eval()


def decode_greedy(log_probs: torch.Tensor) -> str:
    """[T, V] -> text: best class per frame, merge repeats, drop blanks (what the voice API does)."""
    best = log_probs.argmax(dim=-1).tolist()
    out, prev = [], -1
    for k in best:
        if k != prev and k != 0:
            out.append(VOCAB[k])
        prev = k
    return " ".join("".join(out).split())


def spec():
    from common import ModelSpec  # late import: common imports nothing model-specific
    return ModelSpec(
        name="asr_digits",
        kind="speech",
        inputs=[{"name": "audio", "dtype": "FP32", "shape": [-1], "sample_rate": asr_ctc.SAMPLE_RATE}],
        outputs=[{"name": "log_probs", "dtype": "FP32", "shape": [-1, len(VOCAB)]}],
        lengths=[16000, 32000, 64000, 128000],  # 1..8 s: spoken commands and phone numbers
        batch_sizes=[1, 2, 4, 8],
        seed=1003,  # unused by build() (the weights are loaded), kept for reference-case generation
        build=build,
        make_input=asr_ctc.make_input,
        speech={"vocabulary": VOCAB, "blank": 0, "word_separator": " ", "frame_samples": asr_ctc.HOP * 4},
    )
