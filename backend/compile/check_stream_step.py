#!/usr/bin/python3
"""Stream-step contract check of an exported cache-aware model directory (README.md "Cache-aware streaming").

Runs several streams of different lengths through the saved stream_step_b<B> graphs chunk by chunk, as the server
does: streams start at different steps (joining a batch already running), share each step's batch in shuffled
rows, reuse a slot another stream freed (reset), and padding rows (garbage audio, the scratch slot) fill every
batch to its bucket. Then compares each stream's frames with the saved offline graph over the whole utterance
(b1_l<bucket>, the same chunking), within atol + rtol * max|offline| (float_tolerance.py), and checks that a step
of padding rows only leaves every real slot's state unchanged (bit for bit: nothing may be written there).

  /usr/bin/python3 backend/compile/check_stream_step.py DIR/asr_ctc_stream [--rtol 1e-5] [--atol 1e-5]
Exit 0: every stream within its bound; 1: a mismatch (printed).
"""
import argparse
import os
import random
import sys
import time

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import float_tolerance  # noqa: E402
import graph_format  # noqa: E402


def offline(model_dir, config, weights, audio):
    bucket = next(length for length in config["buckets"]["lengths"] if length >= audio.shape[0])
    graph = graph_format.load_graph(model_dir, f"b1_l{bucket}", weights=weights).eval()
    padded = torch.zeros(1, bucket)
    padded[0, :audio.shape[0]] = audio
    with torch.no_grad():
        log_probs, out_lengths = graph(padded, torch.tensor([audio.shape[0]]))
    return log_probs[0, :int(out_lengths[0])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("--rtol", type=float, default=float_tolerance.RTOL)
    parser.add_argument("--atol", type=float, default=float_tolerance.ATOL)
    args = parser.parse_args()
    start = time.monotonic()
    with open(os.path.join(args.model_dir, "config.yaml")) as f:
        config = yaml.safe_load(f)
    step = config["speech"]["stream_step"]
    chunk, slots, sizes = step["chunk_samples"], step["slots"], step["batch_sizes"]
    frame_samples = config["speech"]["frame_samples"]
    weights = graph_format.read_weights(args.model_dir)
    graphs = {b: graph_format.load_graph(args.model_dir, f"stream_step_b{b}", weights=weights).eval() for b in sizes}
    states = [torch.zeros([slots + 1] + s["shape"]) for s in step["states"]]
    scratch = slots

    rng = random.Random(5)
    gen = torch.Generator().manual_seed(6)
    # (start step, samples): lengths off the chunk grid, one shorter than a chunk, one a whole number of chunks.
    lengths = [1, 700, chunk, 3 * chunk + 17, 9 * chunk + 1000, 20 * chunk + 640, 31 * chunk - 5]
    streams = [{"audio": 0.1 * torch.randn(n, generator=gen), "start": rng.randint(0, 6), "pos": 0, "out": [],
                "slot": None} for n in lengths]
    free = list(range(slots))
    rng.shuffle(free)
    free = free[:3]  # fewer slots than streams: later streams reuse freed slots (their state must be reset)
    tick, rows_seen = 0, []
    while any(s["pos"] < s["audio"].shape[0] for s in streams):
        for s in streams:
            if s["slot"] is None and s["start"] <= tick and s["pos"] == 0 and free:
                s["slot"], s["reset"] = free.pop(), 1
        active = [s for s in streams if s["slot"] is not None and s["pos"] < s["audio"].shape[0]]
        rng.shuffle(active)
        if active:
            b = next(size for size in sizes if size >= len(active))
            audio = torch.randn(b, chunk, generator=gen) * 1e3  # padding rows and tails: garbage, never zeros
            lens = torch.zeros(b, dtype=torch.int64)
            row_slots = torch.full((b,), scratch, dtype=torch.int64)
            reset = torch.ones(b, dtype=torch.int64)
            for r, s in enumerate(active):
                piece = s["audio"][s["pos"]:s["pos"] + chunk]
                audio[r, :piece.shape[0]] = piece
                lens[r], row_slots[r], reset[r] = piece.shape[0], s["slot"], s["reset"]
            with torch.no_grad():
                out = graphs[b](audio, lens, row_slots, reset, *states)
            for r, s in enumerate(active):
                s["out"].append(out[r, :(int(lens[r]) + frame_samples - 1) // frame_samples].clone())
                s["pos"] += chunk
                s["reset"] = 0
                if s["pos"] >= s["audio"].shape[0]:
                    free.append(s["slot"])
            rows_seen.append((len(active), b))
        tick += 1

    failed = False
    for s in streams:
        got = torch.cat(s["out"])
        want = offline(args.model_dir, config, weights, s["audio"])
        bound = float_tolerance.bound(want, args.rtol, args.atol)
        diff = float_tolerance.max_diff(got, want) if got.shape == want.shape else float("inf")
        ok = diff <= bound
        failed |= not ok
        print(f"stream {s['audio'].shape[0]:6d} samples ({got.shape[0]} frames): max diff {diff:.2e} "
              f"(bound {bound:.2e}) {'ok' if ok else 'MISMATCH'}")

    # Padding rows only: every real slot keeps its state exactly (only the scratch row may change).
    for s in states:
        s[:slots].normal_(generator=gen)
    before = [s[:slots].clone() for s in states]
    for b in sizes:
        with torch.no_grad():
            graphs[b](torch.randn(b, chunk, generator=gen), torch.zeros(b, dtype=torch.int64),
                      torch.full((b,), scratch, dtype=torch.int64), torch.ones(b, dtype=torch.int64), *states)
    touched = [st["name"] for st, a, s in zip(step["states"], before, states) if not torch.equal(a, s[:slots])]
    if touched:
        print(f"padding rows changed real slots of state(s) {touched}")
        failed = True
    else:
        print(f"padding rows left every real slot unchanged ({len(sizes)} batch sizes)")
    print(f"{len(rows_seen)} steps, rows/bucket {rows_seen[:8]}...; {time.monotonic() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
