#!/usr/bin/python3
"""Padding-invariance check of an exported model directory (config.yaml, graphs/, reference.pt).

For each bucket, batches reference cases of different lengths, fills the padding with random garbage (not
zeros), runs the saved graph and compares each row's real part with the reference output (eager model, batch
1, unpadded). Prints the max abs diff per bucket; exits 1 if any exceeds its bound or a shape/length is wrong.
The bucket and the reference are two shapes (other BLAS kernels), so the bound scales with the reference's
magnitude: atol + rtol * max|reference| (float_tolerance.py).

  /usr/bin/python3 backend/compile/check_padding.py DIR/asr_ctc [DIR/text_embed ...]
      [--rtol 1e-5] [--atol 1e-5] [--buckets b1_l16000,b8_l256000] [--nonfinite]
"""
import argparse
import os
import sys
import time

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_format  # noqa: E402
from common import pad_batch  # noqa: E402
import float_tolerance  # noqa: E402


def load_reference(path: str):
    buffers = dict(torch.jit.load(path).named_buffers())
    cases = []
    for k in range(int(buffers["case_count"])):
        inputs = [buffers[f"case{k}_input{j}"] for j in range(_count(buffers, f"case{k}_input"))]
        outputs = [buffers[f"case{k}_output{j}"] for j in range(_count(buffers, f"case{k}_output"))]
        cases.append((inputs, outputs))
    return cases


def _count(buffers, prefix):
    n = 0
    while f"{prefix}{n}" in buffers:
        n += 1
    return n


def garbage(nonfinite: bool, gen: torch.Generator):
    def fill(shape, dtype):
        if dtype.is_floating_point:
            x = torch.randn(shape, generator=gen) * 1000.0
            if nonfinite and x.numel() > 0:
                flat = x.view(-1)
                flat[0::3], flat[1::7] = float("nan"), float("inf")
            return x
        # Any int64 at all: negative, far past any vocabulary.
        return torch.randint(-2**40, 2**40, shape, generator=gen, dtype=torch.int64)
    return fill


def pick_rows(cases, batch: int, length: int, prev_length: int):
    """Rows for one bucket: cases that fit, those that belong to this bucket first, then shorter ones (lots of
    padding), cycling when there are fewer cases than rows."""
    fits = [c for c in cases if c[0][0].shape[0] <= length]
    mine = [c for c in fits if c[0][0].shape[0] > prev_length]
    order = mine + [c for c in fits if c[0][0].shape[0] <= prev_length][::-1]
    return [order[i % len(order)] for i in range(batch)]


def check_model(model_dir: str, rtol: float, atol: float, only, nonfinite: bool) -> bool:
    with open(os.path.join(model_dir, "config.yaml")) as f:
        cfg = yaml.safe_load(f)
    outputs = cfg["outputs"]
    variable = any(-1 in o["shape"] for o in outputs)
    cases = load_reference(os.path.join(model_dir, "reference.pt"))
    weights = graph_format.read_weights(model_dir)  # None for a format-1 directory
    gen = torch.Generator().manual_seed(1234)
    ok = True
    lengths = cfg["buckets"]["lengths"]
    for b in cfg["buckets"]["batch_sizes"]:
        for i, length in enumerate(lengths):
            key = f"b{b}_l{length}"
            if only and key not in only:
                continue
            rows = pick_rows(cases, b, length, lengths[i - 1] if i else 0)
            inputs, real = pad_batch([r[0] for r in rows], length, garbage(nonfinite, gen))
            graph = graph_format.load_graph(model_dir, key, weights=weights)
            t0 = time.monotonic()
            with torch.no_grad():
                result = graph(*inputs, real)
            ms = (time.monotonic() - t0) * 1000.0
            problems = []
            if not isinstance(result, tuple) or len(result) != len(outputs) + int(variable):
                problems.append(f"returned {type(result).__name__} of wrong arity")
                result = ()
            worst, over = 0.0, False
            for r, (_, refs) in enumerate(rows):
                for j, decl in enumerate(outputs):
                    if not result:
                        break
                    out, ref = result[j][r], refs[j]
                    if decl["shape"][0] == -1:
                        out_len = int(result[-1][r])
                        if out_len != ref.shape[0]:
                            problems.append(f"row {r}: out_len {out_len} != reference {ref.shape[0]}")
                            continue
                        out = out[:out_len]
                    if out.shape != ref.shape:
                        problems.append(f"row {r}: shape {tuple(out.shape)} != {tuple(ref.shape)}")
                        continue
                    d = float_tolerance.max_diff(out, ref)
                    over = over or not d <= float_tolerance.bound(ref, rtol, atol)  # `not <=`: NaN fails too
                    worst = max(worst, d) if d == d else float("nan")
            row_lens = ",".join(str(int(x)) for x in real)
            bad = problems or over
            ok = ok and not bad
            print(f"{cfg['name']:>12} {key:<14} max|diff| {worst:.3e}  {ms:8.1f} ms  "
                  f"{'FAIL' if bad else 'ok'}  lengths [{row_lens}]")
            for p in problems:
                print(f"{'':>14} {p}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dirs", nargs="+")
    parser.add_argument("--rtol", type=float, default=float_tolerance.RTOL,
                        help="allowed max|diff| relative to the reference's largest |value|")
    parser.add_argument("--atol", type=float, default=float_tolerance.ATOL, help="absolute floor of that bound")
    parser.add_argument("--buckets", default="", help="comma-separated b{B}_l{L} names (default: all)")
    parser.add_argument("--nonfinite", action="store_true", help="also put NaN/inf in float padding")
    args = parser.parse_args()
    only = set(filter(None, args.buckets.split(",")))
    ok = all([check_model(d, args.rtol, args.atol, only, args.nonfinite) for d in args.model_dirs])
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
