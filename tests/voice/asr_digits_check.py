#!/usr/bin/python3
"""asr_digits: the exported per-bucket graphs reproduce the trained model, and its held-out WER. CTest runs
  asr_digits_check.py COMPILE_DIR MODELS_DIR HELDOUT_DIR --max-wer W --max-shifted-wer S

1. Every held-out WAV (asr_digits_heldout.py: voices, variants and rates training never used) goes through the
   exported graphs of its bucket, at every compiled batch size, padded with garbage (NaN, +-1e4) past each row's
   end; the log-probs on each row's real frames must match the eager model built from the committed weights
   (asr_digits.build(), batch 1, unpadded) within a bound scaled to their magnitude (float_tolerance.py), and
   the greedy transcripts must be equal.
2. Greedy CTC decoding of the graphs' output: WER per group (`heldout`, `shifted`) must be at most the bounds.
Exit 0 when both hold, 1 otherwise; prints the numbers either way.
"""
import argparse
import collections
import csv
import os
import sys
import wave

import numpy as np
import torch


def read_wav(path):
    with wave.open(path, "rb") as f:
        assert f.getnchannels() == 1 and f.getsampwidth() == 2 and f.getframerate() == 16000, path
        pcm = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2")
    return torch.from_numpy(pcm.astype(np.float32) / 32768.0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("compile_dir")
    p.add_argument("models_dir")
    p.add_argument("heldout_dir")
    p.add_argument("--max-wer", type=float, required=True, help="bound on the `heldout` group's WER")
    p.add_argument("--max-shifted-wer", type=float, required=True, help="bound on the `shifted` group's WER")
    args = p.parse_args()
    sys.path.insert(0, args.compile_dir)
    import asr_digits  # noqa: E402
    import float_tolerance  # noqa: E402  (graph vs eager: two shapes, a bound scaled to the values)
    import asr_digits_corpus as corpus  # noqa: E402
    import graph_format  # noqa: E402
    import yaml  # noqa: E402

    torch.set_num_threads(1)
    model_dir = os.path.join(args.models_dir, "asr_digits")
    with open(os.path.join(model_dir, "config.yaml")) as f:
        config = yaml.safe_load(f)
    lengths, batch_sizes = config["buckets"]["lengths"], config["buckets"]["batch_sizes"]
    if config["speech"]["vocabulary"] != asr_digits.VOCAB:
        print("FAIL: config.yaml's speech vocabulary differs from asr_digits.VOCAB")
        return 1
    with open(os.path.join(args.heldout_dir, "manifest.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        print("FAIL: empty manifest")
        return 1
    eager = asr_digits.build()
    weights = graph_format.read_weights(model_dir)  # None for a format-1 directory
    by_bucket = collections.defaultdict(list)
    for row in rows:
        audio = read_wav(os.path.join(args.heldout_dir, row["file"]))
        bucket = next((n for n in lengths if n >= audio.numel()), None)
        if bucket is None:
            print(f"FAIL: {row['file']} has {audio.numel()} samples, more than the largest bucket {lengths[-1]}")
            return 1
        by_bucket[bucket].append((row, audio))

    gen = torch.Generator().manual_seed(7)
    worst, mismatched, over, graphs_used = 0.0, [], [], set()
    errors, words, eager_out = collections.Counter(), collections.Counter(), {}
    for bucket, items in sorted(by_bucket.items()):
        # Batches of every compiled size in turn, taking the bucket's clips in circular order, until every clip
        # and every batch size have been used: each (batch, length) graph with clips of its length runs.
        pos, k, used_sizes = 0, 0, set()
        while pos < len(items) or len(used_sizes) < len(batch_sizes):
            b = batch_sizes[k % len(batch_sizes)]
            k += 1
            used_sizes.add(b)
            chunk = [items[(pos + i) % len(items)] for i in range(b)]
            pos += b
            graph = graph_format.load_graph(model_dir, f"b{b}_l{bucket}", weights=weights)
            graphs_used.add(f"b{b}_l{bucket}")
            batch = torch.randn(b, bucket, generator=gen) * 1e4  # garbage past each row's end, NaN included
            batch[:, ::97] = float("nan")
            lens = torch.zeros(b, dtype=torch.int64)
            for j, (_, audio) in enumerate(chunk):
                batch[j, :audio.numel()] = audio
                lens[j] = audio.numel()
            with torch.no_grad():
                log_probs, out_lengths = graph(batch, lens)
            for j, (row, audio) in enumerate(chunk):
                if row["file"] not in eager_out:
                    with torch.no_grad():
                        ref, ref_len = eager(audio.unsqueeze(0), torch.tensor([audio.numel()]))
                    eager_out[row["file"]] = ref[0, :int(ref_len[0])]
                ref = eager_out[row["file"]]
                n = ref.shape[0]
                if int(out_lengths[j]) != n:
                    print(f"FAIL: {row['file']}: graph gives {int(out_lengths[j])} frames, eager {n}")
                    return 1
                got = log_probs[j, :n]
                d = float_tolerance.max_diff(got, ref)
                if not d <= float_tolerance.bound(ref):  # `not <=`: a NaN fails too
                    over.append(f"{row['file']} in b{b}_l{bucket}: {d:.2e} > {float_tolerance.bound(ref):.2e}")
                worst = max(worst, d) if d == d else float("nan")
                text = asr_digits.decode_greedy(got)
                if text != asr_digits.decode_greedy(ref):
                    mismatched.append(f"{row['file']} in b{b}_l{bucket}")
                if pos - b + j >= len(items):
                    continue  # a clip seen again to fill a batch: scored once only
                ref_words = row["transcript"].split()
                e = corpus.word_errors(ref_words, text.split())
                errors[row["group"]] += e
                words[row["group"]] += len(ref_words)
                if e:
                    print(f"  {row['file']} [{row['settings']}] ref '{row['transcript']}' hyp '{text}'")

    wer = {g: errors[g] / words[g] for g in words}
    print(f"graphs used: {sorted(graphs_used)}; max |graph - eager| = {worst:.2e} over {len(rows)} clips")
    for g in sorted(wer):
        print(f"WER {g}: {wer[g]:.4f} ({errors[g]} errors / {words[g]} words)")
    ok = True
    if over or mismatched:
        print(f"FAIL: graphs differ from the eager model (over the bound: {over[:4]}; transcripts "
              f"differ on {len(mismatched)} rows: {mismatched[:8]})")
        ok = False
    if wer.get("heldout", 1.0) > args.max_wer:
        print(f"FAIL: held-out WER {wer.get('heldout')} > {args.max_wer}")
        ok = False
    if wer.get("shifted", 1.0) > args.max_shifted_wer:
        print(f"FAIL: shifted WER {wer.get('shifted')} > {args.max_shifted_wer}")
        ok = False
    print("asr_digits_check: " + ("PASSED" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
