#!/usr/bin/python3
"""Synthesizes the English test set of the Whisper checks: whisper_sentences.txt in clips of SENTENCES_PER_CLIP
consecutive sentences (6 to 14 s each: Whisper encodes a 30 s window whatever the clip's length, so several
sentences a clip cost no more encoder time than one), each clip spoken by espeak-ng with one of VOICES and one of
RATES (clip c: voice c mod 6, rate (c + c div 6) mod 3, so each voice speaks at two rates), then resampled by sox
to 16 kHz mono (Whisper's input rate).

  /usr/bin/python3 tests/voice/whisper_testset.py --out DIR [--sentences FILE] [--limit N]

DIR/NNN.wav (16-bit PCM) with NNN.txt (its sentences) beside it, and DIR/manifest.tsv (file, voice, rate, text).
Deterministic for the same espeak-ng and sox builds. Written to a temp dir and renamed into place.
"""
import argparse
import os
import shutil
import subprocess
import sys
import wave
from typing import List, Tuple

import numpy as np

SAMPLE_RATE = 16000
# espeak-ng voice+variant: American and British accents, male and female variants, the Klatt synthesizer.
VOICES = ["en-us", "en-gb", "en-us+f3", "en-gb-x-rp+m3", "en-gb-scotland+f2", "en-us+klatt"]
RATES = [130, 160, 190]  # espeak-ng -s, words per minute (its default is 175)
SENTENCES_PER_CLIP = 3
HERE = os.path.dirname(os.path.abspath(__file__))


def read_sentences(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def settings(clip: int) -> Tuple[str, int]:
    return VOICES[clip % len(VOICES)], RATES[(clip + clip // len(VOICES)) % len(RATES)]


def synthesize(text: str, voice: str, rate: int) -> np.ndarray:
    """int16 mono 16 kHz samples of text. sox writes float32 and the rounding to 16 bits is done here: sox's own
    16-bit output adds random dither, so the same text would give other samples (and transcripts) every run."""
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(rate), "--stdout", text], check=True,
                         capture_output=True).stdout
    raw = subprocess.run(["sox", "-q", "-t", "wav", "-", "-t", "raw", "-e", "floating-point", "-b", "32", "-c",
                          "1", "-r", str(SAMPLE_RATE), "-"], input=wav, check=True, capture_output=True).stdout
    audio = np.frombuffer(raw, dtype="<f4")
    return np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2")


def write_wav(path: str, pcm: np.ndarray) -> None:
    with wave.open(path, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(SAMPLE_RATE)
        f.writeframes(pcm.tobytes())


def read_wav(path: str) -> np.ndarray:
    """float32 samples in [-1, 1) of a 16 kHz mono 16-bit WAV."""
    with wave.open(path, "rb") as f:
        if (f.getnchannels(), f.getsampwidth(), f.getframerate()) != (1, 2, SAMPLE_RATE):
            raise ValueError(f"{path}: not 16 kHz mono 16-bit")
        return np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def read_manifest(folder: str) -> List[Tuple[str, str]]:
    """(wav path, reference text) of each clip of a folder this script wrote."""
    with open(os.path.join(folder, "manifest.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [(os.path.join(folder, r[0]), r[3]) for r in rows]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--sentences", default=os.path.join(HERE, "whisper_sentences.txt"))
    p.add_argument("--limit", type=int, default=0, help="first N clips only (0: all)")
    args = p.parse_args()
    sentences = read_sentences(args.sentences)
    texts = [" ".join(sentences[i:i + SENTENCES_PER_CLIP]) for i in range(0, len(sentences), SENTENCES_PER_CLIP)]
    if args.limit:
        texts = texts[:args.limit]
    out = os.path.abspath(args.out)
    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rows, seconds = ["file\tvoice\trate\ttext"], 0.0
    for k, text in enumerate(texts):
        voice, rate = settings(k)
        pcm = synthesize(text, voice, rate)
        if pcm.size > 30 * SAMPLE_RATE:
            raise SystemExit(f"clip {k} ({voice}, {rate} wpm) is {pcm.size / SAMPLE_RATE:.1f} s: over Whisper's 30 s")
        write_wav(os.path.join(tmp, f"{k:03d}.wav"), pcm)
        with open(os.path.join(tmp, f"{k:03d}.txt"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        rows.append(f"{k:03d}.wav\t{voice}\t{rate}\t{text}")
        seconds += pcm.size / SAMPLE_RATE
    with open(os.path.join(tmp, "manifest.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print(f"whisper test set: {len(texts)} clips, {seconds:.1f} s of audio, in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
