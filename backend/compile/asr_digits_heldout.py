#!/usr/bin/python3
"""Writes the `asr_digits` held-out test set: voices, variants and speaking rates its training never used.

  /usr/bin/python3 backend/compile/asr_digits_heldout.py --out DIR [--count 120] [--shifted 32] [--seed 4242]

DIR/<group>/NNN.wav (16 kHz mono 16-bit) with NNN.txt beside it (the reference transcript; the layout
`sluice-loadtest --audio-folder DIR/heldout` reads), and DIR/manifest.tsv: file, group, synthesis settings,
transcript. Groups: `heldout` (held-out variants and rates on all accents, two accents never trained on) and
`shifted` (one setting outside the training range too: rate, pitch, word gaps or 5 dB white noise; see
asr_digits_corpus.shifted_utterance). Built at build time (tests/voice/CMakeLists.txt) by espeak-ng and sox;
deterministic for the same espeak-ng/sox builds. Written to a temp dir and renamed into place.
"""
import argparse
import multiprocessing
import os
import random
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import asr_digits_corpus as corpus  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--count", type=int, default=120, help="utterances in the `heldout` group")
    p.add_argument("--shifted", type=int, default=32, help="utterances in the `shifted` group")
    p.add_argument("--seed", type=int, default=4242, help="differs from the training and dev seeds")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()

    start = time.monotonic()
    rng = random.Random(args.seed)
    utts = [("heldout", corpus.random_utterance(rng, heldout=True)) for _ in range(args.count)]
    utts += [("shifted", corpus.shifted_utterance(rng)) for _ in range(args.shifted)]
    with multiprocessing.Pool(args.workers) as pool:
        audios = pool.map(corpus.synthesize, [u for _, u in utts], chunksize=8)

    out = os.path.abspath(args.out)
    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for group in ("heldout", "shifted"):
        os.makedirs(os.path.join(tmp, group))
    rows = ["file\tgroup\tsettings\ttranscript"]
    seconds = 0.0
    for k, ((group, u), audio) in enumerate(zip(utts, audios)):
        name = f"{group}/{k:03d}"
        corpus.write_wav(os.path.join(tmp, name + ".wav"), audio)
        with open(os.path.join(tmp, name + ".txt"), "w") as f:
            f.write(u.text + "\n")
        rows.append(f"{name}.wav\t{group}\t{u.tag()}\t{u.text}")
        seconds += audio.size / corpus.SAMPLE_RATE
    with open(os.path.join(tmp, "manifest.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(tmp, out)
    print(f"asr_digits held-out set: {len(utts)} WAVs ({seconds:.0f} s of audio) in {out} "
          f"({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
