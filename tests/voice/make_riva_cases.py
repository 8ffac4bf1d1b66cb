"""Writes the Riva peer test's audio and its reference transcripts (Debian's python3 + torch).

  make_riva_cases.py MODEL_DIR OUT_DIR

The audio: a fixed-seed speech-like signal (tones under a syllable-rate envelope, plus noise), as 16-bit WAV files
at 16 kHz mono (3 s), 16 kHz stereo (both channels equal: its mono mix is exactly the 16 kHz file), 8 kHz,
44.1 kHz and 48 kHz mono, and a 40 s file longer than the largest bucket. The reference: the model's own graph
(graphs/b1_l<bucket>.pt) on the 16 kHz samples, greedy CTC decoding in Python (collapse repeats, drop blanks, the
vocabulary from config.yaml) — computed independently of the server's C++ decoder. expected.json holds it.
"""
import json
import math
import os
import sys
import wave

import numpy as np
import torch
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend", "compile"))
import graph_format  # noqa: E402


def signal(seconds: float, rate: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    envelope = 0.5 + 0.5 * np.sin(2 * math.pi * 3.0 * t)  # ~3 syllables per second
    x = 0.01 * rng.standard_normal(t.size)
    for f0, amp in ((180.0, 0.2), (720.0, 0.1), (2300.0, 0.05)):
        x += amp * envelope * np.sin(2 * math.pi * f0 * t + rng.uniform(0, 2 * math.pi))
    return np.clip(x, -1.0, 1.0)


def write_wav(path: str, samples: np.ndarray, rate: int, channels: int = 1) -> None:
    pcm = np.round(samples * 32767).astype("<i2")
    if channels > 1:
        pcm = np.repeat(pcm[:, None], channels, axis=1).reshape(-1)
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def greedy(log_probs: np.ndarray, vocabulary, blank: int) -> str:
    best = log_probs.argmax(axis=-1)
    out, previous = [], -1
    for k in best:
        if k != previous and k != blank:
            out.append(vocabulary[k])
        previous = k
    return " ".join("".join(out).split())


def main() -> None:
    model_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    config = yaml.safe_load(open(os.path.join(model_dir, "config.yaml")))
    speech = config["speech"]
    files = {}
    base = signal(3.0, 16000, seed=7)
    write_wav(os.path.join(out_dir, "mono16k.wav"), base, 16000)
    write_wav(os.path.join(out_dir, "stereo16k.wav"), base, 16000, channels=2)
    for rate in (8000, 44100, 48000):
        write_wav(os.path.join(out_dir, f"mono{rate}.wav"), signal(3.0, rate, seed=7), rate)
    write_wav(os.path.join(out_dir, "long40s.wav"), signal(40.0, 16000, seed=8), 16000)

    # What the server feeds the model for mono16k.wav: the 16-bit samples / 32768.
    pcm = np.round(base * 32767).astype(np.int16).astype(np.float32) / 32768.0
    bucket = next(length for length in config["buckets"]["lengths"] if length >= pcm.size)
    graph = graph_format.load_graph(model_dir, f"b1_l{bucket}")
    audio = torch.zeros(1, bucket)
    audio[0, :pcm.size] = torch.from_numpy(pcm)
    with torch.no_grad():
        log_probs, lengths = graph(audio, torch.tensor([pcm.size], dtype=torch.int64))
    frames = int(lengths[0])
    files["mono16k.wav"] = greedy(log_probs[0, :frames].numpy(), speech["vocabulary"], speech.get("blank", 0))
    json.dump({"transcripts": files, "frames": frames}, open(os.path.join(out_dir, "expected.json"), "w"), indent=1)
    print(f"make_riva_cases: reference for mono16k.wav ({frames} frames): {files['mono16k.wav']!r}")


if __name__ == "__main__":
    main()
