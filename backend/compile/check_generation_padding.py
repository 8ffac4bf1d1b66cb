#!/usr/bin/python3
"""Checks the traced graphs of an exported generation model directory (config.yaml, graphs/, tokenizer.model,
reference_generation.json; hf/ when present) the way the C++ backend uses them:

  1. in place: a prefill and a decode graph update the k_cache/v_cache tensors passed in, only at the prompt's
     slot and positions (every other slot, the scratch slot included, stays untouched);
  2. eager: prefill logits equal the eager model's (llama.py with hf/pytorch_model.bin), when hf/ exists;
  3. prompt padding: the same prompt in the two smallest prefill buckets (garbage ids in the padding) gives the
     same logits and the same cache contents at the real positions;
  4. batch padding: decode at batch 4 with 2 real rows + 2 padding rows (scratch slot, position 0, token 0)
     equals each real row alone at batch 1, logits and cache; NaN in never-written cache positions is not read;
  5. KV length: the smallest two KV lengths agree for positions below the smaller;
  6. generation: greedy prefill + decode through the graphs (each case alone at batch 1, and all cases together
     in the largest decode batch) gives the reference output_ids, leaving them only at a near tie (a reference
     top-2 margin below float_tolerance.NEAR_TIE: float rounding of another shape can swap such logits).
  --same-as DIR2: every graph DIR2 also has gives the same logits and cache on the same inputs (a re-export,
  e.g. llama_export.py --checkpoint DIR/hf, must be identical).

  /usr/bin/python3 backend/compile/check_generation_padding.py MODELS/llama_tiny [--rtol 1e-5] [--atol 1e-5]
      [--same-as DIR2]
Checks 2-5 compare two graph shapes (or a graph and eager PyTorch): their BLAS kernels differ per shape and per CPU,
so they agree within atol + rtol * max|reference| (float_tolerance.py), never bit-exactly. Check 4b (NaN vs zero in
unwritten cache positions, the same graph) and --same-as (the same graph shapes) are exact.
Prints one line per check; exits 0 if all pass, 1 otherwise.
"""
import argparse
import json
import os
import sys
import time

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import float_tolerance  # noqa: E402
import graph_format  # noqa: E402


class Model:
    def __init__(self, model_dir: str):
        self.dir = model_dir
        with open(os.path.join(model_dir, "config.yaml")) as f:
            self.cfg = yaml.safe_load(f)
        g = self.cfg["generation"]
        self.g = g
        kv = g["kv_cache"]
        self.cache_shape = (kv["layers"], kv["slots"] + 1, g["context_length"], kv["kv_heads"], kv["head_dim"])
        self.scratch = kv["slots"]
        self._graphs = {}
        self._weights = graph_format.read_weights(model_dir)  # None for a format-1 directory

    def graph(self, name: str):
        if name not in self._graphs:
            self._graphs[name] = graph_format.load_graph(self.dir, name, weights=self._weights)
        return self._graphs[name]

    def new_cache(self, fill: float = 0.0):
        return torch.full(self.cache_shape, fill), torch.full(self.cache_shape, fill)

    def prefill(self, tokens, slot, k, v, bucket=None, pad_gen=None):
        bucket = bucket or next(length for length in self.g["prefill_lengths"] if length >= len(tokens))
        pad = bucket - len(tokens)
        padding = (torch.randint(-5, self.g["vocab_size"] + 5, (pad,), generator=pad_gen) if pad_gen is not None
                   else torch.zeros(pad, dtype=torch.int64))
        ids = torch.cat([torch.tensor(tokens, dtype=torch.int64), padding]).unsqueeze(0)
        with torch.no_grad():
            return self.graph(f"prefill_l{bucket}")(ids, torch.tensor([len(tokens)]), torch.tensor([slot]), k, v)

    def decode(self, rows, k, v, batch=None, kv_length=None):
        """rows: [(token, position, slot)]; pads to `batch` with scratch rows; returns real rows' logits."""
        batch = batch or next(b for b in self.g["decode_batch_sizes"] if b >= len(rows))
        kv_length = kv_length or next(x for x in self.g["kv_lengths"] if x > max(r[1] for r in rows))
        rows = list(rows) + [(0, 0, self.scratch)] * (batch - len(rows))
        t, p, s = (torch.tensor([r[i] for r in rows], dtype=torch.int64) for i in range(3))
        with torch.no_grad():
            out = self.graph(f"decode_b{batch}_k{kv_length}")(t, p, s, k, v)
        return out[:len(rows)]


def report(results, name: str, ok: bool, detail: str):
    results.append(ok)
    print(f"  {'ok  ' if ok else 'FAIL'} {name:<34} {detail}", flush=True)


def diff(a, b) -> float:
    return (a - b).abs().max().item() if a.numel() else 0.0


def check(model_dir: str, rtol: float, atol: float, same_as: str) -> bool:
    def bound(*want):
        return float_tolerance.bound(list(want), rtol, atol)

    m = Model(model_dir)
    with open(os.path.join(model_dir, "reference_generation.json")) as f:
        ref = json.load(f)
    # A re-export with fewer/smaller buckets runs the cases that fit it.
    cases = [c for c in ref["cases"] if len(c["prompt_ids"]) <= m.g["prefill_lengths"][-1]
             and len(c["prompt_ids"]) + ref["max_new_tokens"] <= m.g["context_length"]]
    results = []
    print(f"{m.cfg['name']}: cache {list(m.cache_shape)}, {len(cases)} of {len(ref['cases'])} reference cases fit")
    if len(cases) < 3:
        print("  FAIL fewer than 3 reference cases fit the compiled shapes")
        return False
    gen = torch.Generator().manual_seed(7)
    prompt = next(c["prompt_ids"] for c in cases if 20 <= len(c["prompt_ids"]) <= m.g["prefill_lengths"][0])
    n = len(prompt)

    # 1. in place, and nothing outside the slot's positions
    k, v = m.new_cache()
    m.prefill(prompt, 5, k, v, pad_gen=gen)
    bucket0 = m.g["prefill_lengths"][0]
    others = torch.ones(m.cache_shape[1], dtype=torch.bool)
    others[5] = False
    touched = bool(k[:, 5, :n].abs().sum() > 0) and bool(v[:, 5, :n].abs().sum() > 0)
    clean = (k[:, others].abs().sum() == 0 and v[:, others].abs().sum() == 0
             and k[:, 5, bucket0:].abs().sum() == 0 and v[:, 5, bucket0:].abs().sum() == 0)
    report(results, "prefill writes cache in place", touched and bool(clean),
           f"slot 5 positions [0, {n}) written: {touched}; other slots and positions >= {bucket0} zero: {bool(clean)}")
    before = k.clone()
    sizes = m.g["decode_batch_sizes"]
    m.decode([(prompt[-1], n, 5)], k, v, batch=sizes[min(1, len(sizes) - 1)])
    changed = (k != before).nonzero()
    only_pos = changed.numel() > 0 and set(changed[:, 1].tolist()) <= {5, m.scratch} and \
        set(changed[changed[:, 1] == 5][:, 2].tolist()) == {n}
    report(results, "decode writes cache in place", bool(only_pos),
           f"{changed.shape[0]} elements changed, at (slot, position) "
           f"{sorted(set(map(tuple, changed[:, 1:3].tolist())))[:4]}")

    # 2. eager model (hf/ weights)
    hf = os.path.join(model_dir, "hf", "pytorch_model.bin")
    if os.path.exists(hf):
        import llama_export
        model, _, _ = llama_export.load_checkpoint(os.path.join(model_dir, "hf"))
        worst, allowed = 0.0, float("inf")
        for c in cases[:6]:
            k, v = m.new_cache()
            logits = m.prefill(c["prompt_ids"], 0, k, v)
            with torch.no_grad():
                eager = model(torch.tensor([c["prompt_ids"]]))[:, -1]
            worst, allowed = max(worst, diff(logits, eager)), min(allowed, bound(eager))
        report(results, "prefill == eager model", worst <= allowed,
               f"max|diff| {worst:.2e} over 6 prompts (allowed {allowed:.2e})")

    # 3. one prompt in the two smallest prefill buckets, garbage padding
    l0, l1 = m.g["prefill_lengths"][:2]
    k0, v0 = m.new_cache(float("nan"))
    k1, v1 = m.new_cache(1e3)
    a = m.prefill(prompt, 2, k0, v0, bucket=l0, pad_gen=gen)
    b = m.prefill(prompt, 2, k1, v1, bucket=l1, pad_gen=gen)
    d_logits = diff(a, b)
    d_cache = max(diff(k0[:, 2, :n], k1[:, 2, :n]), diff(v0[:, 2, :n], v1[:, 2, :n]))
    b_logits, b_cache = bound(a), bound(k0[:, 2, :n], v0[:, 2, :n])
    report(results, f"prefill l{l0} == l{l1}", d_logits <= b_logits and d_cache <= b_cache,
           f"logits max|diff| {d_logits:.2e} (allowed {b_logits:.2e}), cache (real positions) {d_cache:.2e} "
           f"(allowed {b_cache:.2e})")

    # 4. decode batch 4 (2 real + 2 padding) vs batch 1
    p2 = cases[2]["prompt_ids"]
    k, v = m.new_cache()
    m.prefill(prompt, 3, k, v)
    m.prefill(p2, 7, k, v)
    rows = [(11, n, 3), (23, len(p2), 7)]
    kb, vb = k.clone(), v.clone()
    big = next((b for b in sizes if b >= 4), sizes[-1])
    batched = m.decode(rows, kb, vb, batch=big, kv_length=m.g["kv_lengths"][0])
    worst_l = worst_c = 0.0
    ok_rows = True
    for i, row in enumerate(rows):
        ks, vs = k.clone(), v.clone()
        single = m.decode([row], ks, vs, batch=1, kv_length=m.g["kv_lengths"][0])
        d_l = diff(batched[i], single[0])
        d_c = max(diff(kb[:, row[2]], ks[:, row[2]]), diff(vb[:, row[2]], vs[:, row[2]]))
        ok_rows = ok_rows and d_l <= bound(single[0]) and d_c <= bound(ks[:, row[2]], vs[:, row[2]])
        worst_l, worst_c = max(worst_l, d_l), max(worst_c, d_c)
    report(results, f"decode b{big} (2 real + {big - 2} pad) == b1", ok_rows,
           f"logits max|diff| {worst_l:.2e}, cache {worst_c:.2e} (allowed {bound(single[0]):.2e} on logits)")

    # 4b. whatever lies past a row's position (here NaN: an uninitialised cache) is never read
    kn, vn = m.new_cache(float("nan"))
    kz, vz = m.new_cache()
    m.prefill(prompt, 6, kn, vn)
    m.prefill(prompt, 6, kz, vz)
    x = m.decode([(9, n, 6)], kn, vn, batch=1, kv_length=m.g["kv_lengths"][-1])
    y = m.decode([(9, n, 6)], kz, vz, batch=1, kv_length=m.g["kv_lengths"][-1])
    d = diff(x, y)
    report(results, "decode ignores unwritten positions", d == 0.0,
           f"NaN vs zero cache past position {n}: max|diff| {d:.2e}")

    # 5. KV lengths
    ka, kb_ = m.g["kv_lengths"][:2]
    pos = [n, ka - 1]
    worst, allowed = 0.0, float("inf")
    for p in pos:
        k1, v1 = k.clone(), v.clone()
        k2, v2 = k.clone(), v.clone()
        x = m.decode([(17, p, 3)], k1, v1, batch=1, kv_length=ka)
        y = m.decode([(17, p, 3)], k2, v2, batch=1, kv_length=kb_)
        worst, allowed = max(worst, diff(x, y)), min(allowed, bound(x))
    report(results, f"decode k{ka} == k{kb_}", worst <= allowed,
           f"positions {pos}: max|diff| {worst:.2e} (allowed {allowed:.2e})")

    # 6. greedy generation vs the reference, alone and all together
    t0 = time.monotonic()
    bad, ties = [], []  # a flip at a near tie is float rounding of another shape (float_tolerance.NEAR_TIE)
    for i, c in enumerate(cases):
        k, v = m.new_cache()
        out = [int(m.prefill(c["prompt_ids"], i % m.scratch, k, v, pad_gen=gen).argmax())]
        while len(out) < ref["max_new_tokens"]:
            pos = len(c["prompt_ids"]) + len(out) - 1
            out.append(int(m.decode([(out[-1], pos, i % m.scratch)], k, v, batch=1).argmax()))
        j, allowed = float_tolerance.first_divergence(out, c["output_ids"], c["top2_margins"])
        if j is not None:
            (ties if allowed else bad).append(f"case {i} differs at step {j} (reference margin "
                                              f"{c['top2_margins'][j] if j < len(c['top2_margins']) else 0:.1e})")
    report(results, "greedy b1 == reference", not bad,
           "; ".join(bad) or f"{len(cases)} cases x {ref['max_new_tokens']} tokens, "
           f"{time.monotonic() - t0:.1f} s" + (f"; near ties (allowed): {ties}" if ties else ""))

    batch = cases[:min(m.g["max_num_seqs"], m.scratch, m.g["decode_batch_sizes"][-1])]
    k, v = m.new_cache()
    outs = [[int(m.prefill(c["prompt_ids"], i, k, v).argmax())] for i, c in enumerate(batch)]
    for _ in range(ref["max_new_tokens"] - 1):
        rows = [(o[-1], len(c["prompt_ids"]) + len(o) - 1, i) for i, (c, o) in enumerate(zip(batch, outs))]
        logits = m.decode(rows, k, v)
        for o, row in zip(outs, logits):
            o.append(int(row.argmax()))
    verdicts = [float_tolerance.first_divergence(o, c["output_ids"], c["top2_margins"]) for c, o in zip(batch, outs)]
    bad = [i for i, (j, allowed) in enumerate(verdicts) if not allowed]
    ties = [i for i, (j, allowed) in enumerate(verdicts) if j is not None and allowed]
    report(results, f"greedy b{len(batch)} (batched) == reference", not bad,
           f"cases differing: {bad}" if bad else f"{len(batch)} sequences decoded together"
           + (f"; near ties (allowed): cases {ties}" if ties else ""))

    # --same-as: identical graphs
    if same_as:
        other = Model(same_as)
        worst = 0.0
        names = sorted(f[:-3] for f in os.listdir(os.path.join(same_as, "graphs")) if f.endswith(".pt"))
        for name in names:
            k, v = m.new_cache()
            m.prefill(prompt, 1, k, v)
            k2, v2 = k.clone(), v.clone()
            if name.startswith("prefill_chunk_c"):  # (tokens[1, C], start, length, slot): the prompt's first chunk
                c = int(name.split("_")[2][1:])
                real = prompt[:c]
                args = (torch.tensor([real + [0] * (c - len(real))]), torch.tensor([0]), torch.tensor([len(real)]),
                        torch.tensor([4]))
            elif name.startswith("prefill"):
                args = (torch.tensor([prompt + [0] * (int(name[9:]) - n)]), torch.tensor([n]), torch.tensor([4]))
            else:
                b = int(name.split("_")[1][1:])
                args = (torch.arange(b) + 5, torch.full((b,), n), torch.tensor([1] + [m.scratch] * (b - 1)))
            with torch.no_grad():
                x = m.graph(name)(*args, k, v)
                y = other.graph(name)(*args, k2, v2)
            worst = max(worst, diff(x, y), diff(k, k2), diff(v, v2))
        report(results, f"same as {same_as}", bool(names) and worst == 0.0,
               f"{len(names)} graphs, logits and cache max|diff| {worst:.2e}")
    return all(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("--rtol", type=float, default=float_tolerance.RTOL,
                        help="across shapes: allowed max|diff| relative to the reference's largest |value|")
    parser.add_argument("--atol", type=float, default=float_tolerance.ATOL, help="absolute floor of that bound")
    parser.add_argument("--same-as", help="another export of the same weights: its graphs must agree exactly")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ok = check(args.model_dir, args.rtol, args.atol, args.same_as)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
