#!/usr/bin/python3
"""Exports the example models: one TorchScript graph per (batch size, length) bucket, plus config.yaml and
reference.pt, into DIR/<model>/. The generation model llama_tiny has its own graph set and files
(llama_export.py: tokenizer, prefill/decode graphs, reference_generation.json, hf/).

  /usr/bin/python3 backend/compile/export_models.py --out DIR [--target cpu|neuron]
      [--models asr_ctc,text_embed,llama_tiny] [--reference-cases N] [--lengths L1,L2,... (one model)]

Exit codes: 0 ok, 1 export failed, 2 bad arguments or --target neuron without torch_neuronx.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import asr_ctc  # noqa: E402
import asr_ctc_stream  # noqa: E402
import asr_digits  # noqa: E402
import asr_digits_stream  # noqa: E402
import common  # noqa: E402
import export_checks  # noqa: E402
import llama_export  # noqa: E402
import text_embed  # noqa: E402

# asr_digits and asr_digits_stream: trained weights (weights/<name>.pt).
MODELS = {"asr_ctc": asr_ctc.spec, "asr_ctc_stream": asr_ctc_stream.spec, "text_embed": text_embed.spec,
          "llama_tiny": None, "asr_digits": asr_digits.spec, "asr_digits_stream": asr_digits_stream.spec}
GENERATION_MODELS = {"llama_tiny": llama_export.export}  # export(out_dir, target) -> seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="model repository directory to write into")
    parser.add_argument("--target", choices=["cpu", "neuron"], default="cpu")
    parser.add_argument("--graph-format", type=int, choices=[1, 2], default=2,
                        help="2 (default): weights.pt once, graphs take the weights as inputs; 1: the old layout, every "
                        "graph with its own weights (to test that old repositories keep loading; not for llama_tiny)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: "
                        + ", ".join(MODELS))
    parser.add_argument("--reference-cases", type=int, default=12)
    parser.add_argument("--lengths", help="comma-separated bucket lengths instead of the model's own, ascending "
                        "(e.g. what sluice-advisor chose); needs exactly one model in --models")
    args = parser.parse_args()

    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        print(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    if args.reference_cases < 1:
        print("--reference-cases must be >= 1", file=sys.stderr)
        return 2
    if args.target == "neuron" and export_checks.neuron_missing():
        print(export_checks.neuron_missing(), file=sys.stderr)
        return 2

    lengths = None
    if args.lengths:
        try:
            lengths = [int(v) for v in args.lengths.split(",")]
        except ValueError:
            lengths = []
        if len(names) != 1 or names[0] in GENERATION_MODELS or not lengths or lengths != sorted(set(lengths)) \
                or lengths[0] < 1:
            print("--lengths needs one (non-generation) model in --models and positive ascending integers, e.g. "
                  "16000,48000 (llama_tiny: llama_export.py --prefill-lengths ...)", file=sys.stderr)
            return 2

    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    times = {}
    for name in names:
        if name in GENERATION_MODELS:
            if args.graph_format != 2:
                print(f"--graph-format 1 is not supported for {name}", file=sys.stderr)
                return 2
            times[name] = GENERATION_MODELS[name](args.out, args.target)
            continue
        spec = MODELS[name]()
        if lengths:
            spec.lengths = lengths
        times[name] = common.export_model(spec, args.out, args.target, args.reference_cases, args.graph_format)
    summary = ", ".join(f"{n} {t:.1f} s" for n, t in times.items())
    print(f"total export time {time.monotonic() - start:.1f} s ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
