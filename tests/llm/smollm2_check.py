"""SmolLM2-135M-Instruct (dequantized from its Q4_1 GGUF by gguf_to_hf.py) exported by hf_export.py, against
transformers on the same dequantized weights:

  1. conversion: gguf_to_hf.unpermute equals transformers' own GGUF loader's reverse_permute_weights on every
     attn_q / attn_k tensor of the file; and transformers, on the converted checkpoint, answers the chat question
     "What is the capital of France?" with a sentence naming Paris (a wrong q/k row order or tokenizer does not);
  2. hf_export.py (Debian's /usr/bin/python3: no PyPI package needed) exports it; export time noted;
  3. transformers' greedy generate() (float32, EOS off, MAX_NEW_TOKENS) on chat-template and plain prompts is the
     reference; teacher-forced through the graphs every step's logits are within float_tolerance.bound;
  4. check_generation_padding.py (transformers' tokens as reference_generation.json): in-place cache writes,
     prompt-bucket and batch padding invariance, KV buckets, greedy alone and batched == transformers token for
     token (near-tie rule);
  5. generation_bench.py: memory and tokens/s (printed, never pass/fail);
  6. writes SERVED_REFERENCE (the chats' references, JSON) for smollm2_serving_check.py.

  VENV/bin/python tests/llm/smollm2_check.py GGUF_FILE HF_DIR EXPORT_DIR SERVED_REFERENCE
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
COMPILE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "backend", "compile")
sys.path.insert(0, COMPILE)
sys.path.insert(0, HERE)
import gguf_to_hf  # noqa: E402
import hf_arch_check  # noqa: E402  (teacher_forced)

import gguf  # noqa: E402
import transformers  # noqa: E402
from transformers.modeling_gguf_pytorch_utils import reverse_permute_weights  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"
MAX_NEW_TOKENS = 32
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Write a haiku about the sea."}],
    [{"role": "system", "content": "You are a concise assistant."},
     {"role": "user", "content": "Explain in one sentence what a compiler does."}],
]
TEXTS = [
    "The quick brown fox",
    "Température: 21,5 °C — ciel dégagé; 東京の天気は晴れです. Prices rose 3.7% in 2023.",
    "A river is a natural flowing watercourse, usually freshwater, flowing towards an ocean, sea, lake or another "
    "river. In some cases, a river flows into the ground and becomes dry at the end of its course without reaching "
    "another body of water. Rivers are part of the water cycle; water generally collects in a river from "
    "precipitation through a drainage basin. Small rivers can be referred to using names such as",
]
EXPORT_ARGS = ["--prefill-lengths", "64,128", "--decode-batch-sizes", "1,4", "--kv-lengths", "128,256",
               "--slots", "8"]


def check_permutation(gguf_path: str, cfg) -> str:
    reader = gguf.GGUFReader(gguf_path)
    n = 0
    for t in reader.tensors:
        heads = {"attn_q.weight": cfg["num_attention_heads"], "attn_k.weight": cfg["num_key_value_heads"]}.get(
            t.name.split(".", 2)[-1])
        if heads is None:
            continue
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        ours = gguf_to_hf.unpermute(w, heads)
        theirs = reverse_permute_weights(w, cfg["num_attention_heads"], cfg["num_key_value_heads"]
                                         if t.name.endswith("attn_k.weight") else cfg["num_attention_heads"])
        if not np.array_equal(ours, theirs):
            raise SystemExit(f"FAIL unpermute differs from transformers' reverse_permute_weights on {t.name}")
        n += 1
    return f"{n} q/k tensors un-permuted exactly as transformers' GGUF loader does"


def reference(hf_dir: str):
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    answer_ids = tok.apply_chat_template(CHATS[0], add_generation_prompt=True)
    with torch.no_grad():
        out = model.generate(torch.tensor([answer_ids]), attention_mask=torch.ones(1, len(answer_ids), dtype=torch.long),
                             max_new_tokens=24, do_sample=False, pad_token_id=tok.pad_token_id)
    answer = tok.decode(out[0, len(answer_ids):], skip_special_tokens=True)
    eos = model.generation_config.eos_token_id
    eos_ids = eos if isinstance(eos, list) else [eos]
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    prompts = [tok.apply_chat_template(c, add_generation_prompt=True) for c in CHATS]
    prompts += [tok(t).input_ids for t in TEXTS]
    ref = []
    with torch.no_grad():
        for ids in prompts:
            r = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               max_new_tokens=MAX_NEW_TOKENS, do_sample=False, output_logits=True,
                               return_dict_in_generate=True)
            ref.append((r.sequences[0, len(ids):].tolist(), torch.cat(r.logits, 0).float()))
    return tok, answer, eos_ids, prompts, ref


def write_served_reference(path, tok, eos_ids, prompts, ref, margins):
    """The chats' references for smollm2_serving_check.py (whose venv has only `openai`): the text of every prefix
    of transformers' greedy tokens, as its tokenizer decodes them, so a served text that differs
    is placed at its first differing token (and its top-2 margin)."""
    cases = [{"messages": chat, "prompt_ids": p, "output_ids": t, "top2_margins": m,
              "prefix_texts": [tok.decode(t[:i], skip_special_tokens=True) for i in range(len(t) + 1)]}
             for chat, p, (t, _), m in zip(CHATS, prompts, ref, margins)]
    with open(path, "w") as f:
        json.dump({"eos_ids": eos_ids, "cases": cases}, f)


def main() -> int:
    gguf_path, hf_dir, export_dir, served_reference = sys.argv[1:5]
    torch.set_num_threads(1)
    ok = True
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    print(f"ok   conversion: {check_permutation(gguf_path, cfg)}", flush=True)

    t0 = time.monotonic()
    export = subprocess.run([SYSTEM_PYTHON, os.path.join(COMPILE, "hf_export.py"), "--checkpoint", hf_dir,
                             "--out", export_dir] + EXPORT_ARGS, capture_output=True, text=True, timeout=900)
    export_s = time.monotonic() - t0
    if export.returncode:
        print(f"FAIL hf_export.py exit {export.returncode}\n{export.stdout}\n{export.stderr}")
        return 1
    print(f"ok   hf_export.py (/usr/bin/python3) in {export_s:.0f} s: {export.stdout.strip().splitlines()[-1]}",
          flush=True)

    t0 = time.monotonic()
    tok, answer, eos_ids, prompts, ref = reference(hf_dir)
    paris = "Paris" in answer
    ok = ok and paris
    print(f"{'ok  ' if paris else 'FAIL'} transformers on the converted checkpoint answers {answer!r} "
          f"({time.monotonic() - t0:.0f} s for the reference)", flush=True)

    worst, allowed = 0.0, float("inf")
    for prompt, (tokens, logits) in zip(prompts, ref):
        d, b = hf_arch_check.teacher_forced(export_dir, prompt, tokens, logits)
        worst, allowed = max(worst, d), min(allowed, b)
    forced_ok = worst <= allowed
    ok = ok and forced_ok
    print(f"{'ok  ' if forced_ok else 'FAIL'} teacher-forced graph logits vs transformers: max|diff| {worst:.2e} "
          f"(allowed {allowed:.2e}) over {len(prompts)} prompts x {MAX_NEW_TOKENS} steps "
          f"(prompt lengths {[len(p) for p in prompts]})", flush=True)

    margins = [[float(t[0] - t[1]) for t in logits.topk(2).values] for _, logits in ref]
    cases = [{"prompt_ids": p, "output_ids": t, "top2_margins": m} for p, (t, _), m in zip(prompts, ref, margins)]
    with open(os.path.join(export_dir, "reference_generation.json"), "w") as f:
        json.dump({"model": "smollm2_135m", "max_new_tokens": MAX_NEW_TOKENS, "cases": cases}, f)
    write_served_reference(served_reference, tok, eos_ids, prompts, ref, margins)
    check = subprocess.run([SYSTEM_PYTHON, os.path.join(COMPILE, "check_generation_padding.py"), export_dir],
                           capture_output=True, text=True, timeout=900)
    print(check.stdout + check.stderr, flush=True)
    ok = ok and check.returncode == 0
    for p, (t, _) in zip(prompts[:3], ref[:3]):
        print(f"     transformers greedy: {tok.decode(p)!r} -> {tok.decode(t)!r}")

    bench = subprocess.run([SYSTEM_PYTHON, os.path.join(HERE, "generation_bench.py"), export_dir,
                            "--prompt-length", str(len(prompts[0])), "--new-tokens", "64", "--batches", "1,4"],
                           capture_output=True, text=True, timeout=600)
    print(f"     bench: {bench.stdout.strip()} {bench.stderr.strip()[-300:] if bench.returncode else ''}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
