"""The export-time checks llama_export.py and hf_export.py share: their bucket and target arguments, and the bucket
lists against the model's context. One module, so both tools accept and refuse the same things with the same words.

  add_arguments(parser)           --target, --prefill-lengths, --decode-batch-sizes, --kv-lengths, --slots
  parse_arguments(args)           -> (prefill, batches, kvs) (None where not given); UsageError (exit 2) for a
                                  malformed list, --slots < 1, or --target neuron without torch_neuronx
  check_buckets(prefill, kvs, max_positions, where)
                                  ValueError (exit 1, "refused") naming the bucket and the limit it exceeds:
                                  the context length (the last --kv-lengths) above max_position_embeddings, or the
                                  largest prefill bucket above the context length

check_buckets runs once the model's config is read (the limit is the checkpoint's) and before anything is written.
"""
import argparse
from typing import List, Optional, Sequence, Tuple

# The default buckets (llama_export.py's llama_tiny; hf_export.py caps them at the checkpoint's context).
PREFILL_LENGTHS = [64, 128, 256, 512, 1024]
DECODE_BATCH_SIZES = [1, 2, 4, 8, 16]
KV_LENGTHS = [256, 512, 1024]
SLOTS = 16


class UsageError(Exception):
    """A bad command line (the tools exit 2 with its message)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", choices=["cpu", "neuron"], default="cpu")
    parser.add_argument("--prefill-lengths")
    parser.add_argument("--decode-batch-sizes")
    parser.add_argument("--kv-lengths", help="ascending; the last is the context length")
    parser.add_argument("--slots", type=int, default=SLOTS)


def lengths(text: Optional[str], flag: str) -> Optional[List[int]]:
    """A comma-separated list of positive ascending integers, or None when the flag was not given."""
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or values != sorted(set(values)) or values[0] < 1:
        raise UsageError(f"--{flag} needs positive ascending integers, e.g. 64,128 (got {text!r})")
    return values


def parse_arguments(args: argparse.Namespace) -> Tuple[Optional[List[int]], Optional[List[int]], Optional[List[int]]]:
    prefill = lengths(args.prefill_lengths, "prefill-lengths")
    batches = lengths(args.decode_batch_sizes, "decode-batch-sizes")
    kvs = lengths(args.kv_lengths, "kv-lengths")
    if args.slots < 1:
        raise UsageError(f"--slots must be >= 1 (got {args.slots})")
    if args.target == "neuron" and neuron_missing():
        raise UsageError(neuron_missing())
    return prefill, batches, kvs


def neuron_missing() -> str:
    """Why --target neuron cannot run here ("" when torch_neuronx imports); every exporter checks it up front."""
    try:
        import torch_neuronx  # noqa: F401
    except ImportError as e:
        return f"--target neuron needs torch_neuronx (AWS Neuron SDK), which is not importable here: {e}"
    return ""


def check_buckets(prefill: Sequence[int], kvs: Sequence[int], max_positions: int, where: str) -> None:
    """ValueError naming the bucket and the limit when the buckets do not fit the model's context. `where`: the
    config the limit comes from (a config.json path, or the built-in model's name)."""
    context = kvs[-1]
    if context > max_positions:
        raise ValueError(f"context length {context} (the last --kv-lengths) exceeds max_position_embeddings "
                         f"{max_positions} ({where}): positions past it were never trained")
    if prefill[-1] > context:
        raise ValueError(f"largest prefill bucket {prefill[-1]} (--prefill-lengths) exceeds the context length "
                         f"{context} (the last --kv-lengths, the KV cache's length)")
