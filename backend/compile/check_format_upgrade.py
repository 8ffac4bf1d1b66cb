#!/usr/bin/python3
"""Checks that a graph format 2 export (weights.pt + weight-free graphs) computes exactly what the format 1 export
it replaces computed: every graph of NEW against the same-named graph of OLD on the same random inputs (random
padding and lengths; for generation graphs random caches, updated in place), outputs and caches compared bit for bit.

  /usr/bin/python3 backend/compile/check_format_upgrade.py OLD/llama_tiny NEW/llama_tiny
Exits 0 when every graph is bit-identical, 1 otherwise.
"""
import os
import sys

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_format  # noqa: E402


def random_args(cfg, name, gen):
    """The graph's inputs (generation graphs: without the caches) on random values."""
    if cfg.get("kind") == "generation":
        g, kv = cfg["generation"], cfg["generation"]["kv_cache"]
        if name.startswith("prefill_l"):
            length = int(name[len("prefill_l"):])
            return (torch.randint(0, g["vocab_size"], (1, length), generator=gen), torch.tensor([max(1, length - 5)]),
                    torch.tensor([3 % kv["slots"]]))
        b, k = (int(x) for x in name[len("decode_b"):].split("_k"))
        slots = torch.randperm(kv["slots"], generator=gen)[:b] if b <= kv["slots"] else torch.arange(b) % kv["slots"]
        return (torch.randint(0, g["vocab_size"], (b,), generator=gen), torch.randint(0, k, (b,), generator=gen), slots)
    b, length = (int(x) for x in name[1:].split("_l"))
    inputs = []
    for decl in cfg["inputs"]:
        shape = (b, length) + tuple(decl["shape"][1:])
        inputs.append(torch.randn(shape, generator=gen) if decl["dtype"] == "FP32"
                      else torch.randint(0, 9000, shape, generator=gen))
    return tuple(inputs) + (torch.randint(1, length + 1, (b,), generator=gen),)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    old_dir, new_dir = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    with open(os.path.join(new_dir, "config.yaml")) as f:
        cfg = yaml.safe_load(f)
    weights = graph_format.read_weights(new_dir)
    if weights is None or graph_format.read_weights(old_dir) is not None:
        print(f"expected {new_dir} in format 2 (weights.pt) and {old_dir} in format 1", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(7)
    names = sorted(f[:-3] for f in os.listdir(os.path.join(new_dir, "graphs")) if f.endswith(".pt"))
    different = []
    for name in names:
        old = graph_format.load_graph(old_dir, name)
        new = graph_format.load_graph(new_dir, name, weights=weights)
        args = random_args(cfg, name, gen)
        with torch.no_grad():
            if cfg.get("kind") == "generation":
                g, kv = cfg["generation"], cfg["generation"]["kv_cache"]
                shape = (kv["layers"], kv["slots"] + 1, g["context_length"], kv["kv_heads"], kv["head_dim"])
                k, v = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
                k2, v2 = k.clone(), v.clone()
                same = torch.equal(old(*args, k, v), new(*args, k2, v2)) and torch.equal(k, k2) and torch.equal(v, v2)
            else:
                same = all(torch.equal(a, b) for a, b in zip(old(*args), new(*args)))
        if not same:
            different.append(name)
            print(f"DIFFERENT: {name}")
    print(f"{new_dir}: {len(names) - len(different)} of {len(names)} graphs bit-identical to {old_dir}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
