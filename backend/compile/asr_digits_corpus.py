"""Synthetic speech for the `asr_digits` example model: espeak-ng voices and variants, sox resampling, noise.

Shared by the training script (asr_digits_train.py, run by hand) and the build-time held-out set
(asr_digits_heldout.py). Everything is seeded: the same seed gives the same transcripts, synthesis settings and
noise. Training and held-out draw from disjoint voice variants and disjoint speaking rates, and two accents
(en-029, en-us-nyc) are held out entirely, so the held-out WER measures speakers the model never heard.

One utterance: `espeak-ng -v ACCENT+VARIANT -s WPM -p PITCH -a AMP -g GAP --stdout TEXT` (22050 Hz) piped
into `sox` that resamples through an intermediate rate (8000..22050 Hz: band-limits like a phone line or a cheap
mic) to 16 kHz float, optionally band-passes; then seeded white or pink-ish noise at an SNR is added in numpy,
and the result is peak-limited to [-1, 1].
"""
import dataclasses
import random
import subprocess
from typing import List, Optional

import numpy as np

SAMPLE_RATE = 16000

DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
COMMANDS = ["call", "dial", "stop", "next", "back", "yes", "no", "go", "up", "down", "left", "right",
            "play", "pause", "start", "cancel", "help", "repeat", "open", "close", "on", "off", "menu",
            "home", "answer", "redial", "mute", "volume", "hold", "send", "delete", "skip", "select", "clear",
            "record", "ten", "twenty", "hundred", "okay"]
WORDS = DIGITS + COMMANDS

# Accents (espeak-ng English voices). en-029 and en-us-nyc are never trained on.
TRAIN_ACCENTS = ["en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-gbcwmd"]
HELDOUT_ACCENTS = ["en-029", "en-us-nyc"]

# Voice variants (espeak-ng-data/voices/!v/). Robotic, whispering and novelty variants are left out.
TRAIN_VARIANTS = ["m1", "m2", "m3", "m5", "m6", "m7", "f1", "f2", "f3", "f5", "klatt", "klatt2", "klatt4",
                  "klatt6", "adam", "Alex", "Alicia", "Andrea", "aunty", "belinda", "benjamin", "boris",
                  "caleb", "david", "ed", "edward", "Gene", "iven", "iven2", "Jacky", "john", "Lee", "max",
                  "Michael", "Mike", "norbert", "paul", "rob", "robert", "steph", "steph3", "victor",
                  "shelby", "sandro", "grandpa", "Annie", "Hugo", "michel"]
HELDOUT_VARIANTS = ["m4", "m8", "f4", "klatt3", "klatt5", "iven3", "steph2", "linda", "quincy", "zac",
                    "travis", "Gene2", "edward2", "grandma", "Andy", "Denis"]
assert not set(TRAIN_VARIANTS) & set(HELDOUT_VARIANTS)

# Speaking rates (words per minute): interleaved grids, never shared.
TRAIN_SPEEDS = [120, 135, 150, 165, 180, 195]
HELDOUT_SPEEDS = [128, 143, 158, 172, 188]


@dataclasses.dataclass
class Utterance:
    text: str
    accent: str
    variant: str
    speed: int          # espeak-ng -s, words per minute
    pitch: int          # espeak-ng -p, 0..99
    amplitude: int      # espeak-ng -a, 0..200
    gap: int            # espeak-ng -g, extra pause between words in 10 ms units
    mid_rate: int       # sox resamples 22050 -> mid_rate -> 16000 Hz
    bandpass: bool      # sox sinc 200-3400 Hz (telephone band)
    snr_db: Optional[float]   # None: no noise
    pink: bool          # noise colour: pink-ish (one-pole lowpassed) or white
    seed: int           # noise seed

    def tag(self) -> str:
        return (f"{self.accent}+{self.variant} s{self.speed} p{self.pitch} a{self.amplitude} g{self.gap} "
                f"r{self.mid_rate}{' bp' if self.bandpass else ''} "
                f"snr{'-' if self.snr_db is None else round(self.snr_db)}")


def random_text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:    # a digit string: phone numbers, PINs
        words = [rng.choice(DIGITS) for _ in range(rng.randint(1, 7))]
    elif kind < 0.65:  # one to three commands
        words = [rng.choice(COMMANDS) for _ in range(rng.randint(1, 3))]
    elif kind < 0.85:  # "call four one five ..."
        words = [rng.choice(["call", "dial", "redial", "send"])]
        words += [rng.choice(DIGITS) for _ in range(rng.randint(2, 6))]
    else:              # anything from the vocabulary
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 5))]
    return " ".join(words)


def random_utterance(rng: random.Random, heldout: bool) -> Utterance:
    accents = HELDOUT_ACCENTS + TRAIN_ACCENTS if heldout else TRAIN_ACCENTS
    return Utterance(
        text=random_text(rng),
        accent=rng.choice(accents),
        variant=rng.choice(HELDOUT_VARIANTS if heldout else TRAIN_VARIANTS),
        speed=rng.choice(HELDOUT_SPEEDS if heldout else TRAIN_SPEEDS),
        pitch=rng.randint(20, 80),
        amplitude=rng.randint(40, 180),
        gap=rng.choice([0, 0, 0, 1, 3, 6]),
        mid_rate=rng.choice([8000, 11025, 16000, 22050]),
        bandpass=rng.random() < 0.15,
        snr_db=None if rng.random() < 0.25 else rng.uniform(8.0, 35.0),
        pink=rng.random() < 0.5,
        seed=rng.getrandbits(31))


def shifted_utterance(rng: random.Random) -> Utterance:
    """A held-out utterance with one synthesis setting outside everything training used: a rate below or above
    the training range, an extreme pitch, long pauses between words, or heavy noise."""
    u = random_utterance(rng, heldout=True)
    change = rng.randrange(4)
    if change == 0:
        u.speed = rng.choice([105, 215])
    elif change == 1:
        u.pitch = rng.choice([5, 95])
    elif change == 2:
        u.gap = 15
    else:
        u.snr_db, u.pink = 5.0, False
    return u


def synthesize(u: Utterance) -> np.ndarray:
    """float32 mono 16 kHz samples of one utterance (see the module docstring)."""
    espeak = ["espeak-ng", "-v", f"{u.accent}+{u.variant}", "-s", str(u.speed), "-p", str(u.pitch),
              "-a", str(u.amplitude), "-g", str(u.gap), "--stdout", u.text]
    effects = ["rate", "-m", str(u.mid_rate)]
    if u.bandpass:
        effects += ["sinc", "200-3400"]
    sox = ["sox", "-q", "-t", "wav", "-", "-t", "raw", "-e", "floating-point", "-b", "32", "-c", "1",
           "-r", str(SAMPLE_RATE), "-"] + effects
    wav = subprocess.run(espeak, check=True, capture_output=True).stdout
    raw = subprocess.run(sox, input=wav, check=True, capture_output=True).stdout
    audio = np.frombuffer(raw, dtype=np.float32).copy()
    if u.snr_db is not None and audio.size:
        rng = np.random.default_rng(u.seed)
        noise = rng.standard_normal(audio.size).astype(np.float32)
        if u.pink:  # one-pole lowpass: energy tilted to low frequencies, like room/hum noise
            noise = _one_pole(noise, 0.95)
        signal_power = float(np.mean(audio ** 2)) + 1e-12
        noise *= np.sqrt(signal_power / (float(np.mean(noise ** 2)) + 1e-12) / 10.0 ** (u.snr_db / 10.0))
        audio = audio + noise
    return np.clip(audio, -1.0, 1.0).astype(np.float32)


def _one_pole(x: np.ndarray, a: float) -> np.ndarray:
    """The one-pole lowpass y[n] = a*y[n-1] + x[n], applied in the frequency domain (H = 1 / (1 - a e^-jw);
    circular, which does not matter for noise): no per-sample Python loop and no scipy."""
    spectrum = np.fft.rfft(x)
    w = np.arange(spectrum.size) * np.pi / max(1, spectrum.size - 1)
    return np.fft.irfft(spectrum / (1.0 - a * np.exp(-1j * w)), n=x.size).astype(np.float32)


def write_wav(path: str, audio: np.ndarray) -> None:
    """16-bit PCM mono WAV at 16 kHz (what a user's recorder would write)."""
    import wave
    pcm = np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2")
    with wave.open(path, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(SAMPLE_RATE)
        f.writeframes(pcm.tobytes())


def word_errors(ref: List[str], hyp: List[str]) -> int:
    """Levenshtein distance over words (substitutions + insertions + deletions)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]
