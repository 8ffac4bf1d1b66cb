#!/usr/bin/env python3
"""Hugging Face's own Llama code against sluice's exported llama_tiny: loads MODEL_DIR/hf/ with transformers'
LlamaForCausalLM and LlamaTokenizer (unmodified, from PyPI) and checks, for every case of
MODEL_DIR/reference_generation.json, that
  1. LlamaTokenizer(prompt).input_ids == the reference prompt_ids (BOS + plain SentencePiece), and
  2. greedy generate() (do_sample False, max_new_tokens from the file, EOS disabled) == the reference output_ids,
     or leaves them only at a near tie (reference top-2 margin < float_tolerance.NEAR_TIE: other kernels).
The reference was decoded by sluice's own eager PyTorch model (backend/compile/llama.py), so this proves the
exported checkpoint is a real Llama that independent code reads and runs the same way.

  VENV/bin/python tests/llm/hf_reference_check.py MODEL_DIR
Exits 0 when every case matches, 1 otherwise (the first differing step and its reference top-2 margin named).
"""
import json
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backend", "compile"))
import float_tolerance  # noqa: E402  (the near-tie rule shared with the exporter's checks)
from transformers import LlamaForCausalLM, LlamaTokenizer


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    model_dir = sys.argv[1]
    hf_dir = os.path.join(model_dir, "hf")
    with open(os.path.join(model_dir, "reference_generation.json")) as f:
        ref = json.load(f)
    torch.set_num_threads(1)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; {hf_dir}")
    tokenizer = LlamaTokenizer.from_pretrained(hf_dir)
    model = LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    print(f"loaded: {type(model).__name__} {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{type(tokenizer).__name__} vocab {tokenizer.vocab_size}")
    failures = 0
    steps = ref["max_new_tokens"]
    for i, case in enumerate(ref["cases"]):
        t0 = time.monotonic()
        ids = tokenizer(case["prompt"]).input_ids
        if ids != case["prompt_ids"]:
            j = next((j for j, (a, b) in enumerate(zip(ids, case["prompt_ids"])) if a != b),
                     min(len(ids), len(case["prompt_ids"])))
            print(f"  FAIL case {i}: tokenizer gives {len(ids)} ids, reference {len(case['prompt_ids'])}; first "
                  f"difference at {j}: {ids[j:j + 5]} vs {case['prompt_ids'][j:j + 5]}")
            failures += 1
            continue
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.int64),
                                 do_sample=False, num_beams=1, max_new_tokens=steps, min_new_tokens=0,
                                 eos_token_id=None, pad_token_id=0)
        # EOS disabled: generation_config's eos is overridden with None, so all `steps` tokens are produced and
        # an argmax that happens to be EOS is kept, exactly as the reference does.
        generated = out[0, len(ids):].tolist()
        ms = (time.monotonic() - t0) * 1000
        j, allowed = float_tolerance.first_divergence(generated, case["output_ids"], case["top2_margins"])
        if j is not None:
            margin = case["top2_margins"][j] if j < len(case["top2_margins"]) else float("nan")
            print(f"  {'ok' if allowed else 'FAIL'} case {i} ({len(ids)} prompt ids): generate() differs at step {j}"
                  f" of {steps}: {generated[j:j + 5]} vs {case['output_ids'][j:j + 5]} (reference top-2 margin "
                  f"{margin:.1e}{': a near tie, float rounding of other kernels' if allowed else ''})")
            failures += 0 if allowed else 1
            continue
        print(f"  ok   case {i}: {len(ids):4d} prompt ids, {steps} generated ids identical  {ms:7.0f} ms")
    print(f"{len(ref['cases']) - failures} of {len(ref['cases'])} cases match")
    print("PASS" if failures == 0 else "FAIL")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
