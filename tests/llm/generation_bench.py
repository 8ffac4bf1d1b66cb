"""Measures an exported generation model's graphs as the server runs them (weights.pt once, prefill then decode
through the bucket graphs, one intra-op thread): load time, peak RSS of this process, prefill time, and decode
tokens/s at each batch size. Numbers for the README, never pass/fail.

  /usr/bin/python3 tests/llm/generation_bench.py MODEL_DIR [--prompt-length 40] [--new-tokens 64] [--batches 1,4]
"""
import argparse
import os
import resource
import sys
import time

import torch
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "backend", "compile"))
import graph_format  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("--prompt-length", type=int, default=40)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batches", default="1,4")
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.monotonic()
    with open(os.path.join(args.model_dir, "config.yaml")) as f:
        g = yaml.safe_load(f)["generation"]
    weights = graph_format.read_weights(args.model_dir)
    graphs = {}

    def graph(name):
        if name not in graphs:
            graphs[name] = graph_format.load_graph(args.model_dir, name, weights=weights)
        return graphs[name]

    kv = g["kv_cache"]
    shape = (kv["layers"], kv["slots"] + 1, g["context_length"], kv["kv_heads"], kv["head_dim"])
    k, v = torch.zeros(shape), torch.zeros(shape)
    load_s = time.monotonic() - t0
    weight_mib = sum(t.numel() * t.element_size() for t in weights[1]) / 2**20
    cache_mib = 2 * k.numel() * 4 / 2**20
    gen = torch.Generator().manual_seed(1)
    batches = [int(b) for b in args.batches.split(",")]
    bucket = next(b for b in g["prefill_lengths"] if b >= args.prompt_length)
    results = []
    with torch.no_grad():
        for slot in range(max(batches) + 2):  # the last prefill, warm, is the one reported
            ids = torch.randint(0, g["vocab_size"], (1, bucket), generator=gen)
            slot = min(slot, max(batches) - 1)
            t = time.monotonic()
            graph(f"prefill_l{bucket}")(ids, torch.tensor([args.prompt_length]), torch.tensor([slot]), k, v)
            prefill_s = time.monotonic() - t
        for b in batches:
            decode_b = next(x for x in g["decode_batch_sizes"] if x >= b)
            tokens = torch.randint(0, g["vocab_size"], (decode_b,), generator=gen)
            slots = torch.tensor(list(range(b)) + [kv["slots"]] * (decode_b - b))
            # TorchScript's profiling executor optimises a graph on its first calls: warm every graph the loop uses.
            for kvl in sorted({next(x for x in g["kv_lengths"] if x > args.prompt_length + s)
                               for s in range(args.new_tokens)}):
                for _ in range(3):
                    graph(f"decode_b{decode_b}_k{kvl}")(tokens, torch.zeros(decode_b, dtype=torch.int64),
                                                        torch.full((decode_b,), kv["slots"]), k, v)
            t = time.monotonic()
            for step in range(args.new_tokens):
                pos = args.prompt_length + step
                kvl = next(x for x in g["kv_lengths"] if x > pos)
                positions = torch.tensor([pos] * b + [0] * (decode_b - b))
                logits = graph(f"decode_b{decode_b}_k{kvl}")(tokens, positions, slots, k, v)
                tokens = logits.argmax(-1)
            seconds = time.monotonic() - t
            results.append(f"batch {b}: {b * args.new_tokens / seconds:.1f} tokens/s "
                           f"({1000 * seconds / args.new_tokens:.1f} ms/step)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{os.path.basename(os.path.abspath(args.model_dir))}: weights {weight_mib:.0f} MiB, KV cache "
          f"{cache_mib:.0f} MiB ({list(shape)} x2), loaded in {load_s:.1f} s; peak RSS {rss:.0f} MiB; prefill "
          f"{args.prompt_length} tokens (bucket {bucket}) {1000 * prefill_s:.0f} ms; decode {args.new_tokens} steps: "
          + "; ".join(results) + f"; torch {torch.__version__}, 1 thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
