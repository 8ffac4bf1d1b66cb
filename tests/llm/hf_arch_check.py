"""hf_export.py against Hugging Face transformers, one small randomly initialised checkpoint per architecture.

For each CASE: transformers builds the model from a config (AutoModelForCausalLM.from_config, no hub), its weights
are re-drawn at a scale that makes greedy decoding non-degenerate, and save_pretrained writes it (safetensors,
sharded safetensors or pytorch_model.bin; float32, bfloat16 or float16). hf_export.py exports it. Then:
  1. transformers' greedy generate() (the checkpoint loaded back as float32, eager attention, EOS off) gives the
     reference tokens and logits for prompts of several lengths (1 id up to one short of the largest bucket);
  2. teacher-forced through the exported graphs (prefill bucket, then decode at batch 1 on the reference tokens),
     every step's logits equal transformers' within float_tolerance.bound (max|diff| <= 1e-5 + 1e-5 * max|ref|);
  3. check_generation_padding.py on the export with transformers' tokens as reference_generation.json: in-place
     cache writes, prompt-bucket and batch padding invariance, KV-length buckets, greedy prefill + decode alone and
     all prompts batched == transformers token for token (a divergence allowed only at a reference near tie,
     float_tolerance.NEAR_TIE).
  4. REFUSALS: configs hf_export.py must refuse by name (exit 1, the key in the message), writing nothing.
  5. Qwen3: the qwen3_* CASES where transformers has Qwen3 (>= 4.51: tests/torch2/qwen3_transformers_test.sh);
     under 4.44.2 they are skipped and run_qwen3_self checks a Qwen3 export against llama.py's eager model.
The stored dtype (bf16/fp16) is upcast exactly; the reference is transformers computing in float32 on the same
values (a bf16 transformers run differs from both by bf16 rounding, far above the float32 bound).

  VENV/bin/python tests/llm/hf_arch_check.py WORK_DIR [--cases llama2,mistral_window,...]
Exit 0 when every case passes.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
COMPILE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "backend", "compile")
sys.path.insert(0, COMPILE)
import float_tolerance  # noqa: E402
import graph_format  # noqa: E402

import transformers  # noqa: E402

TINY = dict(vocab_size=384, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2)
# name: (transformers config class, config overrides, save mode, stored dtype)
CASES = {
    "llama2": ("LlamaConfig", dict(rms_norm_eps=1e-5), "safetensors", torch.float32),
    "llama1_mha_bin": ("LlamaConfig", dict(num_key_value_heads=4, rms_norm_eps=1e-6), "bin", torch.float32),
    "llama3_sharded_bf16": ("LlamaConfig", dict(rope_theta=500000.0, eos_token_id=[2, 3], rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}), "sharded", torch.bfloat16),
    "llama32_tied_linear_bias_fp16": ("LlamaConfig", dict(tie_word_embeddings=True, attention_bias=True,
                                                          mlp_bias=True, rope_scaling={"rope_type": "linear",
                                                                                       "factor": 2.0}),
                                      "safetensors", torch.float16),
    "mistral_window16": ("MistralConfig", dict(sliding_window=16), "safetensors", torch.float32),
    "mistral_no_window": ("MistralConfig", dict(sliding_window=None, head_dim=32), "safetensors", torch.float32),
    "qwen2_tied_bf16": ("Qwen2Config", dict(tie_word_embeddings=True), "safetensors", torch.bfloat16),
    # Qwen3 (q/k RMSNorm over head_dim, here 32 != hidden/heads): transformers >= 4.51 only, so these run in
    # tests/torch2 (qwen3_transformers_test.sh, transformers 4.57.1); under 4.44.2 they are skipped, and
    # run_qwen3_self checks the export against llama.py instead.
    "qwen3_tied": ("Qwen3Config", dict(head_dim=32, tie_word_embeddings=True, rope_theta=1000000.0),
                   "safetensors", torch.float32),
    "qwen3_bf16_bias": ("Qwen3Config", dict(head_dim=32, attention_bias=True), "sharded", torch.bfloat16),
}
QWEN3_CASES = ("qwen3_tied", "qwen3_bf16_bias")
# name: (config class, overrides, the substring the refusal must contain, export arguments replacing EXPORT_ARGS')
REFUSALS = {
    "gemma": ("GemmaConfig", dict(head_dim=16), "model_type 'gemma'", []),
    "rope_dynamic": ("LlamaConfig", dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "'dynamic'", []),
    "gelu": ("LlamaConfig", dict(hidden_act="gelu"), "hidden_act='gelu'", []),
    "qwen2_window": ("Qwen2Config", dict(use_sliding_window=True, sliding_window=32), "use_sliding_window", []),
    # The buckets against the model's context (backend/compile/export_checks.py, shared with llama_export.py):
    # TINY's max_position_embeddings is 256.
    "context_over_max_positions": ("LlamaConfig", {}, "context length 512 (the last --kv-lengths) exceeds "
                                   "max_position_embeddings 256", ["--kv-lengths", "64,512"]),
    "prefill_over_context": ("LlamaConfig", {}, "largest prefill bucket 256 (--prefill-lengths) exceeds the "
                             "context length 128", ["--prefill-lengths", "32,256"]),
}
PROMPT_LENGTHS = [1, 3, 25, 32, 33, 60]
MAX_NEW_TOKENS = 16
EXPORT_ARGS = ["--prefill-lengths", "32,64", "--decode-batch-sizes", "1,2,4", "--kv-lengths", "64,128",
               "--slots", "8"]  # check_generation_padding.py uses slots up to 7


def build(config_class: str, overrides, seed: int):
    cfg = getattr(transformers, config_class)(**{**TINY, **overrides})
    cfg._attn_implementation = "eager"  # noqa: SLF001
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # N(0, 1/fan_in) Linears, unit embeddings, norms near 1: clear greedy margins
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name == "lm_head.weight":
                p.copy_(torch.randn(p.shape, generator=gen) * (8.0 / p.shape[1] ** 0.5))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
    return model.eval()


def save(model, path: str, mode: str, dtype):
    model = model.to(dtype)
    if mode == "bin":
        model.save_pretrained(path, safe_serialization=False)
    elif mode == "sharded":
        model.save_pretrained(path, max_shard_size="60KB")
    else:
        model.save_pretrained(path)
    files = sorted(os.listdir(path))
    save_tokenizer_stub(path)
    return files


def save_tokenizer_stub(path: str, vocab_size: int = TINY["vocab_size"]):
    """A word-level tokenizer.json for the served exports (hf_arch_serving_check.py): id i is the word "t<i>",
    split on whitespace, decoded joined by single spaces (no decoder), no special or added tokens. So served text
    spells its ids one for one, and a prompt's words encode to exactly its ids (no BOS: no post-processor)."""
    with open(os.path.join(path, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                   "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
                   "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(vocab_size)},
                             "unk_token": "t0"}}, f)


def reference(path: str, prompts):
    """transformers' greedy generate on the saved checkpoint, loaded as float32: [(tokens, logits [steps, V])]."""
    model = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    model.generation_config.eos_token_id = None  # generate exactly MAX_NEW_TOKENS
    model.generation_config.pad_token_id = 0
    out = []
    with torch.no_grad():
        for ids in prompts:
            r = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               max_new_tokens=MAX_NEW_TOKENS, min_new_tokens=0, do_sample=False,
                               output_logits=True, return_dict_in_generate=True)
            out.append((r.sequences[0, len(ids):].tolist(), torch.cat(r.logits, 0).float()))
    return out


def teacher_forced(export_dir: str, prompt, tokens, want_logits):
    """max|graph logits - transformers'| over every step, and the bound it must stay under."""
    with open(os.path.join(export_dir, "config.yaml")) as f:
        import yaml
        g = yaml.safe_load(f)["generation"]
    kv = g["kv_cache"]
    shape = (kv["layers"], kv["slots"] + 1, g["context_length"], kv["kv_heads"], kv["head_dim"])
    weights = graph_format.read_weights(export_dir)
    graphs = {}

    def graph(name):
        if name not in graphs:
            graphs[name] = graph_format.load_graph(export_dir, name, weights=weights)
        return graphs[name]

    k, v = torch.zeros(shape), torch.zeros(shape)
    bucket = next(b for b in g["prefill_lengths"] if b >= len(prompt))
    ids = torch.tensor([prompt + [7] * (bucket - len(prompt))])
    with torch.no_grad():
        got = [graph(f"prefill_l{bucket}")(
            ids, torch.tensor([len(prompt)]), torch.tensor([1]), k, v)[0]]
        for step, token in enumerate(tokens[:-1]):
            pos = len(prompt) + step
            kvl = next(x for x in g["kv_lengths"] if x > pos)
            got.append(graph(f"decode_b1_k{kvl}")(torch.tensor([token]), torch.tensor([pos]), torch.tensor([1]), k, v)[0])
    got = torch.stack(got)
    return float_tolerance.max_diff(got, want_logits), float_tolerance.bound(want_logits)


def run_case(name: str, work: str, seed: int) -> bool:
    config_class, overrides, mode, dtype = CASES[name]
    t0 = time.monotonic()
    ckpt, export_dir = os.path.join(work, name, "checkpoint"), os.path.join(work, name, "export", name)
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    files = save(build(config_class, overrides, seed), ckpt, mode, dtype)
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, TINY["vocab_size"], (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]
    ref = reference(ckpt, prompts)
    export = subprocess.run([sys.executable, os.path.join(COMPILE, "hf_export.py"), "--checkpoint", ckpt,
                             "--out", export_dir] + EXPORT_ARGS, capture_output=True, text=True, timeout=600)
    if export.returncode != 0:
        print(f"FAIL {name}: hf_export.py exit {export.returncode}\n{export.stdout}{export.stderr}")
        return False
    ok = True
    worst, allowed = 0.0, float("inf")
    for prompt, (tokens, logits) in zip(prompts, ref):
        d, b = teacher_forced(export_dir, prompt, tokens, logits)
        worst, allowed = max(worst, d), min(allowed, b)
        ok = ok and d <= b
    margins = [[float(t[0] - t[1]) for t in logits.topk(2).values] for _, logits in ref]
    cases = [{"prompt_ids": p, "output_ids": t, "top2_margins": m} for p, (t, _), m in zip(prompts, ref, margins)]
    # check_generation_padding.py wants its 20..first-bucket prompt and a longer one among the first three cases.
    cases.sort(key=lambda c: len(c["prompt_ids"]) not in (25, 60))
    with open(os.path.join(export_dir, "reference_generation.json"), "w") as f:
        json.dump({"model": name, "max_new_tokens": MAX_NEW_TOKENS, "cases": cases}, f)
    check = subprocess.run([sys.executable, os.path.join(COMPILE, "check_generation_padding.py"), export_dir],
                           capture_output=True, text=True, timeout=600)
    print(f"{'ok  ' if ok and check.returncode == 0 else 'FAIL'} {name}: {type_of(overrides, config_class)}, "
          f"{mode} {str(dtype)[6:]} ({len(files)} files); teacher-forced logits max|diff| {worst:.2e} "
          f"(allowed {allowed:.2e}) over {len(prompts)} prompts x {MAX_NEW_TOKENS} steps; "
          f"min ref margin {min(min(m) for m in margins):.1e}; {time.monotonic() - t0:.0f} s", flush=True)
    for line in check.stdout.splitlines()[1:]:
        print(f"     {line}")
    if check.returncode != 0:
        print(check.stderr)
    return ok and check.returncode == 0


def type_of(overrides, config_class: str) -> str:
    keys = ", ".join(f"{k}={v}" for k, v in overrides.items() if k != "rms_norm_eps")
    return f"{config_class[:-6]}({keys})"


def run_refusal(name: str, work: str) -> bool:
    config_class, overrides, needle, extra_args = REFUSALS[name]
    ckpt, out = os.path.join(work, "refuse", name), os.path.join(work, "refuse", "out", name)
    shutil.rmtree(os.path.join(work, "refuse", name), ignore_errors=True)
    save(build(config_class, overrides, 1), ckpt, "safetensors", torch.float32)
    r = subprocess.run([sys.executable, os.path.join(COMPILE, "hf_export.py"), "--checkpoint", ckpt, "--out", out]
                       + EXPORT_ARGS + extra_args, capture_output=True, text=True, timeout=300)
    message = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    ok = r.returncode == 1 and needle in message and not os.path.exists(out)
    print(f"{'ok  ' if ok else 'FAIL'} refuses {name}: exit {r.returncode}: {message}", flush=True)
    return ok


QWEN3 = dict(TINY, model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=32, rms_norm_eps=1e-6,
             rope_theta=1000000.0, tie_word_embeddings=True, attention_bias=False, hidden_act="silu",
             torch_dtype="float32")


def run_qwen3_self(work: str) -> bool:
    """Qwen3 where transformers has none (4.44.2): a hand-written Qwen3 config.json and llama.py weights (q_norm /
    k_norm included) saved as pytorch_model.bin, exported; the graphs must equal llama.py's own eager model
    (check_generation_padding.py with llama.py's greedy tokens as the reference), and the export is served with the
    others. That llama.py computes Qwen3 as transformers does is tests/torch2/qwen3_transformers_test.sh's part."""
    import hf_checkpoint
    import llama
    import llama_export
    ckpt, out = os.path.join(work, "qwen3_self", "checkpoint"), os.path.join(work, "qwen3_self", "export", "qwen3")
    shutil.rmtree(os.path.join(work, "qwen3_self"), ignore_errors=True)
    os.makedirs(ckpt)
    model = llama.LlamaForCausalLM(hf_checkpoint.model_config(QWEN3))
    llama.init_weights(model, 3)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=gen))
        model.eval()
    torch.save(model.state_dict(), os.path.join(ckpt, "pytorch_model.bin"))
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump(QWEN3, f)
    save_tokenizer_stub(ckpt)
    cmd = [sys.executable, os.path.join(COMPILE, "hf_export.py"), "--checkpoint", ckpt, "--out", out] + EXPORT_ARGS
    export = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if export.returncode:
        print(f"FAIL qwen3_self: hf_export.py exit {export.returncode}\n{export.stderr}")
        return False
    g = torch.Generator().manual_seed(4)
    cases = []
    for n in PROMPT_LENGTHS:
        ids = torch.randint(3, TINY["vocab_size"], (n,), generator=g).tolist()
        tokens, margins = llama_export.greedy_reference(model, ids, MAX_NEW_TOKENS)
        cases.append({"prompt_ids": ids, "output_ids": tokens, "top2_margins": margins})
    cases.sort(key=lambda c: len(c["prompt_ids"]) not in (25, 60))
    with open(os.path.join(out, "reference_generation.json"), "w") as f:
        json.dump({"model": "qwen3_self", "max_new_tokens": MAX_NEW_TOKENS, "cases": cases}, f)
    check = subprocess.run([sys.executable, os.path.join(COMPILE, "check_generation_padding.py"), out],
                           capture_output=True, text=True, timeout=600)
    ok = check.returncode == 0
    print(f"{'ok  ' if ok else 'FAIL'} qwen3_self (no transformers reference: graphs == llama.py eager): "
          f"check_generation_padding {'PASS' if ok else 'FAIL'}", flush=True)
    if check.returncode:
        print(check.stdout + check.stderr)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--refusals", default=",".join(REFUSALS))
    parser.add_argument("--no-qwen3", action="store_true", help="skip the Qwen3 self-consistency case")
    parser.add_argument("--require-all", action="store_true",
                        help="fail, rather than skip, a case whose config class this transformers lacks")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.work, exist_ok=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    # Each case's seed comes from its name: the same weights and prompts whichever cases run.
    names = [name for name in args.cases.split(",") if name]
    missing = [n for n in names if not hasattr(transformers, CASES[n][0])]
    if missing and (args.require_all or args.cases != ",".join(CASES)):  # asked for: never skipped quietly
        print(f"FAIL transformers {transformers.__version__} has no {sorted({CASES[n][0] for n in missing})} "
              f"for {missing}")
        return 1
    for name in missing:
        print(f"skip {name}: transformers {transformers.__version__} has no {CASES[name][0]} "
              f"(tests/torch2/qwen3_transformers_test.sh checks it with a newer one)")
    results = [run_case(name, args.work, zlib.crc32(name.encode())) for name in names if name not in missing]
    results += [run_refusal(name, args.work) for name in args.refusals.split(",") if name]
    if not args.no_qwen3:
        results.append(run_qwen3_self(args.work))
    print("PASS" if all(results) else "FAIL")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
